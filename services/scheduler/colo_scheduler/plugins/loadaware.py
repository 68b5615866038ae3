"""LoadAware (Filter, Score, Reserve): place by estimated real usage, REFERENCE.md §4 and Koordinator's
``LoadAwareScheduling`` plugin (``pkg/scheduler/plugins/loadaware``, args LoadAwareSchedulingArgs).

Estimated node usage E = reported node usage + the positive estimate gaps of pods assigned
but not yet reflected in the metric (kept by the table); the incoming pod's estimate p comes
from :func:`colo_scheduler.podinfo.estimate_pod` (``estimated_scaling_factors``).

* Filter: reject when round(100 × (E + p) / allocatable) > threshold for a resource with a
  threshold (> 0); equality passes. In integers, with halves rounded up:
  round(100 x / a) ≤ t ⇔ 200 x < (2t + 1) a. Which thresholds and which usage, per node:

  - **prod-only** (``prod_usage_thresholds``, for incoming prod pods on nodes that have them):
    E = Σ reported usage of the node's prod pods + the gaps of assigned prod pods not yet
    reported (REFERENCE.md §4 rule restricted to prod pods); replaces the checks below.
  - **aggregated** (``aggregated.usage_thresholds`` with ``usage_aggregation_type``): E = the
    node's aggregated usage statistic (e.g. p95) over ``usage_aggregated_duration_s`` (0 = the
    longest window reported; missing → the node passes, as Koordinator) + gaps; replaces the
    plain thresholds.
  - otherwise ``usage_thresholds`` on the node usage.

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
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
import numpy as np
import numpy.typing as npt

from colo.messages import AggregatedUsage, NodeMetric
from colo_scheduler.estimation import pod_gap
from colo_scheduler.framework.interface import NODE_ADD, NODE_METRIC, POD_DELETE, CycleState
from colo_scheduler.kernels import KERNEL_QUANTITY_BELOW, load_score_rows, under_rows
from colo_scheduler.podinfo import IntArray, PodInfo, estimate_pod, estimate_times_200
from colo_scheduler.settings import SchedulerSettings
from colo_scheduler.table import FLOAT_EXACT_BELOW, BoolArray, FloatArray, NodeTable, percent_floor

CUSTOM_THRESHOLDS_ANNOTATION = "scheduling.koordinator.sh/custom-usage-thresholds"
"""Node annotation overriding the thresholds (Koordinator ``AnnotationCustomUsageThresholds``)."""

AGGREGATION_TYPES = ("avg", "p50", "p90", "p95", "p99")
"""Statistics a NodeMetric aggregates (REFERENCE.md §2)."""

LOAD_RESOURCES = ("cpu", "memory")
"""Resources LoadAware measures, in column order."""

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

_BIG = np.int64(2**61)



# --------------------------------------------------------------------------- arguments


def _cpu_memory() -> dict[str, int]:
    return {"cpu": 1, "memory": 1}


def _map_problems(values: Mapping[str, int], where: str, lo: int, hi: int | None) -> list[str]:
    errors: list[str] = []
    for k, v in values.items():
        if k not in LOAD_RESOURCES:
            errors.append(f"{where}: unknown resource {k!r}; known: cpu, memory")
        if v < lo or (hi is not None and v > hi):
            errors.append(f"{where}: {k} must be within {lo}..{hi if hi is not None else '∞'}, got {v}")
    return errors


class AggregatedArgs(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Koordinator LoadAwareSchedulingAggregatedArgs: percentile thresholds over the NodeMetric's
    aggregated usage. The filter uses them when ``usage_thresholds`` and ``usage_aggregation_type``
    are set; the score uses ``score_aggregation_type`` when set. Durations in seconds, 0 = the
    longest window the node reports."""

    usage_thresholds: dict[str, int] = {}
    usage_aggregation_type: str = ""
    usage_aggregated_duration_s: int = 0
    score_aggregation_type: str = ""
    score_aggregated_duration_s: int = 0

    def problems(self) -> list[str]:
        """Every problem (thresholds 0..100 of cpu/memory, known statistics, durations ≥ 0)."""
        errors = _map_problems(self.usage_thresholds, "aggregated.usage_thresholds", 0, 100)
        for name in ("usage_aggregation_type", "score_aggregation_type"):
            value = getattr(self, name)
            if value and value not in AGGREGATION_TYPES:
                errors.append(f"aggregated.{name}: unknown statistic {value!r}; known: {', '.join(AGGREGATION_TYPES)}")
        if any(self.usage_thresholds.values()) and not self.usage_aggregation_type:
            errors.append("aggregated.usage_thresholds need aggregated.usage_aggregation_type")
        for name in ("usage_aggregated_duration_s", "score_aggregated_duration_s"):
            if getattr(self, name) < 0:
                errors.append(f"aggregated.{name} must be >= 0")
        return errors

    @property
    def filter_active(self) -> bool:
        """The filter uses aggregated thresholds (Koordinator filterWithAggregation)."""
        return bool(any(self.usage_thresholds.values()) and self.usage_aggregation_type)


class LoadAwareArgs(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Arguments of LoadAware (Koordinator LoadAwareSchedulingArgs). Thresholds are percent of
    allocatable per resource (``cpu``, ``memory``; 0 or absent = none), weights ≥ 0 with a
    positive sum, scaling factors percent. A map given in a profile replaces the default map
    whole. Defaults come from :class:`SchedulerSettings` (:func:`default_args`)."""

    filter_expired_node_metrics: bool = True
    node_metric_expiration_seconds: float = 180.0
    resource_weights: dict[str, int] = msgspec.field(default_factory=_cpu_memory)
    usage_thresholds: dict[str, int] = msgspec.field(default_factory=lambda: {"cpu": 65, "memory": 95})
    prod_usage_thresholds: dict[str, int] = {}
    score_according_prod_usage: bool = False
    estimated_scaling_factors: dict[str, int] = msgspec.field(default_factory=lambda: {"cpu": 85, "memory": 70})
    aggregated: AggregatedArgs = msgspec.field(default_factory=AggregatedArgs)

    def problems(self) -> list[str]:
        """Every problem of the arguments."""
        errors = _map_problems(self.usage_thresholds, "usage_thresholds", 0, 100)
        errors += _map_problems(self.prod_usage_thresholds, "prod_usage_thresholds", 0, 100)
        errors += _map_problems(self.resource_weights, "resource_weights", 0, None)
        errors += _map_problems(self.estimated_scaling_factors, "estimated_scaling_factors", 0, None)
        if sum(self.resource_weights.get(r, 0) for r in LOAD_RESOURCES) <= 0:
            errors.append("resource_weights: the weights of cpu and memory must sum to > 0")
        if not self.node_metric_expiration_seconds > 0:
            errors.append("node_metric_expiration_seconds must be > 0")
        return errors + self.aggregated.problems()


def default_args(settings: SchedulerSettings) -> LoadAwareArgs:
    """The arguments the settings imply (thresholds, weights, factors, expiry), so that existing
    ``COLO_SCHEDULER_*`` configuration keeps working."""
    return LoadAwareArgs(
        filter_expired_node_metrics=settings.filter_expired_metrics,
        node_metric_expiration_seconds=settings.metric_expiry_s,
        resource_weights={"cpu": settings.load_aware_cpu_weight, "memory": settings.load_aware_memory_weight},
        usage_thresholds={"cpu": settings.cpu_threshold_percent, "memory": settings.memory_threshold_percent},
        estimated_scaling_factors={"cpu": settings.cpu_estimation_factor_percent,
                                   "memory": settings.memory_estimation_factor_percent},
    )


# --------------------------------------------------------------------------- per-node thresholds


Pair = tuple[int, int]
"""(cpu, memory) thresholds in percent, 0 = none."""


@dataclass(frozen=True, slots=True)
class NodeThresholds:
    """The thresholds one node gets: plain ``usage``; ``prod`` (None = no prod-only check);
    ``aggregated`` (thresholds, statistic, duration seconds) or None."""

    usage: Pair
    prod: Pair | None
    aggregated: tuple[Pair, str, int] | None


def _pair(values: Mapping[str, int]) -> Pair:
    return int(values.get("cpu", 0)), int(values.get("memory", 0))


def args_thresholds(args: LoadAwareArgs) -> NodeThresholds:
    """The thresholds of a node without override."""
    agg = args.aggregated
    prod = _pair(args.prod_usage_thresholds)
    return NodeThresholds(
        _pair(args.usage_thresholds), prod if any(prod) else None,
        (_pair(agg.usage_thresholds), agg.usage_aggregation_type, agg.usage_aggregated_duration_s)
        if agg.filter_active else None)


_DURATION = re.compile(r"(\d+(?:\.\d*)?)(ns|us|µs|ms|s|m|h)")
_UNIT_S = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration_s(value: object) -> int:
    """Seconds of a Go duration string (``"5m"``, ``"1h30m"``, ``"300s"``) or a number of seconds;
    ValueError otherwise."""
    if isinstance(value, bool):
        raise ValueError(f"bad duration {value!r}")
    if isinstance(value, int | float):
        return int(value)
    if not isinstance(value, str) or not value:
        raise ValueError(f"bad duration {value!r}")
    if value == "0":
        return 0
    pos, total = 0, 0.0
    for m in _DURATION.finditer(value):
        if m.start() != pos:
            raise ValueError(f"bad duration {value!r}")
        total += float(m.group(1)) * _UNIT_S[m.group(2)]
        pos = m.end()
    if pos != len(value):
        raise ValueError(f"bad duration {value!r}")
    return int(total)


def _percent_map(raw: object, where: str) -> Pair:
    if raw is None:
        return 0, 0
    if not isinstance(raw, dict):
        raise ValueError(f"{where} must be an object")
    out = []
    for r in LOAD_RESOURCES:
        v = raw.get(r, 0)
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 100:
            raise ValueError(f"{where}.{r} must be an integer within 0..100")
        out.append(v)
    return out[0], out[1]


def parse_custom_thresholds(text: str, args: LoadAwareArgs) -> NodeThresholds:
    """The thresholds of a node carrying :data:`CUSTOM_THRESHOLDS_ANNOTATION` = ``text``: Koordinator
    CustomUsageThresholds JSON ``{"usageThresholds": {"cpu": 70, "memory": 90},
    "prodUsageThresholds": {…}, "aggregatedUsage": {"usageThresholds": {…},
    "usageAggregationType": "p95", "usageAggregatedDuration": "5m"}}``. An absent or empty map keeps
    the args' value; an aggregated part without thresholds or type is ignored (then the args'
    aggregated thresholds apply). Raises ValueError for unreadable text."""
    try:
        doc: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise ValueError("must be a JSON object")
    base = args_thresholds(args)
    usage = _percent_map(doc.get("usageThresholds"), "usageThresholds")
    prod = _percent_map(doc.get("prodUsageThresholds"), "prodUsageThresholds")
    aggregated = base.aggregated
    agg_doc = doc.get("aggregatedUsage")
    if agg_doc is not None:
        if not isinstance(agg_doc, dict):
            raise ValueError("aggregatedUsage must be an object")
        agg_t = _percent_map(agg_doc.get("usageThresholds"), "aggregatedUsage.usageThresholds")
        stat = agg_doc.get("usageAggregationType", "") or ""
        if stat and stat not in AGGREGATION_TYPES:
            raise ValueError(f"aggregatedUsage.usageAggregationType: unknown statistic {stat!r}")
        duration = parse_duration_s(agg_doc.get("usageAggregatedDuration", 0) or 0)
        if any(agg_t) and stat:
            aggregated = (agg_t, str(stat), duration)
    return NodeThresholds(usage if any(usage) else base.usage, prod if any(prod) else base.prod, aggregated)


def aggregated_usage(metric: NodeMetric | None, stat: str, duration_s: int) -> tuple[int, int] | None:
    """(cpu, memory) of statistic ``stat`` over ``duration_s`` in ``metric.aggregated`` (0 = the longest
    window reported for that statistic, falling back to the node usage when none is; Koordinator
    getTargetAggregatedUsage), or None when not reported."""
    if metric is None:
        return None
    best: AggregatedUsage | None = None
    for a in metric.aggregated:
        if a.stat != stat:
            continue
        if duration_s == 0:
            if best is None or a.window_s > best.window_s:
                best = a
        elif a.window_s == duration_s:
            best = a
            break
    if best is not None:
        return best.cpu, best.memory
    if duration_s == 0:
        return metric.node_usage.cpu, metric.node_usage.memory
    return None


def prod_usage(table: NodeTable, i: int) -> tuple[int, int]:
    """Estimated usage of row ``i``'s prod pods (cpu milli-cores, memory bytes): Σ reported usage of
    the metric's pods of priority class prod (the metric's class, else the class of the assigned
    pod; pods of unknown class are skipped, as Koordinator skips pods it cannot look up) + for
    each assigned prod pod its gap against those per-pod figures (:func:`colo_scheduler.estimation.pod_gap`
    with ``windowed=False``: the estimate when not reported; max(estimate − usage, 0) while the pod is
    younger than the metric's window; 0 after)."""
    metric = table.metrics[i]
    pods = table.node_pods[i]
    cpu = memory = 0
    at, window = math.nan, 0.0
    if metric is not None:
        at, window = metric.at, metric.window_s
        for pm in metric.pods:
            cls = pm.priority_class
            if cls is None:
                ap = pods.get(pm.uid)
                cls = ap.pod.priority_class if ap is not None else None
            if cls == "prod":
                cpu += pm.cpu
                memory += pm.memory
    usage = table.pod_usage[i]
    for uid, ap in pods.items():
        if ap.pod.priority_class != "prod":
            continue
        gc, gm = pod_gap(ap.pod.estimate_ints, usage.get(uid), ap.assigned_at, at, window, windowed=False)
        cpu += gc
        memory += gm
    return cpu, memory


# --------------------------------------------------------------------------- plugin


def _under(slack: IntArray, pod: PodInfo) -> BoolArray:
    """(m,) True where 200 × estimate < slack for cpu and memory (two column comparisons: NumPy's
    ``all(axis=1)`` over 2 columns costs ten times more)."""
    e_cpu, e_mem = pod.estimate200.tolist()
    ok: BoolArray = (slack[:, 0] > e_cpu) & (slack[:, 1] > e_mem)
    return ok


def _cap2(t: IntArray, alloc: IntArray) -> IntArray:
    # a resource without threshold, or that the node has none of, is not checked (Koordinator)
    out: IntArray = np.where((t > 0) & (alloc > 0), (2 * t + 1) * alloc, _BIG)
    return out


@dataclass(slots=True)
class _Cycle:
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
    fdiv: tuple[FloatArray, FloatArray] | None = None  # divisor columns as float64, None = not exact (_weighted)


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
        self.base = args_thresholds(a)
        self.score_prod = a.score_according_prod_usage
        self.score_stat = a.aggregated.score_aggregation_type
        self.score_duration_s = a.aggregated.score_aggregated_duration_s
        f = a.estimated_scaling_factors
        self.factors = (f.get("cpu", 0), f.get("memory", 0))
        self._defaults = (settings.default_cpu_estimate_milli, settings.default_memory_estimate_bytes)
        self._custom_factors = self.factors != (settings.cpu_estimation_factor_percent,
                                                settings.memory_estimation_factor_percent)
        self._parsed: dict[str, NodeThresholds] = {}
        self.annotation_errors: dict[str, str] = {}
        """Node name → why its threshold annotation was ignored."""
        self._prod_active = False
        self._cycle: _Cycle | None = None
        self._cycle_seq = -1
        self._cycle_version = -1

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

    tracks_cycle_rows = True
    """:meth:`begin_cycle` touches every row whose per-cycle values changed (metric freshness), so the
    framework may keep pod-class caches across cycles (framework/classcache.py)."""

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

    def _rows_cycle(self, state: CycleState, c: _Cycle, changes: list[int]) -> None:
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

    def _derive_rows(self, t: NodeTable, c: _Cycle, idx: npt.NDArray[np.intp]) -> None:
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
        c = _Cycle(fresh, expired, unchecked, alloc, np.maximum(alloc, 1), cap_all, agg_rows, agg_base, has_basis,
                   score_base, prod_rows, _cap2(prod_t, alloc), prod_est,
                   np.empty_like(alloc), np.empty_like(alloc), np.empty_like(alloc), np.empty_like(alloc))
        if not n or int(alloc.max()) < FLOAT_EXACT_BELOW:
            c.fdiv = (c.divisor[:, 0].astype(np.float64), c.divisor[:, 1].astype(np.float64))
        if not self._prod_active:  # prod pods see the same arrays
            c.slack_prod, c.room_prod = c.slack_all, c.room_all
        self._cycle = c
        self._refresh(t, slice(None))
        state.data[self.name] = c

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
        score_est = table.estimated_usage[rows] if c.score_base is None else c.score_base[rows] + pending
        c.room_all[rows] = np.where(fresh, c.alloc[rows] - score_est, -_BIG)
        if self._prod_active:
            prod = c.prod_est[rows]
            prod_slack = np.where(fresh, c.cap_prod[rows] - 200 * prod, np.where(c.unchecked[rows, None], _BIG, -_BIG))
            c.slack_prod[rows] = np.where(c.prod_rows[rows, None], prod_slack, c.slack_all[rows])
            c.room_prod[rows] = np.where(fresh, c.alloc[rows] - prod, -_BIG) if self.score_prod else c.room_all[rows]

    def _refresh_row(self, table: NodeTable, i: int) -> None:
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
        room = c.room_all[i]
        room[0] = a_cpu - e_cpu
        room[1] = a_mem - e_mem

    # ------------------------------------------------------------------ filter

    def _slack(self, c: _Cycle, pod: PodInfo) -> IntArray:
        return c.slack_prod if pod.priority_class == "prod" else c.slack_all

    def filter(self, state: CycleState, pod: PodInfo) -> BoolArray | None:
        """(n,) True where estimated usage stays within the thresholds; None for DaemonSet pods."""
        if pod.spec.daemonset:
            return None
        self._ensure_estimate(pod)
        c: _Cycle = state.data[self.name]  # type: ignore[assignment]
        return _under(self._slack(c, pod), pod)

    def filter_rows(self, state: CycleState, pod: PodInfo, rows: npt.NDArray[np.intp]) -> BoolArray:
        """(len(rows),) :meth:`filter` on ``rows`` only."""
        if pod.spec.daemonset:
            return np.ones(len(rows), np.bool_)
        self._ensure_estimate(pod)
        c: _Cycle = state.data[self.name]  # type: ignore[assignment]
        e_cpu, e_mem = pod.estimate200.tolist()
        out: BoolArray = under_rows(self._slack(c, pod), rows, e_cpu, e_mem)  # one compiled loop (kernels.py)
        return out

    def filter_node(self, state: CycleState, pod: PodInfo, i: int) -> bool:
        """:meth:`filter` on row ``i`` with Python ints."""
        if pod.spec.daemonset:
            return True
        self._ensure_estimate(pod)
        c: _Cycle = state.data[self.name]  # type: ignore[assignment]
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
        c: _Cycle = state.data[self.name]  # type: ignore[assignment]
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
        c: _Cycle = state.data[self.name]  # type: ignore[assignment]
        for p in pods:
            self._ensure_estimate(p)
        est200 = np.stack([p.estimate200 for p in pods])
        prod = np.array([p.priority_class == "prod" for p in pods], np.bool_)
        ok_all = (c.slack_all[rows][None, :, :] > est200[:, None, :]).all(axis=2)
        ok_prod = (c.slack_prod[rows][None, :, :] > est200[:, None, :]).all(axis=2)
        ok: BoolArray = np.where(prod[:, None], ok_prod, ok_all)
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
        c: _Cycle = state.data[self.name]  # type: ignore[assignment]
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

    def _room(self, c: _Cycle, pod: PodInfo) -> IntArray:
        return c.room_prod if pod.priority_class == "prod" else c.room_all

    def score(self, state: CycleState, pod: PodInfo) -> IntArray:
        """(n,) 0..100; 0 without a fresh metric."""
        self._ensure_estimate(pod)
        c: _Cycle = state.data[self.name]  # type: ignore[assignment]
        return self._weighted(c, self._room(c, pod), slice(None), pod)

    def score_rows(self, state: CycleState, pod: PodInfo, rows: npt.NDArray[np.intp]) -> IntArray:
        """(len(rows),) :meth:`score` on ``rows`` only."""
        self._ensure_estimate(pod)
        c: _Cycle = state.data[self.name]  # type: ignore[assignment]
        e_cpu, e_mem = pod.estimate_ints
        if c.fdiv is not None and self.weight_sum > 0 and max(e_cpu, e_mem) < KERNEL_QUANTITY_BELOW:
            # allocatable (so room) below FLOAT_EXACT_BELOW: one compiled loop (kernels.py)
            w_cpu, w_mem = self._weight_ints
            out: IntArray = load_score_rows(self._room(c, pod), c.divisor, rows, e_cpu, e_mem, w_cpu, w_mem,
                                            self.weight_sum)
            return out
        return self._weighted(c, self._room(c, pod), rows, pod)

    def _weighted(self, c: _Cycle, room: IntArray, rows: npt.NDArray[np.intp] | slice, pod: PodInfo) -> IntArray:
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
        c: _Cycle = state.data[self.name]  # type: ignore[assignment]
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
        self._refresh_row(table, node)

    def unreserve(self, table: NodeTable, pod: PodInfo, node: int) -> None:
        """Stop counting the pod's estimate."""
        table.untrack(pod.uid)
        self._refresh_row(table, node)
