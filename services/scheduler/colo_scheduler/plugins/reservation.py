"""Reservation: a pod matching a reservation goes to the reserved node, on the reserved room (REFERENCE.md §9).

The store counts a reservation's held room in its node's allocation (:mod:`colo.reservations`), and
the table's allocation is the store's: for every other pod the room is used, through the ordinary
NodeResourcesFit, at no cost. For the owner's pods the room is theirs: before the profile runs, the
core asks :meth:`Reservation.nominate` (the Kubernetes scheduler evaluates a pod's nominated node
first in the same way). Its Filter (:meth:`Reservation.filter_node`) passes a reserved row when the
pod fits the row's free room *plus* the held room and every other filter of the profile passes it
(NodeResourcesFit, which does not know the room is the pod's, is replaced by that check); its Score
(:meth:`Reservation.score_node`) is 100 on a matching reserved row and 0 elsewhere, weighted
:data:`SCORE_WEIGHT`, so that a feasible reservation always wins over any node without one (the
reference's "very high weight", §9). Among several matching reservations the one expiring first is
taken. A pod with no feasible reservation is scheduled by the profile as any other.

A reservation is only for a pod whose requests it covers in part (:func:`covers`: some resource kind both
ask for; a batch-* pod takes nothing from native cpu/memory room): one that covers none is neither offered
nor consumed.

A pod matches by uid, workload, controller (kind/name), namespace or labels
(:meth:`colo.reservations.Reservation.matches`, :func:`colo.reservation_spec.owner_matches`): reservations
are indexed by the most selective field each owner sets (uid, workload, controller name), so a pod costs
three dict look-ups plus a check of the few reservations whose owners select only by namespace, kind or
labels, and no per-node Python loop runs.

Several pods of one owner (the replicas of a workload) may be pending in one cycle. A pod placed on a
reservation and not bound yet **claims** the part of the held room it uses (:meth:`Reservation.claim`):
an allocate-once reservation with a claim is offered to no other pod, a reusable one offers only the
room no claim took. The claim ends when the pod is bound (the store's reservation is re-read then) or
unreserved (a refused bind, a Permit rejection: :meth:`Reservation.unclaim`). Without it every replica
of the cycle was nominated to the same room, the table counted that room as theirs several times and
the store refused every bind after the first.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from colo.messages import Resources
from colo.reservations import Reservation as StoredReservation
from colo.reservations import owner_workload
from colo_scheduler.framework.interface import POD_DELETE, CycleState, FilterPlugin
from colo_scheduler.podinfo import IntArray, PodInfo, resource_vector

SCORE_WEIGHT = 10_000
"""Weight of the Reservation score: 100 × this exceeds any sum of the default profile's weighted
scores (at most 100 × 6), so a feasible reserved node is always the pick (REFERENCE.md §9)."""


@dataclass(frozen=True, slots=True)
class Nomination:
    """A reserved row for a pod: the ``row``, the reservation ``name`` and ``use`` (7,) int64, the part
    of the pod's request the held room covers (the table books only the rest)."""

    row: int
    name: str
    use: IntArray


class Reservation:
    """The Reservation plugin; see the module docstring. ``filters`` are the profile's Filter
    plugins (in order), ``fit_name`` the one whose check the held room replaces."""

    name = "Reservation"
    events = frozenset({POD_DELETE})

    def __init__(self, filters: Sequence[FilterPlugin], fit_name: str = "NodeResourcesFit") -> None:
        self._filters = [f for f in filters if f.name != fit_name]
        self.by_uid: dict[str, list[StoredReservation]] = {}
        self.by_workload: dict[str, list[StoredReservation]] = {}
        self.by_controller: dict[str, list[StoredReservation]] = {}
        """Owner controller name (``owner_name``) → reservations with an owner selecting by it first."""
        self.by_selector: list[StoredReservation] = []
        """Reservations with an owner selecting only by namespace, controller kind or labels."""
        self.reservations: dict[str, StoredReservation] = {}
        self.claims: dict[str, tuple[int, IntArray]] = {}
        """Reservation name → (pods placed on it and not bound, Σ their ``use`` (7,) int64)."""

    @property
    def active(self) -> bool:
        """Whether any reservation is known (else :meth:`nominate` is never worth calling)."""
        return bool(self.reservations)

    def set_reservations(self, reservations: Iterable[StoredReservation]) -> set[str]:
        """Replace the known reservations (the store's available ones); returns the nodes whose
        reservations changed (their allocation should be re-read)."""
        old = self.reservations
        new = {r.name: r for r in reservations if r.state == "Available"}
        changed = {r.node for n, r in old.items() if new.get(n) != r} | {
            r.node for n, r in new.items() if old.get(n) != r}
        self.reservations = new
        self.by_uid, self.by_workload, self.by_controller, self.by_selector = {}, {}, {}, []
        for r in sorted(new.values(), key=lambda r: (r.expires_at, r.name)):
            if r.owner_uid:
                _add(self.by_uid, r.owner_uid, r)
            if r.owner_workload:
                _add(self.by_workload, r.owner_workload, r)
            for o in r.owners:
                if o.uid:
                    _add(self.by_uid, o.uid, r)
                elif o.workload:
                    _add(self.by_workload, o.workload, r)
                elif o.owner_name:
                    _add(self.by_controller, o.owner_name, r)
                elif r not in self.by_selector:
                    self.by_selector.append(r)
        return changed

    @property
    def reusable(self) -> bool:
        """Whether a known reservation is reusable (a pod ending gives room back to it: re-read then)."""
        return any(not r.allocate_once for r in self.reservations.values())

    def forget(self, name: str) -> None:
        """Drop one reservation (consumed by a bind, or refused by the store)."""
        if name in self.reservations:
            self.set_reservations(r for n, r in self.reservations.items() if n != name)

    def matching(self, pod: PodInfo) -> list[StoredReservation]:
        """Available reservations the pod owns, soonest expiry first (those naming its uid before the others);
        an allocate-once reservation another placed, unbound pod claims is not offered."""
        if not self.reservations:
            return []
        spec = pod.spec
        out = [r for r in self.by_uid.get(pod.uid, ()) if r.matches(spec)]
        rest: list[StoredReservation] = []
        workload = owner_workload(spec)
        if workload:
            rest += self.by_workload.get(workload, ())
        if spec.owner is not None:
            rest += self.by_controller.get(spec.owner.name, ())
        rest += self.by_selector
        if rest:
            seen = set(r.name for r in out)
            more = {r.name: r for r in rest if r.name not in seen and r.matches(spec)}
            out += sorted(more.values(), key=lambda r: (r.expires_at, r.name))
        if self.claims:
            out = [r for r in out if not (r.allocate_once and r.name in self.claims)]
        return out

    def held(self, r: StoredReservation) -> IntArray:
        """(7,) int64 room of ``r`` no claim took (milli-cores, bytes, pod slot): its held room less the
        ``use`` of the pods placed on it and not bound yet."""
        held = resource_vector(r.held)
        claim = self.claims.get(r.name)
        return held if claim is None else np.maximum(held - claim[1], 0)

    def claim(self, name: str, use: IntArray) -> None:
        """A pod was placed on reservation ``name`` using ``use`` (7,) of its held room (module doc)."""
        n, total = self.claims.get(name, (0, np.zeros_like(use)))
        self.claims[name] = (n + 1, total + use)

    def unclaim(self, name: str, use: IntArray) -> None:
        """A pod placed on ``name`` was bound or unreserved: its claim of ``use`` (7,) ends."""
        claim = self.claims.get(name)
        if claim is None:
            return
        if claim[0] <= 1:
            del self.claims[name]
        else:
            self.claims[name] = (claim[0] - 1, claim[1] - use)

    def _row(self, state: CycleState, r: StoredReservation, now: float) -> int:
        if r.expires_at <= now:
            return -1
        return state.table.index.get(r.node, -1)

    def filter_node(self, state: CycleState, pod: PodInfo, i: int) -> bool:
        """Filter on row ``i``: True when a matching reservation is there and the pod fits the row's free
        room plus the held room, and every other filter passes the row."""
        return any(self._fits(state, pod, r, i) for r in self.matching(pod)
                   if self._row(state, r, state.now) == i)

    def _fits(self, state: CycleState, pod: PodInfo, r: StoredReservation, i: int) -> bool:
        held_room = self.held(r)
        if not covers(pod.request, held_room, r.held):
            return False
        free = state.table.free[i].tolist()
        held = held_room.tolist()
        request = pod.request_ints
        for c in pod.request_col_ints:
            if free[c] + held[c] < request[c]:
                return False
        return all(_passes(f, state, pod, i) for f in self._filters)

    def score_node(self, state: CycleState, pod: PodInfo, i: int) -> int:
        """Raw score of row ``i``: 100 where the pod has a feasible reservation, else 0."""
        return 100 if self.filter_node(state, pod, i) else 0

    def nominate(self, state: CycleState, pod: PodInfo) -> Nomination | None:
        """The reserved row the pod goes to (the highest score: the first feasible matching
        reservation), or None when it has none."""
        for r in self.matching(pod):
            i = self._row(state, r, state.now)
            if i >= 0 and self._fits(state, pod, r, i):
                use = np.minimum(pod.request, self.held(r))
                if not r.allocate_once:
                    use[-1] = 0  # a reusable reservation keeps its pod slot: each pod takes its own
                return Nomination(i, r.name, use)
        return None


def covers(request: IntArray, held: IntArray, stored: Resources) -> bool:
    """Whether a reservation's ``held`` room (7,) (what no claim took) covers part of a pod's ``request`` (7,):
    some resource both are non-zero in (cpu, memory, batch-*, mid-*; the pod slot does not count). A
    reservation whose ``stored`` room holds only a pod slot covers every pod. A pod asking for batch-* room
    takes nothing from a reservation of native cpu/memory, so it is not nominated there and does not consume
    it (the store's bind script refuses that bind too: :data:`colo.reservations_lua.BIND_ON_LUA`)."""
    if not any((stored.cpu, stored.memory, stored.batch_cpu, stored.batch_memory, stored.mid_cpu,
                stored.mid_memory)):
        return True
    return bool((np.minimum(request[:6], held[:6]) > 0).any())


def _add(index: dict[str, list[StoredReservation]], key: str, r: StoredReservation) -> None:
    entries = index.setdefault(key, [])
    if r not in entries:
        entries.append(r)


def _passes(plugin: Any, state: CycleState, pod: PodInfo, i: int) -> bool:
    one = getattr(plugin, "filter_node", None)
    if one is not None:
        return bool(one(state, pod, i))
    mask = plugin.filter(state, pod)
    return True if mask is None else bool(mask[i])
