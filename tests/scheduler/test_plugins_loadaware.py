"""LoadAware arguments (Koordinator LoadAwareSchedulingArgs): aggregated percentile thresholds and score,
prod-only thresholds and score, per-node override by annotation, scaling factors, validation.
(Oracle tables O3–O5 of REFERENCE.md are in test_sched_loadaware.py; O5 again here through the args.)

Node 96 CPU / 512 Gi everywhere; thresholds in percent with round-half-up, equality passes."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import msgspec
import pytest
from sched_helpers import GI, node, node_resource, pod

from colo.messages import AggregatedUsage, NodeMetric, NodeSpec, PodMetric, PodSpec, Usage
from colo_scheduler.core import Scheduler
from colo_scheduler.plugins import default_profile_config, new_in_tree_registry
from colo_scheduler.plugins.loadaware import (
    CUSTOM_THRESHOLDS_ANNOTATION,
    LoadAware,
    LoadAwareArgs,
    default_args,
    parse_duration_s,
)
from colo_scheduler.settings import SchedulerSettings

NOW = 10_000.0
CPU = 1000


def sched(args: dict[str, Any] | None = None, **settings: Any) -> Scheduler:
    s = SchedulerSettings(**settings)
    profile = default_profile_config(s)
    if args is not None:
        profile = dataclasses.replace(profile, plugin_args={"LoadAware": args})
    return Scheduler(s, profile)


def usage_metric(name: str = "n", cpu: int = 0, memory: int = 0, *, age: float = 0.0,
                 aggregated: list[tuple[int, str, int]] | None = None,
                 pods: list[tuple[str, int, str | None]] | None = None) -> NodeMetric:
    """Node usage, aggregated (window_s, stat, cpu) entries and pods (uid, cpu, class)."""
    return NodeMetric(
        node=name, at=NOW - age, node_usage=Usage(cpu=cpu, memory=memory),
        aggregated=[AggregatedUsage(window_s=w, stat=st, cpu=c) for w, st, c in aggregated or []],  # type: ignore[arg-type]
        pods=[PodMetric(uid=u, cpu=c, priority_class=cls) for u, c, cls in pods or []])  # type: ignore[arg-type]


def prod_pod(uid: str, cpu: int) -> PodSpec:
    return msgspec.structs.replace(pod(uid, cpu, GI, cpu, GI), priority_class="prod", qos_class="LS")


def batch_pod(uid: str, cpu: int) -> PodSpec:
    return pod(uid, batch_cpu=cpu, batch_memory=GI)


def outcome(s: Scheduler, spec: PodSpec, nodes: list[NodeSpec] | None = None,
            metrics: list[NodeMetric] | None = None) -> tuple[bool, dict[str, int]]:
    """Register nodes (with batch allocatable) and metrics, schedule ``spec``: (placed, reasons)."""
    for n in nodes or [node("n")]:
        s.on_node(n, NOW)
        s.on_node_resource(node_resource(n.name, batch_cpu=64 * CPU, batch_memory=64 * GI), NOW)
    for m in metrics or []:
        s.on_metric(m, NOW)
    s.add_pod(spec, NOW)
    out = s.schedule_cycle(NOW)
    return bool(out.placements), (out.failures[0].result.reasons if out.failures else {})


O5_ARGS = {"filter_expired_node_metrics": False, "usage_thresholds": {"cpu": 65, "memory": 95}}

O5 = [
    ("60cpu-256Gi-fits", (60 * CPU, 256 * GI), pod("p"), True, {}),
    ("70cpu-rejected-cpu", (70 * CPU, 256 * GI), pod("p"), False, {"load too high: cpu": 1}),
    ("500Gi-rejected-memory", (30 * CPU, 500 * GI), pod("p"), False, {"load too high: memory": 1}),
]


@pytest.mark.parametrize(("usage", "spec", "fits", "reasons"), [c[1:] for c in O5], ids=[c[0] for c in O5])
def test_o5_through_plugin_args(usage: tuple[int, int], spec: PodSpec, fits: bool, reasons: dict[str, int]) -> None:
    assert outcome(sched(O5_ARGS), spec, metrics=[usage_metric("n", *usage)]) == (fits, reasons)


AGG = {"usage_thresholds": {"cpu": 65}, "usage_aggregation_type": "p95", "usage_aggregated_duration_s": 300}
P95_70 = [(300, "p95", 70 * CPU), (300, "avg", 20 * CPU)]
BIG_POD = pod("p", 16 * CPU, GI, 16 * CPU, GI)  # estimate 13600 m

AGGREGATED = [
    # node usage 30 CPU passes the plain 65 %, but p95 over 5 min is 70 CPU
    ("p95-over-threshold", AGG, usage_metric(cpu=30 * CPU, aggregated=P95_70), pod("p"), False,
     {"aggregated load too high: cpu": 1}),
    ("avg-under-threshold", {**AGG, "usage_aggregation_type": "avg"}, usage_metric(cpu=30 * CPU, aggregated=P95_70),
     pod("p"), True, {}),
    # aggregated thresholds replace the plain ones: node usage 80 CPU, p95 40 CPU → fits
    ("plain-thresholds-not-applied", AGG, usage_metric(cpu=80 * CPU, aggregated=[(300, "p95", 40 * CPU)]), pod("p"),
     True, {}),
    ("window-not-reported-passes", {**AGG, "usage_aggregated_duration_s": 600},
     usage_metric(cpu=30 * CPU, aggregated=P95_70), pod("p"), True, {}),
    # duration 0: the longest window of the statistic (30 min, 70 CPU), not the 5 min (40 CPU)
    ("duration-0-longest-window", {**AGG, "usage_aggregated_duration_s": 0},
     usage_metric(cpu=0, aggregated=[(300, "p95", 40 * CPU), (1800, "p95", 70 * CPU)]), pod("p"), False,
     {"aggregated load too high: cpu": 1}),
    # duration 0 with nothing reported for the statistic: the node usage stands in
    ("duration-0-falls-back-to-node-usage", {**AGG, "usage_aggregated_duration_s": 0},
     usage_metric(cpu=70 * CPU), pod("p"), False, {"aggregated load too high: cpu": 1}),
    # the incoming estimate counts on top of the aggregated usage: 50 CPU + 13.6 CPU = 66 % > 65
    ("aggregated-plus-incoming-estimate", AGG, usage_metric(cpu=0, aggregated=[(300, "p95", 50 * CPU)]), BIG_POD,
     False, {"aggregated load too high: cpu": 1}),
    ("aggregated-plus-incoming-estimate-fits", AGG, usage_metric(cpu=0, aggregated=[(300, "p95", 48 * CPU)]), BIG_POD,
     True, {}),
]


@pytest.mark.parametrize(("agg", "metric", "spec", "fits", "reasons"), [c[1:] for c in AGGREGATED],
                         ids=[c[0] for c in AGGREGATED])
def test_aggregated_thresholds(agg: dict[str, Any], metric: NodeMetric, spec: PodSpec, fits: bool,
                               reasons: dict[str, int]) -> None:
    assert outcome(sched({"aggregated": agg}), spec, metrics=[metric]) == (fits, reasons)


def _score(s: Scheduler, spec: PodSpec, metric: NodeMetric) -> int:
    s.on_node(node("n"), NOW)
    s.on_metric(metric, NOW)
    state = s.framework.begin_cycle(NOW)
    plugin: Any = s.framework.profile.plugins["LoadAware"]
    return int(plugin.score(state, s.pod_info(spec, NOW))[0])


MIXED = usage_metric(cpu=80 * CPU, pods=[("a", 40 * CPU, "prod"), ("b", 40 * CPU, "batch")])

SCORES = [
    # pod without requests (250 m / 200 MiB): plain usage 0 → 99 (O4)
    ("plain-node-usage", {}, usage_metric(aggregated=[(300, "p95", 48 * CPU)]), pod("p"), 99),
    # p95 48 CPU: cpu (96000 − 48000 − 250) × 100 // 96000 = 49, memory 99 → 74
    ("score-on-p95", {"aggregated": {"score_aggregation_type": "p95"}},
     usage_metric(aggregated=[(300, "p95", 48 * CPU)]), pod("p"), 74),
    ("score-aggregate-missing-uses-node-usage", {"aggregated": {"score_aggregation_type": "p99"}},
     usage_metric(aggregated=[(300, "p95", 48 * CPU)]), pod("p"), 99),
    # prod pod, node usage 80 CPU of which prod 40 CPU; incoming 4 CPU / 1 Gi req=lim (3400 m, 0.7 Gi):
    # cpu (96000 − 40000 − 3400) × 100 // 96000 = 54, memory 99 → 76
    ("score-according-prod-usage", {"score_according_prod_usage": True}, MIXED, prod_pod("p", 4 * CPU), 76),
    # a batch pod on the same node scores on the node usage: (96000 − 80000 − 3400) × 100 // 96000 = 13 → 56
    ("prod-usage-only-for-prod-pods", {"score_according_prod_usage": True}, MIXED, batch_pod("q", 4 * CPU), 56),
]


@pytest.mark.parametrize(("args", "metric", "spec", "expected"), [c[1:] for c in SCORES], ids=[c[0] for c in SCORES])
def test_score_variants(args: dict[str, Any], metric: NodeMetric, spec: PodSpec, expected: int) -> None:
    assert _score(sched(args), spec, metric) == expected


PROD_ARGS = {"prod_usage_thresholds": {"cpu": 50}}

PROD = [
    # prod usage 40 CPU + 3400 m = 45 % ≤ 50: the prod check replaces the plain one (80 % > 65)
    ("prod-pod-fits-on-prod-usage", prod_pod("p", 4 * CPU), MIXED, [], True, {}),
    ("batch-pod-plain-check", batch_pod("q", 4 * CPU), MIXED, [], False, {"load too high: cpu": 1}),
    # 40 CPU + 12 CPU × 85 % = 52.3 % > 50
    ("prod-pod-over-prod-threshold", prod_pod("p", 12 * CPU), MIXED, [], False, {"prod load too high: cpu": 1}),
    # a prod pod assigned just now, not yet reported: 40 + 6.8 + 3.4 = 52.3 % > 50
    ("assigned-prod-pod-estimated", prod_pod("p", 4 * CPU), MIXED, [prod_pod("new", 8 * CPU)], False,
     {"prod load too high: cpu": 1}),
    # an assigned batch pod does not count towards prod usage
    ("assigned-batch-pod-not-counted", prod_pod("p", 4 * CPU), MIXED, [batch_pod("new", 8 * CPU)], True, {}),
    # class unknown in the metric, known from the assigned pod (adopted as prod): counted
    ("class-from-assigned-pod", prod_pod("p", 12 * CPU),
     usage_metric(cpu=40 * CPU, pods=[("old", 40 * CPU, None)]), [prod_pod("old", 2 * CPU)], False,
     {"prod load too high: cpu": 1}),
    ("class-unknown-skipped", prod_pod("p", 12 * CPU), usage_metric(cpu=40 * CPU, pods=[("old", 40 * CPU, None)]), [],
     True, {}),
]


@pytest.mark.parametrize(("spec", "metric", "assigned", "fits", "reasons"), [c[1:] for c in PROD],
                         ids=[c[0] for c in PROD])
def test_prod_usage_thresholds(spec: PodSpec, metric: NodeMetric, assigned: list[PodSpec], fits: bool,
                               reasons: dict[str, int]) -> None:
    s = sched(PROD_ARGS)
    s.on_node(node("n"), NOW)
    for a in assigned:
        assert s.adopt(a, "n", NOW)
    assert outcome(s, spec, metrics=[metric]) == (fits, reasons)


def annotated(name: str, value: object) -> NodeSpec:
    text = value if isinstance(value, str) else json.dumps(value)
    return msgspec.structs.replace(node(name), annotations={CUSTOM_THRESHOLDS_ANNOTATION: text})


OVERRIDE = [
    # 70 CPU + 250 m = 73 %: over the default 65, within the node's own 90 (memory then has no threshold)
    ("usage-threshold-raised", {"usageThresholds": {"cpu": 90}}, usage_metric("n", 70 * CPU, 500 * GI), pod("p"),
     True, {}, False),
    ("usage-threshold-lowered", {"usageThresholds": {"cpu": 20, "memory": 95}}, usage_metric("n", 30 * CPU), pod("p"),
     False, {"load too high: cpu": 1}, False),
    ("prod-only-override-keeps-args-usage", {"prodUsageThresholds": {"cpu": 30}}, usage_metric("n", 70 * CPU),
     pod("p"), False, {"load too high: cpu": 1}, False),
    ("prod-override-applies-to-prod-pods", {"prodUsageThresholds": {"cpu": 30}},
     usage_metric("n", 30 * CPU, pods=[("a", 28 * CPU, "prod")]), prod_pod("p", 4 * CPU), False,
     {"prod load too high: cpu": 1}, False),
    ("aggregated-override", {"aggregatedUsage": {"usageThresholds": {"cpu": 50}, "usageAggregationType": "p95",
                                                 "usageAggregatedDuration": "5m"}},
     usage_metric("n", 10 * CPU, aggregated=[(300, "p95", 60 * CPU)]), pod("p"), False,
     {"aggregated load too high: cpu": 1}, False),
    ("unreadable-annotation-uses-args", "{not json", usage_metric("n", 70 * CPU), pod("p"), False,
     {"load too high: cpu": 1}, True),
    ("threshold-out-of-range-uses-args", {"usageThresholds": {"cpu": 120}}, usage_metric("n", 70 * CPU), pod("p"),
     False, {"load too high: cpu": 1}, True),
]


@pytest.mark.parametrize(("annotation", "metric", "spec", "fits", "reasons", "error"), [c[1:] for c in OVERRIDE],
                         ids=[c[0] for c in OVERRIDE])
def test_per_node_override(annotation: object, metric: NodeMetric, spec: PodSpec, fits: bool,
                           reasons: dict[str, int], error: bool) -> None:
    s = sched()
    assert outcome(s, spec, nodes=[annotated("n", annotation)], metrics=[metric]) == (fits, reasons)
    plugin: Any = s.framework.profile.plugins["LoadAware"]
    assert ("n" in plugin.annotation_errors) is error


def test_override_is_per_node() -> None:
    """The same usage is rejected on a plain node and accepted on the annotated one."""
    s = sched()
    nodes = [node("plain"), annotated("custom", {"usageThresholds": {"cpu": 90, "memory": 95}})]
    for n in nodes:
        s.on_node(n, NOW)
        s.on_metric(usage_metric(n.name, 70 * CPU), NOW)
    s.add_pod(pod("p"), NOW)
    assert [p.node for p in s.schedule_cycle(NOW).placements] == ["custom"]


def test_estimated_scaling_factors_from_args() -> None:
    """req = lim 16 CPU on 48 CPU used: 85 % → 64 % fits; 100 % → 67 % > 65 rejected."""
    spec = pod("p", 16 * CPU, GI, 16 * CPU, GI)
    assert outcome(sched(), spec, metrics=[usage_metric("n", 48 * CPU)])[0]
    assert outcome(sched({"estimated_scaling_factors": {"cpu": 100, "memory": 70}}), spec,
                   metrics=[usage_metric("n", 48 * CPU)]) == (False, {"load too high: cpu": 1})


def test_defaults_follow_settings() -> None:
    s = SchedulerSettings(cpu_threshold_percent=50, filter_expired_metrics=False, load_aware_cpu_weight=3,
                          cpu_estimation_factor_percent=90, metric_expiry_s=60.0)
    a = default_args(s)
    assert a.usage_thresholds == {"cpu": 50, "memory": 95}
    assert not a.filter_expired_node_metrics and a.node_metric_expiration_seconds == 60.0
    assert a.resource_weights == {"cpu": 3, "memory": 1} and a.estimated_scaling_factors["cpu"] == 90
    built = new_in_tree_registry().build("LoadAware", s)
    assert isinstance(built, LoadAware) and built.args == a


def test_bad_arguments_list_every_problem() -> None:
    bad = {"usage_thresholds": {"cpu": 101, "gpu": 5}, "resource_weights": {"cpu": 0, "memory": 0},
           "node_metric_expiration_seconds": 0,
           "aggregated": {"usage_thresholds": {"cpu": 60}, "score_aggregation_type": "p42"}}
    with pytest.raises(ValueError) as err:
        new_in_tree_registry().build("LoadAware", SchedulerSettings(), bad)
    msg = str(err.value)
    for part in ("usage_thresholds: cpu must be within 0..100, got 101", "unknown resource 'gpu'",
                 "weights of cpu and memory must sum to > 0", "node_metric_expiration_seconds must be > 0",
                 "aggregated.usage_thresholds need aggregated.usage_aggregation_type",
                 "unknown statistic 'p42'"):
        assert part in msg
    assert LoadAwareArgs().problems() == []


@pytest.mark.parametrize(("value", "seconds"), [("5m", 300), ("1h30m", 5400), ("300s", 300), ("1.5m", 90),
                                                ("0", 0), (120, 120), ("1500ms", 1)])
def test_parse_duration(value: object, seconds: int) -> None:
    assert parse_duration_s(value) == seconds


@pytest.mark.parametrize("value", ["5 m", "m5", "5x", "", True, None])
def test_parse_duration_refuses(value: object) -> None:
    with pytest.raises(ValueError):
        parse_duration_s(value)
