"""The Reservation plugin: reserved room is refused to other pods and taken by its owner (core and service)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from sched_helpers import GI, MI, node, node_resource, pod, scheduler

from colo import subjects
from colo.clock import VirtualClock
from colo.messages import PodAdmitted, PodSpec, Resources
from colo.reservations import Reservation, ReservationStore
from colo.testing.fixtures import service_context
from colo_scheduler.service import SchedulerService
from colo_scheduler.settings import SchedulerSettings


def owned(uid: str, cpu: int, app: str = "web", **kw: Any) -> PodSpec:
    spec = pod(uid, cpu, 64 * MI, app=app, **kw)
    return spec


RSV = Reservation(name="r1", node="n1", owner_uid="mig-pod", owner_workload="default/web",
                  held=Resources(cpu=3000, memory=64 * MI, pods=1), expires_at=500.0)


@dataclass(frozen=True)
class Case:
    name: str
    spec: PodSpec
    node: str  # "" = unschedulable
    reservation: str = ""
    rsv: Reservation = RSV
    n2_cpu: int = 4000
    extra: dict[str, Any] = field(default_factory=dict)


CASES = [
    Case("owner-by-uid-takes-the-reserved-node", owned("mig-pod", 3000, app="other"), "n1", "r1"),
    Case("owner-by-workload-takes-it", owned("replica-2", 2000), "n1", "r1"),
    Case("stranger-is-refused-the-room", owned("stranger", 2000, app="db"), "n2"),
    Case("stranger-unschedulable-when-only-reserved-room-left", owned("stranger", 2000, app="db"), "",
         n2_cpu=1000),
    Case("owner-larger-than-room-plus-free-goes-elsewhere", owned("mig-pod", 4500), "n2", n2_cpu=5000),
    Case("owner-uses-held-room-plus-free", owned("mig-pod", 3800, app="other"), "n1", "r1", n2_cpu=1000,
         rsv=Reservation(name="r1", node="n1", owner_uid="mig-pod", held=Resources(cpu=3000, pods=1),
                         expires_at=500.0)),
    Case("expired-reservation-is-not-used", owned("mig-pod", 3000), "n2",
         rsv=Reservation(name="r1", node="n1", owner_uid="mig-pod", held=Resources(cpu=3000, pods=1),
                         expires_at=50.0)),
    Case("other-filters-still-apply", owned("mig-pod", 3000, selector={"zone": "b"}), "n2"),
    Case("batch-owner-does-not-consume-native-room", pod("batch-1", batch_cpu=4000, batch_memory=GI, app="web"),
         "n1", "", extra={"n1": (8000, 8 * GI)}),
    Case("batch-owner-prefers-no-native-room", pod("batch-1", batch_cpu=4000, batch_memory=GI, app="web"),
         "n2", "", extra={"n1": (4000, GI), "n2": (16000, 16 * GI)}),
    Case("batch-owner-takes-batch-room", pod("batch-1", batch_cpu=4000, batch_memory=GI, app="web"), "n1", "r1",
         rsv=Reservation(name="r1", node="n1", owner_workload="default/web",
                         held=Resources(batch_cpu=4000, batch_memory=GI, pods=1), expires_at=500.0),
         extra={"n1": (4000, GI), "n2": (8000, 8 * GI)}),
    Case("slot-only-reservation-covers-any-pod", owned("replica-2", 2000), "n1", "r1",
         rsv=Reservation(name="r1", node="n1", owner_workload="default/web", held=Resources(pods=1),
                         expires_at=500.0)),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_reservation_in_the_core(case: Case) -> None:
    s = scheduler(seed=1)
    s.on_node(node("n1", cpu=4000, memory=8 * GI, labels={"zone": "a"}), 0.0)
    s.on_node(node("n2", cpu=case.n2_cpu, memory=8 * GI, labels={"zone": "b"}), 0.0)
    for name in ("n1", "n2"):  # batch allocatable (milli-cores, bytes)
        if name in case.extra:
            s.on_node_resource(node_resource(name, *case.extra[name]), 0.0)
    held = case.rsv.held
    s.set_allocated("n1", held, held.pods)  # the store's sums count the held room
    s.reservations.set_reservations([case.rsv])
    s.add_pod(case.spec, 100.0)
    out = s.schedule_cycle(100.0)
    got = out.placements[0].node if out.placements else ""
    assert got == case.node
    if case.node:
        assert out.placements[0].reservation == case.reservation
    if case.reservation:  # the table books the pod on the held room, not on top of it
        i = s.table.index["n1"]
        assert s.table.allocated[i][0] == max(held.cpu, case.spec.requests.cpu)
        assert s.table.allocated[i][2] == max(held.batch_cpu, case.spec.requests.batch_cpu)
        assert s.table.allocated[i][6] == 1


def test_pods_without_reservations_skip_the_plugin() -> None:
    s = scheduler(seed=1)
    s.on_node(node("n1", cpu=4000, memory=8 * GI), 0.0)
    assert not s.reservations.active
    s.reservations.set_reservations([RSV])
    assert s.reservations.matching(s.pod_info(owned("x", 100, app="db"), 0.0)) == []
    assert s.reservations.set_reservations([]) == {"n1"}  # the node whose reservation ended
    assert not s.reservations.active


async def _start(bus_factory: Any, store: Any, clock: VirtualClock) -> SchedulerService:
    bus = await bus_factory("scheduler", clock, autostart=False)
    svc = SchedulerService(SchedulerSettings(seed=1))
    await svc.start(service_context(bus, store, clock))
    await bus.start_consumers()
    return svc


@pytest.mark.integration
async def test_service_binds_owner_on_reservation_and_refuses_others(bus_factory: Any, store: Any) -> None:
    """Real NATS and Redis: node n1 has 4 cores, 3 of them reserved; a stranger asking 2 cores stays
    unschedulable, the owner takes the reserved room, and the store's allocation is the pods' requests."""
    clock = VirtualClock(10.0)
    rs = ReservationStore(store.redis, store.keys)
    spec = node("n1", cpu=4000, memory=8 * GI)
    await store.put_node(spec)
    assert (await rs.reserve("r1", "n1", Resources(cpu=3000, memory=64 * MI), at=0.0, ttl_s=600,
                             owner_uid="owner")).ok
    svc = await _start(bus_factory, store, clock)
    tester = await bus_factory("tester")
    await tester.publish(subjects.NODE_REGISTERED, spec, node="n1")
    await tester.publish(subjects.POD_ADMITTED, PodAdmitted(spec=owned("stranger", 2000, app="db"), at=10.0))
    await svc.ctx.bus.settle()  # type: ignore[union-attr]
    assert (await svc.tick(10.0))["pods_bound"] == 0
    await tester.publish(subjects.POD_ADMITTED, PodAdmitted(spec=owned("owner", 3000, app="web"), at=11.0))
    await svc.ctx.bus.settle()  # type: ignore[union-attr]
    assert (await svc.tick(11.0))["pods_bound"] == 1
    assert await store.bound_node("owner") == "n1" and await store.bound_node("stranger") is None
    assert await store.allocated("n1") == Resources(cpu=3000, memory=64 * MI, pods=1)
    assert (await rs.get("r1")).state == "Succeeded"  # type: ignore[union-attr]
    i = svc.core.table.index["n1"]
    assert svc.core.table.allocated[i].tolist()[:2] == [3000, 64 * MI]
    await svc.stop()


@pytest.mark.integration
async def test_running_scheduler_sweeps_an_expired_reservation(bus_factory: Any, store: Any) -> None:
    """Nobody else sweeps (no descheduler): at its resync after the TTL the scheduler ends the reservation,
    its table sees the room returned, and a stranger the room was refused to is bound."""
    clock = VirtualClock(10.0)
    rs = ReservationStore(store.redis, store.keys)
    spec = node("n1", cpu=4000, memory=8 * GI)
    await store.put_node(spec)
    await rs.reserve("r1", "n1", Resources(cpu=3000), at=0.0, ttl_s=60, owner_uid="gone")
    svc = await _start(bus_factory, store, clock)
    tester = await bus_factory("tester")
    await tester.publish(subjects.NODE_REGISTERED, spec, node="n1")
    await tester.publish(subjects.POD_ADMITTED, PodAdmitted(spec=owned("stranger", 2000, app="db"), at=10.0))
    await svc.ctx.bus.settle()  # type: ignore[union-attr]
    assert (await svc.tick(10.0))["pods_bound"] == 0
    clock.advance_to(10.0 + svc.settings.resync_interval_s + 60.0)
    assert (await svc.tick(clock.now()))["pods_bound"] == 1  # the unschedulable retry meets the swept room
    assert await store.bound_node("stranger") == "n1"
    assert (await rs.get("r1")).state == "Expired"  # type: ignore[union-attr]
    assert await store.allocated("n1") == Resources(cpu=2000, memory=64 * MI, pods=1)
    assert not svc.core.reservations.active
    await svc.stop()


def test_refused_bind_gives_the_room_back_to_the_reservation_in_the_table() -> None:
    """The store refused the owner's bind: the table's row is the store's again (the held room, not the
    pod's request on top of it, not zero), and the retry is nominated to the reservation again."""
    s = scheduler(seed=1, backoff_initial_s=1.0)
    s.on_node(node("n1", cpu=4000, memory=8 * GI), 0.0)
    s.on_node(node("n2", cpu=4000, memory=8 * GI), 0.0)
    s.set_allocated("n1", RSV.held, 1)
    s.reservations.set_reservations([RSV])
    s.add_pod(owned("mig-pod", 2000), 100.0)
    [placed] = s.schedule_cycle(100.0).placements
    i = s.table.index["n1"]
    assert (placed.node, placed.reservation, s.table.allocated[i][0]) == ("n1", "r1", 3000)
    s.bind_failed(placed.pod)
    assert s.table.allocated[i].tolist()[:2] == [RSV.held.cpu, RSV.held.memory] and s.table.allocated[i][6] == 1
    [again] = s.schedule_cycle(200.0).placements
    assert (again.node, again.reservation) == ("n1", "r1")
    s.bound_on_reservation(again.pod)
    s.set_allocated("n1", Resources(cpu=2000, memory=64 * MI), 1)  # the store's sums, re-read after the bind
    s.release("mig-pod", 300.0)  # bound: its release frees the pod's room, nothing goes back to a reservation
    assert s.table.allocated[i].tolist() == [0] * 7
