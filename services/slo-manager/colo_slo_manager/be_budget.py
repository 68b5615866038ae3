"""The batch-cpu offer of a node that runs the SLO-driven BE budget (NodeSLO ``be_budget``, docs/slo-manager.md
"BE budget"). Pure.

The node agent raises its CPU suppress threshold above the static one while the LS pods' interference allows
and reports it in ``NodeMetric.be_budget``. The batch-cpu formula (REFERENCE.md §3) then reclaims up to that
threshold instead of ``batch.cpu_reclaim_threshold_percent``, so that batch pods are offered what BE pods may
use: never above the node's threshold, never below the static reclaim threshold. A node whose budget is off in
the NodeSLO rendered for it, that reports no budget, or whose budget is in ``fallback`` (signals missing: the
agent uses its static threshold) is offered by the static reclaim threshold.
"""

from __future__ import annotations

from colo.messages import NodeMetric, NodeSLO
from colo_slo_manager.settings import BatchConfig


def cpu_reclaim_percent(batch: BatchConfig, metric: NodeMetric, slo: NodeSLO | None) -> int:
    """The CPU reclaim threshold (percent of capacity) of a node with ``metric`` under its rendered ``slo``:
    max(static, ⌊reported threshold⌋) while its BE budget is on and not in fallback, else the static
    ``batch.cpu_reclaim_threshold_percent`` (module doc)."""
    static = batch.cpu_reclaim_threshold_percent
    budget = metric.be_budget
    if slo is None or not slo.be_budget.enabled or budget is None or budget.phase == "fallback":
        return static
    return max(static, min(int(budget.threshold_percent), 100))
