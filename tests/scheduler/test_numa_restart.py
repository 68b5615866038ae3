"""A restarted scheduler keeps every cpuset assignment: the cpuset travels with the binding into the store
(real redis-server) and on ``PodBound`` (real nats-server), and a new instance books exactly those CPUs again
(docs/topology.md "Restart")."""

from __future__ import annotations

from typing import Any

import pytest
from sched_helpers import GI

from colo import subjects
from colo.clock import VirtualClock
from colo.messages import (
    NodeSpec,
    PodAdmitted,
    PodBound,
    PodRecord,
    PodSpec,
    Resources,
    cpuset_parse,
    smt_topology,
)
from colo.store import BindRequest
from colo.testing.fixtures import service_context
from colo_scheduler.plugins.nodenumaresource import NodeNUMAResource
from colo_scheduler.service import SchedulerService
from colo_scheduler.settings import SchedulerSettings

pytestmark = pytest.mark.integration


def lse(uid: str, cores: int) -> PodSpec:
    r = Resources(cpu=cores * 1000, memory=GI)
    return PodSpec(uid=uid, name=uid, qos_class="LSE", priority_class="prod", requests=r, limits=r)


def held(svc: SchedulerService) -> dict[str, tuple[int, ...]]:
    p = svc.core.framework.profile.plugins["NodeNUMAResource"]
    assert isinstance(p, NodeNUMAResource)
    node = p.nodes.get("n1")
    return {uid: cpus for uid, (cpus, _) in (node.pods if node else {}).items()}


async def test_restart_keeps_every_cpuset_assignment(bus_factory: Any, store: Any) -> None:
    clock = VirtualClock(10.0)
    bus = await bus_factory("scheduler", clock, autostart=False)
    svc = SchedulerService(SchedulerSettings(seed=1))
    await svc.start(service_context(bus, store, clock))
    await bus.start_consumers()
    tester = await bus_factory("tester")
    bound: dict[str, str] = {}

    async def on_bound(m: PodBound) -> None:
        bound[m.spec.uid] = m.cpuset

    await tester.subscribe(subjects.POD_BOUND, on_bound, durable="bound")
    r = Resources(cpu=16_000, memory=64 * GI, pods=110)
    spec = NodeSpec(name="n1", capacity=r, allocatable=r, topology=smt_topology(2, 4, 2, 1))
    await store.put_node(spec)
    await tester.publish(subjects.NODE_REGISTERED, spec, node="n1")
    for uid, cores in (("a", 2), ("b", 4), ("c", 2)):
        await tester.publish(subjects.POD_ADMITTED, PodAdmitted(spec=lse(uid, cores), at=10.0))
    await bus.settle()
    assert (await svc.tick(10.0))["pods_bound"] == 3
    await tester.settle()
    before = held(svc)
    assert sorted(len(v) for v in before.values()) == [2, 2, 4]
    assert {u: cpuset_parse(t) for u, t in bound.items()} == before, "PodBound carries the booked cpusets"
    assert {u: cpuset_parse((await store.get_pod(u)).cpuset) for u in before} == before

    # "a" ends: a fresh choice for the others would now start at CPU 0, the stored one does not
    assert await store.release("a", "Succeeded", "Completed", 10.5)
    svc.core.release("a", 10.5)
    assert (await store.get_pod("a")).cpuset == "", "the cpuset goes with the binding"
    del before["a"]
    await store.put_pod(PodRecord(spec=lse("d", 4), updated_at=11.0))  # admitted while no scheduler ran
    svc2 = SchedulerService(SchedulerSettings(seed=1))
    svc2.ctx = svc.ctx
    await svc2._load(11.0)
    assert held(svc2) == before
    assert (await svc2.tick(11.0))["pods_bound"] == 1
    d = held(svc2)["d"]
    assert len(d) == 4 and not set(d) & {c for v in before.values() for c in v}
    svc3 = SchedulerService(SchedulerSettings(seed=1))
    svc3.ctx = svc.ctx
    await svc3._load(12.0)
    assert held(svc3) == {**before, "d": d}
    await svc.stop()


async def test_a_leader_taking_over_books_the_cpusets_its_predecessor_bound(bus_factory: Any, store: Any) -> None:
    clock = VirtualClock(10.0)
    bus = await bus_factory("scheduler", clock, autostart=False)
    svc = SchedulerService(SchedulerSettings(seed=1))
    svc.ctx = service_context(bus, store, clock)
    r = Resources(cpu=16_000, memory=64 * GI, pods=110)
    spec = NodeSpec(name="n1", capacity=r, allocatable=r, topology=smt_topology(2, 4, 2, 1))
    await store.put_node(spec)
    await svc._load(10.0)
    pod = lse("e", 2)
    svc.core.add_pod(pod, 10.0)  # queued here, then bound by the previous leader on CPUs a fresh choice would not take
    await store.put_pod(PodRecord(spec=pod))
    assert (await store.bind_many([BindRequest("e", "n1", pod.requests, 10.0, cpuset="7,15")]))[0].ok
    await svc._take_over(11.0)
    assert held(svc) == {"e": (7, 15)}
