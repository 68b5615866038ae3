"""Migration targets the store accepts (targetroom.py): the room computation, and the target choice of a
round — a target low by usage must also admit the pod (taints, node selector) and have the schedulable room
the store checks (allocatable, batch/mid offers, pods) for its requests."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from colo.messages import (
    Affinity,
    NodeAffinity,
    NodeMetric,
    NodeResource,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    NodeSpec,
    PodBound,
    PodMetric,
    PodSpec,
    Resources,
    Taint,
    Toleration,
    Usage,
)
from colo_descheduler.service import DeschedulerService
from colo_descheduler.settings import DeschedulerSettings
from colo_descheduler.targetroom import TargetRoom

GI = 1 << 30
NODE = Resources(cpu=10_000, memory=100 * GI, pods=110)


def spec(uid: str, **req: int) -> PodSpec:
    return PodSpec(uid=uid, name=uid, requests=Resources(**req))


# --------------------------------------------------------------------------- the room


@dataclass
class RoomCase:
    offer: NodeResource | None = None
    bound: list[PodSpec] = field(default_factory=list)
    held: list[PodSpec] = field(default_factory=list)
    store: Resources | None = None
    pods: int = 110


ROOM_CASES = [
    # (id, case, pod, expected allocated, expected refusal)
    ("allocatable-only-native-fits", RoomCase(), spec("p", cpu=2000, memory=GI),
     (0, 0, 0, 0, 0, 0, 0), ""),
    ("no-offer-refuses-batch", RoomCase(), spec("p", batch_cpu=1000, batch_memory=GI),
     (0, 0, 0, 0, 0, 0, 0), "Insufficient kubernetes.io/batch-cpu, kubernetes.io/batch-memory on t"),
    ("batch-offer-fits", RoomCase(NodeResource(node="t", batch_cpu=4000, batch_memory=8 * GI)),
     spec("p", batch_cpu=1000, batch_memory=GI), (0, 0, 0, 0, 0, 0, 0), ""),
    ("reset-offers-zero", RoomCase(NodeResource(node="t", batch_cpu=4000, batch_memory=8 * GI, reset=True)),
     spec("p", batch_memory=GI), (0, 0, 0, 0, 0, 0, 0), "Insufficient kubernetes.io/batch-memory on t"),
    ("bound-requests-take-batch-memory",
     RoomCase(NodeResource(node="t", batch_cpu=4000, batch_memory=8 * GI), bound=[spec("b", batch_memory=7 * GI)]),
     spec("p", batch_memory=2 * GI), (0, 0, 0, 7 * GI, 0, 0, 1), "Insufficient kubernetes.io/batch-memory on t"),
    ("held-reservation-takes-cpu", RoomCase(held=[spec("h", cpu=9000)]), spec("p", cpu=2000),
     (9000, 0, 0, 0, 0, 0, 1), "Insufficient cpu on t"),
    ("store-truth-larger-than-view", RoomCase(bound=[spec("b", cpu=1000)], store=Resources(cpu=9500, pods=3)),
     spec("p", cpu=1000), (9500, 0, 0, 0, 0, 0, 3), "Insufficient cpu on t"),
    ("view-larger-than-stale-store", RoomCase(bound=[spec("b", memory=99 * GI)], store=Resources(memory=GI)),
     spec("p", memory=2 * GI), (0, 99 * GI, 0, 0, 0, 0, 1), "Insufficient memory on t"),
    ("pods-full", RoomCase(bound=[spec("b")], pods=1), spec("p", cpu=1), (0, 0, 0, 0, 0, 0, 1),
     "Insufficient pods on t"),
    ("mid-offer", RoomCase(NodeResource(node="t", mid_cpu=500, mid_memory=GI)), spec("p", mid_cpu=600),
     (0, 0, 0, 0, 0, 0, 0), "Insufficient kubernetes.io/mid-cpu on t"),
]


@pytest.mark.parametrize(("case", "pod", "allocated", "refusal"), [c[1:] for c in ROOM_CASES],
                         ids=[c[0] for c in ROOM_CASES])
def test_room(case: RoomCase, pod: PodSpec, allocated: tuple[int, ...], refusal: str) -> None:
    room = TargetRoom()
    room.on_node(NodeSpec(name="t", capacity=NODE, allocatable=Resources(cpu=NODE.cpu, memory=NODE.memory,
                                                                           pods=case.pods)))
    if case.offer is not None:
        room.on_resource(case.offer)
    for h in case.held:
        room.hold(h.uid, "t", h)
    if case.store is not None:
        room.refresh({"t": case.store})
    got = room.allocated("t", case.bound)
    assert got == allocated
    assert room.refusal(pod, "t", got) == refusal


def test_planned_evictions_take_the_room() -> None:
    """Several victims to one target: each planned one's requests are taken off for the rest of the round."""
    room = TargetRoom()
    room.on_node(NodeSpec(name="t", capacity=NODE, allocatable=NODE))
    room.on_resource(NodeResource(node="t", batch_cpu=8000, batch_memory=6 * GI))
    pod = spec("p", batch_cpu=1000, batch_memory=4 * GI)
    assert room.refusal(pod, "t", room.allocated("t", ())) == ""
    assert room.refusal(pod, "t", room.allocated("t", ()), [(0, 0, 1000, 4 * GI, 0, 0, 1)]) \
        == "Insufficient kubernetes.io/batch-memory on t"


# --------------------------------------------------------------------------- the target choice of a round


@dataclass
class Target:
    offer: NodeResource | None = None
    taints: list[Taint] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)
    bound: list[PodSpec] = field(default_factory=list)
    pods: int = 110


BE = PodSpec(uid="be", name="be", priority=5500, requests=Resources(batch_cpu=2000, batch_memory=4 * GI))
OFFER = NodeResource(node="t", batch_cpu=8000, batch_memory=16 * GI)


def run_round(target: Target, victim: PodSpec = BE) -> list[tuple[str, str]]:
    """hot: 9000 m of 10000 (90 % > 75 %), the victim using 3000 m beside a DaemonSet using 6000 m; t: 1000 m
    (10 %, low). By usage the victim fits t (4000 m = 40 % after); the case decides whether t admits it."""
    service = DeschedulerService(DeschedulerSettings(consecutive_high_rounds=1))
    service.cluster.on_node(NodeSpec(name="hot", capacity=NODE, allocatable=NODE))
    service.cluster.on_node(NodeSpec(name="t", capacity=NODE,
                                     allocatable=Resources(cpu=NODE.cpu, memory=NODE.memory, pods=target.pods),
                                     taints=target.taints, labels=target.labels))
    if target.offer is not None:
        service.cluster.on_resource(target.offer)
    ds = PodSpec(uid="ds", name="ds", daemonset=True)
    for s, node in [(victim, "hot"), (ds, "hot"), *((b, "t") for b in target.bound)]:
        service.cluster.on_bound(PodBound(spec=s, node=node, at=0.0))
    hot = [PodMetric(uid=victim.uid, cpu=3000, memory=GI), PodMetric(uid="ds", cpu=6000, memory=GI)]
    service.cluster.on_metric(NodeMetric(node="hot", at=400.0, window_s=300.0,
                                         node_usage=Usage(cpu=9000, memory=2 * GI), pods=hot))
    service.cluster.on_metric(NodeMetric(node="t", at=400.0, window_s=300.0,
                                         node_usage=Usage(cpu=1000, memory=GI),
                                         pods=[PodMetric(uid=b.uid, cpu=1, memory=1) for b in target.bound]))
    return [(e.uid, e.target) for e in service.run_round(400.0).evictions]


TOLERATES = [Toleration(key="dedicated", operator="Exists")]
TARGET_CASES = [
    ("fits-usage-not-batch-memory", Target(NodeResource(node="t", batch_cpu=8000, batch_memory=2 * GI)), BE, []),
    ("batch-memory-offered", Target(OFFER), BE, [("be", "t")]),
    ("no-offer", Target(), BE, []),
    ("reset-offer", Target(NodeResource(node="t", batch_cpu=8000, batch_memory=16 * GI, reset=True)), BE, []),
    ("offer-taken-by-bound-pods", Target(OFFER, bound=[spec("b", batch_memory=13 * GI)]), BE, []),
    ("tainted-not-tolerated", Target(OFFER, taints=[Taint(key="dedicated", value="x")]), BE, []),
    ("tainted-noexecute-not-tolerated", Target(OFFER, taints=[Taint(key="dedicated", effect="NoExecute")]), BE, []),
    ("tolerating-pod-allowed", Target(OFFER, taints=[Taint(key="dedicated", value="x")]),
     PodSpec(uid="be", name="be", priority=5500, requests=BE.requests, tolerations=TOLERATES), [("be", "t")]),
    ("node-selector-excludes", Target(OFFER, labels={"zone": "b"}),
     PodSpec(uid="be", name="be", priority=5500, requests=BE.requests, node_selector={"zone": "a"}), []),
    ("node-selector-matches", Target(OFFER, labels={"zone": "a"}),
     PodSpec(uid="be", name="be", priority=5500, requests=BE.requests, node_selector={"zone": "a"}), [("be", "t")]),
    ("required-affinity-excludes", Target(OFFER, labels={"zone": "b"}),
     PodSpec(uid="be", name="be", priority=5500, requests=BE.requests, affinity=Affinity(
         node_affinity=NodeAffinity(required=NodeSelector(node_selector_terms=[NodeSelectorTerm(
             match_expressions=[NodeSelectorRequirement(key="zone", operator="In", values=["a"])])])))), []),
    ("native-cpu-allocated", Target(bound=[spec("b", cpu=9000)]), PodSpec(uid="ls", name="ls", priority=9500,
                                                                          requests=Resources(cpu=2000)), []),
    ("native-fits", Target(bound=[spec("b", cpu=7000)]), PodSpec(uid="ls", name="ls", priority=9500,
                                                                 requests=Resources(cpu=2000)), [("ls", "t")]),
    ("pods-full", Target(OFFER, bound=[spec("b")], pods=1), BE, []),
]


@pytest.mark.parametrize(("target", "victim", "evicted"), [c[1:] for c in TARGET_CASES],
                         ids=[c[0] for c in TARGET_CASES])
def test_target_choice(target: Target, victim: PodSpec, evicted: list[tuple[str, str]]) -> None:
    assert run_round(target, victim) == evicted


def test_room_taken_off_for_the_rest_of_the_round() -> None:
    """Two hot nodes (90 %) each with a BE pod requesting 4 GiB of batch-memory; the one low node t (10 %) could
    take both by usage (70 % after) but offers 6 GiB of batch-memory: one migration, not two to the same room."""
    service = DeschedulerService(DeschedulerSettings(consecutive_high_rounds=1))
    for name in ("hot-1", "hot-2", "t"):
        service.cluster.on_node(NodeSpec(name=name, capacity=NODE, allocatable=NODE))
    service.cluster.on_resource(NodeResource(node="t", batch_cpu=8000, batch_memory=6 * GI))
    for i in (1, 2):
        be = PodSpec(uid=f"be-{i}", name=f"be-{i}", priority=5500, requests=BE.requests)
        ds = PodSpec(uid=f"ds-{i}", name=f"ds-{i}", daemonset=True)
        for s in (be, ds):
            service.cluster.on_bound(PodBound(spec=s, node=f"hot-{i}", at=0.0))
        service.cluster.on_metric(NodeMetric(node=f"hot-{i}", at=400.0, window_s=300.0,
                                             node_usage=Usage(cpu=9000, memory=2 * GI),
                                             pods=[PodMetric(uid=be.uid, cpu=3000, memory=GI),
                                                   PodMetric(uid=ds.uid, cpu=6000, memory=GI)]))
    service.cluster.on_metric(NodeMetric(node="t", at=400.0, window_s=300.0, node_usage=Usage(cpu=1000, memory=GI)))
    result = service.run_round(400.0)
    assert [(e.source, e.target) for e in result.evictions] == [("hot-1", "t")]
    assert "room it requests" in result.skipped["be-2"]
