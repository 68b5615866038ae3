"""The LoadAware plugin's extension points: Filter (with reasons, explanations and the queue's pool
filter), Score, Reserve/Unreserve. Its per-cycle arrays come from :mod:`.rows`."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from colo_scheduler.framework.interface import NODE_ADD, NODE_METRIC, POD_DELETE, CycleState
from colo_scheduler.kernels import KERNEL_QUANTITY_BELOW, load_score_rows, under_rows
from colo_scheduler.plugins.loadaware.args import LOAD_RESOURCES, LoadAwareArgs, default_args
from colo_scheduler.plugins.loadaware.rows import LoadCycle, LoadRows
from colo_scheduler.plugins.loadaware.thresholds import NodeThresholds
from colo_scheduler.podinfo import IntArray, PodInfo, estimate_pod, estimate_times_200
from colo_scheduler.settings import SchedulerSettings
from colo_scheduler.table import BoolArray, NodeTable, percent_floor

EXPIRED = "node(s) nodeMetric expired"
LOAD_TOO_HIGH = ("load too high: cpu", "load too high: memory")
AGGREGATED_TOO_HIGH = ("aggregated load too high: cpu", "aggregated load too high: memory")
PROD_TOO_HIGH = ("prod load too high: cpu", "prod load too high: memory")

REGULAR, AGGREGATED, PROD = 0, 1, 2
"""Which check a row gets for a pod: plain, aggregated or prod-only thresholds."""

LOAD_LABELS: tuple[str, ...] = (
    ("",)
    + tuple(label for pair in (LOAD_TOO_HIGH, AGGREGATED_TOO_HIGH, PROD_TOO_HIGH)
            for label in (pair[0], pair[1], f"{pair[0]}, {pair[1]}"))
    + (EXPIRED,)
)
"""Reason code → label: 0 passes; 1 + 3 × check + (bits − 1) for a check (plain, aggregated,
prod) and the resources over (bit 1 cpu, bit 2 memory; 3 = both, labels joined); 10 expired."""
EXPIRED_CODE = 10


def _under(slack: IntArray, pod: PodInfo) -> BoolArray:
    """(m,) True where 200 × estimate < slack for cpu and memory (two column comparisons: NumPy's
    ``all(axis=1)`` over 2 columns costs ten times more)."""
    e_cpu, e_mem = pod.estimate200.tolist()
    ok: BoolArray = (slack[:, 0] > e_cpu) & (slack[:, 1] > e_mem)
    return ok


class LoadAware:
    """The load-aware plugin, configured by :class:`LoadAwareArgs`."""

    settled_none = True
    """``filter`` is None exactly for DaemonSet pods, at any table state (classcache.py)."""

    app_blind = True
    """Verdicts and scores read the pod's estimate and priority class, never its app (classcache.py)."""

    name = "LoadAware"
    events = frozenset({NODE_ADD, NODE_METRIC, POD_DELETE})

    def __init__(self, settings: SchedulerSettings, args: LoadAwareArgs | None = None) -> None:
        a = args if args is not None else default_args(settings)
        self.args = a
        self.weights = np.array([a.resource_weights.get(r, 0) for r in LOAD_RESOURCES], np.int64)
        self.weight_sum = int(self.weights.sum())
        self._weight_ints: tuple[int, int] = tuple(self.weights.tolist())
        self.expiry_s = a.node_metric_expiration_seconds
        self.filter_expired = a.filter_expired_node_metrics
        f = a.estimated_scaling_factors
        self.factors = (f.get("cpu", 0), f.get("memory", 0))
        self._defaults = (settings.default_cpu_estimate_milli, settings.default_memory_estimate_bytes)
        self._custom_factors = self.factors != (settings.cpu_estimation_factor_percent,
                                                settings.memory_estimation_factor_percent)
        self._rows = LoadRows(a, self.name)

    @property
    def annotation_errors(self) -> dict[str, str]:
        """Node name → why its threshold annotation was ignored."""
        return self._rows.annotation_errors

    # ------------------------------------------------------------------ estimates

    def _ensure_estimate(self, pod: PodInfo) -> None:
        """Re-estimate ``pod`` with this plugin's scaling factors when they differ from the settings'
        (the queue estimates with the settings); done once per pod."""
        if not self._custom_factors or pod.extra.get("load_factors") == self.factors:
            return
        est = estimate_pod(pod.spec, self.factors[0], self.factors[1], *self._defaults)
        pod.estimate = np.array(est, np.int64)
        pod.estimate200 = estimate_times_200(est)
        pod.estimate_ints = (int(est[0]), int(est[1]))
        pod.extra["load_factors"] = self.factors

    # ------------------------------------------------------------------ cycle

    def node_thresholds(self, table: NodeTable, i: int) -> NodeThresholds:
        """Thresholds of row ``i``: its annotation's (:func:`.thresholds.parse_custom_thresholds`) or
        the args'."""
        return self._rows.node_thresholds(table, i)

    tracks_cycle_rows = True
    """:meth:`begin_cycle` touches every row whose per-cycle values changed (metric freshness), so the
    framework may keep pod-class caches across cycles (framework/classcache.py)."""

    def begin_cycle(self, state: CycleState) -> None:
        """Freshness masks at ``state.now``, per-node thresholds, slack and room of every node
        (:meth:`LoadRows.begin_cycle`: after the first cycle only the rows that changed)."""
        self._rows.begin_cycle(state)

    # ------------------------------------------------------------------ filter

    def _slack(self, c: LoadCycle, pod: PodInfo) -> IntArray:
        if pod.priority_class == "prod":
            return c.slack_prod
        return c.slack_be if pod.spec.qos_class == "BE" else c.slack_all

    def filter(self, state: CycleState, pod: PodInfo) -> BoolArray | None:
        """(n,) True where estimated usage stays within the thresholds; None for DaemonSet pods."""
        if pod.spec.daemonset:
            return None
        self._ensure_estimate(pod)
        c: LoadCycle = state.data[self.name]  # type: ignore[assignment]
        return _under(self._slack(c, pod), pod)

    def filter_rows(self, state: CycleState, pod: PodInfo, rows: npt.NDArray[np.intp]) -> BoolArray:
        """(len(rows),) :meth:`filter` on ``rows`` only."""
        if pod.spec.daemonset:
            return np.ones(len(rows), np.bool_)
        self._ensure_estimate(pod)
        c: LoadCycle = state.data[self.name]  # type: ignore[assignment]
        e_cpu, e_mem = pod.estimate200.tolist()
        out: BoolArray = under_rows(self._slack(c, pod), rows, e_cpu, e_mem)  # one compiled loop (kernels.py)
        return out

    def filter_node(self, state: CycleState, pod: PodInfo, i: int) -> bool:
        """:meth:`filter` on row ``i`` with Python ints."""
        if pod.spec.daemonset:
            return True
        self._ensure_estimate(pod)
        c: LoadCycle = state.data[self.name]  # type: ignore[assignment]
        s_cpu, s_mem = self._slack(c, pod)[i].tolist()
        e_cpu, e_mem = pod.estimate_ints
        return bool(s_cpu > 200 * e_cpu and s_mem > 200 * e_mem)

    def reason_codes(self, state: CycleState, pod: PodInfo,
                     rows: npt.NDArray[np.intp]) -> tuple[npt.NDArray[np.uint8], tuple[str, ...]]:
        """(len(rows),) codes into :data:`LOAD_LABELS`: expired metric (when filtered), else the check
        (plain, aggregated, prod-only) and a bit per resource over its threshold; 0 where the row passes."""
        if pod.spec.daemonset:
            return np.zeros(len(rows), np.uint8), LOAD_LABELS
        self._ensure_estimate(pod)
        c: LoadCycle = state.data[self.name]  # type: ignore[assignment]
        over = self._slack(c, pod)[rows] <= pod.estimate200
        bits = over[:, 0].astype(np.int64) + 2 * over[:, 1].astype(np.int64)
        check = np.where(c.agg_rows[rows], AGGREGATED, REGULAR)
        if pod.priority_class == "prod":
            check = np.where(c.prod_rows[rows], PROD, check)
        codes = np.where(bits > 0, 3 * check + bits, 0)
        if self.filter_expired:
            codes = np.where(c.expired[rows], EXPIRED_CODE, codes)
        return codes.astype(np.uint8), LOAD_LABELS

    def pool_filter(self, state: CycleState, pods: Sequence[PodInfo], rows: npt.NDArray[np.intp]) -> BoolArray:
        """(P, d) :meth:`filter` of every pod on every row of ``rows`` (a queueing hint, hints.py)."""
        c: LoadCycle = state.data[self.name]  # type: ignore[assignment]
        for p in pods:
            self._ensure_estimate(p)
        est200 = np.stack([p.estimate200 for p in pods])
        prod = np.array([p.priority_class == "prod" for p in pods], np.bool_)
        be = np.array([p.spec.qos_class == "BE" and p.priority_class != "prod" for p in pods], np.bool_)
        ok_all = (c.slack_all[rows][None, :, :] > est200[:, None, :]).all(axis=2)
        ok_prod = (c.slack_prod[rows][None, :, :] > est200[:, None, :]).all(axis=2)
        ok_be = (c.slack_be[rows][None, :, :] > est200[:, None, :]).all(axis=2)
        ok: BoolArray = np.where(prod[:, None], ok_prod, np.where(be[:, None], ok_be, ok_all))
        ok |= np.array([p.spec.daemonset for p in pods], np.bool_)[:, None]
        return ok

    def explain(self, state: CycleState, pod: PodInfo, rejected: BoolArray) -> dict[str, int]:
        """Reason counts over ``rejected`` rows this plugin rejects, one per resource over (a node over
        on both counts under both): ``"node(s) nodeMetric expired"``, ``"load too high: cpu"``,
        ``"aggregated load too high: memory"``, ``"prod load too high: cpu"`` … The counts of
        :meth:`reason_codes` over those rows, taken with whole-column passes (no row gathers)."""
        if pod.spec.daemonset:
            return {}
        self._ensure_estimate(pod)
        c: LoadCycle = state.data[self.name]  # type: ignore[assignment]
        out: dict[str, int] = {}
        live = rejected
        if self.filter_expired:
            k = int(np.count_nonzero(rejected & c.expired))
            if k:
                out[LOAD_LABELS[EXPIRED_CODE]] = k
                live = rejected & ~c.expired
        slack = self._slack(c, pod)
        e_cpu, e_mem = pod.estimate200.tolist()
        over = (slack[:, 0] <= e_cpu, slack[:, 1] <= e_mem)
        groups: list[tuple[int, BoolArray]] = []
        if pod.priority_class == "prod" and c.prod_rows.any():
            groups.append((PROD, live & c.prod_rows))
            live = live & ~c.prod_rows
        if c.agg_rows.any():
            groups.append((AGGREGATED, live & c.agg_rows))
            live = live & ~c.agg_rows
        groups.append((REGULAR, live))
        for check, rows in groups:
            for bit, over_r in ((1, over[0]), (2, over[1])):
                k = int(np.count_nonzero(rows & over_r))
                if k:
                    label = LOAD_LABELS[3 * check + bit]
                    out[label] = out.get(label, 0) + k
        return out

    # ------------------------------------------------------------------ score

    def _room(self, c: LoadCycle, pod: PodInfo) -> IntArray:
        return c.room_prod if pod.priority_class == "prod" else c.room_all

    def score(self, state: CycleState, pod: PodInfo) -> IntArray:
        """(n,) 0..100; 0 without a fresh metric."""
        self._ensure_estimate(pod)
        c: LoadCycle = state.data[self.name]  # type: ignore[assignment]
        return self._weighted(c, self._room(c, pod), slice(None), pod)

    def score_rows(self, state: CycleState, pod: PodInfo, rows: npt.NDArray[np.intp]) -> IntArray:
        """(len(rows),) :meth:`score` on ``rows`` only."""
        self._ensure_estimate(pod)
        c: LoadCycle = state.data[self.name]  # type: ignore[assignment]
        e_cpu, e_mem = pod.estimate_ints
        if c.fdiv is not None and self.weight_sum > 0 and max(e_cpu, e_mem) < KERNEL_QUANTITY_BELOW:
            # allocatable (so room) below FLOAT_EXACT_BELOW: one compiled loop (kernels.py)
            w_cpu, w_mem = self._weight_ints
            out: IntArray = load_score_rows(self._room(c, pod), c.divisor, rows, e_cpu, e_mem, w_cpu, w_mem,
                                            self.weight_sum)
            return out
        return self._weighted(c, self._room(c, pod), rows, pod)

    def _weighted(self, c: LoadCycle, room: IntArray, rows: npt.NDArray[np.intp] | slice, pod: PodInfo) -> IntArray:
        # column by column: an int64 matmul or an axis-1 reduction over 2 columns costs ten times more.
        # floor(100 (room − e) / divisor) in float64 when exact (allocatable below FLOAT_EXACT_BELOW,
        # room ≤ allocatable: see noderesources._least_allocated), at half the cost of int64 division
        e_cpu, e_mem = pod.estimate_ints
        w_cpu, w_mem = self._weight_ints
        parts = []
        for k, e in ((0, e_cpu), (1, e_mem)):
            if c.fdiv is not None:
                y = room[rows, k] * 100.0
                y -= e * 100.0
                np.maximum(y, 0.0, out=y)
                y /= c.fdiv[k][rows]
                parts.append(y.astype(np.int64))
            else:
                parts.append(percent_floor(np.maximum(room[rows, k] - e, 0), c.divisor[rows, k]))
        s, s_mem = parts
        if w_cpu != 1:
            s *= w_cpu
        if w_mem != 1:
            s_mem *= w_mem
        s += s_mem
        out: IntArray = s // self.weight_sum if self.weight_sum != 1 else s
        return out

    def score_node(self, state: CycleState, pod: PodInfo, i: int) -> int:
        """:meth:`score` on row ``i`` with Python ints."""
        self._ensure_estimate(pod)
        c: LoadCycle = state.data[self.name]  # type: ignore[assignment]
        r_cpu, r_mem = self._room(c, pod)[i].tolist()
        d_cpu, d_mem = c.divisor[i].tolist()
        e_cpu, e_mem = pod.estimate_ints
        w_cpu, w_mem = self._weight_ints
        s = (max(r_cpu - e_cpu, 0) * 100 // d_cpu) * w_cpu + (max(r_mem - e_mem, 0) * 100 // d_mem) * w_mem
        return int(s // self.weight_sum)

    # ------------------------------------------------------------------ reserve

    def reserve(self, table: NodeTable, pod: PodInfo, node: int, now: float) -> None:
        """Count the pod's estimate on the node until a metric reflects it."""
        self._ensure_estimate(pod)
        table.track(pod, node, now)
        self._rows.refresh_row(table, node)

    def unreserve(self, table: NodeTable, pod: PodInfo, node: int) -> None:
        """Stop counting the pod's estimate."""
        table.untrack(pod.uid)
        self._rows.refresh_row(table, node)
