"""A NodeMetric or NodeResource dated far ahead of the descheduler's clock must not freeze its node's view.

The view keeps the newest report per node by ``at``: one report dated ahead (a node agent with a wrong clock,
or garbage with ``at`` 1e300) would make every later, correct report look older and be dropped, and a hot
metric dated ahead stays "fresh" for ever, so the node keeps being descheduled on it (REFERENCE.md §11: a stale
metric keeps descheduling). The service dead-letters reports dated more than ``metric_expiry_s`` ahead of its
clock (as the scheduler does), and offers out of 0..2^50, and keeps taking the node's correct reports.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable

import pytest
import pytest_asyncio

from colo import subjects
from colo.bus import Bus
from colo.messages import DeadLetter, Tick
from colo.runtime import ServiceRunner
from colo.settings import RuntimeSettings
from colo.store import Store
from colo.testing.fixtures import BusFactory
from colo_descheduler.service import DeschedulerService
from colo_descheduler.settings import DeschedulerSettings

pytestmark = pytest.mark.integration
GI = 1 << 30


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


REPORTS = [
    pytest.param("metric", {"node": "n1", "at": 1e300, "node_usage": {"cpu": 9000, "memory": GI}},
                 {"node": "n1", "at": 120.0, "node_usage": {"cpu": 1000, "memory": GI}}, id="metric-at-1e300"),
    pytest.param("metric", {"node": "n1", "at": 60.0 + 181.0, "node_usage": {"cpu": 9000, "memory": GI}},
                 {"node": "n1", "at": 120.0, "node_usage": {"cpu": 1000, "memory": GI}}, id="metric-past-expiry-ahead"),
    pytest.param("resource", {"node": "n1", "at": 1e300, "batch_cpu": 0},
                 {"node": "n1", "at": 120.0, "batch_cpu": 4000}, id="resource-at-1e300"),
    pytest.param("resource", {"node": "n1", "at": 120.0, "batch_cpu": -5},
                 {"node": "n1", "at": 120.0, "batch_cpu": 4000}, id="resource-negative-offer"),
]


@pytest.mark.parametrize(("kind", "bad", "good"), REPORTS)
async def test_a_report_dated_ahead_is_dead_lettered_and_the_node_keeps_its_reports(
        descheduler: DeschedulerService, bus_factory: BusFactory, kind: str,
        bad: dict[str, object], good: dict[str, object]) -> None:
    service = descheduler
    bus: Bus = await bus_factory("tester")
    dead: list[DeadLetter] = []

    async def on_dead(m: DeadLetter) -> None:
        dead.append(m)

    await bus.subscribe(subjects.DEAD_LETTER, on_dead, durable="dlq")
    assert (await bus.request_tick("descheduler", Tick(seq=1, now=60.0, step_s=60.0))).error == ""
    subject = subjects.NODE_METRIC if kind == "metric" else subjects.NODE_RESOURCE
    for body in (bad, good):
        await bus.js.publish(subject.format(node="n1"), json.dumps(body).encode())
    await _wait_for(lambda: len(dead) == 1)
    await asyncio.sleep(0.2)
    if kind == "metric":
        await _wait_for(lambda: "n1" in service.cluster.metrics)
        assert service.cluster.metrics["n1"].at == 120.0
    else:
        await _wait_for(lambda: "n1" in service.cluster.room.offers)
        assert service.cluster.room.offers["n1"].batch_cpu == 4000
    assert len(dead) == 1
