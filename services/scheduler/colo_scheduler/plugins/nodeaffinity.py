"""NodeAffinity (PreFilter, Filter, Score with NormalizeScore): Kubernetes required and preferred node
affinity over node labels (matching rules in :mod:`colo.affinity`).

* PreFilter: a pod whose affinity is invalid (unknown operator, Gt/Lt without one integer
  value, In/NotIn without values, a weight outside 1..100, required without terms) is
  rejected as UNSCHEDULABLE_AND_UNRESOLVABLE with every problem named: no node change can help.
* Filter: the node matches at least one required term (terms ORed, expressions ANDed). The
  per-node match runs once per distinct term set and is cached by the table until labels or
  nodes change (:meth:`NodeTable.cached_mask`).
* Score: raw = Σ weights of the preferred terms the node matches (cached per distinct
  preferred set the same way); NormalizeScore = raw × 100 // max over feasible nodes, all 0
  when that max is 0 (Kubernetes ``helper.DefaultNormalizeScore``, not reversed).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from colo.affinity import preferred_score, required_matches
from colo_scheduler.framework.interface import (
    NODE_ADD,
    UNSCHEDULABLE_AND_UNRESOLVABLE,
    CycleState,
    Status,
)
from colo_scheduler.plugins.maskfilter import CachedMaskFilter
from colo_scheduler.plugins.selectorspread import constant_scores, feasible_max
from colo_scheduler.podinfo import IntArray, PodInfo
from colo_scheduler.table import BoolArray, NodeTable

REASON = "node(s) didn't match Pod's node affinity/selector"
"""Kubernetes ErrReasonPod of NodeAffinity (shared with NodeSelector)."""
INVALID = "invalid node affinity"


def normalize_max(raw: IntArray, feasible: BoolArray) -> IntArray:
    """Kubernetes DefaultNormalizeScore (not reversed): raw × 100 // max(raw over feasible), all 0 when
    that max is 0 or nothing is feasible (raw ≥ 0). Rows above max (infeasible ones) count as max, so
    every value is within 0..100."""
    top = feasible_max(raw, feasible)
    if top <= 0:
        return constant_scores(len(raw), 0)
    out: IntArray = np.minimum(raw, top) * 100 // top
    return out


class NodeAffinity(CachedMaskFilter):
    """Required and preferred node affinity of ``PodSpec.affinity``."""

    name = "NodeAffinity"
    events = frozenset({NODE_ADD})
    reason = REASON

    def __init__(self) -> None:
        self._raw: dict[object, IntArray] = {}
        self._raw_version = -1

    def pre_filter(self, state: CycleState, pod: PodInfo) -> Status | None:
        """UNSCHEDULABLE_AND_UNRESOLVABLE naming every problem of an invalid affinity, else None."""
        if pod.affinity_problems:
            return Status(UNSCHEDULABLE_AND_UNRESOLVABLE, f"{INVALID}: " + "; ".join(pod.affinity_problems))
        return None

    def pool_key(self, pod: PodInfo) -> object:
        """Hashable key on which :meth:`filter` alone depends (a queueing hint, hints.py)."""
        return pod.required_affinity_key

    def _builder(self, pod: PodInfo) -> Callable[[NodeTable], BoolArray]:
        na = pod.spec.affinity.node_affinity if pod.spec.affinity is not None else None
        terms = na.required.node_selector_terms if na is not None and na.required is not None else []

        def build(table: NodeTable) -> BoolArray:
            return np.fromiter((required_matches(terms, table.labels(i)) for i in range(table.n)),
                               dtype=np.bool_, count=table.n)

        return build

    def filter(self, state: CycleState, pod: PodInfo) -> BoolArray | None:
        """(n,) True where a required term matches; None without required affinity or when all match."""
        key = pod.required_affinity_key
        if key is None:
            return None
        return state.table.cached_mask(self.name, key, self._builder(pod))

    def _raw_scores(self, table: NodeTable, pod: PodInfo) -> IntArray | None:
        key = pod.preferred_affinity_key
        if not key:
            return None
        if self._raw_version != table.version:
            self._raw.clear()
            self._raw_version = table.version
        raw = self._raw.get(key)
        if raw is None:
            na = pod.spec.affinity.node_affinity if pod.spec.affinity is not None else None
            preferred = na.preferred if na is not None else []
            raw = self._raw[key] = np.fromiter(
                (preferred_score(preferred, table.labels(i)) for i in range(table.n)),
                dtype=np.int64, count=table.n)
        return raw

    def score(self, state: CycleState, pod: PodInfo) -> IntArray:
        """(n,) raw: Σ weights of matched preferred terms (may exceed 100; :meth:`normalize` scales)."""
        raw = self._raw_scores(state.table, pod)
        return np.zeros(state.table.n, np.int64) if raw is None else raw.copy()

    def score_rows(self, state: CycleState, pod: PodInfo, rows: npt.NDArray[np.intp]) -> IntArray:
        """(len(rows),) :meth:`score` on ``rows`` only."""
        raw = self._raw_scores(state.table, pod)
        if raw is None:
            return np.zeros(len(rows), np.int64)
        out: IntArray = raw[rows]
        return out

    def score_node(self, state: CycleState, pod: PodInfo, i: int) -> int:
        """:meth:`score` on row ``i``."""
        raw = self._raw_scores(state.table, pod)
        return 0 if raw is None else int(raw[i])

    def normalize(self, state: CycleState, pod: PodInfo, raw: IntArray, feasible: BoolArray) -> IntArray | int:
        """(n,) :func:`normalize_max` of ``raw``; the int 0 (the same on every node, no array pass)
        for a pod without preferred terms or when no feasible node matches any."""
        if not pod.preferred_affinity_key or feasible_max(raw, feasible) <= 0:
            return 0
        return normalize_max(raw, feasible)
