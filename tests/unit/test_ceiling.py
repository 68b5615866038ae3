"""Utilization ceilings (colo.sim.ceiling): one named row per case of a node's CPU and memory ceiling, the
cluster sample, the share reached and what binds."""

from __future__ import annotations

import pytest

from colo.messages import (
    MemoryEvictStrategy,
    NodeMetric,
    NodeResource,
    NodeSLO,
    NodeSpec,
    PodBound,
    PodMetric,
    PodSpec,
    PodStatus,
    Resources,
    Usage,
)
from colo.sim.ceiling import CeilingTracker, binding, ceiling_summary

GIB = 1 << 30
CAP = Resources(cpu=100_000, memory=100 * GIB, pods=110)
NODE = NodeSpec(name="n1", capacity=CAP, allocatable=CAP)
LS_POD = PodSpec(uid="ls", name="ls", qos_class="LS", priority_class="prod",
                 requests=Resources(cpu=50_000, memory=40 * GIB))


def _metric(ls_cpu: int = 20_000, ls_mem: int = 30 * GIB, be_allowed: int = -1) -> NodeMetric:
    return NodeMetric(node="n1", at=60.0, system_usage=Usage(cpu=2000, memory=4 * GIB), be_cpu_allowed=be_allowed,
                      pods=[PodMetric(uid="ls", cpu=ls_cpu, memory=ls_mem, qos_class="LS"),
                            PodMetric(uid="be", cpu=9000, memory=9 * GIB, qos_class="BE")])


CASES = [
    # name, colocation, metric, offer (batch cpu m, memory B), eviction threshold % or None, (cpu m, memory B)
    # static: 2 + 20 + offer 38 = 60 cores; memory 4 + 30 + 31 = 65 GiB (under eviction's 70 %)
    ("static-offer", True, _metric(), (38_000, 31 * GIB), 70, (60_000, 65 * GIB)),
    # the suppress budget is below the offer: BE reaches 2 + 20 + 30
    ("suppress-caps-cpu", True, _metric(be_allowed=30_000), (38_000, 31 * GIB), 70, (52_000, 65 * GIB)),
    # an offer above eviction's threshold: memory stops at 70 % of capacity
    ("eviction-caps-memory", True, _metric(), (38_000, 60 * GIB), 70, (60_000, 70 * GIB)),
    ("eviction-off", True, _metric(), (38_000, 60 * GIB), None, (60_000, 94 * GIB)),
    # no offer yet: system + LS only
    ("no-offer", True, _metric(), None, 70, (22_000, 34 * GIB)),
    # baseline: native room = allocatable − LS requests (100 − 50 cores, 100 − 40 GiB)
    ("baseline-native-room", False, _metric(), (38_000, 31 * GIB), 70, (72_000, 70 * GIB)),
    ("baseline-native-room-suppressed", False, _metric(be_allowed=10_000), None, None, (32_000, 94 * GIB)),
    # LS above capacity share: never above capacity
    ("capped-at-capacity", True, _metric(ls_cpu=90_000), (38_000, 31 * GIB), 70, (100_000, 65 * GIB)),
]


@pytest.mark.parametrize(("colocation", "metric", "offer", "evict", "expected"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_node_ceilings(colocation: bool, metric: NodeMetric, offer: tuple[int, int] | None, evict: int | None,
                       expected: tuple[int, int]) -> None:
    t = CeilingTracker([NODE], colocation=colocation)
    t.on_bound(PodBound(spec=LS_POD, node="n1", at=0.0))
    t.on_bound(PodBound(spec=PodSpec(uid="be", name="be", qos_class="BE", requests=Resources(cpu=9000)), node="n1", at=0.0))
    t.on_metric(metric)
    if offer is not None:
        t.on_resource(NodeResource(node="n1", batch_cpu=offer[0], batch_memory=offer[1]))
    t.on_slo(NodeSLO(node="n1", memory_evict=MemoryEvictStrategy(enabled=evict is not None,
                                                                  threshold_percent=evict or 70)))
    cpu, mem = t.node_ceilings(t._by_name["n1"])
    assert (cpu, mem) == pytest.approx(expected)
    t.sample()
    assert t.ls_cpu == [pytest.approx((2000 + metric.pods[0].cpu) / CAP.cpu)]
    assert t.cpu_ceiling == [pytest.approx(expected[0] / CAP.cpu)]
    assert t.mem_ceiling == [pytest.approx(expected[1] / CAP.memory)]


def test_ended_ls_pod_frees_baseline_room() -> None:
    t = CeilingTracker([NODE], colocation=False)
    t.on_bound(PodBound(spec=LS_POD, node="n1", at=0.0))
    t.on_metric(_metric())
    assert t.node_ceilings(t._by_name["n1"])[0] == 72_000
    t.on_status(PodStatus(uid="ls", node="n1", phase="Succeeded", at=120.0))
    assert t.node_ceilings(t._by_name["n1"])[0] == 100_000


BINDING = [
    ("memory-more", {"memory": 10.0, "cpu": 3.0}, "memory"),
    ("cpu-more", {"memory": 1.0, "cpu": 3.0}, "cpu"),
    ("tie-is-cpu", {"memory": 2.0, "cpu": 2.0}, "cpu"),
    ("none", {"gang": 5.0}, "none"),
]


@pytest.mark.parametrize(("ticks", "expected"), [c[1:] for c in BINDING], ids=[c[0] for c in BINDING])
def test_binding(ticks: dict[str, float], expected: str) -> None:
    assert binding(ticks) == expected


def test_summary_share_of_ceiling() -> None:
    t = CeilingTracker([NODE])
    t.cpu_ceiling, t.mem_ceiling = [0.6, 0.5], [0.65, 0.65]
    t.ls_cpu, t.ls_mem = [0.2, 0.2], [0.15, 0.15]
    s = ceiling_summary(t, 0.33, 0.52, {"memory": 4.0}, batch_cpu_per_memory=0.5)
    # 20 % + (65 − 15) % × 0.5: the batch mix fills memory to its ceiling with half as much CPU
    assert s["cpu_if_memory_full"] == pytest.approx(0.45)
    assert ceiling_summary(t, 0.33, 0.52, {})["cpu_if_memory_full"] == -1.0
    assert s["cpu_ceiling_avg"] == pytest.approx(0.55)
    assert s["cpu_ceiling_share"] == pytest.approx(0.6)
    assert s["mem_ceiling_share"] == pytest.approx(0.8)
    assert s["binds"] == "memory"
    assert s["be_budget_threshold_avg"] == -1.0
