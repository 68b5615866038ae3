"""NodeSelector (Filter): the node's labels contain every ``node_selector`` pair of the pod.

The per-node label match runs once per distinct selector and is cached by the
table until a node's labels change, so a cycle does no per-node Python work.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from colo_scheduler.framework.interface import NODE_ADD, CycleState
from colo_scheduler.podinfo import PodInfo
from colo_scheduler.table import BoolArray, NodeTable

REASON = "node(s) didn't match Pod's node affinity/selector"
LABELS: tuple[str, ...] = ("", REASON)
"""Reason code → label: 0 passes, 1 a selector pair does not match."""


def selector_builder(selector: tuple[tuple[str, str], ...]) -> Callable[[NodeTable], BoolArray]:
    """A mask builder for :meth:`NodeTable.cached_mask`: (n,) True where all pairs match."""

    def build(table: NodeTable) -> BoolArray:
        return np.fromiter(
            (all(table.labels(i).get(k) == v for k, v in selector) for i in range(table.n)),
            dtype=np.bool_, count=table.n,
        )

    return build


class NodeSelector:
    """Filter on ``PodSpec.node_selector``."""

    name = "NodeSelector"
    events = frozenset({NODE_ADD})
    static = True
    """Verdict depends only on node labels/taints (framework/classcache.py STATIC)."""

    def pool_key(self, pod: PodInfo) -> object:
        """Hashable key on which :meth:`filter` alone depends (a queueing hint, hints.py)."""
        return pod.selector_key

    def filter(self, state: CycleState, pod: PodInfo) -> BoolArray | None:
        """(n,) True where every selector pair matches; None when every node matches."""
        if not pod.selector_key:
            return None
        return state.table.cached_mask(self.name, pod.selector_key, selector_builder(pod.selector_key))

    def filter_rows(self, state: CycleState, pod: PodInfo, rows: npt.NDArray[np.intp]) -> BoolArray:
        """(len(rows),) :meth:`filter` on ``rows`` only (the cached mask indexed)."""
        mask = self.filter(state, pod)
        if mask is None:
            return np.ones(len(rows), np.bool_)
        out: BoolArray = mask[rows]
        return out

    def reason_codes(self, state: CycleState, pod: PodInfo,
                     rows: npt.NDArray[np.intp]) -> tuple[npt.NDArray[np.uint8], tuple[str, ...]]:
        """(len(rows),) codes into :data:`LABELS` (1 where a pair does not match)."""
        return (~self.filter_rows(state, pod, rows)).astype(np.uint8), LABELS

    def explain(self, state: CycleState, pod: PodInfo, rejected: BoolArray) -> dict[str, int]:
        """All nodes this filter rejects share one reason."""
        ok = self.filter(state, pod)
        k = 0 if ok is None else int(np.count_nonzero(rejected & ~ok))
        return {REASON: k} if k else {}
