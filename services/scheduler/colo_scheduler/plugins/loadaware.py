"""LoadAware (Filter, Score, Reserve): place by estimated real usage, REFERENCE.md §4.

Estimated node usage E = reported node usage + the positive estimate gaps of pods
assigned but not yet reflected in the metric (kept by the table); the incoming pod's
estimate p comes from :func:`colo_scheduler.podinfo.estimate_pod`.

* Filter: reject when round(100 × (E + p) / allocatable) > threshold for a resource
  with a threshold (> 0); equality passes. In integers, with halves rounded up:
  round(100 x / a) ≤ t ⇔ 200 x < (2t + 1) a. Nodes whose metric expired (age ≥ expiry)
  are rejected when ``filter_expired_metrics``, else pass unchecked; nodes without a
  metric pass; DaemonSet pods pass.
* Score: per resource (a − E − p) × 100 // a (0 when over), weighted mean (weights
  1/1 by default); 0 without a fresh metric.

Per cycle the plugin keeps ``slack = (2t + 1) a − 200 E`` and ``room = a − E`` per node
and refreshes the one row a Reserve changes, so a pod costs two array passes to filter.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from colo_scheduler.framework.interface import NODE_ADD, NODE_METRIC, POD_DELETE, CycleState
from colo_scheduler.podinfo import IntArray, PodInfo
from colo_scheduler.settings import SchedulerSettings
from colo_scheduler.table import BoolArray, NodeTable

EXPIRED = "node(s) nodeMetric expired"
LOAD_TOO_HIGH = ("load too high: cpu", "load too high: memory")
LOAD_LABELS: tuple[str, ...] = ("", LOAD_TOO_HIGH[0], LOAD_TOO_HIGH[1], ", ".join(LOAD_TOO_HIGH), EXPIRED)
"""Reason code → label: 0 passes, 1 cpu, 2 memory, 3 both (bit per resource), 4 metric expired."""

_BIG = np.int64(2**61)


@dataclass(slots=True)
class _Cycle:
    fresh: BoolArray  # (n,) metric present and not expired
    expired: BoolArray  # (n,) metric present and expired
    unchecked: BoolArray  # (n,) pass without checking thresholds
    cap2: IntArray  # (n, 2) (2t + 1) × allocatable, or _BIG without a threshold
    alloc: IntArray  # (n, 2) cpu milli-cores, memory bytes
    divisor: IntArray  # (n, 2) allocatable floored at 1
    slack: IntArray  # (n, 2) pass iff 200 p < slack
    room: IntArray  # (n, 2) a − E on fresh rows, −_BIG elsewhere (score 0)


class LoadAware:
    """The load-aware plugin; thresholds, weights and expiry from :class:`SchedulerSettings`."""

    name = "LoadAware"
    events = frozenset({NODE_ADD, NODE_METRIC, POD_DELETE})

    def __init__(self, settings: SchedulerSettings) -> None:
        self.thresholds = np.array(
            [settings.cpu_threshold_percent, settings.memory_threshold_percent], np.int64)
        self.weights = np.array([settings.load_aware_cpu_weight, settings.load_aware_memory_weight],
                                np.int64)
        self.weight_sum = int(self.weights.sum())
        self.expiry_s = settings.metric_expiry_s
        self.filter_expired = settings.filter_expired_metrics
        self._cycle: _Cycle | None = None

    def begin_cycle(self, state: CycleState) -> None:
        """Freshness masks at ``state.now``, threshold caps, slack and room of every node."""
        t = state.table
        at = t.metric_at
        has = ~np.isnan(at)
        with np.errstate(invalid="ignore"):
            expired = has & (state.now - at >= self.expiry_s)
        fresh = has & ~expired
        unchecked = ~has | (expired & (not self.filter_expired))
        alloc = t.alloc[:, :2].copy()
        cap2 = np.where(self.thresholds > 0, (2 * self.thresholds + 1) * alloc, _BIG)
        c = _Cycle(fresh, expired, unchecked, cap2, alloc, np.maximum(alloc, 1),
                   np.empty_like(alloc), np.empty_like(alloc))
        self._cycle = c
        self._refresh(t, slice(None))
        state.data[self.name] = c

    def _refresh(self, table: NodeTable, rows: slice | int) -> None:
        c = self._cycle
        if c is None:
            return
        if isinstance(rows, int):
            if rows >= len(c.slack):
                return  # a node added since the cycle began: the next begin_cycle covers it
            if c.fresh[rows]:  # stale rows keep their constant slack/room
                est = table.estimated_usage[rows]
                c.slack[rows] = c.cap2[rows] - 200 * est
                c.room[rows] = c.alloc[rows] - est
            return
        est = table.estimated_usage[rows]
        fresh = c.fresh[rows, None]
        c.slack[rows] = np.where(fresh, c.cap2[rows] - 200 * est,
                                 np.where(c.unchecked[rows, None], _BIG, -_BIG))
        c.room[rows] = np.where(fresh, c.alloc[rows] - est, -_BIG)

    def filter(self, state: CycleState, pod: PodInfo) -> BoolArray | None:
        """(n,) True where estimated usage stays within the thresholds; None for DaemonSet pods."""
        if pod.spec.daemonset:
            return None
        c: _Cycle = state.data[self.name]  # type: ignore[assignment]
        ok: BoolArray = np.asarray((c.slack > pod.estimate200).all(axis=1))
        return ok

    def filter_rows(self, state: CycleState, pod: PodInfo, rows: npt.NDArray[np.intp]) -> BoolArray:
        """(len(rows),) :meth:`filter` on ``rows`` only."""
        if pod.spec.daemonset:
            return np.ones(len(rows), np.bool_)
        c: _Cycle = state.data[self.name]  # type: ignore[assignment]
        ok: BoolArray = np.asarray((c.slack[rows] > pod.estimate200).all(axis=1))
        return ok

    def reason_codes(self, state: CycleState, pod: PodInfo,
                     rows: npt.NDArray[np.intp]) -> tuple[npt.NDArray[np.uint8], tuple[str, ...]]:
        """(len(rows),) codes into :data:`LOAD_LABELS`: expired metric (when filtered), else a bit per
        resource over its threshold; 0 where the row passes."""
        c: _Cycle = state.data[self.name]  # type: ignore[assignment]
        if pod.spec.daemonset:
            return np.zeros(len(rows), np.uint8), LOAD_LABELS
        over = c.slack[rows] <= pod.estimate200
        codes = over[:, 0].astype(np.uint8) + 2 * over[:, 1].astype(np.uint8)
        if self.filter_expired:
            codes[c.expired[rows]] = 4
        return codes, LOAD_LABELS

    def pool_filter(self, state: CycleState, pods: Sequence[PodInfo], rows: npt.NDArray[np.intp]) -> BoolArray:
        """(P, d) :meth:`filter` of every pod on every row of ``rows`` (a queueing hint, hints.py)."""
        c: _Cycle = state.data[self.name]  # type: ignore[assignment]
        est200 = np.stack([p.estimate200 for p in pods])
        ok: BoolArray = np.asarray((c.slack[rows][None, :, :] > est200[:, None, :]).all(axis=2))
        ok |= np.array([p.spec.daemonset for p in pods], np.bool_)[:, None]
        return ok

    def explain(self, state: CycleState, pod: PodInfo, rejected: BoolArray) -> dict[str, int]:
        """``"node(s) nodeMetric expired"`` and ``"load too high: cpu|memory"`` counts."""
        c: _Cycle = state.data[self.name]  # type: ignore[assignment]
        out: dict[str, int] = {}
        n_exp = int(np.count_nonzero(rejected & c.expired))
        if n_exp and self.filter_expired:
            out[EXPIRED] = n_exp
        over = c.slack <= pod.estimate200
        for r, reason in enumerate(LOAD_TOO_HIGH):
            k = int(np.count_nonzero(rejected & c.fresh & over[:, r]))
            if k:
                out[reason] = k
        return out

    def score(self, state: CycleState, pod: PodInfo) -> IntArray:
        """(n,) 0..100; 0 without a fresh metric."""
        c: _Cycle = state.data[self.name]  # type: ignore[assignment]
        s = np.maximum(c.room - pod.estimate, 0) * 100 // c.divisor
        out: IntArray = (s @ self.weights) // self.weight_sum
        return out

    def filter_node(self, state: CycleState, pod: PodInfo, i: int) -> bool:
        """:meth:`filter` on row ``i`` with Python ints."""
        if pod.spec.daemonset:
            return True
        c: _Cycle = state.data[self.name]  # type: ignore[assignment]
        s_cpu, s_mem = c.slack[i].tolist()
        e_cpu, e_mem = pod.estimate_ints
        return bool(s_cpu > 200 * e_cpu and s_mem > 200 * e_mem)

    def score_node(self, state: CycleState, pod: PodInfo, i: int) -> int:
        """:meth:`score` on row ``i`` with Python ints."""
        c: _Cycle = state.data[self.name]  # type: ignore[assignment]
        r_cpu, r_mem = c.room[i].tolist()
        d_cpu, d_mem = c.divisor[i].tolist()
        e_cpu, e_mem = pod.estimate_ints
        w_cpu, w_mem = self.weights.tolist()
        s = (max(r_cpu - e_cpu, 0) * 100 // d_cpu) * w_cpu + (max(r_mem - e_mem, 0) * 100 // d_mem) * w_mem
        return int(s // self.weight_sum)

    def score_rows(self, state: CycleState, pod: PodInfo, rows: npt.NDArray[np.intp]) -> IntArray:
        """(len(rows),) :meth:`score` on ``rows`` only."""
        c: _Cycle = state.data[self.name]  # type: ignore[assignment]
        s = np.maximum(c.room[rows] - pod.estimate, 0) * 100 // c.divisor[rows]
        out: IntArray = (s @ self.weights) // self.weight_sum
        return out

    def reserve(self, table: NodeTable, pod: PodInfo, node: int, now: float) -> None:
        """Count the pod's estimate on the node until a metric reflects it."""
        table.track(pod, node, now)
        self._refresh(table, node)

    def unreserve(self, table: NodeTable, pod: PodInfo, node: int) -> None:
        """Stop counting the pod's estimate."""
        table.untrack(pod.uid)
        self._refresh(table, node)
