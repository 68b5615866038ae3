"""BatchResourcesBalancedAllocation (Score): Kubernetes NodeResourcesBalancedAllocation on batch pods only.

A batch pod's resources are the node's batch-cpu and batch-memory (its kind columns, REFERENCE.md §1;
:mod:`colo_scheduler.plugins.noderesources`): fractions f = min((allocated + request) / allocatable, 1) of each
resource, score = int((1 − std(f)) × 100) (:func:`~colo_scheduler.plugins.noderesources.balanced_scores`). On a
node whose batch-memory is nearly all taken and whose batch-cpu is free, a CPU-heavy batch pod evens the
fractions and scores high, a memory-heavy one scores low: CPU-heavy batch pods go to memory-full nodes and the
memory left elsewhere stays for the memory-heavy ones, so neither resource is stranded in pieces no pod fits.

Pods of other priority classes (prod, mid) score 0 on every node: a constant changes no ranking, so their
placement stays with the default profile's scores. A batch pod requesting neither resource scores 0 too (as
Kubernetes skips a best-effort pod). Weights only choose the resources (default cpu and memory, meaning the
kind's columns), as in Kubernetes.
"""

from __future__ import annotations

import numpy as np

from colo_scheduler.framework.interface import CycleState, IntpArray
from colo_scheduler.plugins.noderesources import NodeResourcesBalancedAllocation, ResourcesArgs
from colo_scheduler.podinfo import IntArray, PodInfo

BATCH_CLASSES = frozenset({"batch", "free"})
"""The priority classes whose pods this plugin scores (koord-batch, koord-free: the pods on batch resources)."""


class BatchResourcesBalancedAllocation:
    """Score: balanced batch-cpu / batch-memory fractions for batch pods (module docstring); configured by
    :class:`ResourcesArgs` (default cpu 1, memory 1)."""

    name = "BatchResourcesBalancedAllocation"
    events: frozenset[str] = frozenset()
    app_blind = True
    """Scores read the pod's request and priority class, never its app (classcache.py)."""

    def __init__(self, args: ResourcesArgs | None = None) -> None:
        self._balanced = NodeResourcesBalancedAllocation(args)

    def score(self, state: CycleState, pod: PodInfo) -> IntArray:
        """(n,) int64 in 0..100; zeros for a pod that is not batch or free."""
        if pod.priority_class not in BATCH_CLASSES:
            return np.zeros(state.table.n, np.int64)
        return self._balanced.score(state, pod)

    def score_rows(self, state: CycleState, pod: PodInfo, rows: IntpArray) -> IntArray:
        """(len(rows),) :meth:`score` on ``rows`` only."""
        if pod.priority_class not in BATCH_CLASSES:
            return np.zeros(len(rows), np.int64)
        return self._balanced.score_rows(state, pod, rows)
