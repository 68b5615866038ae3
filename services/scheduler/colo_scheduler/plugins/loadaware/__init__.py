"""LoadAware (Filter, Score, Reserve): place by estimated real usage, REFERENCE.md §4 and Koordinator's
``LoadAwareScheduling`` plugin (``pkg/scheduler/plugins/loadaware``, args LoadAwareSchedulingArgs).

Estimated node usage E = reported node usage + the gaps of the assigned pods: the part of their
estimate the metric's windowed node figure does not contain yet (:mod:`colo_scheduler.estimation`,
kept by the table); the incoming pod's estimate p comes from
:func:`colo_scheduler.podinfo.estimate_pod` (``estimated_scaling_factors``).

* Filter: reject when round(100 × (E + p) / allocatable) > threshold for a resource with a
  threshold (> 0); equality passes. In integers, with halves rounded up:
  round(100 x / a) ≤ t ⇔ 200 x < (2t + 1) a. Which thresholds and which usage, per node:

  - **prod-only** (``prod_usage_thresholds``, for incoming prod pods on nodes that have them):
    E = Σ reported usage of the node's prod pods + the gaps of assigned prod pods against those
    figures (REFERENCE.md §4 rule restricted to prod pods); replaces the checks below.
  - **aggregated** (``aggregated.usage_thresholds`` with ``usage_aggregation_type``): E = the
    node's aggregated usage statistic (e.g. p95) over ``usage_aggregated_duration_s`` (0 = the
    longest window reported; missing → the node passes, as Koordinator) + gaps; replaces the
    plain thresholds.
  - otherwise ``usage_thresholds`` on the node usage.

  - **BE pods** (``follow_be_budget``, a Colo extension): the CPU threshold of the check above is
    raised to the node's SLO-driven BE budget threshold (``NodeMetric.be_budget``) where higher.

  A node may override the thresholds with the annotation
  ``scheduling.koordinator.sh/custom-usage-thresholds`` (:func:`parse_custom_thresholds`;
  Koordinator CustomUsageThresholds JSON); an unreadable annotation falls back to the args.
  Nodes whose metric expired (age ≥ ``node_metric_expiration_seconds``) are rejected when
  ``filter_expired_node_metrics``, else pass unchecked; nodes without a metric pass;
  DaemonSet pods pass.
* Score: per resource (a − E − p) × 100 // a (0 when over), weighted mean with
  ``resource_weights`` (1/1); 0 without a fresh metric. E is the aggregated usage with
  ``aggregated.score_aggregation_type`` (falling back to the node usage when not reported),
  the prod-only usage for prod pods with ``score_according_prod_usage``.

Per cycle the plugin keeps ``slack = (2t + 1) a − 200 E`` (for all pods and for prod pods) and
``room = a − E`` per node and refreshes the one row a Reserve changes, so a pod costs two array
passes to filter.

Modules: :mod:`.args` (arguments, defaults from the settings), :mod:`.thresholds` (per-node
thresholds, the annotation), :mod:`.usage` (aggregated and prod-only usage), :mod:`.rows` (the
per-cycle arrays and their refresh), :mod:`.plugin` (Filter, Score, Reserve).
"""

from __future__ import annotations

from colo_scheduler.plugins.loadaware.args import (
    AGGREGATION_TYPES,
    LOAD_RESOURCES,
    AggregatedArgs,
    LoadAwareArgs,
    default_args,
)
from colo_scheduler.plugins.loadaware.plugin import (
    AGGREGATED,
    AGGREGATED_TOO_HIGH,
    EXPIRED,
    EXPIRED_CODE,
    LOAD_LABELS,
    LOAD_TOO_HIGH,
    PROD,
    PROD_TOO_HIGH,
    REGULAR,
    LoadAware,
)
from colo_scheduler.plugins.loadaware.rows import LoadCycle, LoadRows
from colo_scheduler.plugins.loadaware.thresholds import (
    CUSTOM_THRESHOLDS_ANNOTATION,
    NodeThresholds,
    Pair,
    args_thresholds,
    parse_custom_thresholds,
    parse_duration_s,
)
from colo_scheduler.plugins.loadaware.usage import aggregated_usage, be_budget_percent, prod_usage

__all__ = [
    "AGGREGATED", "AGGREGATED_TOO_HIGH", "AGGREGATION_TYPES", "CUSTOM_THRESHOLDS_ANNOTATION", "EXPIRED",
    "EXPIRED_CODE", "LOAD_LABELS", "LOAD_RESOURCES", "LOAD_TOO_HIGH", "PROD", "PROD_TOO_HIGH", "REGULAR",
    "AggregatedArgs", "LoadAware", "LoadAwareArgs", "LoadCycle", "LoadRows", "NodeThresholds", "Pair",
    "aggregated_usage", "args_thresholds", "be_budget_percent", "default_args", "parse_custom_thresholds", "parse_duration_s",
    "prod_usage",
]
