"""Filters (fit incl. batch-* and pods, taints, selector, max instances) and estimation of recent placements."""

from __future__ import annotations

import pytest
from sched_helpers import GI, MI, metric, node, node_resource, pod, scheduler

from colo.messages import PodSpec, Taint, Toleration

NOW = 100.0

FIT = [
    ("cpu-fits", pod("p", 2000, GI), True, {}),
    ("cpu-short", pod("p", 5000, GI), False, {"Insufficient cpu": 2}),
    ("memory-short", pod("p", 1000, 9 * GI), False, {"Insufficient memory": 2}),
    ("batch-cpu-fits", pod("p", batch_cpu=3000, batch_memory=GI), True, {}),
    ("batch-cpu-short", pod("p", batch_cpu=5000, batch_memory=GI), False, {"Insufficient batch-cpu": 2}),
    ("mid-memory-short", pod("p", mid_cpu=100, mid_memory=3 * GI), False, {"Insufficient mid-memory": 2}),
]


@pytest.mark.parametrize(("spec", "fits", "reasons"), [c[1:] for c in FIT], ids=[c[0] for c in FIT])
def test_node_resources_fit(spec: PodSpec, fits: bool, reasons: dict[str, int]) -> None:
    s = scheduler()
    for name in ("a", "b"):
        s.on_node(node(name, cpu=4000, memory=8 * GI), NOW)
        s.on_node_resource(node_resource(name, batch_cpu=4000, batch_memory=4 * GI, mid_cpu=1000,
                                         mid_memory=2 * GI), NOW)
    s.add_pod(spec, NOW)
    out = s.schedule_cycle(NOW)
    assert bool(out.placements) == fits
    assert (out.failures[0].result.reasons if out.failures else {}) == reasons


def test_pods_allocatable_limits_count() -> None:
    s = scheduler()
    s.on_node(node("a", pods=2), NOW)
    for i in range(3):
        s.add_pod(pod(f"p{i}", 100, MI), NOW)
    out = s.schedule_cycle(NOW)
    assert len(out.placements) == 2
    assert out.failures[0].result.reasons == {"Too many pods": 1}


NOSCHED = Taint(key="dedicated", value="gpu")
STATIC = [
    ("untolerated-taint", [NOSCHED], {}, pod("p", 100), None, {"node(s) had untolerated taint": 1}),
    ("tolerated-equal", [NOSCHED], {}, pod("p", 100, tolerations=[Toleration(key="dedicated", value="gpu")]),
     "n", {}),
    ("tolerated-exists-any", [NOSCHED], {}, pod("p", 100, tolerations=[Toleration(operator="Exists")]), "n", {}),
    ("wrong-value", [NOSCHED], {}, pod("p", 100, tolerations=[Toleration(key="dedicated", value="x")]),
     None, {"node(s) had untolerated taint": 1}),
    ("prefer-no-schedule-passes", [Taint(key="k", effect="PreferNoSchedule")], {}, pod("p", 100), "n", {}),
    ("selector-match", [], {"zone": "a"}, pod("p", 100, selector={"zone": "a"}), "n", {}),
    ("selector-mismatch", [], {"zone": "b"}, pod("p", 100, selector={"zone": "a"}), None,
     {"node(s) didn't match Pod's node affinity/selector": 1}),
]


@pytest.mark.parametrize(("taints", "labels", "spec", "placed", "reasons"), [c[1:] for c in STATIC],
                         ids=[c[0] for c in STATIC])
def test_taints_and_selector(taints: list[Taint], labels: dict[str, str], spec: PodSpec, placed: str | None,
                             reasons: dict[str, int]) -> None:
    s = scheduler()
    s.on_node(node("n", labels=labels, taints=taints), NOW)
    s.add_pod(spec, NOW)
    out = s.schedule_cycle(NOW)
    assert (out.placements[0].node if out.placements else None) == placed
    assert (out.failures[0].result.reasons if out.failures else {}) == reasons


@pytest.mark.parametrize(("cap", "placed"), [(1, 2), (2, 4), (-1, 5)], ids=["cap-1", "cap-2", "no-cap"])
def test_max_instance_per_node(cap: int, placed: int) -> None:
    s = scheduler()
    for name in ("a", "b"):
        s.on_node(node(name), NOW)
    for i in range(5):
        s.add_pod(pod(f"p{i}", 100, MI, app="web", max_per_node=cap), NOW)
    out = s.schedule_cycle(NOW)
    assert len(out.placements) == placed
    per_node: dict[str, int] = {}
    for p in out.placements:
        per_node[p.node] = per_node.get(p.node, 0) + 1
    assert cap < 0 or max(per_node.values()) <= cap
    if out.failures:
        assert out.failures[0].result.reasons == {"node(s) reached max instances of app": 2}


@pytest.mark.parametrize(("report_pod_usage", "expected_on_node"), [(False, 2), (True, 2)],
                         ids=["no-usage-reported", "usage-reported-recently"])
def test_recent_placements_are_estimated(report_pod_usage: bool, expected_on_node: int) -> None:
    """Node 10 CPU, threshold 65 %: usage 2 CPU + 2 × 1700 m estimates (2 CPU pods) = 54 %; a third would
    make 71 % > 65, so 2 are placed, not the 5 the stale metric alone would allow."""
    s = scheduler()
    s.on_node(node("n", cpu=10_000, memory=64 * GI), NOW)
    s.on_metric(metric("n", NOW, 2000, GI), NOW)
    for i in range(5):
        s.add_pod(pod(f"p{i}", 2000, MI, 2000, MI), NOW)
    out = s.schedule_cycle(NOW)
    assert len(out.placements) == expected_on_node
    assert out.failures[0].result.reasons == {"load too high: cpu": 1}
    # A metric 120 s later holds 120/300 of the pods' reported usage in its 300 s mean: the rest of
    # their expected usage (max(estimate, usage) − 40 % of the usage) still counts; once they ran the
    # whole window, their reported (lower) usage replaces their estimates.
    usage = {p.pod.uid: (300, MI) for p in out.placements} if report_pod_usage else {}
    s.on_metric(metric("n", NOW + 120, 2000 + 900, GI, pods=usage), NOW + 120)
    est = int(s.table.estimated_usage[0, 0])
    assert est == 2900 + 2 * (1700 - 120 if report_pod_usage else 1700)
    s.on_metric(metric("n", NOW + 300, 2000 + 900, GI, pods=usage), NOW + 300)
    est = int(s.table.estimated_usage[0, 0])
    assert est == (2900 if report_pod_usage else 2900 + 2 * 1700)


def test_release_frees_room_and_wakes_unschedulable() -> None:
    s = scheduler()
    s.on_node(node("n", cpu=1000), NOW)
    s.add_pod(pod("a", 1000, MI), NOW)
    s.add_pod(pod("b", 1000, MI, created_at=1.0), NOW)
    out = s.schedule_cycle(NOW)
    assert [p.pod.uid for p in out.placements] == ["a"]
    assert s.queue.lengths()["unschedulable"] == 1
    s.release("a", NOW + 5)
    out = s.schedule_cycle(NOW + 5)  # woken by the release's queueing hint, well before the retry
    assert [p.pod.uid for p in out.placements] == ["b"]
    assert s.queue.lengths()["unschedulable"] == 0
    assert int(s.table.allocated[0, 0]) == 1000
