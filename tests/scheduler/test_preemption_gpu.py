"""DefaultPreemption for GPUs (DeviceShare as a pod-dependent filter): a node whose GPUs low-priority pods hold
is a candidate, the victims are the fewest / lowest-priority pods whose GPUs the preemptor needs (Kubernetes
``selectVictimsOnNode`` order), and once they are released the preemptor binds with specific GPUs; the device
invariants hold throughout (docs/gpu.md "Preemption")."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from sched_helpers import GI

from colo.messages import GPUInfo, GPURequest, NodeSpec, PodSpec, Resources, devices_parse
from colo_scheduler.core import Scheduler
from colo_scheduler.plugins.deviceshare.plugin import DeviceShare
from colo_scheduler.plugins.deviceshare.preempt import HOLD_PREFIX
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


def bookings(core: Scheduler) -> dict[str, dict[str, tuple[tuple[int, int], ...]]]:
    """Node → the GPU bookings of pods (holds of nominated preemptors left out)."""
    return {name: {u: d for u, d in g.pods.items() if not u.startswith(HOLD_PREFIX)}
            for name, g in plugin(core).nodes.items()}


def invariants(core: Scheduler) -> None:
    """Over the pods' bookings: no GPU over 100 %; a whole-GPU pod's GPUs hold no other pod; every booking
    is a pod placed on that node."""
    for name, pods in bookings(core).items():
        used = [0] * 8
        for uid, devs in pods.items():
            assert core.table.assigned[uid].node == core.table.index[name]
            for pos, milli in devs:
                used[pos] += milli
                if milli >= 1000:
                    others = [u for u, d in pods.items() if u != uid and any(p == pos for p, _ in d)]
                    assert not others, f"{name}: whole GPU {pos} of {uid} shared with {others}"
        assert max(used) <= 1000, f"{name}: a GPU over 100 %: {used}"


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
    before = bookings(core)
    core.add_pod(case.preemptor, NOW)
    out = core.schedule_cycle(NOW)
    assert not out.placements
    assert {e.pod.uid for e in out.evictions} == case.victims
    assert all(e.node == case.node for e in out.evictions)
    assert bookings(core) == before, "the simulation restores the GPU bookings"
    invariants(core)
    holds = {n: d for n, g in plugin(core).nodes.items() for u, d in g.pods.items() if u.startswith(HOLD_PREFIX)}
    assert list(holds) == ([case.node] if case.node else []), "the nominated node holds the preemptor's GPUs"


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


def test_freed_gpus_are_held_for_the_preemptor_against_a_lower_priority_pod() -> None:
    """Between the victims leaving and the preemptor's next attempt (it is in backoff), a lower-priority GPU pod
    (here a requeued victim) does not take the GPUs the preemption freed."""
    core = cluster([gpu_node("g1", 1)], [Held("b1", "g1", "0:1000", 5500)])
    core.add_pod(gpu_pod("p", 9500), NOW)
    out = core.schedule_cycle(NOW)
    assert [e.pod.uid for e in out.evictions] == ["b1"]
    core.release("b1", NOW + 0.1)
    core.add_pod(gpu_pod("b1", 5500), NOW + 0.2)
    out = core.schedule_cycle(NOW + 0.2)  # the preemptor is still in backoff
    assert not out.placements and [f.pod.uid for f in out.failures] == ["b1"]
    invariants(core)
    out = core.schedule_cycle(NOW + 60)
    assert [(p.pod.uid, p.node, p.pod.extra[ASSIGNED_DEVICES]) for p in out.placements] == [("p", "g1", "0:1000")]
    assert not out.evictions, "the victim waits, it is not evicted again"
    invariants(core)
    assert plugin(core).nodes["g1"].pods == {"p": ((0, 1000),)}, "the hold is gone once the preemptor is placed"


SHAPES = st.one_of(st.tuples(st.sampled_from([1, 2, 4]), st.just(1000)),
                   st.tuples(st.just(1), st.sampled_from([250, 500, 700])))


@settings(max_examples=40, deadline=None)
@given(gpus=st.lists(st.sampled_from([1, 2, 4]), min_size=1, max_size=3),
       low=st.lists(st.tuples(SHAPES, st.integers(5000, 5999)), min_size=1, max_size=12),
       high=SHAPES)
def test_preemption_keeps_the_device_invariants(gpus: list[int], low: list[tuple[tuple[int, int], int]],
                                                high: tuple[int, int]) -> None:
    """Low-priority GPU pods fill the nodes as they fit; a prod GPU pod that fits nowhere preempts. Its victims
    are of lower priority and on the nominated node; the bookings of pods never go over 100 % or share a whole
    GPU, before and after; once the victims are released the preemptor binds there, with the GPUs it asked
    (pending low-priority pods retried in the same cycle do not take them)."""
    core = Scheduler(SchedulerSettings(seed=1))
    for k, n in enumerate(gpus):
        core.on_node(gpu_node(f"g{k}", n), 0.0)
    for k, ((count, milli), prio) in enumerate(low):
        core.add_pod(gpu_pod(f"low{k}", prio, count=count, milli=milli), 1.0)
    core.schedule_cycle(1.0)
    invariants(core)
    count, milli = high
    core.add_pod(gpu_pod("p", 9500, count=count, milli=milli), NOW)
    out = core.schedule_cycle(NOW)
    invariants(core)
    if out.placements:
        return  # it fit without preempting
    nodes = {e.node for e in out.evictions}
    assert len(nodes) <= 1 and all(e.pod.priority < 9500 for e in out.evictions)
    for e in out.evictions:
        core.release(e.pod.uid, NOW + 1)
    invariants(core)
    out = core.schedule_cycle(NOW + 60)
    invariants(core)
    event("preempted" if nodes else "no victims")
    if nodes:  # pending low-priority pods may be placed beside it, never on its GPUs
        placed = {p.pod.uid: p for p in out.placements}
        assert "p" in placed and placed["p"].node == nodes.pop()
        devices = devices_parse(str(placed["p"].pod.extra[ASSIGNED_DEVICES]))
        assert len(devices) == count and all(m == milli for _, m in devices)
    assert not any(u.startswith(HOLD_PREFIX) for g in plugin(core).nodes.values() for u in g.pods)


def test_a_kept_nomination_holds_the_gpus_again() -> None:
    """The preemptor retries while its victim is still on the node: no second eviction, the GPUs held again;
    once the victim leaves the preemptor gets them."""
    core = cluster([gpu_node("g1", 1)], [Held("b1", "g1", "0:1000", 5500)])
    core.add_pod(gpu_pod("p", 9500), NOW)
    assert [e.pod.uid for e in core.schedule_cycle(NOW).evictions] == ["b1"]
    out = core.schedule_cycle(NOW + 60)  # b1 has not left yet
    assert not out.placements and not out.evictions
    assert plugin(core).nodes["g1"].pods.get(HOLD_PREFIX + "p") == ((0, 1000),)
    core.release("b1", NOW + 61)
    out = core.schedule_cycle(NOW + 100)  # within the nomination's 120 s
    assert [(p.pod.uid, p.pod.extra[ASSIGNED_DEVICES]) for p in out.placements] == [("p", "0:1000")]
    invariants(core)
