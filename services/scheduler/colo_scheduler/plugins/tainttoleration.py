"""TaintToleration (Filter): a node with a NoSchedule/NoExecute taint the pod does not tolerate is rejected.

Matching follows Kubernetes: a toleration with an empty effect matches every effect;
``Exists`` with an empty key matches every taint; ``Exists`` matches any value of its
key; ``Equal`` needs key and value equal. PreferNoSchedule taints do not filter.
Masks are cached per toleration set until a node's taints change.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from colo.affinity import tolerates_taint
from colo.messages import Taint
from colo_scheduler.framework.interface import NODE_ADD, CycleState
from colo_scheduler.plugins.maskfilter import CachedMaskFilter
from colo_scheduler.podinfo import PodInfo
from colo_scheduler.table import BoolArray, NodeTable

REASON = "node(s) had untolerated taint"

TolerationKey = tuple[str, str, str, str]
"""(key, operator, value, effect) of a toleration."""


def tolerates(tol: TolerationKey, taint: Taint) -> bool:
    """Whether one toleration tolerates ``taint`` (Kubernetes semantics, :func:`colo.affinity.tolerates_taint`)."""
    return tolerates_taint(*tol, taint)


def untolerated(tolerations: tuple[TolerationKey, ...], taints: list[Taint]) -> Taint | None:
    """The first NoSchedule/NoExecute taint of ``taints`` no toleration tolerates, or None."""
    for taint in taints:
        if taint.effect != "PreferNoSchedule" and not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None


def taint_reason(taint: Taint) -> str:
    """``"node(s) had untolerated taint {key=value:Effect}"`` (kubectl taint notation; no ``=`` when
    the value is empty)."""
    kv = f"{taint.key}={taint.value}" if taint.value else taint.key
    return f"{REASON} {{{kv}:{taint.effect}}}"


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


class TaintToleration(CachedMaskFilter):
    """Filter on node taints vs ``PodSpec.tolerations``."""

    name = "TaintToleration"
    events = frozenset({NODE_ADD})
    reason = REASON

    def __init__(self) -> None:
        self._codes: dict[tuple[TolerationKey, ...], tuple[npt.NDArray[np.uint8], tuple[str, ...]]] = {}
        self._codes_version = -1

    def pool_key(self, pod: PodInfo) -> object:
        """Hashable key on which :meth:`filter` alone depends (a queueing hint, hints.py)."""
        return pod.tolerations_key

    def filter(self, state: CycleState, pod: PodInfo) -> BoolArray | None:
        """(n,) True where the pod tolerates every NoSchedule/NoExecute taint; None when all do."""
        key = pod.tolerations_key
        return state.table.cached_mask(self.name, key, taint_builder(key))

    def reason_codes(self, state: CycleState, pod: PodInfo,
                     rows: npt.NDArray[np.intp]) -> tuple[npt.NDArray[np.uint8], tuple[str, ...]]:
        """(len(rows),) codes into labels naming each row's first untolerated taint
        (:func:`taint_reason`); 0 (``""``) where the row passes. Past 254 distinct taints the rest
        share the plain ``"node(s) had untolerated taint"``. Built once per toleration set until a
        node's taints change."""
        table = state.table
        if self._codes_version != table.version:
            self._codes.clear()
            self._codes_version = table.version
        key = pod.tolerations_key
        entry = self._codes.get(key)
        if entry is None:
            labels: dict[str, int] = {"": 0}
            codes = np.zeros(table.n, np.uint8)
            for i in range(table.n):
                taint = untolerated(key, table.taints(i))
                if taint is not None:
                    label = taint_reason(taint)
                    code = labels.get(label)
                    if code is None:
                        code = labels.setdefault(label if len(labels) < 255 else REASON, len(labels))
                    codes[i] = code
            entry = self._codes[key] = (codes, tuple(labels))
        return entry[0][rows], entry[1]
