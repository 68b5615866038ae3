"""The pods a Permit plugin holds (Kubernetes' waiting pods): reserved on their node until allowed, rejected
or timed out. Part of :class:`colo_scheduler.core.Scheduler`, which sets the state below at construction
and provides ``unreserve``; a :class:`~colo_scheduler.framework.interface.BatchPlugin` (Coscheduling) allows
and rejects them through the core's handle."""

from __future__ import annotations

from collections.abc import Callable

from colo_scheduler.framework.interface import UNSCHEDULABLE
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

    def allow(self, uid: str) -> bool:
        """Let a pod held by Permit proceed to binding at the next cycle; False when not waiting."""
        if uid not in self.waiting:
            return False
        self._allowed.add(uid)
        return True

    def reject_waiting(self, uid: str, now: float, reason: str = "rejected while waiting") -> bool:
        """Unreserve a pod held by Permit and park it as unschedulable; False when not waiting."""
        entry = self.waiting.pop(uid, None)
        if entry is None:
            return False
        self._waiting_version += 1
        self._allowed.discard(uid)
        self.unreserve(uid)
        self.queue.add_unschedulable(entry[0], now, frozenset({"Permit"}), {reason: 1})
        return True

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
                self.reject_waiting(uid, now, "permit wait timed out")
                out.failures.append(Failure(pod, ScheduleResult(-1, {"permit wait timed out": 1},
                                                                frozenset({"Permit"}), 0,
                                                                "permit wait timed out", UNSCHEDULABLE), 0.0))

    def _held_on(self) -> dict[int, list[PodInfo]]:
        """Row → pods held at Permit on it (rebuilt when the waiting pods changed)."""
        if self._held[0] != self._waiting_version:
            rows: dict[int, list[PodInfo]] = {}
            for pod, row, _ in self.waiting.values():
                rows.setdefault(row, []).append(pod)
            self._held = (self._waiting_version, rows)
        return self._held[1]
