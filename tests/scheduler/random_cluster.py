"""Hypothesis strategies for random clusters and pods, shared by the plugin and property tests.

A :class:`Cluster` is plain data (node specs, batch/mid allocatable, metrics, assigned pods);
:func:`build_table` loads it into a :class:`NodeTable` the way the scheduler does (node
registration, NodeResource, metric, then Reserve of every assigned pod).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from hypothesis import strategies as st

from colo.messages import (
    NodeMetric,
    NodeResource,
    NodeSpec,
    PodMetric,
    PodSpec,
    Resources,
    Taint,
    Toleration,
    Usage,
)
from colo_scheduler.podinfo import PodInfo, make_pod_info
from colo_scheduler.table import NodeTable

GI = 1024**3
NOW = 10_000.0
EXPIRY_S = 180.0

LABEL_KEYS = ("zone", "disk", "gpu", "tier")
LABEL_VALUES = ("a", "b", "1", "7", "20")
TAINT_KEYS = ("dedicated", "gpu", "spot")
APPS = ("", "web", "db", "cache")


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
def node_st(draw: st.DrawFn, i: int) -> NodeSpec:
    """A node with random size (2–128 cores, 4–512 GiB), pod cap, labels and taints."""
    cpu = draw(st.integers(2, 128)) * 1000
    memory = draw(st.integers(4, 512)) * GI
    pods = draw(st.sampled_from((0, 0, 3, 10, 110)))
    r = Resources(cpu=cpu, memory=memory, pods=pods)
    return NodeSpec(name=f"n{i}", capacity=r, allocatable=r, labels=draw(labels_st),
                    taints=draw(st.lists(taint_st, max_size=2)))


@st.composite
def pod_st(draw: st.DrawFn, uid: str = "p", small: bool = False) -> PodSpec:
    """A native, batch or mid pod with random requests/limits, selector, tolerations, app cap and
    DaemonSet flag; ``small`` keeps requests low (pods already on nodes)."""
    kind = draw(st.sampled_from(("native", "native", "batch", "mid")))
    top = 4 if small else 64
    cpu = draw(st.integers(0, top)) * 500
    memory = draw(st.integers(0, top)) * GI // 2
    lim_cpu = draw(st.sampled_from((0, cpu, 2 * cpu)))
    lim_memory = draw(st.sampled_from((0, memory)))
    if kind == "native":
        req = Resources(cpu=cpu, memory=memory)
        lim = Resources(cpu=lim_cpu, memory=lim_memory)
        prio, qos = draw(st.sampled_from(((None, None), ("prod", "LS"), ("prod", None))))
    elif kind == "batch":
        req = Resources(batch_cpu=cpu, batch_memory=memory)
        lim = Resources(batch_cpu=lim_cpu, batch_memory=lim_memory)
        prio, qos = "batch", "BE"
    else:
        req = Resources(mid_cpu=cpu, mid_memory=memory)
        lim = Resources(mid_cpu=lim_cpu, mid_memory=lim_memory)
        prio, qos = "mid", "BE"
    app = draw(st.sampled_from(APPS))
    prio_class: Literal["prod", "mid", "batch"] | None = prio  # type: ignore[assignment]
    qos_class: Literal["LS", "BE"] | None = qos  # type: ignore[assignment]
    return PodSpec(
        uid=uid, name=uid, requests=req, limits=lim, priority_class=prio_class, qos_class=qos_class,
        node_selector=draw(st.dictionaries(st.sampled_from(LABEL_KEYS), st.sampled_from(LABEL_VALUES),
                                           max_size=1 if not small else 0)),
        tolerations=draw(st.lists(toleration_st, max_size=2)),
        app=app, max_instance_per_node=draw(st.sampled_from((-1, 1, 2, 3))) if app else -1,
        daemonset=draw(st.booleans()) if not small else False,
    )


@st.composite
def cluster_st(draw: st.DrawFn, min_nodes: int = 1, max_nodes: int = 12) -> Cluster:
    """Random nodes; each with NodeResource or none, a fresh / expired / missing metric (with
    per-pod usage for some assigned pods) and up to 4 assigned pods."""
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
                mid_memory=draw(st.integers(0, a.memory // (2 * GI))) * GI))
        else:
            resources.append(None)
        pods_here = [draw(pod_st(f"a{i}-{k}", small=True)) for k in range(draw(st.integers(0, 4)))]
        age = draw(st.sampled_from((None, 0.0, 30.0, 90.0, EXPIRY_S - 1, EXPIRY_S, 400.0)))
        if age is None:
            metrics.append(None)
        else:
            usage = Usage(cpu=draw(st.integers(0, a.cpu)), memory=draw(st.integers(0, a.memory // GI)) * GI)
            reported = [PodMetric(uid=p.uid, cpu=draw(st.integers(0, 3000)),
                                  memory=draw(st.integers(0, 4)) * GI // 2)
                        for p in pods_here if draw(st.booleans())]
            metrics.append(NodeMetric(node=spec.name, at=NOW - age, node_usage=usage, pods=reported))
        for p in pods_here:
            assigned.append((p, i, NOW - draw(st.sampled_from((0.0, 30.0, 100.0, 500.0)))))
    return Cluster(nodes, resources, metrics, assigned)


def pod_info(spec: PodSpec) -> PodInfo:
    """The scheduler's default PodInfo of ``spec`` (factors 85/70, default estimates)."""
    return make_pod_info(spec, queued_at=NOW)


def build_table(cluster: Cluster, report_interval_s: float = 60.0) -> NodeTable:
    """Load ``cluster`` into a fresh table: nodes, NodeResources, metrics, then each assigned pod's
    request (NodeResourcesFit), load estimate (LoadAware) and app count (MaxInstancePerNode)."""
    table = NodeTable(capacity=4, report_interval_s=report_interval_s)
    for spec in cluster.nodes:
        table.upsert_node(spec)
    for nr in cluster.resources:
        if nr is not None:
            table.set_node_resource(nr)
    for m in cluster.metrics:
        if m is not None:
            table.set_metric(m)
    for pod, i, at in cluster.assigned:
        info = pod_info(pod)
        table.add_allocated(i, info.request)
        table.track(info, i, at)
        if pod.app:
            table.add_app_count(pod.app, i, 1)
    return table
