"""Readiness of a service and of each dependency it needs, as served at ``/readyz`` (:mod:`colo.runtime`).

A service is ready when it says so (``Service.ready()``: state loaded, consumers registered), is not stopping,
and every dependency answers: ``nats`` (the client connected and JetStream answering an account-info request)
and ``redis`` (a PING). Each probe waits at most :data:`PROBE_TIMEOUT_S`. The body names every dependency with
its state, so that an operator (or a Kubernetes readiness probe's log) sees which one is missing::

    {"ready": false, "service": "scheduler", "started": true, "stopping": false,
     "dependencies": {"nats": {"state": "up", "error": ""},
                      "redis": {"state": "down", "error": "ConnectionError: Error 111 connecting ..."}}}

States: ``up``; ``reconnecting`` (NATS only: the client lost the server and is trying again); ``down`` (with
the error, or ``timeout`` when the probe did not answer within :data:`PROBE_TIMEOUT_S`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

from colo.bus import Bus
from colo.store import Store

__all__ = ["PROBE_TIMEOUT_S", "dependencies", "report"]

PROBE_TIMEOUT_S = 1.0
"""Seconds a dependency probe may take before the dependency counts as down (Kubernetes' default
readiness ``timeoutSeconds`` is 1 s)."""


def _state(state: str, error: str = "") -> dict[str, str]:
    return {"state": state, "error": error}


async def _probe(call: Awaitable[Any], timeout_s: float) -> dict[str, str]:
    try:
        await asyncio.wait_for(call, timeout=timeout_s)
    except TimeoutError:
        return _state("down", f"timeout: no answer within {timeout_s:g} s")
    except Exception as exc:
        return _state("down", f"{type(exc).__name__}: {exc}")
    return _state("up")


async def _nats(bus: Bus, timeout_s: float) -> dict[str, str]:
    nc = bus.nc
    if nc.is_reconnecting:
        return _state("reconnecting", "connection to the NATS server lost; reconnecting")
    if not nc.is_connected:
        return _state("down", "not connected to NATS")
    return await _probe(bus.js.account_info(), timeout_s)


async def dependencies(bus: Bus, store: Store, timeout_s: float = PROBE_TIMEOUT_S) -> dict[str, dict[str, str]]:
    """``{"nats": {"state", "error"}, "redis": {"state", "error"}}``, both probed concurrently, each within
    ``timeout_s`` seconds. Never raises."""
    nats_state, redis_state = await asyncio.gather(_nats(bus, timeout_s), _probe(store.ping(), timeout_s))
    return {"nats": nats_state, "redis": redis_state}


async def report(service: str, started: bool, stopping: bool, bus: Bus | None, store: Store | None,
                 timeout_s: float = PROBE_TIMEOUT_S) -> tuple[int, dict[str, Any]]:
    """(HTTP status, body) of ``/readyz``: 200 when ``started``, not ``stopping`` and every dependency is
    ``up``, else 503. ``bus``/``store`` None (not connected yet) count as down. Never raises."""
    if bus is None or store is None:
        deps = {"nats": _state("down", "not connected yet"), "redis": _state("down", "not connected yet")}
    else:
        deps = await dependencies(bus, store, timeout_s)
    ready = started and not stopping and all(d["state"] == "up" for d in deps.values())
    body = {"ready": ready, "service": service, "started": started, "stopping": stopping, "dependencies": deps}
    return (200 if ready else 503), body
