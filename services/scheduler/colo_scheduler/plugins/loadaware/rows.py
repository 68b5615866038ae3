"""LoadAware's per-cycle rows: freshness of each node's metric, its thresholds, and the slack and room
arrays the filter and score read, built in full or for the rows the table logged as changed, and
refreshed row by row after a Reserve (REFERENCE.md §4; docs/scheduler.md "Per-cycle state")."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from colo_scheduler.framework.interface import CycleState
from colo_scheduler.plugins.loadaware.args import LoadAwareArgs
from colo_scheduler.plugins.loadaware.thresholds import (
    CUSTOM_THRESHOLDS_ANNOTATION,
    NodeThresholds,
    args_thresholds,
    parse_custom_thresholds,
)
from colo_scheduler.plugins.loadaware.usage import aggregated_usage, be_budget_percent, prod_usage
from colo_scheduler.podinfo import IntArray
from colo_scheduler.table import FLOAT_EXACT_BELOW, BoolArray, FloatArray, NodeTable

_BIG = np.int64(2**61)


def _cap2(t: IntArray, alloc: IntArray) -> IntArray:
    # a resource without threshold, or that the node has none of, is not checked (Koordinator)
    out: IntArray = np.where((t > 0) & (alloc > 0), (2 * t + 1) * alloc, _BIG)
    return out


def _cap_be(cap_all: IntArray, be_t: IntArray, alloc: IntArray) -> IntArray:
    """(n, 2) the caps for BE pods: the CPU cap raised to the node's BE budget threshold ``be_t`` (n,)
    percent where that is higher (0 = no budget: the plain cap), memory as ``cap_all``."""
    out = cap_all.copy()
    raised = (2 * be_t + 1) * alloc[:, 0]
    out[:, 0] = np.where((be_t > 0) & (alloc[:, 0] > 0), np.maximum(cap_all[:, 0], raised), cap_all[:, 0])
    return out


@dataclass(slots=True)
class LoadCycle:
    """The arrays one cycle's filter and score read, ``n`` = nodes: the filter passes a pod of
    estimate p (cpu milli-cores, memory bytes) on a row iff 200 p < slack for both resources; the score
    takes room − p. Rows without a fresh metric hold constants (pass or fail, score 0)."""

    fresh: BoolArray  # (n,) metric present and not expired
    expired: BoolArray  # (n,) metric present and expired
    unchecked: BoolArray  # (n,) pass without checking thresholds
    alloc: IntArray  # (n, 2) cpu milli-cores, memory bytes
    divisor: IntArray  # (n, 2) allocatable floored at 1
    cap_all: IntArray  # (n, 2) (2t + 1) × allocatable of the plain or aggregated thresholds, _BIG = none
    agg_rows: BoolArray  # (n,) the aggregated check applies
    agg_base: IntArray  # (n, 2) aggregated usage (rows of agg_rows)
    has_basis: BoolArray  # (n,) False where the aggregated usage is not reported (pass)
    score_base: IntArray | None  # (n, 2) aggregated usage for the score, None = node usage
    prod_rows: BoolArray  # (n,) the node has prod-only thresholds
    cap_prod: IntArray  # (n, 2)
    prod_est: IntArray  # (n, 2) prod-only estimated usage
    slack_all: IntArray  # (n, 2) pass iff 200 p < slack
    slack_prod: IntArray  # (n, 2) the same for prod pods
    room_all: IntArray  # (n, 2) a − E on fresh rows, −_BIG elsewhere (score 0)
    room_prod: IntArray  # (n, 2) the same for prod pods
    cap_be: IntArray  # (n, 2) cap_all with the CPU cap raised to the node's BE budget (follow_be_budget)
    slack_be: IntArray  # (n, 2) the filter's slack for BE pods
    fdiv: tuple[FloatArray, FloatArray] | None = None  # divisor columns as float64, None = not exact (_weighted)


class LoadRows:
    """The :class:`LoadCycle` of the plugin named ``name`` with arguments ``args``, kept across
    cycles: :meth:`begin_cycle` puts it in ``state.data[name]``."""

    def __init__(self, args: LoadAwareArgs, name: str) -> None:
        a = self.args = args
        self.name = name
        self.expiry_s = a.node_metric_expiration_seconds
        self.filter_expired = a.filter_expired_node_metrics
        self.base = args_thresholds(a)
        self.score_prod = a.score_according_prod_usage
        self.score_stat = a.aggregated.score_aggregation_type
        self.score_duration_s = a.aggregated.score_aggregated_duration_s
        self.follow_be_budget = a.follow_be_budget
        self._parsed: dict[str, NodeThresholds] = {}
        self.annotation_errors: dict[str, str] = {}
        """Node name → why its threshold annotation was ignored."""
        self._prod_active = False
        self._cycle: LoadCycle | None = None
        self._cycle_seq = -1
        self._cycle_version = -1

    def node_thresholds(self, table: NodeTable, i: int) -> NodeThresholds:
        """Thresholds of row ``i``: its annotation's (:func:`parse_custom_thresholds`) or the args'."""
        text = table.specs[i].annotations.get(CUSTOM_THRESHOLDS_ANNOTATION)
        if text is None:
            return self.base
        got = self._parsed.get(text)
        if got is None:
            try:
                got = parse_custom_thresholds(text, self.args)
                self.annotation_errors.pop(table.names[i], None)
            except ValueError as exc:
                self.annotation_errors[table.names[i]] = str(exc)
                got = self.base
            self._parsed[text] = got
        return got

    def begin_cycle(self, state: CycleState) -> None:
        """Freshness masks at ``state.now``, per-node thresholds, slack and room of every node.

        After the first cycle only the rows that changed are recomputed: rows whose spec, allocatable
        or metric the table logged since the previous cycle (:meth:`NodeTable.node_changes_since`;
        Reserve and Unreserve refresh their row at once) and rows whose metric became expired (or
        fresh); the latter are touched in the table's change log, also when everything is recomputed
        (a new table version — labels, taints, annotations, a new node — or a long change log)."""
        t = state.table
        prev = self._cycle
        changes = t.node_changes_since(self._cycle_seq) if prev is not None else None
        if (prev is None or changes is None or len(prev.fresh) != t.n or self._cycle_version != t.version
                or len(changes) > t.n // 4):
            self._full_cycle(state)
            c = self._cycle
            if prev is not None and c is not None and len(prev.fresh) == t.n:
                # class entries kept across cycles re-check logged rows only: log the rows whose
                # metric expired (or became fresh) here too, as the incremental path does
                for i in np.flatnonzero((c.fresh != prev.fresh) | (c.expired != prev.expired)).tolist():
                    t.touch(i)
        else:
            self._rows_cycle(state, prev, changes)
        self._cycle_seq = t.node_change_seq
        self._cycle_version = t.version

    def _freshness(self, t: NodeTable, now: float) -> tuple[BoolArray, BoolArray, BoolArray]:
        at = t.metric_at
        has = ~np.isnan(at)
        with np.errstate(invalid="ignore"):
            expired = has & (now - at >= self.expiry_s)
        fresh = has & ~expired
        unchecked = ~has | (expired & (not self.filter_expired))
        return fresh, expired, unchecked

    def _rows_cycle(self, state: CycleState, c: LoadCycle, changes: list[int]) -> None:
        t = state.table
        fresh, expired, unchecked = self._freshness(t, state.now)
        flipped = np.flatnonzero((fresh != c.fresh) | (expired != c.expired))
        c.fresh, c.expired, c.unchecked = fresh, expired, unchecked
        rows = set(changes)
        rows.update(flipped.tolist())
        if rows:
            idx = np.fromiter(sorted(rows), np.intp, len(rows))
            self._derive_rows(t, c, idx)
            self._refresh(t, idx)
            for i in flipped.tolist():
                t.touch(i)  # class caches re-check these rows
        state.data[self.name] = c

    def _derive_rows(self, t: NodeTable, c: LoadCycle, idx: npt.NDArray[np.intp]) -> None:
        # the per-node values the full cycle computes, for a few rows: thresholds with one array
        # pass over the rows (as _full_cycle), statistics of the metric per row where they apply
        alloc = t.alloc[idx, :2]
        c.alloc[idx] = alloc
        c.divisor[idx] = np.maximum(alloc, 1)
        if c.fdiv is not None:
            if len(alloc) and int(alloc.max()) >= FLOAT_EXACT_BELOW:
                c.fdiv = None
            else:
                c.fdiv[0][idx] = c.divisor[idx, 0]
                c.fdiv[1][idx] = c.divisor[idx, 1]
        rows = idx.tolist()
        m = len(rows)
        profiles = [self.node_thresholds(t, i) for i in rows]
        base = self.base
        if base.aggregated is None and base.prod is None and c.score_base is None and not self._prod_active and all(
                p is base for p in profiles):  # plain thresholds everywhere: arrays only, no per-row statistics
            c.agg_rows[idx] = False
            c.cap_all[idx] = _cap2(np.array(base.usage, np.int64).reshape(1, 2), alloc)
            c.cap_be[idx] = _cap_be(c.cap_all[idx], self._be_thresholds(t, rows), alloc)
            c.prod_rows[idx] = False
            c.cap_prod[idx] = _BIG
            c.has_basis[idx] = True
            c.agg_base[idx] = 0
            return
        agg_rows = np.array([p.aggregated is not None for p in profiles], np.bool_)
        agg_t = np.array([p.aggregated[0] if p.aggregated else (0, 0) for p in profiles], np.int64).reshape(m, 2)
        usage_t = np.array([p.usage for p in profiles], np.int64).reshape(m, 2)
        c.agg_rows[idx] = agg_rows
        c.cap_all[idx] = np.where(agg_rows[:, None], _cap2(agg_t, alloc), _cap2(usage_t, alloc))
        c.cap_be[idx] = _cap_be(c.cap_all[idx], self._be_thresholds(t, rows), alloc)
        c.prod_rows[idx] = np.array([p.prod is not None for p in profiles], np.bool_)
        c.cap_prod[idx] = _cap2(np.array([p.prod or (0, 0) for p in profiles], np.int64).reshape(m, 2), alloc)
        c.has_basis[idx] = True
        c.agg_base[idx] = 0
        fresh = c.fresh[idx].tolist()
        for k, i in enumerate(rows):
            p = profiles[k]
            if p.aggregated is not None and fresh[k]:
                got = aggregated_usage(t.metrics[i], p.aggregated[1], p.aggregated[2])
                if got is None:
                    c.has_basis[i] = False
                else:
                    c.agg_base[i] = got
            if c.score_base is not None:
                got = aggregated_usage(t.metrics[i], self.score_stat, self.score_duration_s) if fresh[k] else None
                c.score_base[i] = got if got is not None else t.metric_usage[i]
            if self._prod_active:
                c.prod_est[i] = prod_usage(t, i) if fresh[k] else (0, 0)

    def _full_cycle(self, state: CycleState) -> None:
        t = state.table
        n = t.n
        fresh, expired, unchecked = self._freshness(t, state.now)
        alloc = t.alloc[:, :2].copy()
        texts = [s.annotations.get(CUSTOM_THRESHOLDS_ANNOTATION) for s in t.specs]
        if any(x is not None for x in texts):
            profiles = [self.node_thresholds(t, i) for i in range(n)]
        else:
            profiles = [self.base] * n
        usage_t = np.array([p.usage for p in profiles], np.int64).reshape(n, 2)
        agg_rows = np.array([p.aggregated is not None for p in profiles], np.bool_)
        agg_t = np.array([p.aggregated[0] if p.aggregated else (0, 0) for p in profiles], np.int64).reshape(n, 2)
        prod_rows = np.array([p.prod is not None for p in profiles], np.bool_)
        prod_t = np.array([p.prod or (0, 0) for p in profiles], np.int64).reshape(n, 2)
        agg_base = np.zeros((n, 2), np.int64)
        has_basis = np.ones(n, np.bool_)
        for i in np.flatnonzero(agg_rows & fresh).tolist():
            agg = profiles[i].aggregated
            assert agg is not None
            got = aggregated_usage(t.metrics[i], agg[1], agg[2])
            if got is None:
                has_basis[i] = False
            else:
                agg_base[i] = got
        score_base: IntArray | None = None
        if self.score_stat:
            score_base = t.metric_usage.copy()
            for i in np.flatnonzero(fresh).tolist():
                got = aggregated_usage(t.metrics[i], self.score_stat, self.score_duration_s)
                if got is not None:
                    score_base[i] = got
        self._prod_active = bool(prod_rows.any()) or self.score_prod
        prod_est = np.zeros((n, 2), np.int64)
        if self._prod_active:
            for i in np.flatnonzero(fresh).tolist():
                prod_est[i] = prod_usage(t, i)
        cap_all = np.where(agg_rows[:, None], _cap2(agg_t, alloc), _cap2(usage_t, alloc))
        c = LoadCycle(fresh, expired, unchecked, alloc, np.maximum(alloc, 1), cap_all, agg_rows, agg_base, has_basis,
                   score_base, prod_rows, _cap2(prod_t, alloc), prod_est,
                   np.empty_like(alloc), np.empty_like(alloc), np.empty_like(alloc), np.empty_like(alloc),
                   _cap_be(cap_all, self._be_thresholds(t, range(n)), alloc), np.empty_like(alloc))
        if not n or int(alloc.max()) < FLOAT_EXACT_BELOW:
            c.fdiv = (c.divisor[:, 0].astype(np.float64), c.divisor[:, 1].astype(np.float64))
        if not self._prod_active:  # prod pods see the same arrays
            c.slack_prod, c.room_prod = c.slack_all, c.room_all
        self._cycle = c
        self._refresh(t, slice(None))
        state.data[self.name] = c

    def _be_thresholds(self, t: NodeTable, rows: range | list[int]) -> IntArray:
        """(len(rows),) the BE budget threshold of each row's last metric, percent (0 = none or not followed)."""
        if not self.follow_be_budget:
            return np.zeros(len(rows), np.int64)
        return np.array([be_budget_percent(t.metrics[i]) for i in rows], np.int64)

    def _refresh(self, table: NodeTable, rows: slice | npt.NDArray[np.intp]) -> None:
        c = self._cycle
        if c is None:
            return
        pending = table.pending_estimate[rows]
        fresh = c.fresh[rows, None]
        checked = fresh & c.has_basis[rows, None]
        passing = np.where(c.unchecked[rows, None] | (fresh & ~c.has_basis[rows, None]), _BIG, -_BIG)
        est = np.where(c.agg_rows[rows, None], c.agg_base[rows] + pending, table.estimated_usage[rows])
        c.slack_all[rows] = np.where(checked, c.cap_all[rows] - 200 * est, passing)
        c.slack_be[rows] = np.where(checked, c.cap_be[rows] - 200 * est, passing)
        score_est = table.estimated_usage[rows] if c.score_base is None else c.score_base[rows] + pending
        c.room_all[rows] = np.where(fresh, c.alloc[rows] - score_est, -_BIG)
        if self._prod_active:
            prod = c.prod_est[rows]
            prod_slack = np.where(fresh, c.cap_prod[rows] - 200 * prod, np.where(c.unchecked[rows, None], _BIG, -_BIG))
            c.slack_prod[rows] = np.where(c.prod_rows[rows, None], prod_slack, c.slack_all[rows])
            c.room_prod[rows] = np.where(fresh, c.alloc[rows] - prod, -_BIG) if self.score_prod else c.room_all[rows]

    def refresh_row(self, table: NodeTable, i: int) -> None:
        """Refresh row ``i`` after a Reserve or Unreserve changed its estimated usage."""
        c = self._cycle
        if c is None or i >= len(c.fresh):
            return  # a node added since the cycle began: the next begin_cycle covers it
        if not c.fresh.item(i):
            return  # stale rows keep their constant slack/room
        if self._prod_active or c.agg_rows.item(i) or c.score_base is not None:
            if self._prod_active:
                c.prod_est[i] = prod_usage(table, i)
            self._refresh(table, slice(i, i + 1))
            return
        # the plain check, in Python ints: NumPy operations on a 2-element row cost ~1 µs each, and
        # element stores into a row view half what a tuple store into the row costs
        e_cpu, e_mem = table.estimated_usage[i].tolist()
        k_cpu, k_mem = c.cap_all[i].tolist()
        a_cpu, a_mem = c.alloc[i].tolist()
        slack = c.slack_all[i]
        slack[0] = k_cpu - 200 * e_cpu
        slack[1] = k_mem - 200 * e_mem
        be = c.slack_be[i]
        be[0] = c.cap_be.item(i, 0) - 200 * e_cpu
        be[1] = k_mem - 200 * e_mem
        room = c.room_all[i]
        room[0] = a_cpu - e_cpu
        room[1] = a_mem - e_mem
