"""The pods a Permit plugin holds (Kubernetes' waiting pods): reserved on their node until allowed, rejected
or timed out. Part of :class:`colo_scheduler.core.Scheduler`, which sets the state below at construction
and provides ``unreserve``; a :class:`~colo_scheduler.framework.interface.BatchPlugin` (Coscheduling) allows
and rejects them through the core's handle."""

from __future__ import annotations

from collections.abc import Callable

from colo_scheduler.framework.decision import DecisionLog, DecisionRecord
from colo_scheduler.framework.interface import UNSCHEDULABLE, WAIT
from colo_scheduler.framework.runner import ScheduleResult
from colo_scheduler.outcome import NOMINATION, CycleOutcome, Failure, Placement
from colo_scheduler.plugins.reservation import Nomination
from colo_scheduler.podinfo import PodInfo
from colo_scheduler.queue import SchedulingQueue
from colo_scheduler.table import NodeTable


class PermitWaiting:
    """The waiting-pod part of :class:`colo_scheduler.core.Scheduler`."""

    table: NodeTable
    queue: SchedulingQueue
    waiting: dict[str, tuple[PodInfo, int, float]]
    """Pods a Permit plugin holds: uid → (pod, row, deadline clock seconds); reserved meanwhile."""
    _held: tuple[int, dict[int, list[PodInfo]]]
    _waiting_version: int
    _allowed: set[str]
    unreserve: Callable[[str], tuple[PodInfo, int] | None]
    decisions: DecisionLog
    _released: list[Failure]
    _gang_waits: dict[str, str]
    """Pods released from Permit since the last cycle's outcome took them (:meth:`_take_released`)."""

    def allow(self, uid: str) -> bool:
        """Let a pod held by Permit proceed to binding at the next cycle; False when not waiting."""
        if uid not in self.waiting:
            return False
        self._allowed.add(uid)
        return True

    def reject_waiting(self, uid: str, now: float, reason: str = "rejected while waiting") -> bool:
        """Unreserve a pod held by Permit and park it as unschedulable; False when not waiting. Its decision
        record stops saying it waits (Unschedulable, no node, ``reason``) and the next cycle's outcome
        reports it as a failure, so a PodUnschedulable with ``reason`` is published for it."""
        entry = self.waiting.pop(uid, None)
        if entry is None:
            return False
        self._waiting_version += 1
        self._allowed.discard(uid)
        self.unreserve(uid)
        pod = entry[0]
        self.queue.add_unschedulable(pod, now, frozenset({"Permit"}), {reason: 1})
        rec = self.decisions.get(uid)
        if rec is not None and rec.status == WAIT:
            rec.status, rec.message, rec.node, rec.at = UNSCHEDULABLE, reason, -1, now
        self._released.append(Failure(pod, ScheduleResult(-1, {reason: 1}, frozenset({"Permit"}), 0, reason,
                                                          UNSCHEDULABLE), 0.0))
        return True

    def _waiting_record(self, rec: DecisionRecord | None) -> DecisionRecord | None:
        """``rec`` with, while its pod waits at Permit in a gang, the gang's latest WAIT reason as its message
        (set when any member began to wait: no member keeps an earlier, smaller count). O(1) a read."""
        if rec is None or rec.status != WAIT:
            return rec
        entry = self.waiting.get(rec.uid)
        gs = entry[0].spec.gang if entry is not None else None
        if gs is not None:
            rec.message = self._gang_waits.get(gs.name, rec.message)
        return rec

    def _take_released(self, out: CycleOutcome) -> None:
        """Report the pods released from Permit since the last cycle as ``out``'s failures (and forget the gangs'
        WAIT reasons once nothing waits)."""
        if not self.waiting and self._gang_waits:
            self._gang_waits.clear()
        if self._released:
            out.failures.extend(self._released)
            self._released = []

    def _place_allowed(self, out: CycleOutcome) -> None:
        for uid in [u for u in self.waiting if u in self._allowed]:
            pod, row, _ = self.waiting.pop(uid)
            self._waiting_version += 1
            self._allowed.discard(uid)
            nominated = pod.extra.get(NOMINATION)
            out.placements.append(Placement(pod, self.table.names[row], 0.0,
                                            nominated.name if isinstance(nominated, Nomination) else ""))

    def _resolve_waiting(self, now: float, out: CycleOutcome) -> None:
        self._place_allowed(out)
        for uid in list(self.waiting):
            entry = self.waiting.get(uid)
            if entry is None:  # released with another member (its gang sent back)
                continue
            pod, row, deadline = entry
            if now >= deadline:
                gs = pod.spec.gang
                self.reject_waiting(uid, now, f"gang {gs.name} wait timed out after {gs.timeout_s:g} s"
                                    if gs is not None else "permit wait timed out")

    def _held_on(self) -> dict[int, list[PodInfo]]:
        """Row → pods held at Permit on it (rebuilt when the waiting pods changed)."""
        if self._held[0] != self._waiting_version:
            rows: dict[int, list[PodInfo]] = {}
            for pod, row, _ in self.waiting.values():
                rows.setdefault(row, []).append(pod)
            self._held = (self._waiting_version, rows)
        return self._held[1]
