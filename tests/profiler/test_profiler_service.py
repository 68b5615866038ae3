"""The profiler service against real NATS and Redis: metrics in → NodeProfile out; garbage → dead letter."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from colo import subjects
from colo.bus import Bus
from colo.messages import (
    DeadLetter,
    NodeMetric,
    NodeProfile,
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
from colo_profiler.service import ProfilerService
from colo_profiler.settings import ProfilerSettings

pytestmark = pytest.mark.integration
GI = 1 << 30


@pytest_asyncio.fixture
async def profiler(nats_url: str, redis_url: str, store: Store,
                   clean_streams: None) -> AsyncIterator[tuple[ProfilerService, ServiceRunner]]:
    service = ProfilerService(ProfilerSettings(cold_start_s=600.0))
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


async def wait_for(cond: object, timeout_s: float = 5.0) -> None:
    for _ in range(int(timeout_s / 0.02)):
        if cond():  # type: ignore[operator]
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition not met in time")


async def test_metrics_in_profile_out(profiler: tuple[ProfilerService, ServiceRunner],
                                      bus_factory: BusFactory) -> None:
    service, runner = profiler
    assert runner.ctx is not None
    bus = await bus_factory("test-profiler")
    profiles = await collect(bus, subjects.PROFILE_NODE, "watch-profiles")
    await bus.publish(subjects.NODE_REGISTERED, NodeSpec(
        name="n1", capacity=Resources(cpu=16000, memory=64 * GI),
        allocatable=Resources(cpu=16000, memory=64 * GI)), node="n1")
    spec = PodSpec(uid="web-1", name="web-1", priority=9500, requests=Resources(cpu=4000, memory=8 * GI))
    await bus.publish(subjects.POD_BOUND, PodBound(spec=spec, node="n1", at=0.0), msg_id="bound-web-1", node="n1")
    for k in range(20):
        await bus.publish(subjects.NODE_METRIC, NodeMetric(
            node="n1", at=60.0 * k, window_s=60, system_usage=Usage(cpu=300, memory=GI),
            pods=[PodMetric(uid="web-1", cpu=1000, memory=2 * GI)]), node="n1")
    await runner.ctx.bus.settle()
    stats = await service.tick(1200.0)
    assert stats["profiles"] == 1 and stats["samples_total"] == 20 * 7
    await wait_for(lambda: len(profiles) == 1)
    prof = profiles[0]
    assert isinstance(prof, NodeProfile) and prof.node == "n1"
    web = prof.pods[0]
    assert (web.uid, web.cold) == ("web-1", False)
    assert 1000 < web.cpu_peak < 1200 and 2 * GI < web.memory_peak < 2.4 * GI
    assert 0 < prof.prod_reclaimable.cpu < 4000 - web.cpu_peak + 1
    # not due again within the publish interval; the pod ending removes it from the next profile
    assert (await service.tick(1230.0))["profiles"] == 0
    await bus.publish(subjects.POD_STATUS, PodStatus(uid="web-1", node="n1", phase="Succeeded", at=1240.0),
                      msg_id="status-web-1-done", node="n1")
    await runner.ctx.bus.settle()
    assert (await service.tick(1260.0))["profiles"] == 1
    await wait_for(lambda: len(profiles) == 2)
    assert profiles[1].pods == []  # type: ignore[attr-defined]
    # due again but unchanged: not re-sent until republish_interval_s (600 s) has passed
    assert (await service.tick(1320.0))["profiles"] == 0
    assert (await service.tick(1860.0))["profiles"] == 1
    await wait_for(lambda: len(profiles) == 3)
    assert profiles[2].at == 1860.0 and profiles[2].pods == []  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("subject", "payload", "reason_part"),
    [
        (subjects.NODE_METRIC.format(node="n1"), b"{not json", "malformed JSON"),
        (subjects.NODE_METRIC.format(node="n1"), b'{"node": "n1"}', "at"),
        (subjects.NODE_METRIC.format(node="n1"), b'{"node": "", "at": 5}', "node is empty"),
        (subjects.POD_BOUND.format(node="n1"), b'{"node": 3}', "PodBound"),
        (subjects.POD_STATUS.format(node="n1"), b"\xff\xfe", "PodStatus"),
        (subjects.NODE_REGISTERED.format(node="n1"), b"[]", "NodeSpec"),
    ],
    ids=["metric-not-json", "metric-missing-at", "metric-empty-node", "bound-wrong-type",
         "status-binary", "node-array"],
)
async def test_garbage_dead_lettered(profiler: tuple[ProfilerService, ServiceRunner], bus_factory: BusFactory,
                                     subject: str, payload: bytes, reason_part: str) -> None:
    service, runner = profiler
    assert runner.ctx is not None
    bus = await bus_factory("test-profiler")
    dead = await collect(bus, subjects.DEAD_LETTER, "watch-dlq")
    await bus.js.publish(subject, payload)
    await bus.publish(subjects.NODE_METRIC, NodeMetric(node="n2", at=10.0), node="n2")
    await runner.ctx.bus.settle()
    await wait_for(lambda: len(dead) == 1)
    dl = dead[0]
    assert isinstance(dl, DeadLetter) and dl.service == "profiler" and dl.subject == subject
    assert reason_part in dl.reason
    # the service kept going: the good metric after the garbage was used
    assert (await service.tick(20.0))["profiles"] == 1
    assert "n2" in service.model.nodes
