"""The usage LoadAware checks besides the node figure: a NodeMetric's aggregated statistic, and the
estimated usage of a node's prod pods."""

from __future__ import annotations

import math

from colo.messages import AggregatedUsage, NodeMetric
from colo_scheduler.estimation import pod_gap
from colo_scheduler.table import NodeTable


def aggregated_usage(metric: NodeMetric | None, stat: str, duration_s: int) -> tuple[int, int] | None:
    """(cpu, memory) of statistic ``stat`` over ``duration_s`` in ``metric.aggregated`` (0 = the longest
    window reported for that statistic, falling back to the node usage when none is; Koordinator
    getTargetAggregatedUsage), or None when not reported."""
    if metric is None:
        return None
    best: AggregatedUsage | None = None
    for a in metric.aggregated:
        if a.stat != stat:
            continue
        if duration_s == 0:
            if best is None or a.window_s > best.window_s:
                best = a
        elif a.window_s == duration_s:
            best = a
            break
    if best is not None:
        return best.cpu, best.memory
    if duration_s == 0:
        return metric.node_usage.cpu, metric.node_usage.memory
    return None


def prod_usage(table: NodeTable, i: int) -> tuple[int, int]:
    """Estimated usage of row ``i``'s prod pods (cpu milli-cores, memory bytes): Σ reported usage of
    the metric's pods of priority class prod (the metric's class, else the class of the assigned
    pod; pods of unknown class are skipped, as Koordinator skips pods it cannot look up) + for
    each assigned prod pod its gap against those per-pod figures (:func:`colo_scheduler.estimation.pod_gap`
    with ``windowed=False``: the estimate when not reported; max(estimate − usage, 0) while the pod is
    younger than the metric's window; 0 after)."""
    metric = table.metrics[i]
    pods = table.node_pods[i]
    cpu = memory = 0
    at, window = math.nan, 0.0
    if metric is not None:
        at, window = metric.at, metric.window_s
        for pm in metric.pods:
            cls = pm.priority_class
            if cls is None:
                ap = pods.get(pm.uid)
                cls = ap.pod.priority_class if ap is not None else None
            if cls == "prod":
                cpu += pm.cpu
                memory += pm.memory
    usage = table.pod_usage[i]
    for uid, ap in pods.items():
        if ap.pod.priority_class != "prod":
            continue
        gc, gm = pod_gap(ap.pod.estimate_ints, usage.get(uid), ap.assigned_at, at, window, windowed=False)
        cpu += gc
        memory += gm
    return cpu, memory


def be_budget_percent(metric: NodeMetric | None) -> int:
    """The SLO-driven BE budget's suppress threshold in ``metric.be_budget`` (percent of capacity, floored to
    a whole percent so that the filter never admits beyond it), 0 when the metric or the budget is absent
    (docs/scheduler.md "LoadAware and the BE budget")."""
    if metric is None or metric.be_budget is None:
        return 0
    return max(0, math.floor(metric.be_budget.threshold_percent))
