"""The scheduler service against real NATS and Redis fed messages that decode but cannot be used.

Found broken: a node whose name is not a NATS subject token (``n1.example.com``, registered by a
publisher that names the subject after something else, or written to the store) was accepted; the
first pod bound to it made ``pod.bound.<node>`` unformattable, the cycle's whole event batch failed
and was retried every cycle after, so from then on no PodBound and no PodUnschedulable event left
the scheduler at all. A pod uid with a control character did the same through its JetStream
message id (a header).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from sched_helpers import GI, node, pod

from colo import subjects
from colo.bus import Bus
from colo.clock import VirtualClock
from colo.messages import (
    AggregatedUsage,
    DeadLetter,
    NodeMetric,
    PodAdmitted,
    PodBound,
    PodMetric,
    PodUnschedulable,
    Usage,
)
from colo.store import Store
from colo.testing.fixtures import BusFactory, service_context
from colo_scheduler.service import SchedulerService
from colo_scheduler.settings import ProfileSettings, SchedulerSettings

pytestmark = pytest.mark.integration


async def _until(bus: Bus, done: Callable[[], bool]) -> None:
    """Settle ``bus`` until ``done()`` (a fresh consumer may not have pulled yet), at most 10 s."""
    deadline = asyncio.get_running_loop().time() + 10
    while True:
        await bus.settle()
        if done() or asyncio.get_running_loop().time() > deadline:
            return
        await asyncio.sleep(0.01)


async def _start(bus_factory: BusFactory, store: Store, clock: VirtualClock) -> SchedulerService:
    bus = await bus_factory("scheduler", clock, autostart=False)
    svc = SchedulerService(SchedulerSettings(seed=1))
    await svc.start(service_context(bus, store, clock))
    await bus.start_consumers()
    return svc


async def test_unusable_node_names_and_uids_are_dead_lettered_and_events_keep_flowing(
        bus_factory: BusFactory, store: Store) -> None:
    clock = VirtualClock(1000.0)
    stored_bad = node("stored.bad", cpu=512_000, memory=1024 * GI)
    await store.put_node(stored_bad)  # loaded at start: must be skipped, not scheduled on
    svc = await _start(bus_factory, store, clock)
    tester = await bus_factory("tester")
    bound: list[PodBound] = []
    unsched: list[PodUnschedulable] = []
    dead: list[DeadLetter] = []

    async def on_bound(m: PodBound) -> None:
        bound.append(m)

    async def on_unsched(m: PodUnschedulable) -> None:
        unsched.append(m)

    async def on_dead(m: DeadLetter) -> None:
        dead.append(m)

    await tester.subscribe(subjects.POD_BOUND, on_bound, durable="bound")
    await tester.subscribe(subjects.POD_UNSCHEDULABLE, on_unsched, durable="unsched")
    await tester.subscribe(subjects.DEAD_LETTER, on_dead, durable="dead")
    try:
        assert "stored.bad" not in svc.core.table.index
        good = node("good", cpu=4_000, memory=8 * GI)
        await store.put_node(good)
        await tester.publish(subjects.NODE_REGISTERED, good, node="good")
        for name in ("n1.example.com", "has space", "wild*", "gt>", ""):
            bad = node(name, cpu=512_000, memory=1024 * GI)  # the roomiest node: every pod would go there
            await store.put_node(bad)
            await tester.publish(subjects.NODE_REGISTERED, bad, node="sneaky")
        await tester.publish(subjects.POD_ADMITTED, PodAdmitted(spec=pod("big", 64_000, GI), at=1000.0))
        await tester.publish(subjects.POD_ADMITTED, PodAdmitted(spec=pod("small", 1_000, GI), at=1000.0))
        await tester.publish(subjects.POD_ADMITTED, PodAdmitted(spec=pod("ünï/ок", 1_000, GI), at=1000.0))
        await tester.publish(subjects.POD_ADMITTED, PodAdmitted(spec=pod("ctl\r\nX-Evil: 1", 1_000, GI),
                                                                at=1000.0))
        await svc.ctx.bus.settle()  # type: ignore[union-attr]
        assert svc.core.table.names == ["good"]
        await svc.tick(1000.0)
        await svc.tick(1001.0)
        await _until(tester, lambda: len(bound) >= 2 and len(unsched) >= 1 and len(dead) >= 6)
        assert sorted(m.spec.uid for m in bound) == ["small", "ünï/ок"]  # any printable uid is fine
        assert await store.bound_node("small") == "good"
        assert [m.uid for m in unsched] == ["big"]
        assert unsched[0].message.startswith("0/1 nodes are available")
        reasons = [d.reason for d in dead]
        assert sum("subject token" in r for r in reasons) == 5, reasons
        assert any("ctl" in r and "control character" in r for r in reasons), reasons
        assert svc.totals["dead_letters"] == 6
        # and the service goes on: a later pod is bound and announced
        await tester.publish(subjects.POD_ADMITTED, PodAdmitted(spec=pod("later", 1_000, GI), at=1002.0))
        await svc.ctx.bus.settle()  # type: ignore[union-attr]
        await svc.tick(1002.0)
        await _until(tester, lambda: len(bound) >= 3)
        assert sorted(m.spec.uid for m in bound) == ["later", "small", "ünï/ок"]
    finally:
        await svc.stop()


async def test_one_unpublishable_event_does_not_hold_back_the_others(bus_factory: BusFactory,
                                                                     store: Store) -> None:
    """Defence in depth: should an event still fail to format, it is dropped with a log line and the rest
    of its batch is published (it is not retried forever in front of every later event)."""
    clock = VirtualClock(1000.0)
    svc = await _start(bus_factory, store, clock)
    tester = await bus_factory("tester")
    bound: list[PodBound] = []

    async def on_bound(m: PodBound) -> None:
        bound.append(m)

    await tester.subscribe(subjects.POD_BOUND, on_bound, durable="bound")
    try:
        ok = PodBound(spec=pod("ok"), node="good", at=1.0)
        await svc._publish([(subjects.POD_BOUND, PodBound(spec=pod("x"), node="bad.name", at=1.0), "x", {"node": "bad.name"}),
                            (subjects.POD_BOUND, ok, "ok", {"node": "good"})])
        await _until(tester, lambda: bool(bound))
        assert [m.spec.uid for m in bound] == ["ok"]
        assert not svc._unpublished
    finally:
        await svc.stop()


async def test_metrics_with_absurd_values_or_from_the_future_are_dead_lettered(bus_factory: BusFactory,
                                                                               store: Store) -> None:
    """Only ``node_usage`` was range-checked. An aggregated p95 of 2^62 milli-cores overflowed the
    int64 slack of the aggregated threshold check and the node passed it; a metric dated a year ahead
    (a skewed clock, milliseconds for seconds) was applied, and every later, correct metric of the node
    was then dropped as older: the node kept its stale usage for good."""
    clock = VirtualClock(1000.0)
    bus = await bus_factory("scheduler", clock, autostart=False)
    settings = SchedulerSettings(seed=1, profile=ProfileSettings(plugin_args={"LoadAware": {"aggregated": {
        "usage_thresholds": {"cpu": 60}, "usage_aggregation_type": "p95"}}}))
    svc = SchedulerService(settings)
    await svc.start(service_context(bus, store, clock))
    await bus.start_consumers()
    tester = await bus_factory("tester")
    try:
        for name in ("a", "b"):
            spec = node(name, cpu=8_000, memory=16 * GI)
            await store.put_node(spec)
            await tester.publish(subjects.NODE_REGISTERED, spec, node=name)

        def metric(name: str, at: float, cpu: int, p95: int = 1_000, pod_cpu: int = 100) -> NodeMetric:
            return NodeMetric(node=name, at=at, node_usage=Usage(cpu=cpu, memory=GI),
                              pods=[PodMetric(uid="x", cpu=pod_cpu, memory=GI)],
                              aggregated=[AggregatedUsage(window_s=300, stat="p95", cpu=p95, memory=GI)])

        bad = [metric("a", 1000.0, 100, p95=2**62), metric("a", 1000.0, 100, pod_cpu=-5),
               metric("b", 1000.0 + 365 * 86400, 100), metric("b", 1000.0 + 3600, 100)]
        for m in bad:
            await tester.publish(subjects.NODE_METRIC, m, node=m.node)
        await tester.publish(subjects.NODE_METRIC, metric("a", 999.0, 7_900, p95=7_900), node="a")
        await tester.publish(subjects.NODE_METRIC, metric("b", 999.0 + 120, 7_900, p95=7_900), node="b")
        await bus.settle()
        assert svc.totals["dead_letters"] == 4
        table = svc.core.table
        assert table.metric_usage[table.index["a"]][0] == 7_900  # the real metrics applied
        assert table.metric_usage[table.index["b"]][0] == 7_900  # (b's is 119 s ahead: within the expiry)
        await tester.publish(subjects.POD_ADMITTED, PodAdmitted(spec=pod("p", 1_000, GI), at=1000.0))
        await bus.settle()
        await svc.tick(1000.0)
        assert await store.bound_node("p") is None  # both nodes are at 99 % CPU
        assert "p" in svc.core.queue.unschedulable
    finally:
        await svc.stop()


async def test_binds_whose_events_died_with_the_scheduler_are_announced_after_a_restart(
        bus_factory: BusFactory, store: Store) -> None:
    """A scheduler bound pods in Redis and died before their PodBound events were acked (they are
    published in the background, up to four batches in flight): nothing announced those binds again, so
    the node agent never started the pods. The next scheduler re-announces every pod that is bound
    but still Pending, with the original message id (JetStream drops it if it did go out)."""
    clock = VirtualClock(1000.0)
    spec = node("n1", cpu=8_000, memory=16 * GI)
    await store.put_node(spec)
    lost, running, queued = pod("lost", 1_000, GI), pod("running", 1_000, GI), pod("queued", 1_000, GI)
    assert await store.admit_pending([lost, running, queued], 990.0) == [True, True, True]
    results = await store.bind_many([(p.uid, "n1", p.requests, 995.0) for p in (lost, running)])
    assert all(r.ok for r in results)
    assert await store.set_phase("running", "Running", "", 996.0)
    tester = await bus_factory("tester")
    bound: list[PodBound] = []

    async def on_bound(m: PodBound) -> None:
        bound.append(m)

    await tester.subscribe(subjects.POD_BOUND, on_bound, durable="bound")
    svc = await _start(bus_factory, store, clock)  # the restart
    try:
        await svc.tick(1000.0)
        await _until(tester, lambda: len(bound) >= 2)
        assert sorted((m.spec.uid, m.node, m.at) for m in bound) == [("lost", "n1", 995.0), ("queued", "n1", 1000.0)]
        assert len(svc.core.framework.placed) == 3
    finally:
        await svc.stop()


async def test_a_restart_does_not_announce_a_bind_twice(bus_factory: BusFactory, store: Store) -> None:
    """The re-announcement carries the original message id: within JetStream's duplicate window a
    PodBound that did go out is not delivered again."""
    clock = VirtualClock(1000.0)
    spec = node("n1", cpu=8_000, memory=16 * GI)
    await store.put_node(spec)
    tester = await bus_factory("tester")
    bound: list[PodBound] = []

    async def on_bound(m: PodBound) -> None:
        bound.append(m)

    await tester.subscribe(subjects.POD_BOUND, on_bound, durable="bound")
    first = await _start(bus_factory, store, clock)
    await tester.publish(subjects.NODE_REGISTERED, spec, node="n1")
    await tester.publish(subjects.POD_ADMITTED, PodAdmitted(spec=pod("p", 1_000, GI), at=1000.0))
    await first.ctx.bus.settle()  # type: ignore[union-attr]
    await first.tick(1000.0)
    await _until(tester, lambda: bool(bound))
    await first.stop()
    second = await _start(bus_factory, store, clock)
    try:
        assert "p" in second._announce
        await second.tick(1001.0)
        await asyncio.sleep(0.3)
        await tester.settle()
        assert [m.spec.uid for m in bound] == ["p"]
        assert not second._announce
    finally:
        await second.stop()
