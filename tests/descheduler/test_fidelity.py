"""LowNodeLoad fidelity to the reference: the pods resource, targets that may not receive pods, pod kinds that
are never evicted, the N of consecutive high rounds; the reference's ``TestLowNodeLoad`` case."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from msgspec.structs import replace

from colo.messages import NodeMetric, NodeSpec, PodBound, PodMetric, PodSpec, Resources, Taint, Usage
from colo_descheduler.lownodeload import Candidate, LowNodeLoad, NodeLoad
from colo_descheduler.service import DeschedulerService
from colo_descheduler.settings import DeschedulerSettings, HighThresholds, LowThresholds, WindowLimit

REFERENCE_SETTINGS = DeschedulerSettings(
    low_thresholds=LowThresholds(cpu=30, memory=100, pods=30),
    high_thresholds=HighThresholds(cpu=50, memory=100, pods=50),
    consecutive_high_rounds=1, max_migrating_per_node=100, node_window_limit=WindowLimit(), workload_window_s=0,
)
"""The case's thresholds (cpu and pods; memory is not in the case: 100 % never binds); the reference's
plugin test runs without the migration controller's per-node and per-workload limits, so they are off."""


@dataclass
class Node:
    name: str
    pods_allocatable: int
    unschedulable: bool = False
    taints: list[Taint] = field(default_factory=list)


def pod(uid: str, node: str, cpu: int = 400, **kind: object) -> tuple[PodSpec, str]:
    return PodSpec(uid=uid, name=uid, requests=Resources(cpu=cpu), **kind), node  # type: ignore[arg-type]


def run_case(nodes: list[Node], pods: list[tuple[PodSpec, str]],
             settings: DeschedulerSettings = REFERENCE_SETTINGS) -> list[str]:
    """One round through the service's view: nodes of 4000 m and 3000 B, pod usage = its 400 m request."""
    service = DeschedulerService(settings)
    for n in nodes:
        alloc = Resources(cpu=4000, memory=3000, pods=n.pods_allocatable)
        service.cluster.on_node(NodeSpec(name=n.name, capacity=alloc, allocatable=alloc,
                                         unschedulable=n.unschedulable, taints=n.taints))
    for spec, node in pods:  # bound a whole window before the metric: its node figure holds them whole
        service.cluster.on_bound(PodBound(spec=spec, node=node, at=-300.0))
    for n in nodes:
        mine = [PodMetric(uid=s.uid, cpu=s.requests.cpu) for s, node in pods if node == n.name]
        service.cluster.on_metric(NodeMetric(node=n.name, at=100.0, node_usage=Usage(cpu=sum(p.cpu for p in mine)),
                                             pods=mine))
    return [e.uid for e in service.run_round(100.0).evictions]


REFERENCE_NODES = [Node("n1", 9), Node("n2", 10), Node("n3", 10, unschedulable=True)]
NOT_EVICTABLE = [pod("p6", "n1", daemonset=True), pod("p7", "n1", local_storage=True, mirror=True),
                 pod("p8", "n1", namespace="kube-system", priority=2_000_000_000)]
REFERENCE_PODS = [*(pod(f"p{i}", "n1") for i in range(1, 6)), *NOT_EVICTABLE, pod("p9", "n2")]


def test_reference_low_node_load_evicts_exactly_4() -> None:
    """The reference's ``TestLowNodeLoad`` "without priorities" case.

    n1 (9 pods allocatable) runs 8 pods of 400 m: 3200 m = 80 % CPU and 8/9 = 89 % pods, high on both (> 50).
    p1–p5 may go; p6 (DaemonSet), p7 (local storage and mirror) and p8 (system-critical) may not. n2 (10 pods)
    runs p9: 10 % CPU and pods, low (≤ 30). n3 is empty and low but unschedulable: not a target.
    Each eviction takes 400 m and 1 pod off n1 and puts them on n2. After 4: n1 at 1600 m = 40 % and 4/9 =
    44 %, no longer high, which ends its turn; n2 at 2000 m = 50 % and 5/10 = 50 %, exactly at its high
    thresholds, so a 5th pod would also fit no target (2400 m = 60 %, 6/10 pods). p5 stays.
    """
    assert run_case(REFERENCE_NODES, REFERENCE_PODS) == ["p1", "p2", "p3", "p4"]


FIDELITY_CASES = [
    ("reference-no-evictable-pods", REFERENCE_NODES,
     [*(pod(f"p{i}", "n1", daemonset=True) for i in range(1, 5)), pod("p5", "n1", local_storage=True, mirror=True),
      pod("p6", "n1", namespace="kube-system", priority=2_000_000_000), pod("p9", "n2")], REFERENCE_SETTINGS, 0),
    ("only-low-node-unschedulable", [Node("n1", 9), Node("n3", 10, unschedulable=True)], REFERENCE_PODS,
     REFERENCE_SETTINGS, 0),
    ("same-node-schedulable", [Node("n1", 9), Node("n3", 10)], REFERENCE_PODS, REFERENCE_SETTINGS, 4),
    ("only-low-node-tainted-noschedule", [Node("n1", 9), Node("n3", 10, taints=[Taint(key="k")])],
     REFERENCE_PODS, REFERENCE_SETTINGS, 0),
    ("only-low-node-tainted-noexecute", [Node("n1", 9), Node("n3", 10, taints=[Taint(key="k", effect="NoExecute")])],
     REFERENCE_PODS, REFERENCE_SETTINGS, 0),
    ("prefer-no-schedule-taint-is-a-target",
     [Node("n1", 9), Node("n3", 10, taints=[Taint(key="k", effect="PreferNoSchedule")])],
     REFERENCE_PODS, REFERENCE_SETTINGS, 4),
    ("local-storage-kept-by-default", REFERENCE_NODES[:2],
     [*(pod(f"p{i}", "n1", local_storage=True) for i in range(1, 9)), pod("p9", "n2")], REFERENCE_SETTINGS, 0),
    ("local-storage-evicted-when-allowed", REFERENCE_NODES[:2],
     [*(pod(f"p{i}", "n1", local_storage=True) for i in range(1, 9)), pod("p9", "n2")],
     replace(REFERENCE_SETTINGS, evict_local_storage_pods=True), 4),
    ("mirror-never", REFERENCE_NODES[:2], [*(pod(f"p{i}", "n1", mirror=True) for i in range(1, 9)), pod("p9", "n2")],
     replace(REFERENCE_SETTINGS, evict_local_storage_pods=True), 0),
    ("static-never", REFERENCE_NODES[:2], [*(pod(f"p{i}", "n1", static=True) for i in range(1, 9)), pod("p9", "n2")],
     REFERENCE_SETTINGS, 0),
    ("pods-threshold-off-by-default", REFERENCE_NODES[:2],
     [*(pod(f"p{i}", "n1", cpu=100) for i in range(1, 9)), pod("p9", "n2")],
     replace(REFERENCE_SETTINGS, low_thresholds=LowThresholds(cpu=30, memory=100),
             high_thresholds=HighThresholds(cpu=50, memory=100)), 0),
]


@pytest.mark.parametrize(("nodes", "pods", "settings", "evicted"), [c[1:] for c in FIDELITY_CASES],
                         ids=[c[0] for c in FIDELITY_CASES])
def test_fidelity(nodes: list[Node], pods: list[tuple[PodSpec, str]], settings: DeschedulerSettings,
                  evicted: int) -> None:
    assert len(run_case(nodes, pods, settings)) == evicted


def test_pods_resource_alone_makes_a_node_high() -> None:
    """8 pods of 100 m on n1: 20 % CPU, but 8/9 pods > 50 %: high on pods, and evicting pods cures it."""
    pods = [*(pod(f"p{i}", "n1", cpu=100) for i in range(1, 9)), pod("p9", "n2")]
    assert len(run_case(REFERENCE_NODES[:2], pods)) == 4  # 4/9 = 44 % ≤ 50 after 4


@pytest.mark.parametrize(("n", "first_round"), [(1, 1), (2, 2), (5, 5)], ids=["N=1-first-detection", "N=2", "N=5"])
def test_source_at_nth_consecutive_high_round(n: int, first_round: int) -> None:
    """A node is a source when its consecutive high count ≥ N (the reference's consecutiveAbnormalities)."""
    lnl = LowNodeLoad(DeschedulerSettings(consecutive_high_rounds=n))
    alloc = (10_000, 100 << 30)
    nodes = [NodeLoad("hot", alloc, (9000, 10 << 30)), NodeLoad("cold", alloc, (1000, 10 << 30))]
    pods = {"hot": [Candidate("a", "hot", (1500, 1 << 30))]}
    rounds = [bool(lnl.run(nodes, pods, {}, {}, {}, lambda: True).evictions) for _ in range(6)]
    assert rounds.index(True) + 1 == first_round


PODS_T = DeschedulerSettings(low_thresholds=LowThresholds(pods=30), high_thresholds=HighThresholds(pods=50))
CLASSIFY_CASES = [
    ("pods-high", PODS_T, NodeLoad("n", (10_000, 100 << 30), (1000, 10 << 30), 10, 6), (False, True)),
    ("pods-at-high-not-high", PODS_T, NodeLoad("n", (10_000, 100 << 30), (1000, 10 << 30), 10, 5), (False, False)),
    ("pods-low-inclusive", PODS_T, NodeLoad("n", (10_000, 100 << 30), (1000, 10 << 30), 10, 3), (True, False)),
    ("pods-off-by-default", DeschedulerSettings(), NodeLoad("n", (10_000, 100 << 30), (1000, 10 << 30), 10, 10),
     (True, False)),
    ("no-pods-allocatable-ignores-pods", PODS_T, NodeLoad("n", (10_000, 100 << 30), (1000, 10 << 30), 0, 50),
     (True, False)),
    ("zero-cpu-allocatable-counts-as-full", DeschedulerSettings(), NodeLoad("n", (0, 100 << 30), (0, 0)),
     (False, True)),
]


@pytest.mark.parametrize(("settings", "load", "low_high"), [c[1:] for c in CLASSIFY_CASES],
                         ids=[c[0] for c in CLASSIFY_CASES])
def test_classification_with_pods(settings: DeschedulerSettings, load: NodeLoad,
                                  low_high: tuple[bool, bool]) -> None:
    res = LowNodeLoad(settings).run([load], {}, {}, {}, {}, lambda: True)
    assert (res.low == ["n"], res.high == ["n"]) == low_high
