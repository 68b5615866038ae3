"""SelectorSpread (Score with NormalizeScore, Reserve): spread the pods of one application over nodes.

The Kubernetes SelectorSpread plugin restricted to the hostname topology, with the pod's
``app`` as its selector: raw = pods of the app already on the node (row-local, the table's
app count); NormalizeScore = 100 × (max − count) // max over the feasible nodes, 100 everywhere
when that max is 0 (integer form of Kubernetes' ``MaxNodeScore × (max − count) / max``). Pods
without an ``app`` score 100 on every node. MaxInstancePerNode stays the hard cap; both book
the app count once (:func:`colo_scheduler.plugins.maxinstance.count_app`).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from colo_scheduler.framework.interface import CycleState, SparseScores
from colo_scheduler.kernels import spread_rows
from colo_scheduler.plugins.maxinstance import count_app, uncount_app
from colo_scheduler.podinfo import IntArray, PodInfo
from colo_scheduler.table import BoolArray, NodeTable

_CONSTANT: dict[tuple[int, int], IntArray] = {}


def constant_scores(n: int, value: int) -> IntArray:
    """A read-only (n,) array of ``value`` (shared: normalize results are never written to)."""
    out = _CONSTANT.get((n, value))
    if out is None:
        if len(_CONSTANT) > 64:
            _CONSTANT.clear()
        out = _CONSTANT[(n, value)] = np.full(n, value, np.int64)
        out.setflags(write=False)
    return out


def feasible_max(raw: IntArray, feasible: BoolArray) -> int:
    """max(raw over feasible rows), 0 when none, for raw ≥ 0 (a product and a max: NumPy's masked
    ``max(where=…)`` is five times slower)."""
    if not raw.any():
        return 0
    return int((raw * feasible).max())


def spread_scores(raw: IntArray, feasible: BoolArray) -> SparseScores | int:
    """100 × (max − raw) // max with max over feasible rows (raw ≥ 0): 100 on every row with raw 0,
    so the rows holding pods (few: an app's pods sit on few nodes) as :class:`SparseScores`; the int
    100 when max is 0. Rows above max (infeasible ones) count as max (score 0), so every value is
    within 0..100."""
    nz, values, top = spread_rows(raw, feasible)  # one compiled pass (kernels.py)
    if top <= 0:
        return 100
    return SparseScores(100, nz, values)


def normalize_spread(raw: IntArray, feasible: BoolArray) -> IntArray:
    """(n,) :func:`spread_scores` as a full vector (100 everywhere when max is 0)."""
    got = spread_scores(raw, feasible)
    return constant_scores(len(raw), got) if isinstance(got, int) else got.dense(len(raw))


class SelectorSpread:
    """Prefers nodes holding fewer pods of the pod's ``app``."""

    pod_level = True
    """Raw scores are the table's app counts, read at each decision instead of kept per pod class
    (classcache.py): pods of one class may belong to different apps."""

    name = "SelectorSpread"
    events: frozenset[str] = frozenset()

    def score(self, state: CycleState, pod: PodInfo) -> IntArray:
        """(n,) raw: pods of the app on each node (0 without an app)."""
        if not pod.spec.app:
            return np.zeros(state.table.n, np.int64)
        return state.table.app_count(pod.spec.app).copy()

    def score_rows(self, state: CycleState, pod: PodInfo, rows: npt.NDArray[np.intp]) -> IntArray:
        """(len(rows),) :meth:`score` on ``rows`` only."""
        if not pod.spec.app:
            return np.zeros(len(rows), np.int64)
        out: IntArray = state.table.app_count(pod.spec.app)[rows]
        return out

    def score_node(self, state: CycleState, pod: PodInfo, i: int) -> int:
        """:meth:`score` on row ``i``."""
        return int(state.table.app_count(pod.spec.app)[i]) if pod.spec.app else 0

    def normalize(self, state: CycleState, pod: PodInfo, raw: IntArray, feasible: BoolArray) -> SparseScores | int:
        """:func:`spread_scores` of ``raw`` (the nodes holding the app's pods); the int 100 (the same on
        every node, no array pass) for a pod without an app or whose app has no pod on any node yet."""
        if not pod.spec.app:
            return 100
        return spread_scores(raw, feasible)

    def reserve(self, table: NodeTable, pod: PodInfo, node: int, now: float) -> None:
        """Count the pod on the node for its app (once, shared with MaxInstancePerNode)."""
        count_app(table, pod, node)

    def unreserve(self, table: NodeTable, pod: PodInfo, node: int) -> None:
        """Undo :meth:`reserve`."""
        uncount_app(table, pod)
