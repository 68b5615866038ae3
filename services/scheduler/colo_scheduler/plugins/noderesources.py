"""NodeResourcesFit (Filter, Reserve) and NodeResourcesLeastAllocated (Score).

Fit follows the Kubernetes plugin of the same name over Colo's resource columns:
a node fits when, for every resource the pod requests (> 0), allocated + request ≤
allocatable — cpu, memory and the pod count against the node's allocatable,
batch-*/mid-* against its NodeResource (the same rule as the store's bind script,
docs/architecture.md "Store").
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from colo.messages import RESOURCE_NAMES
from colo_scheduler.framework.interface import NODE_ADD, NODE_RESOURCE, POD_DELETE, CycleState
from colo_scheduler.podinfo import IntArray, PodInfo
from colo_scheduler.table import BoolArray, NodeTable

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


class NodeResourcesFit:
    """Filter: requested resources fit the node's free resources; Reserve: book the request."""

    name = "NodeResourcesFit"
    events = frozenset({NODE_ADD, NODE_RESOURCE, POD_DELETE})

    def filter(self, state: CycleState, pod: PodInfo) -> BoolArray:
        """(n,) True where free ≥ request for every requested column (one (n, 7) comparison)."""
        ok: BoolArray = np.asarray((state.table.free >= pod.fit_request).all(axis=1))
        return ok

    def filter_rows(self, state: CycleState, pod: PodInfo, rows: npt.NDArray[np.intp]) -> BoolArray:
        """(len(rows),) :meth:`filter` on ``rows`` only."""
        ok: BoolArray = np.asarray((state.table.free[rows] >= pod.fit_request).all(axis=1))
        return ok

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


class NodeResourcesLeastAllocated:
    """Score: mean over the pod's (cpu, memory) columns of free-after-placement × 100 // allocatable.

    The columns are the pod's resource kind (native, batch-* or mid-*), so batch pods
    spread over batch allocatable. Kubernetes LeastAllocated with weights 1/1; a node
    with 0 allocatable in a column scores 0 there.
    """

    name = "NodeResourcesLeastAllocated"
    events: frozenset[str] = frozenset()

    def begin_cycle(self, state: CycleState) -> None:
        """Allocatable floored at 1 (divisor), once per cycle."""
        state.data[self.name] = np.maximum(state.table.alloc, 1)

    def score(self, state: CycleState, pod: PodInfo) -> IntArray:
        """(n,) int64 in 0..100."""
        c0 = pod.kind_cols[0]
        divisor: IntArray = state.data[self.name]  # type: ignore[assignment]
        left = np.maximum(state.table.free[:, c0:c0 + 2] - pod.kind_request, 0)
        s = left * 100 // divisor[:, c0:c0 + 2]
        out: IntArray = (s[:, 0] + s[:, 1]) >> 1
        return out

    def score_rows(self, state: CycleState, pod: PodInfo, rows: npt.NDArray[np.intp]) -> IntArray:
        """(len(rows),) :meth:`score` on ``rows`` only."""
        c0 = pod.kind_cols[0]
        divisor: IntArray = state.data[self.name]  # type: ignore[assignment]
        left = np.maximum(state.table.free[rows, c0:c0 + 2] - pod.kind_request, 0)
        s = left * 100 // divisor[rows, c0:c0 + 2]
        out: IntArray = (s[:, 0] + s[:, 1]) >> 1
        return out
