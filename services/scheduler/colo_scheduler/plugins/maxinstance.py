"""MaxInstancePerNode (Filter, Reserve): at most ``max_instance_per_node`` pods of one ``app`` per node.

Pods with an empty ``app`` or a cap of −1 are not limited; every pod with an ``app``
is counted (Reserve) so that capped pods of the same app see it. The count is shared with
SelectorSpread: :func:`count_app` / :func:`uncount_app` book a pod once whichever of the two
plugins reserves it first.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from colo_scheduler.framework.interface import NODE_ADD, POD_DELETE, CycleState
from colo_scheduler.podinfo import PodInfo
from colo_scheduler.table import BoolArray, NodeTable

_COUNTED = "app_row"
"""``PodInfo.extra`` key: the row on which the pod's app count is booked."""


def count_app(table: NodeTable, pod: PodInfo, node: int) -> None:
    """Book one pod of ``pod.spec.app`` on row ``node`` unless already booked (no-op without app)."""
    if pod.spec.app and _COUNTED not in pod.extra:
        table.add_app_count(pod.spec.app, node, 1)
        pod.extra[_COUNTED] = node


def uncount_app(table: NodeTable, pod: PodInfo) -> None:
    """Undo :func:`count_app` (no-op when not booked)."""
    node = pod.extra.pop(_COUNTED, None)
    if isinstance(node, int):
        table.add_app_count(pod.spec.app, node, -1)


REASON = "node(s) reached max instances of app"
LABELS: tuple[str, ...] = ("", REASON)
"""Reason code → label: 0 passes, 1 the cap is reached."""


class MaxInstancePerNode:
    """Per-app instance cap per node, from ``PodSpec.app`` and ``PodSpec.max_instance_per_node``."""

    settled_none = True
    """``filter`` is None exactly for pods without an app or a cap, at any table state (classcache.py)."""

    app_blind = True
    """Reads the pod's app only for a pod with a cap (max_instance_per_node ≥ 0), whose class keeps
    its app (classcache.py)."""

    name = "MaxInstancePerNode"
    events = frozenset({NODE_ADD, POD_DELETE})

    def pool_key(self, pod: PodInfo) -> object:
        """Hashable key on which :meth:`filter` alone depends (a queueing hint, hints.py)."""
        return (pod.spec.app, pod.spec.max_instance_per_node)

    def filter(self, state: CycleState, pod: PodInfo) -> BoolArray | None:
        """(n,) True where the app has fewer than the cap on the node; None for uncapped pods."""
        cap = pod.spec.max_instance_per_node
        if not pod.spec.app or cap < 0:
            return None
        ok: BoolArray = state.table.app_count(pod.spec.app) < cap
        return ok

    def filter_rows(self, state: CycleState, pod: PodInfo, rows: npt.NDArray[np.intp]) -> BoolArray:
        """(len(rows),) :meth:`filter` on ``rows`` only."""
        cap = pod.spec.max_instance_per_node
        if not pod.spec.app or cap < 0:
            return np.ones(len(rows), np.bool_)
        ok: BoolArray = state.table.app_count(pod.spec.app)[rows] < cap
        return ok

    def filter_node(self, state: CycleState, pod: PodInfo, i: int) -> bool:
        """:meth:`filter` on row ``i``."""
        cap = pod.spec.max_instance_per_node
        if not pod.spec.app or cap < 0:
            return True
        return bool(state.table.app_count(pod.spec.app).item(i) < cap)

    def reason_codes(self, state: CycleState, pod: PodInfo,
                     rows: npt.NDArray[np.intp]) -> tuple[npt.NDArray[np.uint8], tuple[str, ...]]:
        """(len(rows),) codes into :data:`LABELS` (1 where the cap is reached)."""
        return (~self.filter_rows(state, pod, rows)).astype(np.uint8), LABELS

    def explain(self, state: CycleState, pod: PodInfo, rejected: BoolArray) -> dict[str, int]:
        """All nodes this filter rejects share one reason."""
        ok = self.filter(state, pod)
        k = 0 if ok is None else int(np.count_nonzero(rejected & ~ok))
        return {REASON: k} if k else {}

    def reserve(self, table: NodeTable, pod: PodInfo, node: int, now: float) -> None:
        """Count one more pod of the app on the node (:func:`count_app`)."""
        count_app(table, pod, node)

    def unreserve(self, table: NodeTable, pod: PodInfo, node: int) -> None:
        """Count one pod of the app less on the node (:func:`uncount_app`)."""
        uncount_app(table, pod)
