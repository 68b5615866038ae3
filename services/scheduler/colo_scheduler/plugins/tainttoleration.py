"""TaintToleration (Filter): a node with a NoSchedule/NoExecute taint the pod does not tolerate is rejected.

Matching follows Kubernetes: a toleration with an empty effect matches every effect;
``Exists`` with an empty key matches every taint; ``Exists`` matches any value of its
key; ``Equal`` needs key and value equal. PreferNoSchedule taints do not filter.
Masks are cached per toleration set until a node's taints change.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from colo.messages import Taint
from colo_scheduler.framework.interface import NODE_ADD, CycleState
from colo_scheduler.podinfo import PodInfo
from colo_scheduler.table import BoolArray, NodeTable

REASON = "node(s) had untolerated taint"

TolerationKey = tuple[str, str, str, str]
"""(key, operator, value, effect) of a toleration."""


def tolerates(tol: TolerationKey, taint: Taint) -> bool:
    """Whether one toleration tolerates ``taint`` (Kubernetes semantics)."""
    key, operator, value, effect = tol
    if effect and effect != taint.effect:
        return False
    if operator == "Exists":
        return key == "" or key == taint.key
    return key == taint.key and value == taint.value


def taint_builder(tolerations: tuple[TolerationKey, ...]) -> Callable[[NodeTable], BoolArray]:
    """A mask builder: (n,) True where every filtering taint of the node is tolerated."""

    def build(table: NodeTable) -> BoolArray:
        def ok(i: int) -> bool:
            return all(
                taint.effect == "PreferNoSchedule" or any(tolerates(t, taint) for t in tolerations)
                for taint in table.taints(i)
            )

        return np.fromiter((ok(i) for i in range(table.n)), dtype=np.bool_, count=table.n)

    return build


class TaintToleration:
    """Filter on node taints vs ``PodSpec.tolerations``."""

    name = "TaintToleration"
    events = frozenset({NODE_ADD})

    def pool_key(self, pod: PodInfo) -> object:
        """Hashable key on which :meth:`filter` alone depends (a queueing hint, hints.py)."""
        return pod.tolerations_key

    def filter(self, state: CycleState, pod: PodInfo) -> BoolArray | None:
        """(n,) True where the pod tolerates every NoSchedule/NoExecute taint; None when all do."""
        key = pod.tolerations_key
        return state.table.cached_mask(self.name, key, taint_builder(key))

    def explain(self, state: CycleState, pod: PodInfo, rejected: BoolArray) -> dict[str, int]:
        """All nodes this filter rejects share one reason."""
        ok = self.filter(state, pod)
        k = 0 if ok is None else int(np.count_nonzero(rejected & ~ok))
        return {REASON: k} if k else {}
