"""DefaultPreemption for GPUs (DeviceShare as a pod-dependent filter): a node whose GPUs low-priority pods hold
is a candidate, the victims are the fewest / lowest-priority pods whose GPUs the preemptor needs (Kubernetes
``selectVictimsOnNode`` order), and once they are released the preemptor binds with specific GPUs; the device
invariants hold throughout (docs/gpu.md "Preemption")."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from sched_helpers import GI

from colo.messages import GPUInfo, GPURequest, NodeSpec, PodSpec, Resources, devices_parse
from colo_scheduler.core import Scheduler
from colo_scheduler.plugins.deviceshare.plugin import DeviceShare
from colo_scheduler.podinfo import ASSIGNED_DEVICES
from colo_scheduler.settings import SchedulerSettings

NOW = 100.0


def gpu_node(name: str, n: int, model: str = "V100M16", cpu: int = 96_000) -> NodeSpec:
    r = Resources(cpu=cpu, memory=512 * GI, pods=110)
    return NodeSpec(name=name, capacity=r, allocatable=r,
                    gpus=[GPUInfo(index=i, model=model, memory_bytes=16 * GI) for i in range(n)])


def gpu_pod(uid: str, priority: int, count: int = 1, milli: int = 1000, models: tuple[str, ...] = (),
            cpu: int = 4000) -> PodSpec:
    return PodSpec(uid=uid, name=uid, priority=priority, requests=Resources(cpu=cpu, memory=GI),
                   gpu=GPURequest(count=count, milli=milli, models=list(models)))


@dataclass(frozen=True)
class Held:
    """A bound pod on ``node`` holding ``devices`` (``"index:milli,..."``) at ``priority``."""

    uid: str
    node: str
    devices: str
    priority: int = 5500
    at: float = 0.0


def held_pod(h: Held) -> PodSpec:
    devs = devices_parse(h.devices)
    milli = devs[0][1]
    return gpu_pod(h.uid, h.priority, count=len(devs), milli=milli)


def plugin(core: Scheduler) -> DeviceShare:
    p = core.framework.profile.plugins["DeviceShare"]
    assert isinstance(p, DeviceShare)
    return p


def cluster(nodes: list[NodeSpec], pods: list[Held]) -> Scheduler:
    core = Scheduler(SchedulerSettings(seed=1))
    for n in nodes:
        core.on_node(n, 0.0)
    for h in pods:
        assert core.adopt(held_pod(h), h.node, h.at, devices=h.devices)
    return core


def invariants(core: Scheduler) -> None:
    """No GPU over 100 %; a whole-GPU pod's GPUs hold no other pod."""
    for name, gpus in plugin(core).nodes.items():
        assert (gpus.free >= 0).all(), f"{name}: a GPU over 100 %: {gpus.free.tolist()}"
        for uid, devs in gpus.pods.items():
            for pos, milli in devs:
                if milli >= 1000:
                    others = [u for u, d in gpus.pods.items() if u != uid and any(p == pos for p, _ in d)]
                    assert not others, f"{name}: whole GPU {pos} of {uid} shared with {others}"


@dataclass(frozen=True)
class Case:
    name: str
    nodes: list[NodeSpec]
    pods: list[Held]
    preemptor: PodSpec
    node: str  # "" = no nomination
    victims: frozenset[str] = frozenset()


FULL = [gpu_node("g1", 2)]
MIXED = [Held("b-whole", "g1", "0:1000", 5500), Held("s-low", "g1", "1:500", 5200), Held("s-mid", "g1", "1:500", 5300)]

CASES = [
    Case("whole GPU: the lowest-priority pods that free one GPU", FULL, MIXED,
         gpu_pod("p", 9500), "g1", frozenset({"s-low", "s-mid"})),
    Case("GPU share: one half is enough, the lowest priority goes", FULL, MIXED,
         gpu_pod("p", 9500, milli=500), "g1", frozenset({"s-low"})),
    Case("whole GPU: a single whole-GPU victim beats a higher one", FULL,
         [Held("b1", "g1", "0:1000", 5100), Held("b2", "g1", "1:1000", 5500)],
         gpu_pod("p", 9500), "g1", frozenset({"b1"})),
    Case("two GPUs: both holders go", FULL,
         [Held("b1", "g1", "0:1000", 5100), Held("b2", "g1", "1:1000", 5500)],
         gpu_pod("p", 9500, count=2), "g1", frozenset({"b1", "b2"})),
    Case("node with lower-priority victims wins", [gpu_node("g1", 1), gpu_node("g2", 1)],
         [Held("b1", "g1", "0:1000", 5500), Held("b2", "g2", "0:1000", 5200)],
         gpu_pod("p", 9500), "g2", frozenset({"b2"})),
    Case("not for a GPU the holders' priority protects", FULL,
         [Held("b1", "g1", "0:1000", 9500), Held("b2", "g1", "1:1000", 5500)],
         gpu_pod("p", 9500, count=2), ""),
    Case("never a candidate: too few GPUs of the model", [gpu_node("g1", 2, "A100")],
         [Held("b1", "g1", "0:1000", 5100)],
         gpu_pod("p", 9500, count=3), ""),
    Case("never a candidate: the node has no GPU of the allowed model", FULL,
         [Held("b1", "g1", "0:1000", 5100), Held("b2", "g1", "1:1000", 5100)],
         gpu_pod("p", 9500, models=("A100",)), ""),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_gpu_victims_and_node(case: Case) -> None:
    core = cluster(case.nodes, case.pods)
    before = {n: g.free.copy() for n, g in plugin(core).nodes.items()}
    core.add_pod(case.preemptor, NOW)
    out = core.schedule_cycle(NOW)
    assert not out.placements
    assert {e.pod.uid for e in out.evictions} == case.victims
    assert all(e.node == case.node for e in out.evictions)
    after = {n: g.free for n, g in plugin(core).nodes.items()}
    assert all((before[n] == after[n]).all() for n in before), "the simulation restores the GPU bookings"
    invariants(core)


@pytest.mark.parametrize("case", [c for c in CASES if c.node], ids=[c.name for c in CASES if c.node])
def test_preemptor_binds_with_specific_gpus_once_the_victims_leave(case: Case) -> None:
    core = cluster(case.nodes, case.pods)
    core.add_pod(case.preemptor, NOW)
    out = core.schedule_cycle(NOW)
    for e in out.evictions:
        core.release(e.pod.uid, NOW + 1)
    out = core.schedule_cycle(NOW + 60)
    assert [(p.pod.uid, p.node) for p in out.placements] == [(case.preemptor.uid, case.node)]
    devices = devices_parse(str(out.placements[0].pod.extra[ASSIGNED_DEVICES]))
    req = case.preemptor.gpu
    assert req is not None and len(devices) == req.count and all(m == req.milli for _, m in devices)
    invariants(core)
