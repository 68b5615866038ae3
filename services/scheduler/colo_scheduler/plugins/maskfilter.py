"""Shared row methods of Filter plugins whose verdict is a mask cached by the table per distinct pod
key (NodeSelector, NodeAffinity, TaintToleration): the one-row, some-rows, reason and explain
methods all index that mask."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from colo_scheduler.framework.interface import CycleState
from colo_scheduler.podinfo import PodInfo
from colo_scheduler.table import BoolArray


class CachedMaskFilter:
    """Base of a Filter whose :meth:`filter` returns a cached (n,) mask (or None when no node is
    rejected) that depends only on the pod and on node labels/taints; every node it rejects shares
    ``reason``."""

    app_blind = True
    """The mask reads labels/taints and the pod's selector-like fields, never its app (classcache.py)."""

    reason = ""
    static = True
    """Verdict depends only on node labels/taints (framework/classcache.py STATIC)."""

    def filter(self, state: CycleState, pod: PodInfo) -> BoolArray | None:
        """(n,) True where the pod may go; None when every node passes (subclasses)."""
        raise NotImplementedError

    def filter_rows(self, state: CycleState, pod: PodInfo, rows: npt.NDArray[np.intp]) -> BoolArray:
        """(len(rows),) :meth:`filter` on ``rows`` only (the cached mask indexed)."""
        mask = self.filter(state, pod)
        if mask is None:
            return np.ones(len(rows), np.bool_)
        out: BoolArray = mask[rows]
        return out

    def filter_node(self, state: CycleState, pod: PodInfo, i: int) -> bool:
        """:meth:`filter` on row ``i``."""
        mask = self.filter(state, pod)
        return True if mask is None else bool(mask[i])

    def reason_codes(self, state: CycleState, pod: PodInfo,
                     rows: npt.NDArray[np.intp]) -> tuple[npt.NDArray[np.uint8], tuple[str, ...]]:
        """(len(rows),) codes into ``("", reason)``: 1 where the row is rejected."""
        return (~self.filter_rows(state, pod, rows)).astype(np.uint8), ("", self.reason)

    def explain(self, state: CycleState, pod: PodInfo, rejected: BoolArray) -> dict[str, int]:
        """All nodes this filter rejects share one reason."""
        ok = self.filter(state, pod)
        k = 0 if ok is None else int(np.count_nonzero(rejected & ~ok))
        return {self.reason: k} if k else {}
