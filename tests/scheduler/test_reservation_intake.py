"""Reservations end to end through the scheduler service (real NATS and Redis): submitted on
``reservation.submitted``, placed (on their node, or where a pod of their requests would go), consumed by a
matching pod, expired, reusable, and never losing room to a refused bind (REFERENCE.md §9, §11)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from sched_helpers import GI, MI, node, pod

from colo import subjects
from colo.clock import VirtualClock
from colo.messages import (
    DeadLetter,
    NodeSpec,
    OwnerReference,
    PodAdmitted,
    PodSpec,
    PodStatus,
    ReservationOwner,
    ReservationSpec,
    Resources,
)
from colo.reservations import ReservationStore
from colo.testing.fixtures import service_context
from colo_scheduler.service import SchedulerService
from colo_scheduler.settings import SchedulerSettings

pytestmark = pytest.mark.integration

TEAM_A = ReservationOwner(namespace="ml", match_labels={"team": "a"})


class Cluster:
    """A started scheduler service, a tester bus and the store."""

    def __init__(self, svc: SchedulerService, tester: Any, store: Any, clock: VirtualClock) -> None:
        self.svc, self.tester, self.store, self.clock = svc, tester, store, clock
        self.rs = ReservationStore(store.redis, store.keys)

    async def add_node(self, spec: NodeSpec) -> None:
        await self.store.put_node(spec)
        await self.tester.publish(subjects.NODE_REGISTERED, spec, node=spec.name)

    async def submit(self, *pods: PodSpec) -> None:
        for p in pods:
            await self.tester.publish(subjects.POD_ADMITTED, PodAdmitted(spec=p, at=self.clock.now()))

    async def reserve(self, spec: ReservationSpec) -> None:
        await self.tester.publish(subjects.RESERVATION_SUBMITTED, spec)

    async def ended(self, uid: str, node: str) -> None:
        await self.tester.publish(subjects.POD_STATUS, PodStatus(uid=uid, node=node, phase="Succeeded",
                                                                 at=self.clock.now(), reason="Completed"), node=node)

    async def tick(self, at: float | None = None) -> dict[str, float]:
        if at is not None:
            self.clock.advance_to(at)
        await self.svc.ctx.bus.settle()  # type: ignore[union-attr]
        return await self.svc.tick(self.clock.now())

    def table_row(self, name: str) -> list[int]:
        return [int(v) for v in self.svc.core.table.allocated[self.svc.core.table.index[name]].tolist()]


@pytest.fixture
async def cluster(bus_factory: Any, store: Any) -> Any:
    clock = VirtualClock(10.0)
    bus = await bus_factory("scheduler", clock, autostart=False)
    svc = SchedulerService(SchedulerSettings(seed=1))
    await svc.start(service_context(bus, store, clock))
    await bus.start_consumers()
    c = Cluster(svc, await bus_factory("tester"), store, clock)
    yield c
    await svc.stop()


def team_pod(uid: str, cpu: int, labels: dict[str, str] | None = None, owner: OwnerReference | None = None,
             **kw: Any) -> PodSpec:
    base = pod(uid, cpu, 64 * MI, **kw)
    return msgspec.structs.replace(base, namespace="ml", owner=owner,
                                   labels=labels if labels is not None else {"team": "a"})


async def test_a_nodeless_reservation_is_placed_and_consumed_by_a_matching_pod(cluster: Cluster) -> None:
    """Filters apply to the reserve pod (zone a only); the room is refused to a stranger and taken by the owner."""
    await cluster.add_node(node("n1", cpu=4000, memory=8 * GI, labels={"zone": "a"}))
    await cluster.add_node(node("n2", cpu=8000, memory=8 * GI, labels={"zone": "b"}))
    await cluster.reserve(ReservationSpec(name="r1", namespace="ml", requests=Resources(cpu=3000, memory=GI),
                                          owners=[TEAM_A], node_selector={"zone": "a"}, ttl_s=600, created_at=10.0))
    await cluster.tick()
    rec = await cluster.rs.get("r1")
    assert rec is not None and (rec.state, rec.node, rec.held) == ("Available", "n1",
                                                                    Resources(cpu=3000, memory=GI, pods=1))
    assert await cluster.store.allocated("n1") == Resources(cpu=3000, memory=GI, pods=1)
    assert cluster.table_row("n1")[:2] == [3000, GI]
    await cluster.submit(team_pod("stranger", 2000, labels={"team": "b"}, selector={"zone": "a"}))
    assert (await cluster.tick(11.0))["pods_bound"] == 0
    await cluster.submit(team_pod("owner", 3000))
    assert (await cluster.tick(12.0))["pods_bound"] == 1
    assert await cluster.store.bound_node("owner") == "n1"
    assert await cluster.store.bound_node("stranger") is None
    done = await cluster.rs.get("r1")
    assert done is not None and (done.state, done.consumed_by) == ("Succeeded", "owner")
    assert await cluster.store.allocated("n1") == Resources(cpu=3000, memory=64 * MI, pods=1)


async def test_a_reservation_that_fits_nowhere_waits_visibly_and_is_placed_when_room_comes(cluster: Cluster) -> None:
    await cluster.add_node(node("n1", cpu=2000, memory=8 * GI))
    await cluster.reserve(ReservationSpec(name="big", requests=Resources(cpu=3000), owners=[TEAM_A], ttl_s=600,
                                          created_at=10.0))
    await cluster.tick()
    rec = await cluster.rs.get("big")
    assert rec is not None and rec.state == "Pending" and "Insufficient cpu" in rec.reason, rec
    assert cluster.svc.debug()["reservations"]["pending"] == {"big": 1}  # type: ignore[index]
    assert await cluster.store.allocated("n1") == Resources()
    await cluster.tick(10.5)  # before its backoff: not tried again
    assert cluster.svc.reservation_intake.attempts["big"] == 1
    await cluster.add_node(node("n2", cpu=4000, memory=8 * GI))
    await cluster.tick(20.0)
    rec = await cluster.rs.get("big")
    assert rec is not None and (rec.state, rec.node) == ("Available", "n2")
    assert cluster.svc.debug()["reservations"]["pending"] == {}  # type: ignore[index]


async def test_ttl_expiry_returns_the_room_placed_or_pending(cluster: Cluster) -> None:
    await cluster.add_node(node("n1", cpu=4000, memory=8 * GI))
    await cluster.reserve(ReservationSpec(name="r1", node="n1", requests=Resources(cpu=3000), owners=[TEAM_A],
                                          ttl_s=60, created_at=10.0))
    await cluster.reserve(ReservationSpec(name="never", requests=Resources(cpu=9000), owners=[TEAM_A], ttl_s=30,
                                          created_at=10.0))
    await cluster.tick()
    assert (await cluster.rs.get("r1")).state == "Available"  # type: ignore[union-attr]
    await cluster.submit(team_pod("stranger", 2000, labels={}))
    assert (await cluster.tick(11.0))["pods_bound"] == 0
    t = 10.0 + cluster.svc.settings.resync_interval_s + 60.0
    assert (await cluster.tick(t))["pods_bound"] == 1  # the sweep returned the room; the stranger takes it
    assert await cluster.store.bound_node("stranger") == "n1"
    assert (await cluster.rs.get("r1")).state == "Expired"  # type: ignore[union-attr]
    never = await cluster.rs.get("never")
    assert never is not None and never.state == "Expired" and "Insufficient cpu" in never.reason
    assert await cluster.store.allocated("n1") == Resources(cpu=2000, memory=64 * MI, pods=1)


async def test_a_reusable_reservation_gets_the_room_back_when_its_pod_ends(cluster: Cluster) -> None:
    await cluster.add_node(node("n1", cpu=4000, memory=8 * GI))
    job = OwnerReference(kind="Job", name="train", uid="job-1")
    await cluster.reserve(ReservationSpec(name="pool", node="n1", requests=Resources(cpu=3000, memory=GI),
                                          owners=[ReservationOwner(owner_kind="Job", owner_name="train")],
                                          allocate_once=False, ttl_s=3600, created_at=10.0))
    await cluster.tick()
    await cluster.submit(team_pod("w1", 3000, owner=job))
    assert (await cluster.tick(11.0))["pods_bound"] == 1
    assert (await cluster.rs.get("pool")).held == Resources(memory=GI - 64 * MI, pods=1)  # type: ignore[union-attr]
    await cluster.submit(team_pod("stranger", 1500, labels={}))
    assert (await cluster.tick(12.0))["pods_bound"] == 0  # 1000 free beside the reservation
    await cluster.ended("w1", "n1")
    await cluster.tick(13.0)
    back = await cluster.rs.get("pool")
    assert back is not None and back.state == "Available" and back.held == Resources(cpu=3000, memory=GI, pods=1)
    assert await cluster.store.allocated("n1") == Resources(cpu=3000, memory=GI, pods=1)
    assert cluster.table_row("n1")[:2] == [3000, GI]  # the table is the store's, not 0
    assert await cluster.store.bound_node("stranger") is None  # the room went back to the reservation
    await cluster.submit(team_pod("w2", 2500, owner=job))
    assert (await cluster.tick(14.0))["pods_bound"] == 1
    assert await cluster.store.bound_node("w2") == "n1"


async def test_a_refused_bind_leaves_the_room_with_the_reservation(cluster: Cluster) -> None:
    """Another binder took the node's free room behind the scheduler's back: the owner's bind on the
    reservation is refused by the store, and the reservation keeps all its room (REFERENCE.md §11)."""
    await cluster.add_node(node("n1", cpu=4000, memory=8 * GI))
    await cluster.reserve(ReservationSpec(name="r1", node="n1", requests=Resources(cpu=1000, memory=GI),
                                          owners=[ReservationOwner(uid="owner")], ttl_s=600, created_at=10.0))
    await cluster.tick()
    assert (await cluster.store.bind("foreign", "n1", Resources(cpu=3000), 10.5)).ok  # unseen by the scheduler
    await cluster.submit(team_pod("owner", 2000, labels={}))
    out = await cluster.tick(11.0)
    assert out["pods_bound"] == 0 and out["bind_conflicts"] == 1
    rec = await cluster.rs.get("r1")
    assert rec is not None and rec.state == "Available" and rec.held == Resources(cpu=1000, memory=GI, pods=1)
    assert await cluster.store.allocated("n1") == Resources(cpu=4000, memory=GI, pods=2)
    assert cluster.table_row("n1")[:2] == [4000, GI] and cluster.table_row("n1")[6] == 2
    assert cluster.svc.core.reservations.claims == {}
    assert await cluster.store.release("foreign", "Succeeded", "Completed", 12.0)
    await cluster.ended("foreign", "n1")
    assert (await cluster.tick(30.0))["pods_bound"] == 1
    assert await cluster.store.bound_node("owner") == "n1"
    assert (await cluster.rs.get("r1")).state == "Succeeded"  # type: ignore[union-attr]
    assert await cluster.store.allocated("n1") == Resources(cpu=2000, memory=64 * MI, pods=1)


async def test_bad_submissions_are_dead_lettered_and_replays_change_nothing(cluster: Cluster) -> None:
    dead: list[DeadLetter] = []

    async def on_dead(m: DeadLetter) -> None:
        dead.append(m)

    await cluster.tester.subscribe(subjects.DEAD_LETTER, on_dead, durable="dlq")
    await cluster.add_node(node("n1", cpu=4000, memory=8 * GI))
    await cluster.reserve(ReservationSpec(name="Bad Name", requests=Resources(cpu=-1), owners=[ReservationOwner()]))
    good = ReservationSpec(name="r1", node="n1", requests=Resources(cpu=1000), owners=[TEAM_A], created_at=10.0)
    await cluster.reserve(good)
    await cluster.tick()
    await cluster.reserve(good)  # a redelivery: the same reservation
    await cluster.reserve(ReservationSpec(name="r1", node="n1", requests=Resources(cpu=500), owners=[TEAM_A],
                                          created_at=11.0))  # another one with a taken name
    await cluster.tick(11.0)
    await cluster.tester.settle()
    assert len(dead) == 2, dead
    assert all(p in dead[0].reason for p in ("name:", "requests.cpu:", "owners[0]:")), dead[0].reason
    assert "exists" in dead[1].reason
    assert [(r.name, r.state) for r in await cluster.rs.all()] == [("r1", "Available")]
    assert await cluster.store.allocated("n1") == Resources(cpu=1000, pods=1)


async def test_pending_reservations_in_the_store_are_placed_after_a_restart(cluster: Cluster) -> None:
    """Recorded Pending by an earlier scheduler (or the leader before a fail-over), never placed: picked up."""
    await cluster.add_node(node("n1", cpu=4000, memory=8 * GI))
    left = ReservationSpec(name="left", requests=Resources(cpu=1000), owners=[TEAM_A], ttl_s=600, created_at=5.0)
    assert await cluster.rs.put_pending(left, 5.0) == ""
    await cluster.reserve(left)  # its redelivery: known, still pending
    await cluster.tick()
    rec = await cluster.rs.get("left")
    assert rec is not None and (rec.state, rec.node, rec.expires_at) == ("Available", "n1", 605.0)
