"""Invariants checked in Redis at the end of a run (e2e tests and the demo)."""

from __future__ import annotations

from typing import Any

from colo import codec
from colo.messages import RESOURCE_NAMES, NodeResource, NodeSpec, Resources
from colo.store import Store

_BATCH_MID = ("batch_cpu", "batch_memory", "mid_cpu", "mid_memory")
_ALLOC_FIELDS = ("cpu", "memory", "batch_cpu", "batch_memory", "mid_cpu", "mid_memory", "pods")

_ALLOCATED_LUA = """
local out = {}
for i, key in ipairs(KEYS) do
  out[i] = table.concat(redis.call('HGETALL', key), ',')
end
return table.concat(out, ';')
"""
"""Every allocation hash of KEYS in one reply: ``f,v,f,v;f,v;...`` (fields are plain names, values integers)."""


def _text(raw: Any) -> str:
    return raw.decode() if isinstance(raw, bytes) else str(raw)


def parse_allocated(names: list[str], reply: str) -> dict[str, Resources]:
    """The allocations of ``names`` from one :data:`_ALLOCATED_LUA` reply; equal to
    :meth:`colo.store.Store.all_allocated` (missing fields and empty hashes are 0).

    Raises ValueError when the reply does not have one part per name or a value is not an integer.
    """
    parts = reply.split(";") if names else []
    if len(parts) != len(names):
        raise ValueError(f"allocation reply has {len(parts)} parts for {len(names)} nodes")
    out: dict[str, Resources] = {}
    for name, part in zip(names, parts):
        flat = part.split(",") if part else []
        vals = {flat[i]: int(flat[i + 1] or 0) for i in range(0, len(flat) - 1, 2)}
        out[name] = Resources(**{k: vals.get(k, 0) for k in _ALLOC_FIELDS})
    return out


class StoreSnapshot:
    """Reads what the allocation check needs from the store in four round trips per tick.

    Node specs and NodeResources are decoded again only when their stored bytes changed
    (most do not change between ticks); allocations are read in one server-side script.
    The results equal :meth:`Store.list_nodes` (allocatable per node),
    :meth:`Store.list_node_resources` and :meth:`Store.all_allocated`.
    """

    def __init__(self) -> None:
        self._nodes: dict[str, tuple[bytes, str, Resources]] = {}
        self._resources: dict[str, tuple[bytes, NodeResource]] = {}

    async def read(self, store: Store) -> tuple[dict[str, Resources], dict[str, NodeResource],
                                                 dict[str, Resources]]:
        """(allocatable per node, NodeResource per node that has one, allocation per node)."""
        k = store.keys
        names = sorted(_text(n) for n in await store.redis.smembers(k.nodes))
        if not names:
            return {}, {}, {}
        pipe = store.redis.pipeline(transaction=False)
        pipe.mget([k.node(n) for n in names])
        pipe.mget([k.node_resource(n) for n in names])
        pipe.eval(_ALLOCATED_LUA, len(names), *[k.allocated(n) for n in names])
        spec_raws, res_raws, alloc_raw = await pipe.execute()
        nodes: dict[str, Resources] = {}
        for name, raw in zip(names, spec_raws):
            if raw is None:
                continue
            cached = self._nodes.get(name)
            if cached is None or cached[0] != raw:
                spec = codec.decode(raw, NodeSpec)
                cached = self._nodes[name] = (raw, spec.name, spec.allocatable)
            nodes[cached[1]] = cached[2]
        resources: dict[str, NodeResource] = {}
        for name, raw in zip(names, res_raws):
            if raw is None:
                continue
            cached_r = self._resources.get(name)
            if cached_r is None or cached_r[0] != raw:
                cached_r = self._resources[name] = (raw, codec.decode(raw, NodeResource))
            resources[name] = cached_r[1]
        return nodes, resources, parse_allocated(names, _text(alloc_raw))


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
    at bind time (REFERENCE.md §3, colo.store). ``violations`` accumulates messages; ``allocated_total`` is
    the cluster's Σ allocation read by the last check (milli-cores, bytes, pods).
    """

    def __init__(self) -> None:
        self.violations: list[str] = []
        self.allocated_total = Resources()
        self._max_offer: dict[str, Resources] = {}
        self._last: dict[str, Resources] = {}
        self._snapshot = StoreSnapshot()

    def offered(self, res: NodeResource) -> None:
        """A NodeResource seen on the bus: raise the interval's maximum offer of its node."""
        prev = self._max_offer.get(res.node, Resources())
        self._max_offer[res.node] = Resources(**{
            r: max(getattr(prev, r), getattr(res, r)) for r in _BATCH_MID})

    async def check(self, store: Store, at: float) -> list[str]:
        """Compare the store's allocations with allocatable and offers; returns new violations."""
        nodes, current, allocated = await self._snapshot.read(store)
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
        self.allocated_total = Resources(**{r: sum(getattr(a, r) for a in allocated.values()) for r in _ALLOC_FIELDS})
        self._last = allocated
        self._max_offer = {name: Resources(**{r: getattr(current[name], r) for r in _BATCH_MID})
                           for name in current}
        return new
