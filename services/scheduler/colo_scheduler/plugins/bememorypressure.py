"""BEMemoryPressure (Filter): no BE pod, and no pod requesting batch-memory, on a node under BE memory pressure.

A node is under BE memory pressure while its node agent reports the condition (node memory at the BE
memory eviction threshold, 70 % by default, or a BE memory eviction, until memory has stayed below the lower
threshold for the NodeSLO's hold, 300 s; docs/node-agent.md "BE memory pressure"); the slo-manager then
publishes ``NodeResource.memory_pressure`` (with batch-memory 0). Rejecting there keeps admission no looser
than eviction (REFERENCE.md §11, first bullet): LoadAware's memory threshold (95 %) alone would put an
evicted pod straight back on the node that just evicted it. The verdict reads only the pod's class and the
table's ``memory_pressure`` column, which changes with a NodeResource (event ``NodeResource``).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from colo.classes import qos_class_of
from colo_scheduler.framework.interface import NODE_RESOURCE, CycleState
from colo_scheduler.podinfo import PodInfo
from colo_scheduler.table import BoolArray

REASON = "node(s) under BE memory pressure (evicting BE pods for memory)"
LABELS: tuple[str, ...] = ("", REASON)
"""Reason code → label: 0 passes, 1 the node is under BE memory pressure."""

_KEY = "be_memory"
"""``PodInfo.extra`` key: whether the pod is BE or requests batch-memory."""


def be_memory_pod(pod: PodInfo) -> bool:
    """True for a BE pod or one requesting (or limited in) batch-memory; cached on the pod."""
    cached = pod.extra.get(_KEY)
    if isinstance(cached, bool):
        return cached
    spec = pod.spec
    out = qos_class_of(spec) == "BE" or spec.requests.batch_memory > 0 or spec.limits.batch_memory > 0
    pod.extra[_KEY] = out
    return out


class BEMemoryPressure:
    """Filter on ``NodeTable.memory_pressure`` for BE / batch-memory pods."""

    name = "BEMemoryPressure"
    events = frozenset({NODE_RESOURCE})
    app_blind = True
    """Never reads the pod's app (classcache.py)."""

    def pool_key(self, pod: PodInfo) -> object:
        """Hashable key on which :meth:`filter` alone depends (a queueing hint, hints.py)."""
        return be_memory_pod(pod)

    def filter(self, state: CycleState, pod: PodInfo) -> BoolArray | None:
        """(n,) True where the node is not under pressure; None for other pods or when no node is."""
        if not be_memory_pod(pod):
            return None
        pressure = state.table.memory_pressure
        if not pressure.any():
            return None
        ok: BoolArray = ~pressure
        return ok

    def filter_rows(self, state: CycleState, pod: PodInfo, rows: npt.NDArray[np.intp]) -> BoolArray:
        """(len(rows),) :meth:`filter` on ``rows`` only."""
        if not be_memory_pod(pod):
            return np.ones(len(rows), np.bool_)
        ok: BoolArray = ~state.table.memory_pressure[rows]
        return ok

    def filter_node(self, state: CycleState, pod: PodInfo, i: int) -> bool:
        """:meth:`filter` on row ``i``."""
        return not (be_memory_pod(pod) and bool(state.table.memory_pressure.item(i)))

    def reason_codes(self, state: CycleState, pod: PodInfo,
                     rows: npt.NDArray[np.intp]) -> tuple[npt.NDArray[np.uint8], tuple[str, ...]]:
        """(len(rows),) codes into :data:`LABELS` (1 where the node is under pressure)."""
        return (~self.filter_rows(state, pod, rows)).astype(np.uint8), LABELS

    def explain(self, state: CycleState, pod: PodInfo, rejected: BoolArray) -> dict[str, int]:
        """All nodes this filter rejects share one reason."""
        ok = self.filter(state, pod)
        k = 0 if ok is None else int(np.count_nonzero(rejected & ~ok))
        return {REASON: k} if k else {}
