"""NodeSelector (Filter): the node's labels contain every ``node_selector`` pair of the pod.

The per-node label match runs once per distinct selector and is cached by the
table until a node's labels change, so a cycle does no per-node Python work.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from colo_scheduler.framework.interface import NODE_ADD, CycleState
from colo_scheduler.plugins.maskfilter import CachedMaskFilter
from colo_scheduler.podinfo import PodInfo
from colo_scheduler.table import BoolArray, NodeTable

REASON = "node(s) didn't match Pod's node affinity/selector"


def selector_builder(selector: tuple[tuple[str, str], ...]) -> Callable[[NodeTable], BoolArray]:
    """A mask builder for :meth:`NodeTable.cached_mask`: (n,) True where all pairs match."""

    def build(table: NodeTable) -> BoolArray:
        labels = [table.labels(i) for i in range(table.n)]
        out = np.ones(table.n, np.bool_)
        for k, v in selector:  # a pass per pair over the label dicts, not a generator per node
            out &= np.fromiter([lab.get(k) == v for lab in labels], np.bool_, len(labels))
        return out

    return build


class NodeSelector(CachedMaskFilter):
    """Filter on ``PodSpec.node_selector``."""

    name = "NodeSelector"
    events = frozenset({NODE_ADD})
    reason = REASON

    def pool_key(self, pod: PodInfo) -> object:
        """Hashable key on which :meth:`filter` alone depends (a queueing hint, hints.py)."""
        return pod.selector_key

    def filter(self, state: CycleState, pod: PodInfo) -> BoolArray | None:
        """(n,) True where every selector pair matches; None when every node matches."""
        if not pod.selector_key:
            return None
        return state.table.cached_mask(self.name, pod.selector_key, selector_builder(pod.selector_key))
