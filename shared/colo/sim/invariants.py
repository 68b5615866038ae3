"""Invariants checked in Redis at the end of a run (e2e tests and the demo)."""

from __future__ import annotations

from colo.messages import RESOURCE_NAMES, NodeResource, Resources
from colo.store import Store

_BATCH_MID = ("batch_cpu", "batch_memory", "mid_cpu", "mid_memory")


def over_commitments(nodes: dict[str, Resources], extended: dict[str, Resources],
                     allocated: dict[str, Resources]) -> list[str]:
    """Every (node, resource) whose allocation exceeds what the node offers.

    ``nodes`` maps a node to its allocatable (cpu milli-cores, memory bytes, pods count);
    ``extended`` to its batch/mid allocatable (as ``Resources`` with batch_*/mid_* set;
    a missing node offers 0); ``allocated`` to the sums recorded by binds. Allocation on an
    unknown node is a violation too.
    """
    out: list[str] = []
    for node, alloc in sorted(allocated.items()):
        if node not in nodes:
            if any(getattr(alloc, r) for r in RESOURCE_NAMES):
                out.append(f"{node}: allocation on an unknown node")
            continue
        cap = nodes[node]
        ext = extended.get(node, Resources())
        for r in ("cpu", "memory", "pods"):
            limit = getattr(cap, r)
            if r == "pods" and limit <= 0:
                continue
            if getattr(alloc, r) > limit:
                out.append(f"{node}: {r} allocated {getattr(alloc, r)} > allocatable {limit}")
        for r in _BATCH_MID:
            if getattr(alloc, r) > getattr(ext, r):
                out.append(f"{node}: {r} allocated {getattr(alloc, r)} > offered {getattr(ext, r)}")
    return out


class AllocationWatch:
    """Checks after every tick that no node is over-committed on any resource, incl. batch-*/mid-*.

    Native cpu/memory/pods are compared with the node's allocatable. Batch/mid offers change
    over time and bound pods are not evicted when an offer shrinks, so an allocation is
    compared with the largest offer seen since the previous check, and only when the
    allocation grew (a bind happened): a bind is refused unless it fits the offer current
    at bind time (REFERENCE.md §3, colo.store). ``violations`` accumulates messages.
    """

    def __init__(self) -> None:
        self.violations: list[str] = []
        self._max_offer: dict[str, Resources] = {}
        self._last: dict[str, Resources] = {}

    def offered(self, res: NodeResource) -> None:
        """A NodeResource seen on the bus: raise the interval's maximum offer of its node."""
        prev = self._max_offer.get(res.node, Resources())
        self._max_offer[res.node] = Resources(**{
            r: max(getattr(prev, r), getattr(res, r)) for r in _BATCH_MID})

    async def check(self, store: Store, at: float) -> list[str]:
        """Compare the store's allocations with allocatable and offers; returns new violations."""
        nodes = {n.name: n.allocatable for n in await store.list_nodes()}
        current = await store.list_node_resources()
        allocated = await store.all_allocated()
        ext: dict[str, Resources] = {}
        for name in set(current) | set(self._max_offer):
            cur = current.get(name)
            seen = self._max_offer.get(name, Resources())
            ext[name] = Resources(**{
                r: max(getattr(seen, r), getattr(cur, r) if cur else 0) for r in _BATCH_MID})
        grown = {}
        for name, alloc in allocated.items():
            last = self._last.get(name, Resources())
            if any(getattr(alloc, r) > getattr(last, r) for r in _BATCH_MID):
                grown[name] = alloc
            else:
                # no bind of batch/mid since the last check: only native resources are checked
                grown[name] = Resources(**{r: getattr(alloc, r) for r in ("cpu", "memory", "pods")})
        new = [f"t={at:.0f}s {v}" for v in over_commitments(nodes, ext, grown)]
        self.violations.extend(new)
        self._last = allocated
        self._max_offer = {name: Resources(**{r: getattr(current[name], r) for r in _BATCH_MID})
                           for name in current}
        return new
