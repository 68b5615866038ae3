"""When to publish a node's batch/mid allocatable (REFERENCE.md §2, §3). Pure functions.

The scheduler must not see churn on every metric report: a new value is published
only when it differs from the last published one by more than the diff threshold,
or the last publish is too old. A node whose metric went stale is reset once.
"""

from __future__ import annotations

from colo.messages import NodeMetric, NodeResource
from colo_slo_manager.allocatable import Allocatable
from colo_slo_manager.memory_pressure import pressure_reason


def differs(old: int, new: int, threshold_percent: int) -> bool:
    """True when ``new`` differs from ``old`` by more than ``threshold_percent`` of ``old``.

    Relative and strict, as Koordinator's ``resourceDiffThreshold`` (REFERENCE.md §3):
    |new − old| × 100 > old × threshold. From 0, any change counts.
    """
    if old <= 0:
        return new != old
    return abs(new - old) * 100 > old * threshold_percent


def metric_is_stale(metric: NodeMetric, now: float, stale_after_s: float) -> bool:
    """True when the metric is older than ``stale_after_s`` seconds at ``now`` (REFERENCE.md §2: 15 min)."""
    return now - metric.at > stale_after_s


def publish_reason(last: NodeResource | None, new: Allocatable, now: float,
                   diff_threshold_percent: int, max_age_s: float) -> str:
    """Why ``new`` should be published given the ``last`` published value, or ``""`` to keep quiet.

    Reasons: ``initial`` (nothing published yet), ``recovered`` (last was a reset), BE memory pressure
    started or ended or batch-memory dropped to 0 (:func:`~colo_slo_manager.memory_pressure.pressure_reason`,
    whatever the threshold),
    ``changed <field>`` (relative diff above the threshold), ``refresh`` (last publish
    older than ``max_age_s`` seconds). Units: milli-cores, bytes, seconds.
    """
    if last is None:
        return "initial"
    if last.reset:
        return "recovered"
    urgent = pressure_reason(last, new)
    if urgent:
        return urgent
    # field by field rather than by getattr: this runs for every node on every tick
    if differs(last.batch_cpu, new.batch_cpu, diff_threshold_percent):
        return "changed batch_cpu"
    if differs(last.batch_memory, new.batch_memory, diff_threshold_percent):
        return "changed batch_memory"
    if differs(last.mid_cpu, new.mid_cpu, diff_threshold_percent):
        return "changed mid_cpu"
    if differs(last.mid_memory, new.mid_memory, diff_threshold_percent):
        return "changed mid_memory"
    if now - last.at > max_age_s:
        return "refresh"
    return ""


def reset_resource(node: str, now: float, reason: str) -> NodeResource:
    """The NodeResource that withdraws every batch/mid resource of ``node`` (all zeros, ``reset``)."""
    return NodeResource(node=node, reset=True, reason=reason, at=now)


def decide(node: str, last: NodeResource | None, metric: NodeMetric | None, computed: Allocatable | None,
           now: float, *, enabled: bool, diff_threshold_percent: int, max_age_s: float,
           stale_after_s: float) -> NodeResource | None:
    """The NodeResource to publish for ``node`` at ``now``, or None.

    * colocation disabled (``enabled`` False): withdraw resources published earlier, once;
    * no metric (or nothing ``computed``): nothing — the node offers no batch/mid resources;
    * metric older than ``stale_after_s``: a reset once (not again while it stays reset);
    * otherwise ``computed`` when :func:`publish_reason` gives a reason.
    """
    if not enabled:
        if last is not None and not last.reset:
            return reset_resource(node, now, "colocation disabled")
        return None
    if metric is None:
        return None
    if metric_is_stale(metric, now, stale_after_s):
        if last is not None and last.reset:
            return None
        return reset_resource(node, now, f"metric stale: {now - metric.at:.0f}s old > {stale_after_s:.0f}s")
    if computed is None:
        return None
    reason = publish_reason(last, computed, now, diff_threshold_percent, max_age_s)
    if not reason:
        return None
    return NodeResource(node=node, batch_cpu=computed.batch_cpu, batch_memory=computed.batch_memory,
                        mid_cpu=computed.mid_cpu, mid_memory=computed.mid_memory, reason=reason, at=now,
                        memory_pressure=computed.memory_pressure)
