"""The descheduler service against real NATS and Redis: hot metrics in → EvictionCommand out."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest
import pytest_asyncio

from colo import subjects
from colo.bus import Bus
from colo.messages import (
    DeadLetter,
    EvictionCommand,
    NodeMetric,
    NodeSpec,
    PodBound,
    PodMetric,
    PodSpec,
    PodStatus,
    Resources,
    Usage,
)
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
                      clean_streams: None) -> AsyncIterator[tuple[DeschedulerService, ServiceRunner]]:
    service = DeschedulerService(DeschedulerSettings(interval_s=0.0, consecutive_high_rounds=3,
                                                     migration_jobs=False))  # jobs: test_migration_*.py
    runner = ServiceRunner(service, RuntimeSettings(nats_url=nats_url, redis_url=redis_url, sim=True,
                                                    store_prefix=store.keys.prefix))
    await runner.start()
    try:
        yield service, runner
    finally:
        await runner.stop()


async def collect(bus: Bus, subject: subjects.Subject[object], durable: str) -> list[object]:
    got: list[object] = []

    async def handler(msg: object) -> None:
        got.append(msg)

    await bus.subscribe(subject, handler, durable=durable)
    return got


async def wait_for(cond: Callable[[], bool], timeout_s: float = 5.0) -> None:
    for _ in range(int(timeout_s / 0.02)):
        if cond():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition not met in time")


async def publish_cluster(bus: Bus, at: float) -> None:
    for name in ("hot", "cold"):
        await bus.publish(subjects.NODE_REGISTERED, NodeSpec(
            name=name, capacity=Resources(cpu=10_000, memory=100 * GI),
            allocatable=Resources(cpu=10_000, memory=100 * GI)), node=name)
    for uid, prio in (("batch-1", 5500), ("prod-1", 9500)):
        spec = PodSpec(uid=uid, name=uid, priority=prio, app=uid.split("-")[0],
                       requests=Resources(cpu=2000, memory=4 * GI))
        await bus.publish(subjects.POD_BOUND, PodBound(spec=spec, node="hot", at=0.0), msg_id=f"b-{uid}", node="hot")
    await publish_metrics(bus, at)


async def publish_metrics(bus: Bus, at: float) -> None:
    # hot: 1000 + 1500 + 6500 = 9000 m = 90 % (> 75); cold 20 %: room for 5500 m below 75 %
    await bus.publish(subjects.NODE_METRIC, NodeMetric(
        node="hot", at=at, system_usage=Usage(cpu=1000, memory=10 * GI),
        pods=[PodMetric(uid="batch-1", cpu=1500, memory=4 * GI), PodMetric(uid="prod-1", cpu=6500, memory=4 * GI)]),
        node="hot")
    await bus.publish(subjects.NODE_METRIC, NodeMetric(node="cold", at=at, system_usage=Usage(cpu=2000, memory=GI)),
                      node="cold")


async def test_hot_node_evicts_after_consecutive_rounds(
        descheduler: tuple[DeschedulerService, ServiceRunner], bus_factory: BusFactory) -> None:
    service, runner = descheduler
    assert runner.ctx is not None
    bus = await bus_factory("test-descheduler")
    orders = await collect(bus, subjects.POD_EVICT, "watch-evict")
    await publish_cluster(bus, at=0.0)
    await runner.ctx.bus.settle()
    for now in (1.0, 2.0):  # rounds 1 and 2: below N = 3
        assert (await service.tick(now))["round_evictions"] == 0
    stats = await service.tick(3.0)
    assert stats["round_evictions"] == 1 and stats["rounds"] == 3
    await wait_for(lambda: len(orders) == 1)
    cmd = orders[0]
    assert isinstance(cmd, EvictionCommand)
    assert (cmd.uid, cmd.node, cmd.reason) == ("batch-1", "hot", "LowNodeLoad")
    # the metric still shows batch-1 on hot, but its migration is booked: hot counts at 75 %, not high
    stats = await service.tick(4.0)
    assert (stats["round_evictions"], stats["high_nodes"]) == (0, 0)
    assert service.cluster.migrating_per_node() == {"hot": 1}
    # the node agent reports the eviction: the migration runs until its replacement runs elsewhere
    await bus.publish(subjects.POD_STATUS, PodStatus(uid="batch-1", node="hot", phase="Failed", at=5.0,
                                                     reason="Evicted"), msg_id="s-batch-1", node="hot")
    await runner.ctx.bus.settle()
    assert set(service.cluster.migrations) == {"batch-1"}
    spec = PodSpec(uid="batch-1", name="batch-1", priority=5500, app="batch", requests=Resources(cpu=2000, memory=4 * GI))
    await bus.publish(subjects.POD_BOUND, PodBound(spec=spec, node="cold", at=6.0), msg_id="b2-batch-1", node="cold")
    await bus.publish(subjects.POD_STATUS, PodStatus(uid="batch-1", node="cold", phase="Running", at=7.0),
                      msg_id="s2-batch-1", node="cold")
    await runner.ctx.bus.settle()
    assert service.cluster.migrations == {}
    # its booking stays: the metrics at 0 s do not show the move yet
    assert set(service.cluster.bookings) == {"batch-1"}


async def test_stale_metrics_ignored(descheduler: tuple[DeschedulerService, ServiceRunner],
                                     bus_factory: BusFactory) -> None:
    service, runner = descheduler
    assert runner.ctx is not None
    bus = await bus_factory("test-descheduler")
    await publish_cluster(bus, at=0.0)
    await runner.ctx.bus.settle()
    for now in (200.0, 201.0, 202.0, 203.0):  # metrics are 200 s old: expired
        stats = await service.tick(now)
        assert stats["high_nodes"] == 0 and stats["round_evictions"] == 0


@pytest.mark.parametrize(
    ("subject", "payload", "reason_part"),
    [
        (subjects.NODE_METRIC.format(node="hot"), b"{oops", "malformed JSON"),
        (subjects.NODE_METRIC.format(node="hot"), b'{"node": "", "at": 1}', "NodeMetric needs"),
        (subjects.POD_BOUND.format(node="hot"), b'{"spec": 1}', "PodBound"),
        (subjects.POD_STATUS.format(node="hot"), b'{"uid": "x", "node": "hot", "phase": "Gone", "at": 1}',
         "PodStatus"),
        (subjects.NODE_REGISTERED.format(node="hot"), b'"hot"', "NodeSpec"),
    ],
    ids=["metric-not-json", "metric-empty-node", "bound-wrong-type", "status-bad-phase", "node-string"],
)
async def test_garbage_dead_lettered(descheduler: tuple[DeschedulerService, ServiceRunner],
                                     bus_factory: BusFactory, subject: str, payload: bytes,
                                     reason_part: str) -> None:
    service, runner = descheduler
    assert runner.ctx is not None
    bus = await bus_factory("test-descheduler")
    dead = await collect(bus, subjects.DEAD_LETTER, "watch-dlq")
    await bus.js.publish(subject, payload)
    await publish_cluster(bus, at=0.0)
    await runner.ctx.bus.settle()
    await wait_for(lambda: len(dead) == 1)
    dl = dead[0]
    assert isinstance(dl, DeadLetter) and dl.service == "descheduler" and dl.subject == subject
    assert reason_part in dl.reason
    # kept running: the valid messages after the garbage were applied
    stats = await service.tick(1.0)
    assert stats["high_nodes"] == 1 and stats["low_nodes"] == 1
    assert set(service.cluster.pods) == {"batch-1", "prod-1"}
