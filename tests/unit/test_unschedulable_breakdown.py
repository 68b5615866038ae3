"""Why pods stayed unschedulable: reason labels, categories, the dominant reason and the per-tick breakdown."""

from __future__ import annotations

import pytest

from colo.messages import PodBound, PodSpec, PodUnschedulable, Resources, TickAck
from colo.sim.metrics import RunMetrics
from colo.sim.unschedulable import UnschedulableBreakdown, by_category, category, dominant, reason_label


@pytest.mark.parametrize(("reason", "label", "cat"), [
    pytest.param("Insufficient batch-memory", "Insufficient batch-memory", "memory", id="batch-memory"),
    pytest.param("Insufficient cpu", "Insufficient cpu", "cpu", id="native-cpu"),
    pytest.param("Insufficient mid-cpu", "Insufficient mid-cpu", "cpu", id="mid-cpu"),
    pytest.param("Too many pods", "Too many pods", "pods", id="pod-count"),
    pytest.param("load too high: cpu", "load too high: cpu", "cpu", id="loadaware-cpu"),
    pytest.param("node(s) under BE memory pressure (evicting BE pods for memory)",
                 "node(s) under BE memory pressure (evicting BE pods for memory)", "memory", id="be-memory-pressure"),
    pytest.param("node(s) had untolerated taint", "node(s) had untolerated taint", "placement", id="taint"),
    pytest.param("Insufficient nvidia.com/gpu", "Insufficient nvidia.com/gpu", "gpu", id="whole-gpus"),
    pytest.param("Insufficient GPU share", "Insufficient GPU share", "gpu", id="gpu-share"),
    pytest.param("no GPUs", "no GPUs", "gpu", id="no-gpus"),
    pytest.param("no GPU of model V100M32", "no GPU of model V100M32", "gpu", id="gpu-model"),
    pytest.param("gang job-7-1 has 1 of 4 members", "gang: fewer members known than min_member", "gang",
                 id="gang-members-unknown"),
    pytest.param("gang job-7-1: 2 of 4 members placed, 4 known; waiting", "gang: min_member not placed", "gang",
                 id="gang-not-placed"),
    pytest.param("gang job-7-1: member job-7-1-3 fits no node; the gang was sent back",
                 "gang: sent back (a member fits no node)", "gang", id="gang-sent-back"),
    pytest.param("gang job-9-2: member p-3 was released while waiting", "gang: released while waiting (timeout)",
                 "gang", id="gang-timeout"),
    pytest.param("quota team-a: insufficient runtime quota batch_memory (used 10 + 5 > runtime 12)",
                 "quota: insufficient runtime batch_memory", "quota", id="quota-runtime"),
    pytest.param("quota team-b: exceeds max quota batch_cpu (used 10 + 5 > max 12)",
                 "quota: would exceed max batch_cpu", "quota", id="quota-max"),
    pytest.param("quota team-c: not found", "quota: not found", "quota", id="quota-other"),
])
def test_reason_labels_drop_names_and_figures(reason: str, label: str, cat: str) -> None:
    assert reason_label(reason) == label
    assert category(label) == cat


@pytest.mark.parametrize(("reasons", "top"), [
    pytest.param({"Insufficient batch-memory": 15, "Insufficient batch-cpu": 3, "Too many pods": 2},
                 "Insufficient batch-memory", id="most-nodes"),
    pytest.param({"Insufficient cpu": 5, "Insufficient memory": 5}, "Insufficient cpu", id="tie-by-name"),
    pytest.param({"gang g1 has 1 of 4 members": 1}, "gang: fewer members known than min_member", id="permit"),
    pytest.param({}, "unknown", id="empty"),
])
def test_dominant_reason(reasons: dict[str, int], top: str) -> None:
    assert dominant(reasons) == top


def test_a_pod_counts_once_under_its_dominant_reason_and_bound_pods_not_at_all() -> None:
    unsched = {
        "a": {"Insufficient batch-memory": 15, "Insufficient batch-cpu": 3},
        "b": {"Insufficient batch-memory": 10},
        "c": {"Too many pods": 20, "Insufficient batch-cpu": 1},
        "d": {"Insufficient batch-memory": 20},
    }
    b = UnschedulableBreakdown.of(unsched, {"d"})
    assert b.pods_by_label() == {"Insufficient batch-memory": 2, "Too many pods": 1}
    assert b.table() == [
        {"label": "Insufficient batch-memory", "category": "memory", "pods": 2, "pods_any": 2, "nodes": 25},
        {"label": "Too many pods", "category": "pods", "pods": 1, "pods_any": 1, "nodes": 20},
        {"label": "Insufficient batch-cpu", "category": "cpu", "pods": 0, "pods_any": 2, "nodes": 4},
    ]
    assert by_category(b.pods_by_label()) == {"memory": 2, "cpu": 0, "gpu": 0, "pods": 1, "gang": 0, "quota": 0,
                                              "placement": 0}


def test_each_tick_samples_the_reasons_and_the_batch_allocation() -> None:
    m = RunMetrics("colo")
    for uid, reason in (("a", "Insufficient batch-memory"), ("b", "Insufficient batch-memory"), ("c", "Too many pods")):
        m.on_unschedulable(PodUnschedulable(uid=uid, name=uid, reasons={reason: 3}, message="", at=0.0))
    slo = TickAck(service="slo-manager", seq=0, stats={"batch_cpu": 8000.0, "batch_memory": float(4 << 30)})
    m.on_ticks(0.0, [slo], Resources(batch_cpu=3000, batch_memory=1 << 30))
    m.on_bound(PodBound(spec=PodSpec(uid="a", name="a"), node="n1", at=60.0, attempt_ms=1.0))
    m.on_ticks(60.0, [slo])
    first, second = m.series
    assert (first.pods_unschedulable, first.unschedulable_reasons) == (3, {"Insufficient batch-memory": 2,
                                                                          "Too many pods": 1})
    assert (first.batch_cpu_cores, first.batch_cpu_allocated_cores) == (8.0, 3.0)
    assert (first.batch_memory_gib, first.batch_memory_allocated_gib) == (4.0, 1.0)
    assert second.unschedulable_reasons == {"Insufficient batch-memory": 1, "Too many pods": 1}
    assert second.pods_unschedulable == m.summary()["pods_unschedulable"] == 2
    assert second.unschedulable_reasons == m.unschedulable_breakdown().pods_by_label(), "per tick = end table"
