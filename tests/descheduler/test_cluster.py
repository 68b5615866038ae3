"""The descheduler's cluster view: fresh metrics, candidates, migration tracking."""

from __future__ import annotations

import pytest

from colo.messages import NodeMetric, NodeSpec, PodBound, PodMetric, PodSpec, PodStatus, Resources, Usage
from colo_descheduler.cluster import ClusterView
from colo_descheduler.lownodeload import Eviction

GI = 1 << 30


def view() -> ClusterView:
    v = ClusterView()
    for n in ("n1", "n2"):
        v.on_node(NodeSpec(name=n, capacity=Resources(cpu=10_000, memory=64 * GI),
                           allocatable=Resources(cpu=8000, memory=60 * GI)))
    v.on_bound(PodBound(spec=PodSpec(uid="p1", name="p1", app="web", priority=9500), node="n1", at=10.0))
    v.on_bound(PodBound(spec=PodSpec(uid="ds", name="ds", daemonset=True), node="n1", at=10.0))
    v.on_bound(PodBound(spec=PodSpec(uid="crit", name="crit", priority=2_000_000_000), node="n1", at=10.0))
    v.on_metric(NodeMetric(node="n1", at=100.0, system_usage=Usage(cpu=500, memory=GI),
                           pods=[PodMetric(uid=u, cpu=1000, memory=GI) for u in ("p1", "ds", "crit", "ghost")]))
    return v


@pytest.mark.parametrize(
    ("now", "fresh"), [(100.0, ["n1"]), (280.0, ["n1"]), (281.0, [])],
    ids=["now", "180s-old-still-fresh", "181s-old-stale"],
)
def test_fresh_loads(now: float, fresh: list[str]) -> None:
    loads = view().fresh_loads(now, 180.0)
    assert [load.name for load in loads] == fresh
    if fresh:
        assert loads[0].usage == (500 + 4 * 1000, GI + 4 * GI)  # system + Σ pods
        assert loads[0].allocatable == (8000, 60 * GI)


def test_older_metric_ignored() -> None:
    v = view()
    v.on_metric(NodeMetric(node="n1", at=50.0, system_usage=Usage(cpu=1)))
    assert v.metrics["n1"].at == 100.0


def test_candidates_exclude_unknown_daemonset_critical() -> None:
    v = view()
    cands = v.candidates(v.fresh_loads(100.0, 180.0))["n1"]
    assert [(c.uid, c.priority_class, c.workload) for c in cands] == [("p1", "prod", "default/web")]


@pytest.mark.parametrize(
    ("status", "still_migrating"),
    [
        (PodStatus(uid="p1", node="n1", phase="Failed", at=120.0, reason="Evicted"), True),
        (PodStatus(uid="p1", node="n1", phase="Succeeded", at=120.0), False),
        (PodStatus(uid="p1", node="n1", phase="Running", at=120.0), True),
        (PodStatus(uid="p1", node="n2", phase="Failed", at=120.0), True),
        (PodStatus(uid="p1", node="n2", phase="Running", at=120.0), False),
    ],
    ids=["evicted-runs-until-replacement", "succeeded-ends", "running-keeps", "other-node-ignored",
         "replacement-running-ends"],
)
def test_migration_ends_on_status(status: PodStatus, still_migrating: bool) -> None:
    v = view()
    v.start_migration(Eviction("p1", "n1", "n2", "default/web", (1000, GI)), 110.0)
    assert v.migrating_per_node() == {"n1": 1}
    assert v.workload_counts()[0] == {"default/web": 1}
    v.on_status(status)
    assert ("p1" in v.migrations) is still_migrating
    assert v.candidates(v.fresh_loads(100.0, 180.0))["n1"] == []  # migrating, booked or gone


def test_rebound_elsewhere_runs_until_running_and_ttl() -> None:
    v = view()
    v.start_migration(Eviction("p1", "n1", "n2", "default/web", (1000, GI)), 110.0)
    v.on_bound(PodBound(spec=PodSpec(uid="p1", name="p1", app="web"), node="n2", at=130.0))
    assert set(v.migrations) == {"p1"}  # bound is not yet available
    v.on_status(PodStatus(uid="p1", node="n2", phase="Running", at=131.0))
    assert v.migrations == {}
    v.start_migration(Eviction("crit", "n1", "n2", "", (1, 1)), 110.0)
    assert v.expire(410.0, 300.0) == 0
    assert v.expire(411.0, 300.0) == 1


@pytest.mark.parametrize(
    ("rebind", "want"),
    [
        pytest.param(PodSpec(uid="p1", name="p1", app="api", priority=9500), ("default/api", 1, "prod"),
                     id="new-workload"),
        pytest.param(PodSpec(uid="p1", name="p1", app="web", priority=5500), ("default/web", 1, "batch"),
                     id="new-priority-class"),
        pytest.param(PodSpec(uid="p1", name="p1", app="web", daemonset=True), None, id="now-a-daemonset"),
    ],
)
def test_rebinding_refreshes_cached_spec_fields(rebind: PodSpec, want: tuple[str, int, str] | None) -> None:
    v = view()
    v.on_bound(PodBound(spec=rebind, node="n1", at=20.0))
    (cands,) = v.candidates(v.fresh_loads(100.0, 180.0)).values()
    mine = [c for c in cands if c.uid == "p1"]
    if want is None:
        assert mine == []
        return
    workload, replicas, prio = want
    assert (mine[0].workload, mine[0].priority_class) == (workload, prio)
    assert v.workload_counts()[1].get(workload) == replicas


@pytest.mark.parametrize("node", ["n1", "n2"], ids=["with-metric", "no-metric"])
def test_lazy_candidates_equal_eager(node: str) -> None:
    v = view()
    loads = v.fresh_loads(100.0, 180.0)
    eager = v.candidates(loads)
    lazy = v.lazy_candidates(loads)
    assert dict(lazy) == eager
    assert lazy.get(node, ()) == eager.get(node, ())
    v.on_status(PodStatus(uid="p1", node="n1", phase="Succeeded", at=50.0))
    fresh = v.lazy_candidates(loads)
    assert [c.uid for c in fresh.get("n1", [])] == []  # a finished pod is no longer a candidate
