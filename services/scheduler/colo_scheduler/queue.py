"""The scheduling queue: active heap, backoff pool, unschedulable pool (Kubernetes PriorityQueue).

* **active**: ordered by the QueueSort key (priority desc, then created_at).
* **backoff**: pods whose last attempt failed transiently (a bind conflict) or that were
  moved out of the unschedulable pool while still backing off; they become active when
  ``last_attempt_at + backoff(attempts)`` passes, backoff = initial × 2^(attempts − 1)
  capped at max (Kubernetes podInitialBackoffSeconds / podMaxBackoffSeconds).
* **unschedulable**: pods no node accepted; moved back on a cluster event one of the
  rejecting plugins registered for, or after ``unschedulable_retry_s`` at the latest.

Every pod is in at most one place (keyed by uid); all times are clock seconds.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import cast

from colo_scheduler.podinfo import PodInfo


@dataclass(slots=True)
class _Unschedulable:
    pod: PodInfo
    since: float
    rejectors: frozenset[str]
    reasons: dict[str, int]


class SchedulingQueue:
    """Active / backoff / unschedulable pools; ``sort_key`` comes from the QueueSort plugin."""

    def __init__(
        self,
        sort_key: Callable[[PodInfo], tuple[float, ...]],
        backoff_initial_s: float = 1.0,
        backoff_max_s: float = 10.0,
        unschedulable_retry_s: float = 60.0,
    ) -> None:
        self._key = sort_key
        self.backoff_initial_s = backoff_initial_s
        self.backoff_max_s = backoff_max_s
        self.unschedulable_retry_s = unschedulable_retry_s
        self._seq = 0
        self._active: list[tuple[float | int | str, ...]] = []
        self._active_pods: dict[str, tuple[int, PodInfo]] = {}
        self._backoff: list[tuple[float, int, str]] = []
        self._backoff_pods: dict[str, tuple[int, PodInfo]] = {}
        self.unschedulable: dict[str, _Unschedulable] = {}

    # ------------------------------------------------------------------ membership

    def __contains__(self, uid: object) -> bool:
        return uid in self._active_pods or uid in self._backoff_pods or uid in self.unschedulable

    def __len__(self) -> int:
        return len(self._active_pods) + len(self._backoff_pods) + len(self.unschedulable)

    def lengths(self) -> dict[str, int]:
        """Pods per pool: ``active``, ``backoff``, ``unschedulable``."""
        return {"active": len(self._active_pods), "backoff": len(self._backoff_pods),
                "unschedulable": len(self.unschedulable)}

    def remove(self, uid: str) -> PodInfo | None:
        """Take pod ``uid`` out of whichever pool holds it (heap entries are dropped lazily)."""
        for pool in (self._active_pods, self._backoff_pods):
            entry = pool.pop(uid, None)
            if entry is not None:
                return entry[1]
        u = self.unschedulable.pop(uid, None)
        return u.pod if u else None

    def pods(self) -> list[PodInfo]:
        """Every queued pod (any pool), unordered."""
        return ([p for _, p in self._active_pods.values()] + [p for _, p in self._backoff_pods.values()]
                + [u.pod for u in self.unschedulable.values()])

    # ------------------------------------------------------------------ adding

    def add(self, pod: PodInfo) -> bool:
        """Add a new pod to the active queue; False (no change) when its uid is already queued."""
        if pod.uid in self:
            return False
        self._push_active(pod)
        return True

    def _push_active(self, pod: PodInfo) -> None:
        self._seq += 1
        self._active_pods[pod.uid] = (self._seq, pod)
        entry: tuple[float | int | str, ...] = (*self._key(pod), self._seq, pod.uid)  # flat: cheap to compare
        heapq.heappush(self._active, entry)

    def backoff_s(self, attempts: int) -> float:
        """Backoff after ``attempts`` failed attempts: initial × 2^(attempts−1), capped at max."""
        if attempts <= 0:
            return 0.0
        return float(min(self.backoff_initial_s * 2 ** min(attempts - 1, 62), self.backoff_max_s))

    def backoff_until(self, pod: PodInfo) -> float:
        """Clock time at which ``pod``'s backoff ends."""
        return pod.last_attempt_at + self.backoff_s(pod.attempts)

    def add_backoff(self, pod: PodInfo) -> None:
        """Queue a pod whose attempt failed transiently; active again after its backoff."""
        self.remove(pod.uid)
        self._seq += 1
        self._backoff_pods[pod.uid] = (self._seq, pod)
        heapq.heappush(self._backoff, (self.backoff_until(pod), self._seq, pod.uid))

    def add_unschedulable(self, pod: PodInfo, now: float, rejectors: frozenset[str],
                          reasons: dict[str, int]) -> None:
        """Park a pod no node accepted, with the plugins that rejected it and their reasons."""
        self.remove(pod.uid)
        self.unschedulable[pod.uid] = _Unschedulable(pod, now, rejectors, reasons)

    # ------------------------------------------------------------------ moving

    def _requeue(self, pod: PodInfo, now: float) -> None:
        if self.backoff_until(pod) > now:
            self.add_backoff(pod)
        else:
            self._push_active(pod)

    def move_on_event(self, event: str, now: float, interest: Mapping[str, frozenset[str]]) -> int:
        """Move unschedulable pods that ``event`` may help back to active (or backoff).

        ``interest`` maps a plugin name to the events it registered; a pod moves when
        any plugin that rejected it registered ``event`` (or nothing is known). Returns
        the number of pods moved.
        """
        moved = [u for u in self.unschedulable.values()
                 if not u.rejectors or any(event in interest.get(r, frozenset()) for r in u.rejectors)]
        for u in moved:
            del self.unschedulable[u.pod.uid]
            self._requeue(u.pod, now)
        return len(moved)

    def wake(self, uids: list[str], now: float) -> int:
        """Move the unschedulable pods ``uids`` (in that order) back to active, or to backoff while
        still backing off; uids not in the unschedulable pool are skipped. Returns pods moved."""
        moved = 0
        for uid in uids:
            u = self.unschedulable.pop(uid, None)
            if u is not None:
                self._requeue(u.pod, now)
                moved += 1
        return moved

    def flush(self, now: float) -> None:
        """Backoff pods whose backoff passed, and unschedulable pods parked at least the retry
        interval, become active."""
        while self._backoff and self._backoff[0][0] <= now:
            _, seq, uid = heapq.heappop(self._backoff)
            entry = self._backoff_pods.get(uid)
            if entry is not None and entry[0] == seq:
                del self._backoff_pods[uid]
                self._push_active(entry[1])
        stale = [u for u in self.unschedulable.values() if now - u.since >= self.unschedulable_retry_s]
        for u in stale:
            del self.unschedulable[u.pod.uid]
            self._requeue(u.pod, now)

    def pop_batch(self, limit: int) -> list[PodInfo]:
        """Up to ``limit`` active pods in QueueSort order, removed from the queue."""
        out: list[PodInfo] = []
        while self._active and len(out) < limit:
            entry_key = heapq.heappop(self._active)
            seq, uid = cast(int, entry_key[-2]), cast(str, entry_key[-1])
            entry = self._active_pods.get(uid)
            if entry is not None and entry[0] == seq:
                del self._active_pods[uid]
                out.append(entry[1])
        return out
