"""NodeResourcesFit (Filter, Score, Reserve), NodeResourcesLeastAllocated and
NodeResourcesBalancedAllocation (Score).

Fit follows the Kubernetes plugin of the same name over Colo's resource columns:
a node fits when, for every resource the pod requests (> 0), allocated + request ≤
allocatable — cpu, memory and the pod count against the node's allocatable,
batch-*/mid-* against its NodeResource (the same rule as the store's bind script,
docs/architecture.md "Store").

Scores follow the Kubernetes ``NodeResourcesFit`` scoring strategies
(``pkg/scheduler/framework/plugins/noderesources``: ``least_allocated.go``,
``most_allocated.go``, ``requested_to_capacity_ratio.go``, ``balanced_allocation.go``) over
a weighted list of resources, with ``requested`` = the node's allocated requests + the pod's
request and ``allocatable`` the node's column (:data:`UNLIMITED` for a node without a pod
cap). The names ``cpu`` and ``memory`` stand for the pod's resource-kind columns: batch-*
for a batch pod, mid-* for a mid pod (REFERENCE.md §1), so BE pods spread or pack on batch
allocatable. Unlike Kubernetes, a pod without a cpu/memory request counts as requesting
nothing (no 100 m / 200 MB "non-zero" default): the table books actual requests.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, cast

import msgspec
import numpy as np
import numpy.typing as npt

from colo.messages import RESOURCE_NAMES
from colo_scheduler.framework.interface import NODE_ADD, NODE_RESOURCE, POD_DELETE, CycleState
from colo_scheduler.kernels import KERNEL_QUANTITY_BELOW, fit_rows, least_allocated_rows
from colo_scheduler.podinfo import COL, KIND_COLUMNS, IntArray, PodInfo
from colo_scheduler.table import FLOAT_EXACT_BELOW, BoolArray, FloatArray, NodeTable, percent_floor

MAX_NODE_SCORE = 100
"""Kubernetes framework.MaxNodeScore."""

_WIDE = (2**63 - 1) // MAX_NODE_SCORE
"""Largest requested amount r whose MAX_NODE_SCORE × r fits int64 (LeastAllocated's integer form)."""


MAX_CUSTOM_PRIORITY_SCORE = 10
"""Kubernetes config.MaxCustomPriorityScore: shape scores of RequestedToCapacityRatio are 0..10,
scaled × 10 to 0..100."""

RESOURCE_ALIASES: dict[str, str] = {
    **{name: name for name in RESOURCE_NAMES},
    **{name.replace("_", "-"): name for name in RESOURCE_NAMES},
    **{f"kubernetes.io/{name.replace('_', '-')}": name for name in RESOURCE_NAMES if "_" in name},
}
"""Resource names accepted in scoring arguments (``cpu``, ``batch-cpu``,
``kubernetes.io/batch-cpu``, ``batch_cpu``, ``pods`` …) → column name."""

STRATEGIES = ("LeastAllocated", "MostAllocated", "RequestedToCapacityRatio")
"""Kubernetes ScoringStrategyType values."""


class ResourceSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A scored resource and its weight (Kubernetes config.ResourceSpec; weight 1..100)."""

    name: str
    weight: int = 1


class UtilizationShapePoint(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A point of the RequestedToCapacityRatio shape: ``utilization`` 0..100 %, ``score`` 0..10
    (Kubernetes config.UtilizationShapePoint)."""

    utilization: int
    score: int


def _default_resources() -> list[ResourceSpec]:
    return [ResourceSpec(name="cpu", weight=1), ResourceSpec(name="memory", weight=1)]


def _default_shape() -> list[UtilizationShapePoint]:
    # Kubernetes' default shape for RequestedToCapacityRatio: 0 % → 10, 100 % → 0 (spreading).
    return [UtilizationShapePoint(utilization=0, score=10), UtilizationShapePoint(utilization=100, score=0)]


def resources_problems(resources: Sequence[ResourceSpec], where: str) -> list[str]:
    """Every problem of a weighted resource list (unknown or repeated name, weight outside 1..100,
    empty list), Kubernetes ValidateNodeResourcesFitArgs rules."""
    errors: list[str] = []
    if not resources:
        errors.append(f"{where}: at least one resource is needed")
    seen: set[str] = set()
    for r in resources:
        col = RESOURCE_ALIASES.get(r.name)
        if col is None:
            errors.append(f"{where}: unknown resource {r.name!r}; known: {', '.join(RESOURCE_NAMES)}")
        elif col in seen:
            errors.append(f"{where}: resource {r.name!r} given twice")
        else:
            seen.add(col)
        if not 1 <= r.weight <= 100:
            errors.append(f"{where}: weight of {r.name!r} must be within 1..100, got {r.weight}")
    return errors


class ScoringStrategy(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Kubernetes NodeResourcesFit ``scoringStrategy``: ``type`` (LeastAllocated, MostAllocated or
    RequestedToCapacityRatio), weighted ``resources`` (default cpu 1, memory 1, as Kubernetes) and
    the ``shape`` of RequestedToCapacityRatio (default 0 % → 10, 100 % → 0)."""

    type: Literal["LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"] = "LeastAllocated"
    resources: list[ResourceSpec] = msgspec.field(default_factory=_default_resources)
    shape: list[UtilizationShapePoint] = msgspec.field(default_factory=_default_shape)

    def problems(self) -> list[str]:
        """Every problem: resources (:func:`resources_problems`) and, for RequestedToCapacityRatio,
        a shape with utilization 0..100 strictly increasing and scores 0..10."""
        errors = resources_problems(self.resources, "scoring_strategy.resources")
        if self.type == "RequestedToCapacityRatio":
            if not self.shape:
                errors.append("scoring_strategy.shape: at least one point is needed")
            last = -1
            for p in self.shape:
                if not 0 <= p.utilization <= 100:
                    errors.append(f"scoring_strategy.shape: utilization {p.utilization} outside 0..100")
                if p.utilization <= last:
                    errors.append("scoring_strategy.shape: utilization values must increase")
                last = p.utilization
                if not 0 <= p.score <= MAX_CUSTOM_PRIORITY_SCORE:
                    errors.append(f"scoring_strategy.shape: score {p.score} outside 0..10")
        return errors


class NodeResourcesFitArgs(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Arguments of NodeResourcesFit (Kubernetes NodeResourcesFitArgs): its Score's strategy."""

    scoring_strategy: ScoringStrategy = msgspec.field(default_factory=ScoringStrategy)

    def problems(self) -> list[str]:
        """The strategy's problems."""
        return self.scoring_strategy.problems()


class ResourcesArgs(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Arguments of NodeResourcesLeastAllocated and NodeResourcesBalancedAllocation: the weighted
    resources (Kubernetes NodeResourcesLeastAllocatedArgs / NodeResourcesBalancedAllocationArgs;
    default cpu 1, memory 1)."""

    resources: list[ResourceSpec] = msgspec.field(default_factory=_default_resources)

    def problems(self) -> list[str]:
        """The resource list's problems."""
        return resources_problems(self.resources, "resources")


def kind_columns(resources: Sequence[ResourceSpec]) -> dict[int, tuple[npt.NDArray[np.intp], IntArray]]:
    """Per resource kind (keyed by the kind's cpu column) the scored columns and weights: ``cpu``
    and ``memory`` become the kind's columns; a column named twice after that keeps its first
    weight (a batch pod scoring ``cpu`` and ``batch-cpu``)."""
    out: dict[int, tuple[npt.NDArray[np.intp], IntArray]] = {}
    for cpu_col, mem_col in KIND_COLUMNS.values():
        cols: list[int] = []
        weights: list[int] = []
        for r in resources:
            col = COL[RESOURCE_ALIASES[r.name]]
            col = cpu_col if col == COL["cpu"] else mem_col if col == COL["memory"] else col
            if col not in cols:
                cols.append(col)
                weights.append(r.weight)
        out[cpu_col] = (np.array(cols, np.intp), np.array(weights, np.int64))
    return out


def broken_linear(shape: Sequence[tuple[int, int]], p: IntArray) -> IntArray:
    """Kubernetes helper.BuildBrokenLinearFunction over ``p`` (utilization percent): the shape's
    first score below its first point, the last score above its last, linear in between with Go's
    integer division (truncation toward zero)."""
    u = np.array([pt[0] for pt in shape], np.int64)
    sc = np.array([pt[1] for pt in shape], np.int64)
    idx = np.searchsorted(u, p, side="left")
    inner = np.clip(idx, 1, len(u) - 1)
    du = np.maximum(u[inner] - u[inner - 1], 1)
    num = (sc[inner] - sc[inner - 1]) * (p - u[inner - 1])
    step = np.sign(num) * (np.abs(num) // du)
    out: IntArray = np.where(idx == 0, sc[0], np.where(idx >= len(u), sc[-1], sc[inner - 1] + step))
    return out


def strategy_scores(strategy: str, shape: Sequence[tuple[int, int]], requested: IntArray, alloc: IntArray,
                    weights: IntArray) -> IntArray:
    """(m,) node scores 0..100 from (m, k) ``requested`` and ``alloc`` and (k,) ``weights``.

    * LeastAllocated: per resource (alloc − requested) × 100 // alloc, 0 when requested > alloc.
    * MostAllocated: min(requested, alloc) × 100 // alloc.
    * Both skip resources with alloc 0 and return Σ score × weight // Σ weight (0 when no weight).
    * RequestedToCapacityRatio: shape(requested × 100 // alloc) (shape(100) when alloc is 0 or
      requested > alloc), counting only resources scoring > 0, rounded mean half away from zero.
    """
    has = alloc > 0
    safe = np.where(has, alloc, 1)
    if strategy == "RequestedToCapacityRatio":
        util = np.where(has & (requested <= alloc), percent_floor(np.clip(requested, 0, alloc), safe), 100)
        s = broken_linear(shape, util)
        counted = s > 0
    elif strategy == "MostAllocated":
        s = percent_floor(np.minimum(requested, alloc), safe)
        counted = has
    else:
        s = np.where(requested > alloc, 0, percent_floor(np.maximum(alloc - requested, 0), safe))
        counted = has
    # column by column: NumPy reductions along a short axis cost ten times more
    num = np.zeros(len(s), np.int64)
    den = np.zeros(len(s), np.int64)
    for j, wj in enumerate(weights.tolist()):
        if wj:
            cj = counted[:, j]
            num += np.where(cj, s[:, j] * wj, 0)
            den += np.where(cj, wj, 0)
    den1 = np.maximum(den, 1)
    if strategy == "RequestedToCapacityRatio":
        out: IntArray = np.where(den > 0, (2 * num + den1) // (2 * den1), 0)
    else:
        out = np.where(den > 0, num // den1, 0)
    return out


def balanced_scores(requested: IntArray, alloc: IntArray) -> IntArray:
    """(m,) Kubernetes balancedResourceScorer: fractions min(requested / alloc, 1) of resources
    with alloc > 0; std = |f0 − f1| / 2 for two, the population standard deviation for more, 0
    otherwise; score = int((1 − std) × 100). Float64 sums in column order (as the loop oracle)."""
    m, k = requested.shape
    has = alloc > 0
    frac = np.where(has, np.minimum(requested / np.where(has, alloc, 1), 1.0), 0.0)
    count = has.sum(axis=1)
    total = np.zeros(m)
    first = np.zeros(m)
    second = np.zeros(m)
    seen = np.zeros(m, np.int64)
    for j in range(k):
        total = total + frac[:, j]
        first = np.where(has[:, j] & (seen == 0), frac[:, j], first)
        second = np.where(has[:, j] & (seen == 1), frac[:, j], second)
        seen = seen + has[:, j]
    mean = total / np.maximum(count, 1)
    sq = np.zeros(m)
    for j in range(k):
        d = frac[:, j] - mean
        sq = sq + np.where(has[:, j], d * d, 0.0)
    std = np.where(count == 2, np.abs((first - second) / 2),
                   np.where(count > 2, np.sqrt(sq / np.maximum(count, 1)), 0.0))
    out: IntArray = ((1 - std) * MAX_NODE_SCORE).astype(np.int64)
    return out


_LeastCycle = tuple[IntArray, dict[int, "IntArray | int"], set[int], dict[int, FloatArray], dict[int, "IntArray | None"]]
"""LeastAllocated's per-cycle data: divisors, per-kind weight sums, int64-only columns, float64
divisor columns, per-kind kernel divisors (a module-level alias: a subscripted type built in the
hot path costs microseconds a call)."""


class _ResourceScore:
    """Shared scoring over the table's allocated requests: subclasses set ``strategy``."""

    app_blind = True
    """Verdicts and scores read the pod's request only, never its app (classcache.py)."""

    strategy = "LeastAllocated"

    def __init__(self, resources: Sequence[ResourceSpec], shape: Sequence[UtilizationShapePoint] = ()) -> None:
        self.columns = kind_columns(resources)
        self._column_ints = {kind: list(zip(cols.tolist(), weights.tolist()))
                             for kind, (cols, weights) in self.columns.items()}
        self.shape = tuple((p.utilization, p.score * (MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE))
                           for p in shape)
        # per instance: two instances of one plugin (other arguments) may share a cycle state
        self._data_key = f"{getattr(self, 'name', type(self).__name__)}/least/{id(self)}"
        self._cycle_key: tuple[int, int, int] | None = None
        self._cycle_data: object = None

    tracks_cycle_rows = True
    """The per-cycle divisors derive from allocatable only, whose changes the table logs."""

    def begin_cycle(self, state: CycleState) -> None:
        """LeastAllocated: per cycle, allocatable floored at 1 (divisor; also as float64 columns) and per
        resource kind the per-node Σ weight of the scored columns with allocatable > 0, or that sum as
        one int when every node has it (allocatable only changes between cycles)."""
        if self.strategy != "LeastAllocated":
            return
        key = (id(state.table), state.table.n, state.table.alloc_version)
        if key == self._cycle_key:  # allocatable unchanged since the last cycle: the same arrays
            state.data[self._data_key] = self._cycle_data
            return
        alloc = state.table.alloc
        divisor = np.maximum(alloc, 1)
        dens: dict[int, IntArray | int] = {}
        for kind, (cols, weights) in self.columns.items():
            den = np.zeros(len(alloc), np.int64)
            for c, w in zip(cols.tolist(), weights.tolist()):
                den += (alloc[:, c] > 0) * w
            same = len(den) and bool((den == den[0]).all())
            dens[kind] = max(int(den[0]), 1) if same else np.maximum(den, 1)
        tops = [int(alloc[:, c].max()) if len(alloc) else 0 for c in range(alloc.shape[1])]
        # columns where × 100 could overflow int64 (an unlimited pod count): the requested form
        big = {c for c, top in enumerate(tops) if top > 2**55}
        # columns whose floor(100 x / a) float64 gives exactly (see _least_allocated): as float columns
        exact = {c: np.ascontiguousarray(divisor[:, c], np.float64) for c, top in enumerate(tops)
                 if top < FLOAT_EXACT_BELOW}
        # per kind, the divisor as kernels.least_allocated_rows takes it (length 1: the same on every
        # row), or None when a scored column is too large for its int64 arithmetic
        kernel_dens: dict[int, IntArray | None] = {
            kind: None if any(tops[c] >= KERNEL_QUANTITY_BELOW for c in cols.tolist())
            else np.full(1, dens[kind], np.int64) if isinstance(dens[kind], int) else dens[kind]  # type: ignore[misc]
            for kind, (cols, _) in self.columns.items()}
        self._cycle_key, self._cycle_data = key, (divisor, dens, big, exact, kernel_dens)
        state.data[self._data_key] = self._cycle_data

    def _least_allocated(self, state: CycleState, pod: PodInfo, rows: npt.NDArray[np.intp] | slice) -> IntArray:
        # (a − r) × 100 // a = max(free − request, 0) × 100 // a, column by column from the table's
        # free column: a dozen passes instead of (n, k) gathers and axis-1 reductions. Where every
        # allocatable of the column is below FLOAT_EXACT_BELOW the quotient is taken in float64: 100 ×
        # free and 100 × request are exact (< 2^53), so is their difference, the division rounds once,
        # and with a (q + 1) < 2^53 for q ≤ 100 (free ≤ allocatable) rounding never crosses an integer,
        # so truncation gives the integer floor — at half the cost of int64 floor division.
        divisor, dens, big, exact, kernel_dens = cast(_LeastCycle, state.data[self._data_key])
        free = state.table.free
        if not isinstance(rows, slice):
            den_k = kernel_dens[pod.kind_cols[0]]
            if den_k is not None:  # a few rows: one compiled loop, not a dozen array operations
                cols, weights = self.columns[pod.kind_cols[0]]
                return least_allocated_rows(free, divisor, rows, cols, weights, pod.request, den_k)
        request = pod.request_ints
        num: IntArray | None = None
        for c, w in self._column_ints[pod.kind_cols[0]]:
            if not w:
                continue
            fdiv = exact.get(c)
            if fdiv is not None:
                y = free[rows, c] * 100.0
                y -= request[c] * 100.0
                np.maximum(y, 0.0, out=y)
                y /= fdiv[rows]
                s = y.astype(np.int64)
            elif c in big:
                allocated = state.table.allocated[rows, c]
                r = allocated + request[c]
                a = state.table.alloc[rows, c]
                s = np.where((r > a) | (a <= 0), 0, MAX_NODE_SCORE + (-MAX_NODE_SCORE * r) // divisor[rows, c])
                # rows where 100 × r (or r) would overflow int64: Python ints, as score_node
                for k in np.flatnonzero(allocated > _WIDE - request[c]).tolist():
                    rk, ak = int(allocated[k]) + request[c], int(a[k])
                    s[k] = 0 if rk > ak or ak <= 0 else MAX_NODE_SCORE + (-MAX_NODE_SCORE * rk) // ak
            else:
                s = np.maximum(free[rows, c] - request[c], 0) * MAX_NODE_SCORE // divisor[rows, c]
            if w != 1:
                s *= w
            num = s if num is None else num + s
        den = dens[pod.kind_cols[0]]
        if num is None:
            return np.zeros(len(free[rows, 0]), np.int64)
        if isinstance(den, int):  # a column with allocatable 0 scores 0: no term
            return num // den if den != 1 else num
        out: IntArray = num // den[rows]
        return out

    def _scores(self, table: NodeTable, pod: PodInfo, rows: npt.NDArray[np.intp] | slice,
                state: CycleState | None = None) -> IntArray:
        if state is not None and self.strategy == "LeastAllocated" and self._data_key in state.data:
            return self._least_allocated(state, pod, rows)
        cols, weights = self.columns[pod.kind_cols[0]]
        alloc = table.alloc[rows][:, cols]
        requested = table.allocated[rows][:, cols] + pod.request[cols]
        if self.strategy == "Balanced":
            if not pod.request[cols].any():  # best-effort pod: Kubernetes skips the plugin
                return np.zeros(len(alloc), np.int64)
            return balanced_scores(requested, alloc)
        return strategy_scores(self.strategy, self.shape, requested, alloc, weights)

    def score(self, state: CycleState, pod: PodInfo) -> IntArray:
        """(n,) int64 in 0..100."""
        return self._scores(state.table, pod, slice(None), state)

    def score_rows(self, state: CycleState, pod: PodInfo, rows: npt.NDArray[np.intp]) -> IntArray:
        """(len(rows),) :meth:`score` on ``rows`` only."""
        return self._scores(state.table, pod, rows, state)

    def score_node(self, state: CycleState, pod: PodInfo, i: int) -> int:
        """:meth:`score` on row ``i``: Python ints for LeastAllocated and MostAllocated (the same
        integer formulas as :func:`strategy_scores`), the array path otherwise."""
        if self.strategy not in ("LeastAllocated", "MostAllocated"):
            return int(self._scores(state.table, pod, np.array([i], np.intp))[0])
        alloc = state.table.alloc[i].tolist()
        allocated = state.table.allocated[i].tolist()
        request = pod.request_ints
        num = den = 0
        for c, w in self._column_ints[pod.kind_cols[0]]:
            a = alloc[c]
            if a <= 0:
                continue
            r = allocated[c] + request[c]
            if self.strategy == "MostAllocated":
                s = min(r, a) * MAX_NODE_SCORE // a
            else:
                s = 0 if r > a else MAX_NODE_SCORE + (-MAX_NODE_SCORE * r) // a
            num += s * w
            den += w
        return num // den if den > 0 else 0

INSUFFICIENT: dict[int, str] = {
    i: ("Too many pods" if name == "pods" else f"Insufficient {name.replace('_', '-')}")
    for i, name in enumerate(RESOURCE_NAMES)
}
"""Column → Kubernetes-style rejection reason (``"Insufficient batch-cpu"``, ``"Too many pods"``)."""

_BITS = np.left_shift(np.int64(1), np.arange(len(RESOURCE_NAMES), dtype=np.int64))

FIT_LABELS: tuple[str, ...] = tuple(
    ", ".join(INSUFFICIENT[c] for c in range(len(RESOURCE_NAMES)) if code >> c & 1)
    for code in range(1 << len(RESOURCE_NAMES))
)
"""Reason code → label: bit ``c`` of the code set when column ``c`` is insufficient, labels joined
in column order (``"Insufficient cpu, Insufficient memory"``); code 0 (``""``) = the node fits."""


def _fits(free: IntArray, pod: PodInfo) -> BoolArray:
    """(m,) True where ``free`` (m, 7) covers the pod's request in every requested column."""
    cols = pod.request_cols.tolist()
    if not cols:
        return np.ones(len(free), np.bool_)
    request = pod.request
    ok: BoolArray = free[:, cols[0]] >= request[cols[0]]
    for c in cols[1:]:
        ok &= free[:, c] >= request[c]
    return ok


class NodeResourcesFit(_ResourceScore):
    """Filter: requested resources fit the node's free resources; Score: the configured
    :class:`ScoringStrategy` (Kubernetes NodeResourcesFit); Reserve: book the request."""

    name = "NodeResourcesFit"
    events = frozenset({NODE_ADD, NODE_RESOURCE, POD_DELETE})

    def __init__(self, args: NodeResourcesFitArgs | None = None) -> None:
        a = (args or NodeResourcesFitArgs()).scoring_strategy
        super().__init__(a.resources, a.shape)
        self.strategy = a.type

    def filter(self, state: CycleState, pod: PodInfo) -> BoolArray:
        """(n,) True where free ≥ request for every requested column (one comparison per requested
        column: NumPy's ``all(axis=1)`` over 7 columns costs ten times more)."""
        return _fits(state.table.free, pod)

    def filter_rows(self, state: CycleState, pod: PodInfo, rows: npt.NDArray[np.intp]) -> BoolArray:
        """(len(rows),) :meth:`filter` on ``rows`` only (one compiled loop: kernels.py)."""
        out: BoolArray = fit_rows(state.table.free, rows, pod.fit_request)
        return out

    def filter_node(self, state: CycleState, pod: PodInfo, i: int) -> bool:
        """:meth:`filter` on row ``i`` with Python ints (requested columns only)."""
        free = state.table.free[i].tolist()
        request = pod.request_ints
        for c in pod.request_col_ints:
            if free[c] < request[c]:
                return False
        return True

    def reason_codes(self, state: CycleState, pod: PodInfo,
                     rows: npt.NDArray[np.intp]) -> tuple[npt.NDArray[np.uint8], tuple[str, ...]]:
        """(len(rows),) codes into :data:`FIT_LABELS`: a bit per requested column whose free amount
        is below the request (0 where the pod fits)."""
        short = state.table.free[rows] < pod.fit_request
        return (short @ _BITS).astype(np.uint8), FIT_LABELS

    def pool_filter(self, state: CycleState, pods: Sequence[PodInfo], rows: npt.NDArray[np.intp]) -> BoolArray:
        """(P, d) :meth:`filter` of every pod on every row of ``rows`` (a queueing hint, hints.py)."""
        fit = np.stack([p.fit_request for p in pods])
        ok: BoolArray = np.asarray((state.table.free[rows][None, :, :] >= fit[:, None, :]).all(axis=2))
        return ok

    def explain(self, state: CycleState, pod: PodInfo, rejected: BoolArray) -> dict[str, int]:
        """Per requested resource, how many ``rejected`` nodes lack it (a node may count twice)."""
        free = state.table.free
        out: dict[str, int] = {}
        for col in pod.request_cols:
            c = int(np.count_nonzero(rejected & (free[:, col] < pod.request[col])))
            if c:
                out[INSUFFICIENT[int(col)]] = c
        return out

    def reserve(self, table: NodeTable, pod: PodInfo, node: int, now: float) -> None:
        """Add the pod's request vector to the node's allocation."""
        table.add_allocated(node, pod.request)

    def unreserve(self, table: NodeTable, pod: PodInfo, node: int) -> None:
        """Remove the pod's request vector from the node's allocation."""
        table.add_allocated(node, pod.request, -1)


class NodeResourcesLeastAllocated(_ResourceScore):
    """Score: LeastAllocated over the weighted resources (default cpu 1, memory 1, in the pod's kind
    columns) — the earlier Kubernetes plugin of this name; the same as NodeResourcesFit's Score
    with the LeastAllocated strategy."""

    name = "NodeResourcesLeastAllocated"
    events: frozenset[str] = frozenset()

    def __init__(self, args: ResourcesArgs | None = None) -> None:
        super().__init__((args or ResourcesArgs()).resources)


class NodeResourcesBalancedAllocation(_ResourceScore):
    """Score: prefers nodes whose requested fractions of the weighted resources are close to each
    other (Kubernetes NodeResourcesBalancedAllocation, :func:`balanced_scores`); weights only choose
    the resources, as in Kubernetes. 0 on every node for a pod requesting none of them."""

    name = "NodeResourcesBalancedAllocation"
    events: frozenset[str] = frozenset()
    strategy = "Balanced"

    def __init__(self, args: ResourcesArgs | None = None) -> None:
        super().__init__((args or ResourcesArgs()).resources)
