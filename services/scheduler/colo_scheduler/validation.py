"""Checks of the messages the scheduler consumes: pods, nodes and metrics it must not schedule with.

Each ``*_problem`` function returns '' for a usable message, else the reason it is dead-lettered
(docs/scheduler.md "The service").
"""

from __future__ import annotations

import math
import unicodedata

import msgspec

from colo import subjects
from colo.messages import RESOURCE_NAMES, NodeMetric, PodSpec, Resources

MAX_QUANTITY = 2**50
"""Largest accepted resource amount (milli-cores, bytes, count). Larger values are absurd and
would overflow the int64 columns of the node table once summed or scaled (×200 estimates)."""

MAX_PRIORITY = 2**31 - 1
"""Kubernetes pod priority is an int32."""


def out_of_range(r: Resources) -> list[str]:
    """Names of ``r``'s fields outside 0..:data:`MAX_QUANTITY`."""
    values = msgspec.structs.astuple(r)
    if min(values) >= 0 and max(values) <= MAX_QUANTITY:  # the usual case, without a getattr per field
        return []
    return [n for n in RESOURCE_NAMES if not 0 <= getattr(r, n) <= MAX_QUANTITY]


def pod_problem(spec: PodSpec) -> str:
    """Why an admitted pod cannot be scheduled ('' when it can): empty uid or one with a control
    character (it goes into the JetStream message id of its events, a header), quantities out of
    0..:data:`MAX_QUANTITY`, priority outside int32."""
    bad = out_of_range(spec.requests) + out_of_range(spec.limits)
    if spec.priority is not None and not -MAX_PRIORITY - 1 <= spec.priority <= MAX_PRIORITY:
        bad.append("priority")
    uid = spec.uid
    # printable ASCII holds no control character: the per-character check only for other uids
    if not (uid.isascii() and uid.isprintable()) and any(unicodedata.category(c) == "Cc" for c in uid):
        return f"invalid pod {spec.uid!r}: the uid holds a control character"
    if spec.uid and not bad:
        return ""
    return (f"invalid pod {spec.uid!r}: empty uid or negative or out of range {bad}"
            f" (resources 0..{MAX_QUANTITY}, priority int32)")


def node_problem(name: str, allocatable: Resources | None = None, capacity: Resources | None = None) -> str:
    """Why a node cannot be scheduled on ('' when it can): a name that is not one NATS subject token
    (letters, digits, ``-``, ``_``; its pods' PodBound events go to ``pod.bound.<node>``), or
    quantities out of 0..:data:`MAX_QUANTITY`."""
    try:
        subjects.POD_BOUND.format(node=name)
    except ValueError:
        return (f"invalid node {name!r}: the name must be one subject token (letters, digits, '-', '_'), "
                f"it names the subject pod.bound.<node>")
    bad = (out_of_range(allocatable) if allocatable is not None else []) + (
        out_of_range(capacity) if capacity is not None else [])
    if bad:
        return f"invalid node {name!r}: allocatable/capacity out of range 0..{MAX_QUANTITY} {bad}"
    return ""


def metric_problem(metric: NodeMetric, now: float, max_ahead_s: float) -> str:
    """Why a NodeMetric cannot be used ('' when it can): a usage (node, system, host apps, a pod's,
    an aggregated statistic's) out of 0..:data:`MAX_QUANTITY` (larger values overflow the int64
    estimates: the load filter compares 200 × usage), a negative window, a non-finite time, or a
    time more than ``max_ahead_s`` (the metric expiry) ahead of the scheduler's clock: such a metric
    would stay fresh past its life, and every correct metric of the node, being older, would be
    dropped until the clock caught up."""
    bad = [name for name, u in (("node_usage", metric.node_usage), ("system_usage", metric.system_usage),
                                ("host_apps_usage", metric.host_apps_usage))
           if not (0 <= u.cpu <= MAX_QUANTITY and 0 <= u.memory <= MAX_QUANTITY)]
    bad += [f"pods[{p.uid!r}]" for p in metric.pods if not (0 <= p.cpu <= MAX_QUANTITY and 0 <= p.memory <= MAX_QUANTITY)]
    bad += [f"aggregated[{a.stat} {a.window_s} s]" for a in metric.aggregated
            if not (0 <= a.cpu <= MAX_QUANTITY and 0 <= a.memory <= MAX_QUANTITY and a.window_s >= 0)]
    if bad:
        return f"invalid NodeMetric of {metric.node!r}: usage out of range 0..{MAX_QUANTITY} in {', '.join(bad)}"
    if not math.isfinite(metric.at):
        return f"invalid NodeMetric of {metric.node!r}: non-finite time"
    if not (math.isfinite(metric.window_s) and metric.window_s >= 0):
        return (f"invalid NodeMetric of {metric.node!r}: aggregation window_s {metric.window_s!r} (must be a finite "
                f"number of seconds >= 0; a negative window counts every fresh pod as held by the node figure)")
    if metric.at > now + max_ahead_s:
        return (f"invalid NodeMetric of {metric.node!r}: dated {metric.at - now:.0f} s ahead of the scheduler's "
                f"clock (more than metric_expiry_s = {max_ahead_s:g} s; a skewed clock or a wrong unit?)")
    return ""
