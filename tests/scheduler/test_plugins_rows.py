"""Row-wise plugin methods: ``filter_rows`` / ``score_rows`` equal the full-table result indexed by the
rows, and ``reason_codes`` label exactly the rejected rows, on random clusters (also after Reserve)."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from random_cluster import NOW, Cluster, build_table, cluster_st, pod_info, pod_st

from colo_scheduler.framework.interface import CyclePlugin, CycleState, ReservePlugin
from colo_scheduler.plugins import new_in_tree_registry
from colo_scheduler.settings import SchedulerSettings

FILTERS = ("NodeResourcesFit", "LoadAware", "NodeSelector", "TaintToleration", "MaxInstancePerNode", "NodeAffinity")
SCORES = ("LoadAware", "NodeResourcesLeastAllocated", "NodeAffinity", "SelectorSpread")
ALL_RESOURCES = [{"name": n} for n in ("cpu", "memory", "batch-cpu", "mid-memory", "pods")]
STRATEGY_SCORES: list[tuple[str, Any]] = [
    ("NodeResourcesFit", {"scoring_strategy": {"type": t, "resources": r}})
    for t in ("LeastAllocated", "MostAllocated", "RequestedToCapacityRatio")
    for r in ([{"name": "cpu", "weight": 2}, {"name": "memory"}], ALL_RESOURCES)
] + [("NodeResourcesBalancedAllocation", None), ("NodeResourcesBalancedAllocation", {"resources": ALL_RESOURCES})]


def _plugins(names: tuple[str, ...], **overrides: Any) -> list[Any]:
    registry = new_in_tree_registry()
    s = SchedulerSettings(**overrides)
    return [registry.build(n, s) for n in names]


def _scorers() -> list[Any]:
    registry = new_in_tree_registry()
    return [registry.build(n, SchedulerSettings(), a) for n, a in STRATEGY_SCORES]


def _state(table: Any, plugins: list[Any]) -> CycleState:
    state = CycleState(now=NOW, table=table)
    for p in plugins:
        if isinstance(p, CyclePlugin):
            p.begin_cycle(state)
    return state


def _check_filters(state: CycleState, plugins: list[Any], info: Any, rows: np.ndarray) -> None:
    n = state.table.n
    for p in plugins:
        full = p.filter(state, info)
        full = np.ones(n, np.bool_) if full is None else full
        got = p.filter_rows(state, info, rows)
        assert got.dtype == np.bool_ and got.shape == (len(rows),), p.name
        assert np.array_equal(got, full[rows]), p.name
        if hasattr(p, "filter_node"):
            assert [p.filter_node(state, info, int(i)) for i in rows] == full[rows].tolist(), p.name
        codes, labels = p.reason_codes(state, info, rows)
        assert codes.dtype == np.uint8 and codes.shape == (len(rows),), p.name
        assert np.array_equal(codes != 0, ~full[rows]), p.name
        assert labels[0] == "" and all(labels[int(c)] for c in codes if c), p.name


def _check_scores(state: CycleState, plugins: list[Any], info: Any, rows: np.ndarray) -> None:
    for p in plugins:
        full = p.score(state, info)
        got = p.score_rows(state, info, rows)
        assert got.shape == (len(rows),), p.name
        assert np.array_equal(got, full[rows]), p.name
        if hasattr(p, "score_node"):
            assert [p.score_node(state, info, int(i)) for i in rows] == full[rows].tolist(), p.name
        if not hasattr(p, "normalize"):
            assert full.min(initial=0) >= 0 and full.max(initial=0) <= 100, p.name


@settings(max_examples=60, deadline=None)
@given(cluster=cluster_st(), pod=pod_st("incoming"), data=st.data(),
       filter_expired=st.booleans())
def test_rows_equal_full_result(cluster: Cluster, pod: Any, data: st.DataObject, filter_expired: bool) -> None:
    table = build_table(cluster)
    filters = _plugins(FILTERS, filter_expired_metrics=filter_expired)
    scores = _plugins(SCORES, filter_expired_metrics=filter_expired) + _scorers()
    state = _state(table, filters + scores)
    info = pod_info(pod)
    rows = np.array(data.draw(st.lists(st.integers(0, table.n - 1), max_size=6)), np.intp)
    _check_filters(state, filters, info, rows)
    _check_scores(state, scores, info, rows)
    # Reserve the pod on a node: the changed row must still agree with the full result.
    target = data.draw(st.integers(0, table.n - 1))
    by_name = {p.name: p for p in filters + scores}
    by_name["NodeResourcesFit"] = filters[0]  # one Reserve per plugin name
    for p in by_name.values():
        if isinstance(p, ReservePlugin):
            p.reserve(table, info, target, NOW)
    nxt = pod_info(data.draw(pod_st("next")))
    every = np.arange(table.n, dtype=np.intp)
    _check_filters(state, filters, nxt, every)
    _check_scores(state, scores, nxt, every)


def test_fit_reason_joins_every_insufficient_resource() -> None:
    from colo.messages import NodeSpec, PodSpec, Resources

    r = Resources(cpu=1000, memory=1024, pods=1)
    table = build_table(Cluster([NodeSpec(name="n", capacity=r, allocatable=r)], [None], [None]))
    (fit,) = _plugins(("NodeResourcesFit",))
    info = pod_info(PodSpec(uid="p", name="p", requests=Resources(cpu=2000, memory=2048)))
    codes, labels = fit.reason_codes(_state(table, [fit]), info, np.array([0], np.intp))
    assert labels[int(codes[0])] == "Insufficient cpu, Insufficient memory"


def test_taint_reason_names_the_untolerated_taint() -> None:
    from colo.messages import NodeSpec, PodSpec, Resources, Taint, Toleration

    r = Resources(cpu=1000, memory=1024)
    nodes = [NodeSpec(name="a", capacity=r, allocatable=r,
                      taints=[Taint(key="dedicated", value="gpu"), Taint(key="spot", effect="NoExecute")]),
             NodeSpec(name="b", capacity=r, allocatable=r, taints=[Taint(key="spot", effect="NoExecute")]),
             NodeSpec(name="c", capacity=r, allocatable=r)]
    table = build_table(Cluster(nodes, [None] * 3, [None] * 3))
    (taints,) = _plugins(("TaintToleration",))
    state = _state(table, [taints])
    info = pod_info(PodSpec(uid="p", name="p", tolerations=[Toleration(key="dedicated", operator="Exists")]))
    codes, labels = taints.reason_codes(state, info, np.arange(3, dtype=np.intp))
    assert [labels[int(c)] for c in codes] == ["node(s) had untolerated taint {spot:NoExecute}"] * 2 + [""]
    info = pod_info(PodSpec(uid="q", name="q"))
    codes, labels = taints.reason_codes(state, info, np.arange(3, dtype=np.intp))
    assert [labels[int(c)] for c in codes] == ["node(s) had untolerated taint {dedicated=gpu:NoSchedule}",
                                               "node(s) had untolerated taint {spot:NoExecute}", ""]
