"""The batch-cpu offer of a node that runs the SLO-driven BE budget (NodeSLO ``be_budget``, docs/slo-manager.md
"BE budget"). Pure.

The node agent raises its CPU suppress threshold above the static one while the LS pods' interference allows
and reports it in ``NodeMetric.be_budget``. The batch-cpu formula (REFERENCE.md §3) then reclaims up to that
threshold instead of ``batch.cpu_reclaim_threshold_percent``, so that batch pods are offered what BE pods may
use: never above the node's threshold nor the ``max_percent`` of the NodeSLO rendered for it (a report made
under an older NodeSLO may be above a lowered ceiling), never below the static reclaim threshold. A node whose budget is off in
the NodeSLO rendered for it, that reports no budget, or whose budget is in ``fallback`` (signals missing: the
agent uses its static threshold) or whose report is older than :data:`BUDGET_STALE_S` is offered by the static
reclaim threshold.
"""

from __future__ import annotations

from colo.messages import NodeMetric, NodeSLO
from colo_slo_manager.settings import BatchConfig

BUDGET_STALE_S = 180.0
"""A budget reported longer ago than this (seconds; three NodeMetric report intervals of 60 s) is offered by the
static threshold: the agent that would cut it when LS pods suffer has stopped reporting (REFERENCE.md §11, a
stale metric from a dead agent), long before the metric itself is reset (``metric_stale_reset_s``, 15 min)."""


def cpu_reclaim_percent(batch: BatchConfig, metric: NodeMetric, slo: NodeSLO | None, now: float,
                        stale_after_s: float = BUDGET_STALE_S) -> int:
    """The CPU reclaim threshold (percent of capacity) of a node with ``metric`` under its rendered ``slo``:
    max(static, min(⌊reported threshold⌋, ``slo.be_budget.max_percent``)) while its BE budget is on and not in
    fallback, else the static ``batch.cpu_reclaim_threshold_percent`` (module doc). The rendered ``max_percent``
    caps the report: a state the agent computed under an older NodeSLO (a higher ceiling) is never offered. A
    metric older than ``stale_after_s`` at ``now`` (seconds) gets the static threshold (:data:`BUDGET_STALE_S`)."""
    static = batch.cpu_reclaim_threshold_percent
    budget = metric.be_budget
    if (slo is None or not slo.be_budget.enabled or budget is None or budget.phase == "fallback"
            or now - metric.at > stale_after_s):
        return static
    return max(static, min(int(budget.threshold_percent), slo.be_budget.max_percent, 100))
