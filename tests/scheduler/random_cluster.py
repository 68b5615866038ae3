"""Hypothesis strategies for random clusters and pods, shared by the plugin and property tests.

A :class:`Cluster` is plain data (node specs, batch/mid allocatable, metrics, assigned pods);
:func:`build_table` loads it into a :class:`NodeTable` the way the scheduler does (node
registration, NodeResource, metric, then each assigned pod's request, load estimate and app
count, as Reserve books them).

Nodes: random sizes, pod caps, labels (some numeric, for Gt/Lt), taints, now and then a
LoadAware threshold annotation (valid or not). Metrics: fresh, expired or missing, with
aggregated percentiles and per-pod usage (with or without the pod's class). Pods: native,
batch or mid (prod, batch, mid and sometimes invalid class combinations), node selectors,
tolerations, required and preferred node affinity (sometimes invalid), app caps, DaemonSets.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Literal

from hypothesis import strategies as st

from colo.messages import (
    Affinity,
    AggregatedUsage,
    NodeAffinity,
    NodeMetric,
    NodeResource,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    NodeSpec,
    PodMetric,
    PodSpec,
    PreferredSchedulingTerm,
    Resources,
    Taint,
    Toleration,
    Usage,
)
from colo_scheduler.plugins.loadaware import CUSTOM_THRESHOLDS_ANNOTATION
from colo_scheduler.podinfo import PodInfo, make_pod_info
from colo_scheduler.table import NodeTable

GI = 1024**3
NOW = 10_000.0
EXPIRY_S = 180.0

LABEL_KEYS = ("zone", "disk", "gen", "tier")
LABEL_VALUES = ("a", "b", "1", "7", "20")
TAINT_KEYS = ("dedicated", "gpu", "spot")
APPS = ("", "web", "db", "cache")
OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


@dataclass
class Cluster:
    """Nodes with their NodeResource, metric (None = missing) and pods already assigned
    (spec, node row, assignment time)."""

    nodes: list[NodeSpec]
    resources: list[NodeResource | None]
    metrics: list[NodeMetric | None]
    assigned: list[tuple[PodSpec, int, float]] = field(default_factory=list)


labels_st = st.dictionaries(st.sampled_from(LABEL_KEYS), st.sampled_from(LABEL_VALUES), max_size=3)
taint_st = st.builds(Taint, key=st.sampled_from(TAINT_KEYS), value=st.sampled_from(("", "x", "y")),
                     effect=st.sampled_from(("NoSchedule", "PreferNoSchedule", "NoExecute")))
toleration_st = st.one_of(
    st.builds(Toleration, key=st.sampled_from(TAINT_KEYS), operator=st.just("Equal"),
              value=st.sampled_from(("", "x", "y")), effect=st.sampled_from(("", "NoSchedule", "NoExecute"))),
    st.builds(Toleration, key=st.sampled_from(("",) + TAINT_KEYS), operator=st.just("Exists"),
              effect=st.sampled_from(("", "NoSchedule"))),
)


@st.composite
def requirement_st(draw: st.DrawFn, valid: bool = True) -> NodeSelectorRequirement:
    """A node selector requirement; ``valid=False`` may draw a bad operator or value."""
    key = draw(st.sampled_from(LABEL_KEYS))
    op = draw(st.sampled_from(OPERATORS + (() if valid else ("Near", "Gt"))))
    if op in ("In", "NotIn"):
        values = draw(st.lists(st.sampled_from(LABEL_VALUES), min_size=1, max_size=2))
    elif op in ("Gt", "Lt"):
        values = [draw(st.sampled_from(("0", "5", "10", "x") if not valid else ("0", "5", "10", "-3")))]
    else:
        values = []
    return NodeSelectorRequirement(key=key, operator=op, values=values)


@st.composite
def affinity_st(draw: st.DrawFn) -> Affinity | None:
    """None, or required terms (ORed, 1–2 expressions each) and/or preferred terms (weights 1..100);
    one draw in ~12 has an invalid expression."""
    if draw(st.integers(0, 2)) == 0:
        return None
    valid = draw(st.integers(0, 11)) > 0
    req = requirement_st(valid)
    term = st.builds(NodeSelectorTerm, match_expressions=st.lists(req, min_size=draw(st.integers(0, 1)), max_size=2))
    required = None
    if draw(st.booleans()):
        required = NodeSelector(node_selector_terms=draw(st.lists(term, min_size=1, max_size=2)))
    preferred = draw(st.lists(st.builds(PreferredSchedulingTerm, weight=st.integers(1, 100), preference=term),
                              max_size=3))
    return Affinity(node_affinity=NodeAffinity(required=required, preferred=preferred))


@st.composite
def annotation_st(draw: st.DrawFn) -> dict[str, str]:
    """Mostly none; else a LoadAware threshold override (usage, prod, aggregated) or unreadable text."""
    kind = draw(st.integers(0, 9))
    if kind < 6:
        return {}
    if kind == 9:
        return {CUSTOM_THRESHOLDS_ANNOTATION: "{broken"}
    percent = st.dictionaries(st.sampled_from(("cpu", "memory")), st.integers(0, 100), max_size=2)
    doc: dict[str, object] = {}
    if draw(st.booleans()):
        doc["usageThresholds"] = draw(percent)
    if draw(st.booleans()):
        doc["prodUsageThresholds"] = draw(percent)
    if kind == 8:
        doc["aggregatedUsage"] = {"usageThresholds": draw(percent),
                                  "usageAggregationType": draw(st.sampled_from(("p95", "avg"))),
                                  "usageAggregatedDuration": draw(st.sampled_from(("5m", "10m", "0")))}
    return {CUSTOM_THRESHOLDS_ANNOTATION: json.dumps(doc)}


@st.composite
def node_st(draw: st.DrawFn, i: int) -> NodeSpec:
    """A node with random size (2–128 cores, 4–512 GiB), pod cap, labels, taints and annotation."""
    cpu = draw(st.integers(2, 128)) * 1000
    memory = draw(st.integers(4, 512)) * GI
    pods = draw(st.sampled_from((0, 0, 3, 10, 110)))
    r = Resources(cpu=cpu, memory=memory, pods=pods)
    return NodeSpec(name=f"n{i}", capacity=r, allocatable=r, labels=draw(labels_st),
                    taints=draw(st.lists(taint_st, max_size=2)), annotations=draw(annotation_st()))


@st.composite
def pod_st(draw: st.DrawFn, uid: str = "p", small: bool = False) -> PodSpec:
    """A native, batch or mid pod with random requests/limits, classes, selector, tolerations,
    affinity, app cap and DaemonSet flag; ``small`` keeps requests low and the pod valid (pods
    already on nodes)."""
    kind = draw(st.sampled_from(("native", "native", "batch", "mid")))
    top = 4 if small else 64
    cpu = draw(st.integers(0, top)) * 500
    memory = draw(st.integers(0, top)) * GI // 2
    lim_cpu = draw(st.sampled_from((0, cpu, 2 * cpu)))
    lim_memory = draw(st.sampled_from((0, memory)))
    prio: str | None
    qos: str | None
    if kind == "native":
        req = Resources(cpu=cpu, memory=memory)
        lim = Resources(cpu=lim_cpu, memory=lim_memory)
        prio, qos = draw(st.sampled_from(((None, None), ("prod", "LS"), ("prod", None), ("prod", "LSR"))))
    elif kind == "batch":
        req = Resources(batch_cpu=cpu, batch_memory=memory)
        lim = Resources(batch_cpu=lim_cpu, batch_memory=lim_memory)
        prio, qos = "batch", "BE"
    else:
        req = Resources(mid_cpu=cpu, mid_memory=memory)
        lim = Resources(mid_cpu=lim_cpu, mid_memory=lim_memory)
        prio, qos = "mid", "BE"
    if small:
        if qos == "LSR":
            qos = "LS"
    elif draw(st.integers(0, 14)) == 0:  # now and then an invalid combination (QoSAdmission)
        prio, qos = draw(st.sampled_from((("prod", "BE"), ("batch", "LS"), ("mid", "LSE"))))
    app = draw(st.sampled_from(APPS))
    prio_class: Literal["prod", "mid", "batch"] | None = prio  # type: ignore[assignment]
    qos_class: Literal["LS", "LSR", "LSE", "BE"] | None = qos  # type: ignore[assignment]
    return PodSpec(
        uid=uid, name=uid, requests=req, limits=lim, priority_class=prio_class, qos_class=qos_class,
        node_selector=draw(st.dictionaries(st.sampled_from(LABEL_KEYS), st.sampled_from(LABEL_VALUES),
                                           max_size=1 if not small else 0)),
        affinity=None if small else draw(affinity_st()),
        tolerations=draw(st.lists(toleration_st, max_size=2)),
        app=app, max_instance_per_node=draw(st.sampled_from((-1, 1, 2, 3))) if app else -1,
        daemonset=draw(st.booleans()) if not small else False,
    )


@st.composite
def cluster_st(draw: st.DrawFn, min_nodes: int = 1, max_nodes: int = 12) -> Cluster:
    """Random nodes; each with NodeResource or none, a fresh / expired / missing metric (with
    aggregated usage and per-pod usage for some assigned pods) and up to 4 assigned pods."""
    n = draw(st.integers(min_nodes, max_nodes))
    nodes = [draw(node_st(i)) for i in range(n)]
    resources: list[NodeResource | None] = []
    metrics: list[NodeMetric | None] = []
    assigned: list[tuple[PodSpec, int, float]] = []
    for i, spec in enumerate(nodes):
        a = spec.allocatable
        if draw(st.booleans()):
            resources.append(NodeResource(
                node=spec.name, batch_cpu=draw(st.integers(0, a.cpu // 1000)) * 1000,
                batch_memory=draw(st.integers(0, a.memory // GI)) * GI,
                mid_cpu=draw(st.integers(0, a.cpu // 2000)) * 1000,
                mid_memory=draw(st.integers(0, a.memory // (2 * GI))) * GI,
                memory_pressure=draw(st.booleans())))
        else:
            resources.append(None)
        pods_here = [draw(pod_st(f"a{i}-{k}", small=True)) for k in range(draw(st.integers(0, 4)))]
        age = draw(st.sampled_from((None, 0.0, 30.0, 90.0, EXPIRY_S - 1, EXPIRY_S, 400.0)))
        if age is None:
            metrics.append(None)
        else:
            usage = Usage(cpu=draw(st.integers(0, a.cpu)), memory=draw(st.integers(0, a.memory // GI)) * GI)
            reported = [PodMetric(uid=p.uid, cpu=draw(st.integers(0, 3000)), memory=draw(st.integers(0, 4)) * GI // 2,
                                  priority_class=p.priority_class if draw(st.booleans()) else None)
                        for p in pods_here if draw(st.booleans())]
            aggregated = [AggregatedUsage(window_s=w, stat=s, cpu=draw(st.integers(0, a.cpu)),
                                          memory=draw(st.integers(0, a.memory // GI)) * GI)
                          for w, s in draw(st.lists(st.sampled_from(((300, "p95"), (600, "p95"), (1800, "p95"),
                                                                      (300, "avg"))), max_size=3, unique=True))]
            metrics.append(NodeMetric(node=spec.name, at=NOW - age, node_usage=usage, pods=reported,
                                      aggregated=aggregated, window_s=draw(st.sampled_from((300.0, 60.0, 150.5)))))
        for p in pods_here:
            assigned.append((p, i, NOW - draw(st.sampled_from((0.0, 30.0, 100.0, 250.25, 500.0)))))
    return Cluster(nodes, resources, metrics, assigned)


def pod_info(spec: PodSpec) -> PodInfo:
    """The scheduler's default PodInfo of ``spec`` (factors 85/70, default estimates)."""
    return make_pod_info(spec, queued_at=NOW)


def load_nodes(table: NodeTable, cluster: Cluster) -> None:
    """Nodes, NodeResources and metrics of ``cluster`` into ``table`` (no pods)."""
    for spec in cluster.nodes:
        table.upsert_node(spec)
    for nr in cluster.resources:
        if nr is not None:
            table.set_node_resource(nr)
    for m in cluster.metrics:
        if m is not None:
            table.set_metric(m)


def build_table(cluster: Cluster) -> NodeTable:
    """Load ``cluster`` into a fresh table: nodes, NodeResources, metrics, then each assigned pod's
    request (NodeResourcesFit), load estimate (LoadAware) and app count (MaxInstancePerNode)."""
    table = NodeTable(capacity=4)
    load_nodes(table, cluster)
    for pod, i, at in cluster.assigned:
        info = pod_info(pod)
        table.add_allocated(i, info.request)
        table.track(info, i, at)
        if pod.app:
            table.add_app_count(pod.app, i, 1)
    return table
