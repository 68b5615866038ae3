"""The cycle's hooks into reservations, preemption nominations and the elastic quota: a pod that owns a
feasible reservation is nominated to its reserved node, a preemptor goes first to the node its victims freed
(Kubernetes: the nominated node first), and each cycle recomputes the runtime quotas and orders the evictions
that give a quota its lent min back (docs/quota.md). Part of :class:`colo_scheduler.core.Scheduler`, which
sets the state below at construction and provides ``reject_waiting``."""

from __future__ import annotations

from collections.abc import Callable

from colo.messages import ElasticQuota as ElasticQuotaSpec
from colo_scheduler.framework.interface import CycleState
from colo_scheduler.framework.runner import Framework
from colo_scheduler.outcome import NOMINATION, CycleOutcome, Eviction
from colo_scheduler.plugins.elasticquota import QUOTA_CHANGE, ElasticQuota
from colo_scheduler.plugins.preemption import Nominator
from colo_scheduler.plugins.preemption.victims import passes
from colo_scheduler.plugins.reservation import Nomination, Reservation
from colo_scheduler.podinfo import PodInfo
from colo_scheduler.queue import SchedulingQueue
from colo_scheduler.table import NodeTable


class CycleHooks:
    """The reservation, nomination and quota part of :class:`colo_scheduler.core.Scheduler`."""

    table: NodeTable
    framework: Framework
    queue: SchedulingQueue
    quota: ElasticQuota | None
    reservations: Reservation
    nominator: Nominator | None
    waiting: dict[str, tuple[PodInfo, int, float]]
    _events: set[str]
    _quota_totals: tuple[int, int, tuple[int, ...]]
    reject_waiting: Callable[[str, float, str], bool]

    def on_quota(self, spec: ElasticQuotaSpec) -> list[str]:
        """Add, change or delete an elastic quota; the problems when refused ([] when applied, or when no
        profile plugin keeps quotas). Pods its checks refused are woken by the change."""
        if self.quota is None:
            return []
        problems = self.quota.apply(spec)
        if not problems:
            self.quota.book.rebuild(self.framework.placed.values(), self.queue.pods())
            self._events.add(QUOTA_CHANGE)
        return problems

    def bound_on_reservation(self, pod: PodInfo) -> None:
        """The store bound ``pod`` on its reservation: the room is the pod's now (a later release frees it)."""
        nominated = pod.extra.pop(NOMINATION, None)
        if isinstance(nominated, Nomination):
            self.reservations.unclaim(nominated.name, nominated.use)

    def _quota_cycle(self, now: float, out: CycleOutcome) -> None:
        """Recompute the runtime quotas (when demand, use or the cluster changed) and order evictions
        where lent quota is needed back (docs/quota.md)."""
        assert self.quota is not None
        t = self.table
        if self._quota_totals[:2] != (t.alloc_version, t.n):
            self._quota_totals = (t.alloc_version, t.n, tuple(int(v) for v in t.alloc.sum(axis=0)))
        if self.quota.refresh(self._quota_totals[2]):
            self._events.add(QUOTA_CHANGE)
        names = t.names
        for r in self.quota.reclaim():
            if r.member.pod.uid in self.waiting:  # held at Permit, not on its node yet: give the room back
                self.reject_waiting(r.member.pod.uid, now, r.reason)
            elif not (self.nominator is not None and self.nominator.leaving(r.member.pod.uid)):  # once a pod
                out.evictions.append(Eviction(r.member.pod, names[r.member.row], r.reason))

    def ordered_out(self, uid: str) -> bool:
        """Whether a quota reclaim ordered pod ``uid`` out already (a preemption that picks it as a victim counts
        on its room without a second eviction order)."""
        return self.quota is not None and uid in self.quota.book.evicting

    def _nominated_row(self, state: CycleState, pod: PodInfo) -> int:
        """The row a preemption nominated the pod to when it passes every PreFilter and Filter there now
        (its held room released first), else −1; ``_diagnose`` then keeps or ends the nomination."""
        assert self.nominator is not None
        row = self.nominator.release(pod.uid)
        if row < 0:
            return -1
        for pre in self.framework.profile.pre_filter:
            st = pre.pre_filter(state, pod)
            if st is not None and not st.ok:
                return -1
        return row if passes(self.framework.profile.filter, state, pod, row) else -1

    def _nominate(self, state: CycleState, pod: PodInfo) -> Nomination | None:
        """The pod's reserved row when it owns a feasible reservation and passes the PreFilters."""
        if not self.reservations.matching(pod):
            return None
        for pre in self.framework.profile.pre_filter:
            st = pre.pre_filter(state, pod)
            if st is not None and not st.ok:
                return None
        return self.reservations.nominate(state, pod)
