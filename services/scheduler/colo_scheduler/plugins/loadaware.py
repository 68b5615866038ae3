"""LoadAware (Filter, Score, Reserve): place by estimated real usage, REFERENCE.md §4.

Estimated node usage = reported node usage + the positive estimate gaps of pods
assigned but not yet reflected in the metric (kept by the table) + the incoming
pod's estimate (:func:`colo_scheduler.podinfo.estimate_pod`). Filter rejects a node
when round(100 × estimated / allocatable) > threshold for a resource with a
threshold; score = weighted mean of (allocatable − estimated) × 100 // allocatable.
Expired metrics (age ≥ expiry) are rejected when configured and score 0; nodes
without a metric pass and score 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from colo_scheduler.framework.interface import NODE_ADD, NODE_METRIC, POD_DELETE, CycleState
from colo_scheduler.podinfo import IntArray, PodInfo
from colo_scheduler.settings import SchedulerSettings
from colo_scheduler.table import UNLIMITED, BoolArray, NodeTable

EXPIRED = "node(s) nodeMetric expired"
LOAD_TOO_HIGH = ("load too high: cpu", "load too high: memory")


@dataclass(slots=True)
class _Cycle:
    fresh: BoolArray  # (n,) metric present and not expired
    expired: BoolArray  # (n,) metric present and expired
    unchecked_pass: BoolArray  # (n,) pass without checking thresholds
    cap2: IntArray  # (n, 2): pass iff 200 × estimated < cap2
    alloc: IntArray  # (n, 2) cpu milli-cores, memory bytes


class LoadAware:
    """The load-aware plugin; thresholds, weights and expiry from :class:`SchedulerSettings`."""

    name = "LoadAware"
    events = frozenset({NODE_ADD, NODE_METRIC, POD_DELETE})

    def __init__(self, settings: SchedulerSettings) -> None:
        self.thresholds = np.array(
            [settings.cpu_threshold_percent, settings.memory_threshold_percent], np.int64)
        self.weights = (settings.load_aware_cpu_weight, settings.load_aware_memory_weight)
        self.expiry_s = settings.metric_expiry_s
        self.filter_expired = settings.filter_expired_metrics

    def begin_cycle(self, state: CycleState) -> None:
        """Freshness masks at ``state.now`` and the integer threshold caps.

        round(100 e / a) ≤ t (halves up) ⇔ 200 e < (2t + 1) a, so no division per pod.
        """
        t = state.table
        at = t.metric_at
        has = ~np.isnan(at)
        with np.errstate(invalid="ignore"):
            expired = has & (state.now - at >= self.expiry_s)
        fresh = has & ~expired
        unchecked = ~has | (expired & (not self.filter_expired))
        alloc = t.alloc[:, :2].copy()
        cap2 = np.where(self.thresholds > 0, (2 * self.thresholds + 1) * alloc, UNLIMITED)
        state.data[self.name] = _Cycle(fresh, expired, unchecked, cap2, alloc)

    def _estimated(self, state: CycleState, pod: PodInfo) -> IntArray:
        est: IntArray = state.table.estimated_usage + pod.estimate
        return est

    def filter(self, state: CycleState, pod: PodInfo) -> BoolArray:
        """(n,) True where estimated usage stays within the thresholds. DaemonSet pods pass."""
        c: _Cycle = state.data[self.name]  # type: ignore[assignment]
        if pod.spec.daemonset:
            return np.ones(state.table.n, np.bool_)
        ok: BoolArray = (200 * self._estimated(state, pod) < c.cap2).all(axis=1)
        return (ok & c.fresh) | c.unchecked_pass

    def explain(self, state: CycleState, pod: PodInfo, rejected: BoolArray) -> dict[str, int]:
        """``"node(s) nodeMetric expired"`` and ``"load too high: cpu|memory"`` counts."""
        c: _Cycle = state.data[self.name]  # type: ignore[assignment]
        out: dict[str, int] = {}
        n_exp = int(np.count_nonzero(rejected & c.expired))
        if n_exp:
            out[EXPIRED] = n_exp
        over = 200 * self._estimated(state, pod) >= c.cap2
        for r, reason in enumerate(LOAD_TOO_HIGH):
            k = int(np.count_nonzero(rejected & c.fresh & over[:, r]))
            if k:
                out[reason] = k
        return out

    def score(self, state: CycleState, pod: PodInfo) -> IntArray:
        """(n,) 0..100; 0 without a fresh metric."""
        c: _Cycle = state.data[self.name]  # type: ignore[assignment]
        est = self._estimated(state, pod)
        a = c.alloc
        s = np.where((est <= a) & (a > 0), (a - est) * 100 // np.maximum(a, 1), 0)
        wc, wm = self.weights
        node: IntArray = (s[:, 0] * wc + s[:, 1] * wm) // (wc + wm)
        return np.where(c.fresh, node, 0)

    def reserve(self, table: NodeTable, pod: PodInfo, node: int, now: float) -> None:
        """Count the pod's estimate on the node until a metric reflects it."""
        table.track(pod, node, now)

    def unreserve(self, table: NodeTable, pod: PodInfo, node: int) -> None:
        """Stop counting the pod's estimate."""
        table.untrack(pod.uid)
