"""Property: on random clusters and pods, the vectorized plugins agree with the per-node loop of
:mod:`colo_scheduler.loop` node by node (every filter mask, every raw and normalized score, the
PreFilter verdict), and the Framework's choice is among the loop's best nodes — for a few pods in
a row of one cycle, each reserved before the next (so the class cache's row updates and the
plugins' Reserve refreshes are checked too), under several profiles and plugin arguments."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from random_cluster import NOW, Cluster, build_table, cluster_st, load_nodes, pod_info, pod_st

from colo_scheduler.framework.interface import NormalizeScorePlugin, ReasonCodesPlugin, SparseScores
from colo_scheduler.framework.registry import ProfileConfig, build_profile
from colo_scheduler.framework.runner import Framework
from colo_scheduler.loop import loop_decision
from colo_scheduler.plugins import default_profile_config, new_in_tree_registry
from colo_scheduler.settings import SchedulerSettings
from colo_scheduler.table import NodeTable

LOAD_ARGS = [
    None,
    {"aggregated": {"usage_thresholds": {"cpu": 60, "memory": 90}, "usage_aggregation_type": "p95",
                    "usage_aggregated_duration_s": 300, "score_aggregation_type": "p95"}},
    {"aggregated": {"usage_thresholds": {"cpu": 70}, "usage_aggregation_type": "p95",
                    "usage_aggregated_duration_s": 0}},
    {"prod_usage_thresholds": {"cpu": 40, "memory": 80}, "score_according_prod_usage": True,
     "resource_weights": {"cpu": 3, "memory": 1}},
    {"usage_thresholds": {"cpu": 80}, "estimated_scaling_factors": {"cpu": 100, "memory": 50}},
]

RESOURCE_SCORES: list[tuple[str, dict[str, Any] | None]] = [
    ("NodeResourcesLeastAllocated", None),
    ("NodeResourcesFit", {"scoring_strategy": {"type": "MostAllocated",
                                               "resources": [{"name": "cpu", "weight": 2}, {"name": "pods"}]}}),
    ("NodeResourcesFit", {"scoring_strategy": {"type": "RequestedToCapacityRatio",
                                               "resources": [{"name": "cpu"}, {"name": "memory", "weight": 3}],
                                               "shape": [{"utilization": 0, "score": 2},
                                                         {"utilization": 60, "score": 10},
                                                         {"utilization": 100, "score": 3}]}}),
    ("NodeResourcesBalancedAllocation", {"resources": [{"name": "cpu"}, {"name": "memory"}, {"name": "pods"}]}),
]


def _profile(s: SchedulerSettings, load_args: dict[str, Any] | None, resource: tuple[str, Any]) -> ProfileConfig:
    base = default_profile_config(s)
    name, args = resource
    score = {k: v for k, v in base.score.items() if k != "NodeResourcesLeastAllocated"}
    score[name] = 1
    plugin_args: dict[str, object] = {}
    if load_args is not None:
        plugin_args["LoadAware"] = load_args
    if args is not None:
        plugin_args[name] = args
    return dataclasses.replace(base, score=score, plugin_args=plugin_args)


def _check(fw: Framework, state: Any, info: Any, s: SchedulerSettings) -> int:
    """Compare one decision with the loop; returns the chosen row (−1 for none)."""
    table = fw.table
    loop = loop_decision(table, NOW, info, fw.profile, s)
    quick = loop_decision(table, NOW, info, fw.profile, s, every_node=False)  # the benchmark's loop
    assert quick.feasible == loop.feasible and quick.best == loop.best
    result = fw.schedule_one(state, info)
    if loop.rejected_by:
        assert result.node == -1 and result.rejectors == {loop.rejected_by}
        event(f"rejected by PreFilter {loop.rejected_by}")
        return -1
    feasible = np.ones(table.n, np.bool_)
    for f in fw.profile.filter:
        mask = f.filter(state, info)
        got = np.ones(table.n, np.bool_) if mask is None else mask
        assert got.tolist() == loop.masks[f.name], f.name
        feasible &= got
    assert feasible.tolist() == loop.feasible
    for f in fw.profile.filter:  # explain counts the reasons of the per-row reason codes
        if f.name in ("LoadAware", "NodeResourcesFit") and isinstance(f, ReasonCodesPlugin):
            mask = f.filter(state, info)
            rejected = np.zeros(table.n, np.bool_) if mask is None else ~mask
            codes, labels = f.reason_codes(state, info, np.flatnonzero(rejected))
            counted: dict[str, int] = {}
            for code in codes.tolist():
                for label in labels[code].split(", ") if code else ():
                    counted[label] = counted.get(label, 0) + 1
            assert f.explain(state, info, rejected) == counted, f.name
    for p, _ in fw.profile.score:
        raw = p.score(state, info)
        assert raw.tolist() == loop.raw[p.name], p.name
        final = p.normalize(state, info, raw, feasible) if isinstance(p, NormalizeScorePlugin) else raw
        if isinstance(final, int):  # the same score on every node
            final = np.full(len(raw), final, np.int64)
        elif isinstance(final, SparseScores):  # the same on all but a few nodes
            final = final.dense(len(raw))
        assert final.tolist() == loop.scores[p.name], p.name
    if loop.best:
        assert result.node in loop.best, (result.node, loop.best, loop.total)
        event(f"placed; {'tie' if len(loop.best) > 1 else 'one best node'}")
    else:
        assert result.node == -1
        event("no feasible node")
    for name, mask in loop.masks.items():
        if not all(mask):
            event(f"{name} rejects a node")
    return result.node


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(cluster=cluster_st(), data=st.data(), load=st.sampled_from(LOAD_ARGS),
       resource=st.sampled_from(RESOURCE_SCORES), filter_expired=st.booleans())
def test_vectorized_plugins_agree_with_the_loop(cluster: Cluster, data: st.DataObject, load: dict[str, Any] | None,
                                                resource: tuple[str, Any], filter_expired: bool) -> None:
    s = SchedulerSettings(filter_expired_metrics=filter_expired, metric_expiry_s=180.0)
    profile = build_profile(_profile(s, load, resource), new_in_tree_registry(), s)
    table = NodeTable(capacity=4)
    load_nodes(table, cluster)
    fw = Framework(profile, table, seed=data.draw(st.integers(0, 3)))
    for spec, i, at in cluster.assigned:  # pods already bound: booked by the profile's Reserve plugins
        fw.reserve(pod_info(spec), i, at)
    state = fw.begin_cycle(NOW)
    for k in range(data.draw(st.integers(1, 4))):
        spec = data.draw(pod_st(f"in{k}"))
        info = pod_info(spec)
        node = _check(fw, state, info, s)
        if node >= 0:
            fw.reserve(info, node, NOW)


def test_loop_rejects_unknown_plugins() -> None:
    import pytest

    from colo.messages import PodSpec

    class Odd:
        name = "Odd"
        events: frozenset[str] = frozenset()

        def filter(self, state: Any, pod: Any) -> None:
            return None

        def explain(self, state: Any, pod: Any, rejected: Any) -> dict[str, int]:
            return {}

    s = SchedulerSettings()
    registry = new_in_tree_registry()
    registry.register("Odd", lambda a, st_: Odd())
    profile = build_profile(ProfileConfig(filter=("Odd",)), registry, s)
    table = build_table(Cluster([], [], []))
    with pytest.raises(ValueError, match="Odd"):
        loop_decision(table, NOW, PodSpec(uid="p", name="p"), profile, s)
