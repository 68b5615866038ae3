"""Nominations (Kubernetes ``status.nominatedNodeName``): the room a preemptor's victims free is held for it.

While a preemptor waits (its victims leaving, itself in backoff), its request is booked on the
nominated row of the node table (and the plugins among :attr:`Nominator.holders` hold their own
share, DeviceShare the GPUs it will take), so no pod placed meanwhile — of lower, equal or higher priority —
takes the room (the store's allocation, re-read by the service, gets the hold added back:
:meth:`Nominator.held_on`). When the preemptor's turn comes the core releases the hold and tries
the nominated row first (:meth:`Nominator.release`); if it still fails there, the nomination is
kept — and held again — as long as some victim is still on its node, so one preemptor never
evicts twice for the same room. A nomination lapses when the preemptor is placed, when its victims
are all gone and it still does not fit (a new preemption may follow), or ``timeout_s`` after it was
made.
"""

from __future__ import annotations

from collections.abc import Container, Sequence
from dataclasses import dataclass

from colo_scheduler.framework.decision import DecisionRecord, PreemptionRecord
from colo_scheduler.framework.interface import SUCCESS, PreemptionRemovalSimulator
from colo_scheduler.plugins.preemption.rules import owner_key
from colo_scheduler.podinfo import IntArray, PodInfo
from colo_scheduler.table import NodeTable


@dataclass(slots=True)
class NominatedPod:
    """A preemptor nominated to ``row`` at clock time ``at``: its victims' uids, whether its request is
    booked on the row now (``held``) and the record of the decision."""

    pod: PodInfo
    row: int
    victims: tuple[str, ...]
    at: float
    record: PreemptionRecord
    held: bool = False


@dataclass(frozen=True, slots=True)
class PendingEviction:
    """A victim to evict from ``row`` for ``preemptor``."""

    victim: PodInfo
    row: int
    preemptor: PodInfo


class Nominator:
    """The nominations of one scheduler (see the module docstring); ``timeout_s`` > 0 seconds."""

    def __init__(self, table: NodeTable, timeout_s: float) -> None:
        self.table = table
        self.timeout_s = timeout_s
        self.nominations: dict[str, NominatedPod] = {}
        self.evictions: list[PendingEviction] = []
        """Victims chosen since the core last took them (:meth:`take_evictions`)."""
        self.unbound: Container[str] = ()
        """Uids of pods placed and not bound (the core's Permit waiters): never victims."""
        self._victims: dict[str, int] = {}
        """Victim uid → live nominations naming it."""
        self.holders: Sequence[PreemptionRemovalSimulator] = ()
        """Plugins that hold their own state for a nominated pod (DeviceShare: its GPUs), with the requests."""

    def __len__(self) -> int:
        return len(self.nominations)

    def get(self, uid: str) -> NominatedPod | None:
        """The nomination of pod ``uid``, or None."""
        return self.nominations.get(uid)

    def leaving(self, uid: str) -> bool:
        """Whether pod ``uid`` is a victim of a live nomination still on its node."""
        return uid in self._victims and uid in self.table.assigned

    def still_leaving(self, nom: NominatedPod) -> bool:
        """Whether some victim of ``nom`` is still counted on a node."""
        assigned = self.table.assigned
        return any(v in assigned for v in nom.victims)

    def leaving_by_owner(self) -> dict[str, int]:
        """Owner key → victims of live nominations still on their nodes (disruption budgets)."""
        out: dict[str, int] = {}
        assigned = self.table.assigned
        for nom in self.nominations.values():
            for uid in nom.victims:
                ap = assigned.get(uid)
                if ap is not None and (key := owner_key(ap.pod.spec)):
                    out[key] = out.get(key, 0) + 1
        return out

    def nominate(self, pod: PodInfo, row: int, victims: list[PodInfo], now: float,
                 record: PreemptionRecord) -> None:
        """Nominate ``pod`` to ``row`` evicting ``victims``: hold the room, queue the evictions."""
        self.drop(pod.uid)
        nom = NominatedPod(pod, row, tuple(v.uid for v in victims), now, record)
        self.nominations[pod.uid] = nom
        for uid in nom.victims:
            self._victims[uid] = self._victims.get(uid, 0) + 1
        self.hold(nom)
        self.evictions.extend(PendingEviction(v, row, pod) for v in victims)

    def hold(self, nom: NominatedPod) -> None:
        """Book the preemptor's request on its row (no-op when booked)."""
        if not nom.held:
            self.table.add_allocated(nom.row, nom.pod.request)
            for h in self.holders:
                if h.preemption_applies(nom.pod):
                    h.preemption_hold(self.table, nom.row, nom.pod, nom.victims)
            nom.held = True

    def release(self, uid: str) -> int:
        """Unbook pod ``uid``'s hold before it is scheduled; its nominated row, or −1 when none."""
        nom = self.nominations.get(uid)
        if nom is None:
            return -1
        if nom.held:
            self.table.add_allocated(nom.row, nom.pod.request, -1)
            for h in self.holders:
                h.preemption_unhold(self.table, nom.row, nom.pod)
            nom.held = False
        return nom.row

    def drop(self, uid: str) -> None:
        """End pod ``uid``'s nomination (placed, or lapsed), releasing its hold."""
        self.release(uid)
        nom = self.nominations.pop(uid, None)
        if nom is not None:
            for v in nom.victims:
                left = self._victims.pop(v) - 1
                if left:
                    self._victims[v] = left

    def expire(self, now: float) -> None:
        """Drop the nominations made ``timeout_s`` or longer before ``now``."""
        for uid in [u for u, n in self.nominations.items() if now - n.at >= self.timeout_s]:
            self.drop(uid)

    def held_on(self, row: int) -> IntArray | None:
        """(7,) int64 Σ requests held on ``row`` now, or None when nothing is held there."""
        total: IntArray | None = None
        for nom in self.nominations.values():
            if nom.held and nom.row == row:
                total = nom.pod.request.copy() if total is None else total + nom.pod.request
        return total

    def placed_record(self, pod: PodInfo, row: int, at: float, detail: str) -> DecisionRecord:
        """The decision record of ``pod`` placed at clock time ``at`` on ``row``, the node its preemption
        nominated (the preemption's record attached)."""
        nom = self.nominations.get(pod.uid)
        return DecisionRecord(pod.uid, pod.attempts, at, row, -1, self.table.n, 1, SUCCESS,
                              f"placed on {self.table.names[row]}, the node its preemption nominated", detail,
                              nominated=row, preemption=nom.record if nom is not None else None)

    def take_evictions(self) -> list[PendingEviction]:
        """The victims chosen since the last call (the core emits them)."""
        out, self.evictions = self.evictions, []
        return out


