"""Leader election on a real redis-server: one leader at a time, hand-over on release and on
expiry, stepping down when renewal fails, and a scheduler that stops binding the moment its lease
is gone (fenced binds)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sched_helpers import GI, MI, node, pod

from colo import subjects
from colo.clock import VirtualClock
from colo.messages import PodAdmitted
from colo.settings import RuntimeSettings
from colo.store import Store
from colo.testing.fixtures import BusFactory, service_context
from colo_scheduler.lease import LeaderElector
from colo_scheduler.service import SchedulerService
from colo_scheduler.settings import SchedulerSettings

pytestmark = pytest.mark.integration


def elector(store: Store, holder: str, changes: list[tuple[str, bool]] | None = None,
            duration_s: float = 0.6, deadline_s: float = 0.4, retry_s: float = 0.05) -> LeaderElector:
    def on_change(leader: bool) -> None:
        if changes is not None:
            changes.append((holder, leader))

    return LeaderElector(store, "sched", holder, duration_s, deadline_s, retry_s, on_change)


async def test_one_leader_among_candidates_and_hand_over_on_release(store: Store) -> None:
    changes: list[tuple[str, bool]] = []
    candidates = [elector(store, h, changes) for h in ("a", "b", "c")]
    results = await asyncio.gather(*(c.try_once() for c in candidates))
    assert sum(results) == 1
    leader = next(c for c in candidates if c.is_leader())
    assert changes == [(leader.holder, True)]
    for _ in range(3):  # renewals keep it
        assert [await c.try_once() for c in candidates] == [c is leader for c in candidates]
    token = leader.lease.token if leader.lease else 0
    await leader.release()
    assert not leader.is_leader() and changes[-1] == (leader.holder, False)
    others = [c for c in candidates if c is not leader]
    assert sum([await c.try_once() for c in others]) == 1
    new = next(c for c in others if c.is_leader())
    assert new.lease is not None and new.lease.token > token
    assert new.fence() is not None and leader.fence() is None


async def test_expired_lease_is_taken_over_and_the_old_holder_steps_down(store: Store) -> None:
    changes: list[tuple[str, bool]] = []
    a, b = elector(store, "a", changes), elector(store, "b", changes)
    assert await a.try_once()
    await asyncio.sleep(0.45)  # a stops renewing (paused): past its renew deadline it no longer leads
    assert not a.is_leader() and changes[-1] == ("a", False)
    assert not await b.try_once()  # the key itself lives until duration_s
    await asyncio.sleep(0.25)
    assert await b.try_once()
    assert not await a.try_once() and b.is_leader()  # a is a follower now


async def test_a_leader_whose_lease_vanished_steps_down_at_its_next_renewal(store: Store) -> None:
    changes: list[tuple[str, bool]] = []
    a = elector(store, "a", changes)
    assert await a.try_once()
    await store.redis.delete(store.keys.lease("sched"))
    assert not await a.try_once()
    assert changes == [("a", True), ("a", False)]


@pytest.mark.parametrize(("duration", "deadline", "retry"), [(1.0, 1.0, 0.5), (1.0, 0.5, 0.5), (1.0, 0.5, 0.0)])
def test_elector_refuses_inconsistent_timing(store: Store, duration: float, deadline: float, retry: float) -> None:
    with pytest.raises(ValueError, match="duration_s > renew_deadline_s > retry_period_s"):
        LeaderElector(store, "sched", "a", duration, deadline, retry)


async def _elected_service(bus_factory: BusFactory, store: Store, clock: VirtualClock,
                           instance: str) -> tuple[SchedulerService, Any]:
    bus = await bus_factory("scheduler", clock, autostart=False)
    svc = SchedulerService(SchedulerSettings(leader_election=True, lease_duration_s=3.0,
                                             lease_renew_deadline_s=2.0, lease_retry_period_s=0.05))
    await svc.start(service_context(bus, store, clock, RuntimeSettings(instance=instance)))
    await bus.start_consumers()
    return svc, bus


async def test_follower_keeps_state_warm_and_takes_over_without_binding_twice(bus_factory: BusFactory,
                                                                              store: Store) -> None:
    clock = VirtualClock(10.0)
    tester = await bus_factory("tester")
    spec = node("n1", cpu=4000, memory=8 * GI)
    await store.put_node(spec)
    await tester.publish(subjects.NODE_REGISTERED, spec, node="n1")
    a, bus_a = await _elected_service(bus_factory, store, clock, "a")
    await asyncio.sleep(0.1)
    b, bus_b = await _elected_service(bus_factory, store, clock, "b")
    try:
        assert a.leading() and not b.leading()
        for j in range(3):
            await tester.publish(subjects.POD_ADMITTED, PodAdmitted(spec=pod(f"p{j}", 1000, MI), at=10.0))
        await bus_a.settle()
        await bus_b.settle()
        assert len(b.core.queue) == 3  # warm: the follower queued them too ...
        stats_b = await b.tick(11.0)
        assert stats_b["leader"] == 0.0 and stats_b["pods_bound"] == 0  # ... but does not schedule
        assert (await a.tick(11.0))["pods_bound"] == 3
        await bus_b.settle()  # b adopts a's binds from pod.bound
        assert len(b.core.queue) == 0 and len(b.core.framework.placed) == 3
        assert b.debug()["leader"] == {"leader": False, "election": True, "lease": "scheduler", "holder":
                                       b.elector.holder if b.elector else "", "token": None, "transitions": 0,
                                       "elected_at": 0.0}
        await tester.publish(subjects.POD_ADMITTED, PodAdmitted(spec=pod("late", 1000, MI), at=12.0))
        await bus_a.settle()
        await bus_b.settle()
        await a.stop()  # releases the lease
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 5
        while not b.leading():
            assert loop.time() < deadline
            await asyncio.sleep(0.02)
        stats = await b.tick(13.0)
        assert stats["leader"] == 1.0 and stats["pods_bound"] == 1
        assert await store.bound_node("late") == "n1"
        assert (await store.allocated("n1")).cpu == 4000 and (await store.allocated("n1")).pods == 4
    finally:
        await a.stop()
        await b.stop()


async def test_a_leader_that_lost_its_lease_binds_nothing(bus_factory: BusFactory, store: Store) -> None:
    """The lease moves to someone else between two renewals: the fenced bind is refused by Redis,
    the scheduler steps down and keeps the pods queued for whoever leads."""
    clock = VirtualClock(10.0)
    tester = await bus_factory("tester")
    spec = node("n1", cpu=4000, memory=8 * GI)
    await store.put_node(spec)
    await tester.publish(subjects.NODE_REGISTERED, spec, node="n1")
    a, bus_a = await _elected_service(bus_factory, store, clock, "a")
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 5
        while not a.leading():
            assert loop.time() < deadline
            await asyncio.sleep(0.02)
        await tester.publish(subjects.POD_ADMITTED, PodAdmitted(spec=pod("p", 1000, MI), at=10.0))
        await bus_a.settle()
        for task in a._tasks:  # its renewals stall (a paused process, a slow network) ...
            if task.get_name() == "scheduler:lease":
                task.cancel()
        # ... and another replica takes the lease meanwhile
        await store.redis.delete(store.keys.lease("scheduler"))
        usurper = await store.acquire_lease("scheduler", "z", 60_000)
        assert usurper is not None
        assert a.leading()  # this one has not noticed yet
        stats = await a.tick(11.0)
        assert stats["pods_bound"] == 0 and await store.bound_node("p") is None
        assert not a.leading() and "p" in a.core.queue
    finally:
        await a.stop()
