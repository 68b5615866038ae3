"""Scheduler service against real nats-server and redis-server (colo.testing fixtures)."""

from __future__ import annotations

from typing import Any

import pytest
from sched_helpers import GI, MI, node, pod

from colo import subjects
from colo.clock import VirtualClock
from colo.messages import DeadLetter, PodAdmitted, PodBound, PodUnschedulable, Resources
from colo.testing.fixtures import service_context
from colo_scheduler.service import SchedulerService
from colo_scheduler.settings import SchedulerSettings

pytestmark = pytest.mark.integration


async def _start(bus_factory: Any, store: Any, clock: VirtualClock) -> SchedulerService:
    bus = await bus_factory("scheduler", clock, autostart=False)
    ctx = service_context(bus, store, clock)
    svc = SchedulerService(SchedulerSettings(seed=1))
    await svc.start(ctx)
    await bus.start_consumers()
    return svc


async def _bound_on_n1(bus_factory: Any, store: Any, cpu: int, pods: dict[str, int]) -> tuple[SchedulerService, Any]:
    """A started service and a tester bus, with node n1 of ``cpu`` milli-cores and ``pods`` (uid →
    milli-cores) admitted and bound on it by a tick at 10 s."""
    svc = await _start(bus_factory, store, VirtualClock(10.0))
    tester = await bus_factory("tester")
    spec = node("n1", cpu=cpu, memory=8 * GI)
    await store.put_node(spec)
    await tester.publish(subjects.NODE_REGISTERED, spec, node="n1")
    for uid, milli in pods.items():
        await tester.publish(subjects.POD_ADMITTED, PodAdmitted(spec=pod(uid, milli, MI), at=10.0))
    await svc.ctx.bus.settle()  # type: ignore[union-attr]
    assert (await svc.tick(10.0))["pods_bound"] == len(pods)
    return svc, tester


async def test_admitted_pods_are_bound_without_overcommit(bus_factory: Any, store: Any) -> None:
    clock = VirtualClock(1000.0)
    svc = await _start(bus_factory, store, clock)
    tester = await bus_factory("tester")
    seen: dict[str, list[Any]] = {"bound": [], "unsched": []}

    async def on_bound(m: PodBound) -> None:
        seen["bound"].append(m)

    async def on_unsched(m: PodUnschedulable) -> None:
        seen["unsched"].append(m)

    await tester.subscribe(subjects.POD_BOUND, on_bound, durable="bound")
    await tester.subscribe(subjects.POD_UNSCHEDULABLE, on_unsched, durable="unsched")
    for i in range(3):
        spec = node(f"n{i}", cpu=4000, memory=8 * GI, pods=10)
        await store.put_node(spec)
        await tester.publish(subjects.NODE_REGISTERED, spec, node=spec.name)
    # No metrics yet (LoadAware passes): 14 pods of 1 CPU fit 12 slots (3 nodes × 4 CPU).
    for j in range(14):
        await tester.publish(subjects.POD_ADMITTED, PodAdmitted(spec=pod(f"p{j}", 1000, 256 * MI,
                                                                          created_at=float(j)), at=1000.0))
    await svc.ctx.bus.settle()  # type: ignore[union-attr]
    assert len(await store.list_pods()) == 14  # persisted before scheduling
    stats = await svc.tick(1000.0)
    await tester.settle()
    assert stats["pods_bound"] == 12 and stats["pods_unschedulable"] == 2
    alloc = await store.all_allocated()
    assert all(r.cpu <= 4000 for r in alloc.values()), alloc
    assert sum(r.pods for r in alloc.values()) == 12
    assert {m.spec.uid for m in seen["bound"]} == {f"p{j}" for j in range(12)}
    assert {m.uid for m in seen["unsched"]} == {"p12", "p13"}
    assert seen["unsched"][0].reasons == {"Insufficient cpu": 3}
    # An unschedulable pod is not re-reported every tick, nor on a retry with the same verdict ...
    await svc.tick(1001.0)
    await tester.settle()
    assert len(seen["unsched"]) == 2
    await svc.tick(1000.0 + svc.settings.unschedulable_retry_s)
    await tester.settle()
    assert len(seen["unsched"]) == 2
    # ... but again once the repeat interval has passed.
    await svc.tick(1000.0 + svc.settings.unschedulable_event_interval_s)
    await tester.settle()
    assert sorted(m.uid for m in seen["unsched"][2:]) == ["p12", "p13"]


async def test_garbage_is_dead_lettered_and_service_keeps_working(bus_factory: Any, store: Any) -> None:
    clock = VirtualClock(50.0)
    svc = await _start(bus_factory, store, clock)
    tester = await bus_factory("tester")
    dead: list[DeadLetter] = []

    async def on_dead(m: DeadLetter) -> None:
        dead.append(m)

    await tester.subscribe(subjects.DEAD_LETTER, on_dead, durable="dlq")
    garbage_subjects = [
        subjects.POD_ADMITTED.format(), subjects.NODE_REGISTERED.format(node="n1"),
        subjects.NODE_RESOURCE.format(node="n1"), subjects.NODE_METRIC.format(node="n1"),
        subjects.POD_STATUS.format(node="n1"),
    ]
    for s in garbage_subjects:
        await tester.js.publish(s, b"{not json")
    # Decodes, but does not validate: negative request.
    await tester.publish(subjects.POD_ADMITTED, PodAdmitted(
        spec=pod("neg").__class__(uid="neg", name="neg", requests=Resources(cpu=-5)), at=50.0))
    spec = node("n1", cpu=2000, memory=4 * GI)
    await store.put_node(spec)
    await tester.publish(subjects.NODE_REGISTERED, spec, node="n1")
    await tester.publish(subjects.POD_ADMITTED, PodAdmitted(spec=pod("ok", 500, MI), at=50.0))
    await svc.ctx.bus.settle()  # type: ignore[union-attr]
    stats = await svc.tick(50.0)
    await tester.settle()
    assert stats["pods_bound"] == 1
    assert await store.bound_node("ok") == "n1"
    assert len(dead) == len(garbage_subjects) + 1
    assert {d.subject for d in dead} >= set(garbage_subjects)
    assert all(d.reason for d in dead)
    assert any("negative" in d.reason for d in dead)


async def test_restart_reloads_pending_pods_and_allocations(bus_factory: Any, store: Any) -> None:
    clock = VirtualClock(10.0)
    svc = await _start(bus_factory, store, clock)
    tester = await bus_factory("tester")
    spec = node("n1", cpu=2000, memory=4 * GI)
    await store.put_node(spec)
    await tester.publish(subjects.NODE_REGISTERED, spec, node="n1")
    await tester.publish(subjects.POD_ADMITTED, PodAdmitted(spec=pod("a", 1500, MI), at=10.0))
    await svc.ctx.bus.settle()  # type: ignore[union-attr]
    # A fresh instance (crash before any tick) finds the pod in the store and the node's state.
    svc2 = SchedulerService(SchedulerSettings())
    svc2.ctx = svc.ctx
    await svc2._load(10.0)
    assert "a" in svc2.core.queue
    stats = await svc2.tick(10.0)
    assert stats["pods_bound"] == 1
    svc3 = SchedulerService(SchedulerSettings())
    svc3.ctx = svc.ctx
    await svc3._load(11.0)
    assert "a" in svc3.core.framework.placed and int(svc3.core.table.allocated[0, 0]) == 1500


@pytest.mark.parametrize(("reason", "requeued"), [("Evicted", True), ("Completed", False)],
                         ids=["evicted-requeued", "completed-released-only"])
async def test_status_releases_and_requeues_evicted(bus_factory: Any, store: Any, reason: str,
                                                    requeued: bool) -> None:
    from colo.messages import PodStatus

    svc, tester = await _bound_on_n1(bus_factory, store, 2000, {"a": 1500})
    phase = "Failed" if reason == "Evicted" else "Succeeded"
    status = PodStatus(uid="a", node="n1", phase=phase, at=20.0, reason=reason)
    for _ in range(2):  # redelivery is harmless
        await tester.publish(subjects.POD_STATUS, status, node="n1")
    await svc.ctx.bus.settle()  # type: ignore[union-attr]
    assert (await store.allocated("n1")).cpu == 0
    assert ("a" in svc.core.queue) == requeued
    stats = await svc.tick(30.0)
    assert stats["pods_bound"] == (1 if requeued else 0)
    assert (await store.allocated("n1")).cpu == (1500 if requeued else 0)


async def test_a_requeued_victim_keeps_why_it_was_evicted(bus_factory: Any, store: Any) -> None:
    """A preempted pod back in the queue shows "Evicted: Preempted by ns/name" (colo describe / get pods)."""
    from colo.messages import PodStatus

    svc, tester = await _bound_on_n1(bus_factory, store, 2000, {"a": 1500})
    await tester.publish(subjects.POD_STATUS, PodStatus(uid="a", node="n1", phase="Failed", at=20.0, reason="Evicted",
                                                        message="Preempted by shop/big"), node="n1")
    await svc.ctx.bus.settle()  # type: ignore[union-attr]
    assert "a" in svc.core.queue
    rec = await store.get_pod("a")
    assert rec is not None and (rec.phase, rec.reason) == ("Pending", "Evicted: Preempted by shop/big")


@pytest.mark.parametrize(("history", "reasons", "now", "published"), [
    ([], {"Insufficient cpu": 3}, 0.0, True),
    ([({"Insufficient cpu": 3}, 0.0)], {"Insufficient cpu": 3}, 300.0, False),
    ([({"Insufficient cpu": 3}, 0.0)], {"Insufficient cpu": 2, "Too many pods": 1}, 300.0, True),
    ([({"Insufficient cpu": 3}, 0.0)], {"Insufficient cpu": 3}, 600.0, True),
], ids=["first", "same-verdict-soon", "changed-verdict", "same-verdict-after-interval"])
def test_unschedulable_reports(history: list[tuple[dict[str, int], float]], reasons: dict[str, int],
                               now: float, published: bool) -> None:
    svc = SchedulerService(SchedulerSettings(unschedulable_event_interval_s=600.0))
    for old, at in history:
        assert svc._report_unschedulable("p", old, "msg", at)
    assert svc._report_unschedulable("p", reasons, "msg", now) is published


@pytest.mark.parametrize("read_at", ["after-store-release", "before-store-release"])
async def test_a_release_overlapping_an_allocation_resync_never_counts_the_pod_out_twice(
        bus_factory: Any, store: Any, read_at: str) -> None:
    """A status handler releases the pod in the store and in the table with an await between them;
    a resync of the store's sums can run in that gap. Its sums then either already leave the pod out
    (read after the store's release) or still hold it. The table must never count the pod out twice
    (an under-count: cycles place on room that is not there); an over-count is re-read next cycle."""
    from colo.messages import PodStatus

    svc, tester = await _bound_on_n1(bus_factory, store, 4000, {"a": 1500, "b": 1000})
    row = svc.core.table.index["n1"]
    real_release = store.release
    seen: list[int] = []

    async def release_with_a_resync_in_the_gap(*args: Any, **kwargs: Any) -> bool:
        if read_at == "before-store-release":
            await svc._resync(15.0)
        released: bool = await real_release(*args, **kwargs)
        if read_at == "after-store-release":
            await svc._resync(15.0)
        seen.append(int(svc.core.table.allocated[row, 0]))
        return released

    store.release = release_with_a_resync_in_the_gap
    await tester.publish(subjects.POD_STATUS, PodStatus(uid="a", node="n1", phase="Succeeded", at=20.0,
                                                        reason="Completed"), node="n1")
    await svc.ctx.bus.settle()  # type: ignore[union-attr]
    assert (await store.allocated("n1")).cpu == 1000
    assert seen and min(seen) >= 1000, seen  # never below what b holds
    await svc.tick(21.0)  # re-reads the node when the resync may have over-counted
    assert int(svc.core.table.allocated[row, 0]) == 1000


async def test_a_late_pod_bound_during_the_release_does_not_resurrect_the_pod(bus_factory: Any,
                                                                             store: Any) -> None:
    """The table releases the pod before the store does; a PodBound of it handled in between finds
    the store's binding still there and must not adopt the pod back."""
    from colo.bus import MessageInfo
    from colo.messages import PodStatus

    svc, tester = await _bound_on_n1(bus_factory, store, 4000, {"a": 1500})
    bound_at = (await store.bound_nodes(["a"]))["a"][1]
    late = PodBound(spec=pod("a", 1500, MI), node="n1", at=bound_at)
    real_release = store.release

    async def release_with_a_late_bound_first(*args: Any, **kwargs: Any) -> bool:
        await svc._on_bound([(late, MessageInfo(subject="colo.v1.pod.bound.n1", headers={}, stream_seq=1,
                                                num_delivered=1))])
        released: bool = await real_release(*args, **kwargs)
        return released

    store.release = release_with_a_late_bound_first
    await tester.publish(subjects.POD_STATUS, PodStatus(uid="a", node="n1", phase="Succeeded", at=20.0,
                                                        reason="Completed"), node="n1")
    await svc.ctx.bus.settle()  # type: ignore[union-attr]
    assert "a" not in svc.core.framework.placed and svc.totals["foreign_binds"] == 0
    await svc.tick(21.0)
    assert int(svc.core.table.allocated[svc.core.table.index["n1"], 0]) == 0
