"""A migration target's schedulable room: what the store checks when the job reserves on it.

The store (:mod:`colo.store`, :mod:`colo.reservations`) refuses a reservation when, for any resource the pod
requests, ``allocated + request > limit``, where ``limit`` is the node's allocatable cpu/memory/pods
(``NodeSpec``) and its batch/mid offer (``NodeResource`` of the slo-manager, REFERENCE.md §3; no offer or a
reset node offers 0), and ``allocated`` is Σ requests of the pods bound there plus the room of the
reservations held on it (one pod slot each). LowNodeLoad picks targets by *usage*; a target must also have
this room, else its job waits Pending until it is Aborted (the reservation refused) and the hot node keeps
its pod.

``allocated`` per node is the larger, per resource, of

- the store's allocations (:meth:`TargetRoom.refresh`, read at the start of every round: the truth, as other
  schedulers' binds and every reservation are in it but not all are seen as events), and
- what the view knows: Σ requests of the pods it knows bound there (Pending/Running) plus the requests of the
  migrations it booked there whose replacement is not bound yet (their reservations).

Within a round, each planned eviction takes its requests off its target (several victims to one target).
A target must also admit the pod as the scheduler would: its NoSchedule/NoExecute taints tolerated, its
node selector and required node affinity matched (:mod:`colo.affinity`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from colo.affinity import node_selected, taints_tolerated
from colo.messages import NodeResource, NodeSpec, PodSpec, Resources

ROOM_RESOURCES: tuple[str, ...] = ("cpu", "memory", "batch_cpu", "batch_memory", "mid_cpu", "mid_memory", "pods")
"""The resources the store checks, in this order (milli-cores, bytes, milli-cores, bytes, milli-cores, bytes,
a count)."""

LABELS: tuple[str, ...] = ("cpu", "memory", "kubernetes.io/batch-cpu", "kubernetes.io/batch-memory",
                           "kubernetes.io/mid-cpu", "kubernetes.io/mid-memory", "pods")
"""The store's names of :data:`ROOM_RESOURCES` in its refusals ("Insufficient kubernetes.io/batch-memory")."""

Room = tuple[int, int, int, int, int, int, int]
"""A vector over :data:`ROOM_RESOURCES`."""


def requests_of(spec: PodSpec) -> Room:
    """What a reservation for ``spec`` holds: its requests (negative as 0) and one pod slot."""
    r = spec.requests
    return (max(r.cpu, 0), max(r.memory, 0), max(r.batch_cpu, 0), max(r.batch_memory, 0), max(r.mid_cpu, 0),
            max(r.mid_memory, 0), 1)


def as_room(r: Resources) -> Room:
    """``r`` as a :data:`Room` vector (its ``pods`` as the count)."""
    return (r.cpu, r.memory, r.batch_cpu, r.batch_memory, r.mid_cpu, r.mid_memory, r.pods)


def shortfall(request: Sequence[int], limit: Sequence[int], allocated: Sequence[int]) -> list[str]:
    """The resources (:data:`LABELS`) ``request`` does not fit, as the store checks them: a resource requested
    (> 0) with ``allocated + request > limit``; pods only when the limit is > 0 (0 = no pod limit). Empty when
    it fits."""
    bad = [LABELS[i] for i in range(6) if request[i] > 0 and allocated[i] + request[i] > limit[i]]
    if limit[6] > 0 and allocated[6] + 1 > limit[6]:
        bad.append("pods")
    return bad


@dataclass(frozen=True)
class Held:
    """Room a migration holds on ``node`` for pod ``uid`` until its replacement is bound (its reservation)."""

    uid: str
    node: str
    room: Room


class TargetRoom:
    """Per-node limits (allocatable and batch/mid offers) and allocations; see the module docstring."""

    def __init__(self) -> None:
        self.nodes: dict[str, NodeSpec] = {}
        self.offers: dict[str, NodeResource] = {}
        self.store_allocated: dict[str, Room] = {}
        """The store's allocations at the last :meth:`refresh` (empty before the first)."""
        self.held: dict[str, Held] = {}
        """Reservations of this descheduler's migrations by pod uid, until the replacement is bound."""

    # ------------------------------------------------------------------ feeds

    def on_node(self, spec: NodeSpec) -> None:
        """A node registration: its allocatable cpu/memory/pods, taints, labels."""
        self.nodes[spec.name] = spec

    def on_resource(self, res: NodeResource) -> None:
        """The node's batch/mid offer (a reset node offers 0 whatever its values say); the newest by ``at``."""
        old = self.offers.get(res.node)
        if old is None or res.at >= old.at:
            self.offers[res.node] = res

    def refresh(self, allocated: Mapping[str, Resources]) -> None:
        """Take the store's allocations (:meth:`colo.store.Store.allocated_many`) as the truth for the round."""
        self.store_allocated = {n: as_room(r) for n, r in allocated.items()}

    def hold(self, uid: str, node: str, spec: PodSpec) -> None:
        """A migration of ``spec`` booked on ``node``: its reservation holds the pod's requests there."""
        self.held[uid] = Held(uid, node, requests_of(spec))

    def release(self, uid: str) -> None:
        """The migration's reservation ended (replacement bound, job over): its room is no longer held."""
        self.held.pop(uid, None)

    # ------------------------------------------------------------------ room

    def limit(self, node: str) -> Room:
        """The store's bind limits of ``node``: allocatable cpu, memory; batch/mid offer (0 without one or when
        reset); allocatable pods. All 0 for an unknown node."""
        spec = self.nodes.get(node)
        if spec is None:
            return (0, 0, 0, 0, 0, 0, 0)
        a = spec.allocatable
        o = self.offers.get(node)
        if o is None or o.reset:
            return (a.cpu, a.memory, 0, 0, 0, 0, a.pods)
        return (a.cpu, a.memory, o.batch_cpu, o.batch_memory, o.mid_cpu, o.mid_memory, a.pods)

    def allocated(self, node: str, bound: Iterable[PodSpec]) -> Room:
        """Per resource the larger of the store's allocation of ``node`` and the view's: Σ
        :func:`requests_of` the pods ``bound`` there plus the room :attr:`held` on it."""
        view = [0] * 7
        for spec in bound:
            for i, q in enumerate(requests_of(spec)):
                view[i] += q
        for h in self.held.values():
            if h.node == node:
                for i, q in enumerate(h.room):
                    view[i] += q
        store = self.store_allocated.get(node, (0, 0, 0, 0, 0, 0, 0))
        a0, a1, a2, a3, a4, a5, a6 = (max(v, s) for v, s in zip(view, store, strict=True))
        return (a0, a1, a2, a3, a4, a5, a6)

    def refusal(self, spec: PodSpec, node: str, allocated: Sequence[int],
                planned: Iterable[Sequence[int]] = ()) -> str:
        """Why ``node`` is no target for ``spec`` ("" when it is): unknown, a taint not tolerated, excluded by
        its node selector / required affinity, or short of room (``allocated`` plus the ``planned`` requests of
        this round's evictions to it) on some resource, named as the store names it."""
        ns = self.nodes.get(node)
        if ns is None:
            return f"node {node} unknown"
        if not taints_tolerated(spec, ns):
            return f"node {node} has an untolerated taint"
        if not node_selected(spec, ns.labels):
            return f"node {node} does not match the pod's node selector / affinity"
        used = list(allocated)
        for p in planned:
            for i, q in enumerate(p):
                used[i] += q
        bad = shortfall(requests_of(spec), self.limit(node), used)
        return f"Insufficient {', '.join(bad)} on {node}" if bad else ""
