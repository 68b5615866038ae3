"""NodeResourcesFit (Filter, Reserve) and NodeResourcesLeastAllocated (Score).

Fit follows the Kubernetes plugin of the same name over Colo's resource columns:
a node fits when, for every resource the pod requests (> 0), allocated + request ≤
allocatable — cpu, memory and the pod count against the node's allocatable,
batch-*/mid-* against its NodeResource (the same rule as the store's bind script,
docs/architecture.md "Store").
"""

from __future__ import annotations

import numpy as np

from colo.messages import RESOURCE_NAMES
from colo_scheduler.framework.interface import NODE_ADD, NODE_RESOURCE, POD_DELETE, CycleState
from colo_scheduler.podinfo import IntArray, PodInfo
from colo_scheduler.table import BoolArray, NodeTable

INSUFFICIENT: dict[int, str] = {
    i: ("Too many pods" if name == "pods" else f"Insufficient {name.replace('_', '-')}")
    for i, name in enumerate(RESOURCE_NAMES)
}
"""Column → Kubernetes-style rejection reason (``"Insufficient batch-cpu"``, ``"Too many pods"``)."""


class NodeResourcesFit:
    """Filter: requested resources fit the node's free resources; Reserve: book the request."""

    name = "NodeResourcesFit"
    events = frozenset({NODE_ADD, NODE_RESOURCE, POD_DELETE})

    def filter(self, state: CycleState, pod: PodInfo) -> BoolArray:
        """(n,) True where free ≥ request for every requested column."""
        cols = pod.request_cols
        ok: BoolArray = (state.table.free[:, cols] >= pod.request[cols]).all(axis=1)
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
    """Score: mean over the pod's (cpu, memory) columns of free-after-placement / allocatable × 100.

    The columns are the pod's resource kind (native, batch-* or mid-*), so batch pods
    spread over batch allocatable. Kubernetes LeastAllocated with weights 1/1.
    """

    name = "NodeResourcesLeastAllocated"
    events: frozenset[str] = frozenset()

    def score(self, state: CycleState, pod: PodInfo) -> IntArray:
        """(n,) int64 in 0..100."""
        t = state.table
        cols = list(pod.kind_cols)
        alloc = t.alloc[:, cols]
        left = np.maximum(t.free[:, cols] - pod.request[cols], 0)
        s = np.where(alloc > 0, left * 100 // np.maximum(alloc, 1), 0)
        out: IntArray = (s[:, 0] + s[:, 1]) // 2
        return out
