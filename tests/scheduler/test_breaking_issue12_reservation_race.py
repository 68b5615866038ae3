"""Several pods of one owner in one scheduling cycle, one reservation.

A migration's reservation names the owner workload (``namespace/app``): every pending replica of that
workload matches it. Within one cycle the plugin kept offering the reservation's full held room to each of
them, so all were nominated to it: the table booked the held room as the pods' several times (its row showed
room it did not have, so later pods of the cycle went there too) and the store refused every bind after the
first ("reservation not available"), sending those pods to backoff although other nodes had room.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from sched_helpers import GI, MI, node, pod, scheduler

from colo import subjects
from colo.clock import VirtualClock
from colo.messages import PodAdmitted, Resources
from colo.reservations import Reservation, ReservationStore
from colo.testing.fixtures import service_context
from colo_scheduler.service import SchedulerService
from colo_scheduler.settings import SchedulerSettings


@dataclass(frozen=True)
class Case:
    name: str
    held_cpu: int
    allocate_once: bool
    on_reservation: int  # placements on r1
    n1_cpu_after: int  # the table's cpu allocation of n1 after the cycle (held room + what lies above it)


CASES = [
    Case("allocate-once-taken-by-one-replica", 3000, True, 1, 3000),
    Case("reusable-shared-until-its-room-is-used", 4000, False, 2, 4000),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_one_reservation_several_replicas_in_a_cycle(case: Case) -> None:
    rsv = Reservation(name="r1", node="n1", owner_workload="default/web", allocate_once=case.allocate_once,
                      held=Resources(cpu=case.held_cpu, memory=64 * MI, pods=1), expires_at=500.0)
    s = scheduler(seed=1)
    s.on_node(node("n1", cpu=4000, memory=8 * GI), 0.0)
    s.on_node(node("n2", cpu=8000, memory=8 * GI), 0.0)
    s.set_allocated("n1", rsv.held, 1)
    s.reservations.set_reservations([rsv])
    for uid in ("a", "b", "c"):
        s.add_pod(pod(uid, 2000, 64 * MI, app="web"), 100.0)
    out = s.schedule_cycle(100.0)
    assert len(out.placements) == 3
    assert sum(1 for p in out.placements if p.reservation == "r1") == case.on_reservation
    assert all(p.node == "n1" for p in out.placements if p.reservation == "r1")
    i = s.table.index["n1"]
    on_n1 = [p for p in out.placements if p.node == "n1"]
    assert s.table.allocated[i][0] == case.n1_cpu_after
    # pod slots as the store counts them: an allocate-once reservation's slot is its pod's, a reusable one
    # keeps its own slot and each pod takes another
    assert s.table.allocated[i][0] <= 4000
    assert s.table.allocated[i][6] == len(on_n1) + (0 if case.allocate_once else 1)


def test_a_refused_replica_hands_the_reservation_back() -> None:
    """The one nominated replica's bind is refused: the next cycle nominates a replica to it again."""
    rsv = Reservation(name="r1", node="n1", owner_workload="default/web",
                      held=Resources(cpu=3000, memory=64 * MI, pods=1), expires_at=500.0)
    s = scheduler(seed=1, backoff_initial_s=1.0)
    s.on_node(node("n1", cpu=4000, memory=8 * GI), 0.0)
    s.on_node(node("n2", cpu=8000, memory=8 * GI), 0.0)
    s.set_allocated("n1", rsv.held, 1)
    s.reservations.set_reservations([rsv])
    s.add_pod(pod("a", 2000, 64 * MI, app="web"), 100.0)
    [placed] = s.schedule_cycle(100.0).placements
    assert placed.reservation == "r1"
    s.bind_failed(placed.pod)
    s.add_pod(pod("b", 2000, 64 * MI, app="web"), 100.0)
    out = s.schedule_cycle(200.0)
    assert sorted(p.reservation for p in out.placements) == ["", "r1"]


@pytest.mark.integration
async def test_three_replicas_one_reservation_all_bound_in_one_tick(bus_factory: Any, store: Any) -> None:
    """Real NATS and Redis: the store accepts every bind of the cycle (none refused into backoff)."""
    clock = VirtualClock(10.0)
    rs = ReservationStore(store.redis, store.keys)
    n1, n2 = node("n1", cpu=4000, memory=8 * GI), node("n2", cpu=8000, memory=8 * GI)
    for spec in (n1, n2):
        await store.put_node(spec)
    assert (await rs.reserve("r1", "n1", Resources(cpu=3000, memory=64 * MI), at=0.0, ttl_s=600,
                             owner_workload="default/web")).ok
    bus = await bus_factory("scheduler", clock, autostart=False)
    svc = SchedulerService(SchedulerSettings(seed=1))
    await svc.start(service_context(bus, store, clock))
    await bus.start_consumers()
    tester = await bus_factory("tester")
    for spec in (n1, n2):
        await tester.publish(subjects.NODE_REGISTERED, spec, node=spec.name)
    for uid in ("a", "b", "c"):
        await tester.publish(subjects.POD_ADMITTED, PodAdmitted(spec=pod(uid, 2000, 64 * MI, app="web"), at=10.0))
    await svc.ctx.bus.settle()  # type: ignore[union-attr]
    stats = await svc.tick(10.0)
    assert stats["pods_bound"] == 3, stats
    assert (await rs.get("r1")).state == "Succeeded"  # type: ignore[union-attr]
    alloc = await store.allocated("n1")
    assert alloc.cpu <= 4000
    await svc.stop()
