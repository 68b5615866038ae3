"""Cheap health signals every service exports (docs/metrics.md "Every service"), defined at import time.

* ``colo_build_info{service,version}``: always 1; the package version of the running code (``colo.__version__``).
* ``colo_bus_connected``: 1 while the NATS client is connected and JetStream answers, else 0.
* ``colo_store_up``: 1 while Redis answers a PING, else 0.

The two dependency gauges are the readiness probes of ``/readyz`` (:func:`colo.readiness.dependencies`, each
within :data:`colo.readiness.PROBE_TIMEOUT_S`), run when ``/metrics`` is scraped: a scrape says what a readiness
probe would. Labels: ``service`` (the six service names) and ``version`` (one per process).
"""

from __future__ import annotations

import colo
from colo import readiness, telemetry
from colo.bus import Bus
from colo.store import Store

BUILD_INFO = telemetry.gauge("colo_build_info", "Always 1: the version of the code the service runs",
                             ("service", "version"))
BUS_CONNECTED = telemetry.gauge(
    "colo_bus_connected", "1 while connected to NATS with JetStream answering (the /readyz probe), else 0")
STORE_UP = telemetry.gauge("colo_store_up", "1 while Redis answers a PING (the /readyz probe), else 0")


def started(service: str) -> None:
    """Export the build info of ``service``; the dependencies count as down until the first probe."""
    BUILD_INFO.labels(service, colo.__version__).set(1)


async def probe(bus: Bus | None, store: Store | None) -> None:
    """Set :data:`BUS_CONNECTED` and :data:`STORE_UP` from the readiness probes (None: not connected: 0).
    Never raises."""
    if bus is None or store is None:
        BUS_CONNECTED.set(0)
        STORE_UP.set(0)
        return
    deps = await readiness.dependencies(bus, store)
    BUS_CONNECTED.set(1 if deps["nats"]["state"] == "up" else 0)
    STORE_UP.set(1 if deps["redis"]["state"] == "up" else 0)
