"""A restarted scheduler keeps every device assignment: the GPUs travel with the binding into the store (real
redis-server) and on ``PodBound.devices`` (real nats-server), and a new instance books exactly those GPUs again
(docs/gpu.md "Restart")."""

from __future__ import annotations

from typing import Any

import pytest
from sched_helpers import GI

from colo import subjects
from colo.clock import VirtualClock
from colo.messages import (
    GPUInfo,
    GPURequest,
    NodeSpec,
    PodAdmitted,
    PodBound,
    PodRecord,
    PodSpec,
    Resources,
    allocations_devices,
    devices_parse,
)
from colo.store import BindRequest
from colo.testing.fixtures import service_context
from colo_scheduler.plugins.deviceshare.plugin import DeviceShare
from colo_scheduler.service import SchedulerService
from colo_scheduler.settings import SchedulerSettings

pytestmark = pytest.mark.integration


def gpu_pod(uid: str, count: int, milli: int = 1000) -> PodSpec:
    return PodSpec(uid=uid, name=uid, requests=Resources(cpu=2000, memory=GI), gpu=GPURequest(count=count, milli=milli))


def held(svc: SchedulerService) -> dict[str, tuple[tuple[int, int], ...]]:
    p = svc.core.framework.profile.plugins["DeviceShare"]
    assert isinstance(p, DeviceShare)
    node = p.nodes.get("g1")
    return {uid: tuple((node.index[pos], m) for pos, m in devs) for uid, devs in (node.pods if node else {}).items()}


def gpu_node() -> NodeSpec:
    r = Resources(cpu=64_000, memory=256 * GI, pods=110)
    return NodeSpec(name="g1", capacity=r, allocatable=r,
                    gpus=[GPUInfo(index=i, model="V100M16", memory_bytes=16 * GI) for i in range(4)])


async def test_restart_keeps_every_device_assignment(bus_factory: Any, store: Any) -> None:
    clock = VirtualClock(10.0)
    bus = await bus_factory("scheduler", clock, autostart=False)
    svc = SchedulerService(SchedulerSettings(seed=1))
    await svc.start(service_context(bus, store, clock))
    await bus.start_consumers()
    tester = await bus_factory("tester")
    bound: dict[str, tuple[tuple[int, int], ...]] = {}

    async def on_bound(m: PodBound) -> None:
        bound[m.spec.uid] = allocations_devices(m.devices)

    await tester.subscribe(subjects.POD_BOUND, on_bound, durable="bound")
    spec = gpu_node()
    await store.put_node(spec)
    await tester.publish(subjects.NODE_REGISTERED, spec, node="g1")
    for uid, count, milli in (("a", 1, 1000), ("b", 2, 1000), ("c", 1, 500)):
        await tester.publish(subjects.POD_ADMITTED, PodAdmitted(spec=gpu_pod(uid, count, milli), at=10.0))
    await bus.settle()
    assert (await svc.tick(10.0))["pods_bound"] == 3
    await tester.settle()
    before = held(svc)
    assert sorted(sum(m for _, m in v) for v in before.values()) == [500, 1000, 2000]
    assert bound == before, "PodBound carries the booked devices"
    assert {u: devices_parse((await store.get_pod(u)).devices) for u in before} == before

    # "a" ends: a fresh choice for the others could now take its GPU, the stored one does not move
    assert await store.release("a", "Succeeded", "Completed", 10.5)
    svc.core.release("a", 10.5)
    assert (await store.get_pod("a")).devices == "", "the devices go with the binding"
    del before["a"]
    await store.put_pod(PodRecord(spec=gpu_pod("d", 1), updated_at=11.0))  # admitted while no scheduler ran
    svc2 = SchedulerService(SchedulerSettings(seed=1))
    svc2.ctx = svc.ctx
    await svc2._load(11.0)
    assert held(svc2) == before
    assert (await svc2.tick(11.0))["pods_bound"] == 1
    d = held(svc2)["d"]
    assert len(d) == 1 and d[0][0] not in {i for v in before.values() for i, _ in v}
    svc3 = SchedulerService(SchedulerSettings(seed=1))
    svc3.ctx = svc.ctx
    await svc3._load(12.0)
    assert held(svc3) == {**before, "d": d}
    await svc.stop()


async def test_a_leader_taking_over_books_the_devices_its_predecessor_bound(bus_factory: Any, store: Any) -> None:
    clock = VirtualClock(10.0)
    bus = await bus_factory("scheduler", clock, autostart=False)
    svc = SchedulerService(SchedulerSettings(seed=1))
    svc.ctx = service_context(bus, store, clock)
    await store.put_node(gpu_node())
    await svc._load(10.0)
    pod = gpu_pod("e", 1, 300)
    svc.core.add_pod(pod, 10.0)
    await store.put_pod(PodRecord(spec=pod))
    assert (await store.bind_many([BindRequest("e", "g1", pod.requests, 10.0, devices="3:300")]))[0].ok
    await svc._take_over(11.0)
    assert held(svc) == {"e": ((3, 300),)}
