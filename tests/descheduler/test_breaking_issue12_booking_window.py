"""A NodeMetric with a negative aggregation window must not end a migration's booking.

A booking ends on a side once the metric's window ``[at − window_s, at]`` starts after the pod left the
source / after the replacement was bound on the target (colo_descheduler/booking.py). With ``window_s``
negative the window "starts" after ``at``: one such report ends both sides at once, the node is no longer
settling and its 300 s mean (still holding the evicted pod) makes it a source again: the cascade of issue 12
item 1 through one bad report. The service must reject the report, as it rejects a non-finite ``at``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable

import pytest
import pytest_asyncio

from colo import subjects
from colo.bus import Bus
from colo.messages import DeadLetter, NodeMetric, Usage
from colo.runtime import ServiceRunner
from colo.settings import RuntimeSettings
from colo.store import Store
from colo.testing.fixtures import BusFactory
from colo_descheduler.booking import Booking
from colo_descheduler.service import DeschedulerService
from colo_descheduler.settings import DeschedulerSettings

GI = 1 << 30

SIDES = [
    pytest.param("source", id="source-side"),
    pytest.param("target", id="target-side"),
]


def _booking() -> Booking:
    b = Booking("p", "src", "dst", (2000, GI), started_at=100.0, ran_since=-1000.0)
    b.left_at, b.bound_node, b.bound_at = 101.0, "dst", 101.0
    return b


@pytest.mark.parametrize("side", SIDES)
def test_booking_outlives_a_correct_metric_30s_later(side: str) -> None:
    """The premise: a correct metric 30 s after the move keeps both sides booked."""
    b = _booking()
    m = NodeMetric(node="src" if side == "source" else "dst", at=131.0, node_usage=Usage(cpu=3000, memory=GI))
    share, _ = b.source_share(m) if side == "source" else b.target_share(m)
    assert share > 0.8 and not b.done


@pytest_asyncio.fixture
async def descheduler(nats_url: str, redis_url: str, store: Store,
                      clean_streams: None) -> AsyncIterator[DeschedulerService]:
    service = DeschedulerService(DeschedulerSettings(interval_s=0.0, migration_jobs=False))
    runner = ServiceRunner(service, RuntimeSettings(nats_url=nats_url, redis_url=redis_url, sim=True,
                                                    store_prefix=store.keys.prefix))
    await runner.start()
    try:
        yield service
    finally:
        await runner.stop()


async def _wait_for(cond: Callable[[], bool], timeout_s: float = 5.0) -> None:
    for _ in range(int(timeout_s / 0.02)):
        if cond():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition not met in time")


@pytest.mark.integration
@pytest.mark.parametrize("window_s", [pytest.param(-300.0, id="negative"), pytest.param(-1e-3, id="just-below")])
async def test_negative_window_metric_dead_lettered_and_booking_kept(
        descheduler: DeschedulerService, bus_factory: BusFactory, window_s: float) -> None:
    service = descheduler
    bus: Bus = await bus_factory("tester")
    dead: list[DeadLetter] = []

    async def on_dead(m: DeadLetter) -> None:
        dead.append(m)

    await bus.subscribe(subjects.DEAD_LETTER, on_dead, durable="dlq")
    service.cluster.bookings["p"] = _booking()
    body = {"node": "dst", "at": 131.0, "window_s": window_s, "node_usage": {"cpu": 3000, "memory": GI}}
    await bus.js.publish(subjects.NODE_METRIC.format(node="dst"), json.dumps(body).encode())
    await _wait_for(lambda: len(dead) == 1)
    assert "window_s" in dead[0].reason
    assert "dst" not in service.cluster.metrics
    service.cluster.allocatable["dst"] = (10_000, 10 * GI)
    service.cluster.fresh_loads(131.0, 120.0)
    assert not service.cluster.bookings["p"].target_done
