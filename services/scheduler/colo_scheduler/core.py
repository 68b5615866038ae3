"""The scheduler's synchronous core: node table + framework + queue, without I/O.

The service (:mod:`colo_scheduler.service`) feeds it events and binds what it
places; tests drive it directly. Times are clock seconds; ``decision_ms`` is wall
time measured with :func:`time.perf_counter`.

The cycle is here; its parts live in their own modules and are mixed into :class:`Scheduler`:
the pods held at Permit (:mod:`colo_scheduler.waiting`), the reservation, nomination and quota
hooks (:mod:`colo_scheduler.hooks`), the node events and queueing hints (:mod:`colo_scheduler.wakeup`)
and what a cycle decided (:mod:`colo_scheduler.outcome`; re-exported here).
"""

from __future__ import annotations

import gc
import time

from colo.messages import PodSpec
from colo_scheduler.framework.classcache import spec_class_key
from colo_scheduler.framework.decision import DecisionLog, DecisionRecord
from colo_scheduler.framework.interface import POD_DELETE, UNSCHEDULABLE, WAIT, BatchPlugin
from colo_scheduler.framework.registry import ProfileConfig, build_profile
from colo_scheduler.framework.runner import Framework, ScheduleResult
from colo_scheduler.hooks import CycleHooks
from colo_scheduler.outcome import NOMINATION, CycleOutcome, Eviction, Failure, Placement, preempted_by
from colo_scheduler.plugins import new_in_tree_registry, profile_config
from colo_scheduler.plugins.elasticquota import ElasticQuota
from colo_scheduler.plugins.preemption import DefaultPreemption, Nominator
from colo_scheduler.plugins.reservation import Nomination, Reservation
from colo_scheduler.podinfo import (
    ASSIGNED_CPUSET,
    ASSIGNED_DEVICES,
    PodInfo,
    clone_pod_info,
    make_pod_info,
    pod_priority,
)
from colo_scheduler.queue import SchedulingQueue
from colo_scheduler.settings import SchedulerSettings
from colo_scheduler.table import NodeTable
from colo_scheduler.waiting import PermitWaiting
from colo_scheduler.wakeup import EQUIVALENCE_FILTERS, EQUIVALENCE_PRE_FILTERS, ClusterEvents, equivalence_key

__all__ = ["EQUIVALENCE_FILTERS", "EQUIVALENCE_PRE_FILTERS", "NOMINATION", "CycleOutcome", "Eviction", "Failure",
           "Placement", "Scheduler", "equivalence_key", "preempted_by"]


class Scheduler(PermitWaiting, CycleHooks, ClusterEvents):
    """Pure scheduling state machine; raises ValueError for an invalid profile at construction.

    ``use_class_cache`` and ``use_score_buckets`` False select the framework's reference paths
    (:class:`~colo_scheduler.framework.runner.Framework`): the same decisions, slower."""

    def __init__(self, settings: SchedulerSettings, profile: ProfileConfig | None = None,
                 use_class_cache: bool = True, use_score_buckets: bool = True) -> None:
        self.settings = settings
        self.table = NodeTable()
        profile_obj = build_profile(profile or profile_config(settings), new_in_tree_registry(),
                                    settings)
        self.framework = Framework(profile_obj, self.table, settings.seed, use_class_cache, use_score_buckets)
        self.decisions = DecisionLog(settings.decision_records)
        """The latest :class:`DecisionRecord` of recently attempted pods (``decision_records`` pods)."""
        self._record = settings.decision_detail if settings.decision_records > 0 else None
        self.waiting: dict[str, tuple[PodInfo, int, float]] = {}
        """Pods a Permit plugin holds: uid → (pod, row, deadline clock seconds); reserved meanwhile."""
        self._held: tuple[int, dict[int, list[PodInfo]]] = (0, {})
        self._waiting_version = 0
        self._allowed: set[str] = set()
        self._released: list[Failure] = []
        self._gang_waits: dict[str, str] = {}
        """Gang → the latest Permit WAIT reason of one of its members (:meth:`decision` shows it on each)."""
        self._templates: dict[bytes, PodInfo] = {}
        self.queue = SchedulingQueue(profile_obj.queue_sort.sort_key, settings.backoff_initial_s,
                                     settings.backoff_max_s, settings.unschedulable_retry_s)
        self.interest: dict[str, frozenset[str]] = {name: getattr(p, "events", frozenset()) for name, p in profile_obj.plugins.items()}
        self._filter_names = frozenset(p.name for p in profile_obj.filter)
        self.quota: ElasticQuota | None = next((p for p in profile_obj.plugins.values()
                                                if isinstance(p, ElasticQuota)), None)
        """The profile's elastic quota plugin (docs/quota.md), None when not enabled."""
        self._quota_totals: tuple[int, int, tuple[int, ...]] = (-1, -1, ())
        # its rejections depend on the pod's quota, not on the class: never cached per class (below)
        self._equivalence = all(isinstance(p, EQUIVALENCE_PRE_FILTERS) or p is self.quota
                                for p in profile_obj.pre_filter) and all(
            isinstance(p, EQUIVALENCE_FILTERS) for p in profile_obj.filter)
        self._dirty_rows: set[int] = set()
        self._events: set[str] = set()
        self.reservations = Reservation(profile_obj.filter)
        """Reservations from the store; a matching pod is nominated to its reserved node first."""
        self._batch_plugins = [p for p in profile_obj.plugins.values() if isinstance(p, BatchPlugin)]
        for bp in self._batch_plugins:
            bp.attach(self)
        self.nominator: Nominator | None = next(
            (p.attach(self.table, profile_obj.filter, list(profile_obj.plugins.values()), self.waiting)
             for p in profile_obj.post_filter if isinstance(p, DefaultPreemption)), None)
        """Preemptors' nominations (:mod:`colo_scheduler.plugins.preemption`), None without DefaultPreemption."""
        self.hint_stats = {"woken": 0, "skipped": 0, "equivalent_failures": 0}
        """Counters: pods woken by hints, unschedulable pods left parked after a change, and
        failures decided by an equivalent pod's failure in the same cycle."""

    # ------------------------------------------------------------------ pods

    def pod_info(self, spec: PodSpec, now: float) -> PodInfo:
        """PreFilter state of ``spec`` (request vector, estimate) with ``queued_at = now``.

        Pods of one class (replicas of a workload) share the derived arrays of a template built
        once per class; every array of a PodInfo is read-only by convention (plugins replace
        attributes, never write into them)."""
        key = spec_class_key(spec, pod_priority(spec), self.framework.cache.ignores_app)
        template = self._templates.get(key)
        if template is None:
            s = self.settings
            template = make_pod_info(spec, s.cpu_estimation_factor_percent, s.memory_estimation_factor_percent,
                                     s.default_cpu_estimate_milli, s.default_memory_estimate_bytes)
            if len(self._templates) >= 10_000:
                self._templates.clear()
            self._templates[key] = template
        return clone_pod_info(template, spec, now, {"class": key})

    def add_pod(self, spec: PodSpec, now: float) -> bool:
        """Queue a pending pod; False when it is already queued or placed."""
        if spec.uid in self.framework.placed or spec.uid in self.queue:
            return False
        info = self.pod_info(spec, now)
        added = self.queue.add(info)
        if added and self.quota is not None:
            self.quota.add_pending(info)
        return added

    def adopt(self, spec: PodSpec, node: str, bound_at: float, cpuset: str = "", devices: str = "") -> bool:
        """Count an already bound pod (loaded from the store) on ``node``, with the ``cpuset`` its binding
        holds (kernel list format; NodeNUMAResource books exactly those CPUs) and its ``devices``
        (``"index:milli,..."``; DeviceShare books exactly those GPUs); False for unknown nodes
        or pods already placed. Allocation sums should afterwards be set from the store."""
        i = self.table.index.get(node)
        if i is None or spec.uid in self.framework.placed:
            return False
        self.queue.remove(spec.uid)
        if self.nominator:
            self.nominator.drop(spec.uid)  # bound elsewhere: its held room is free again
        info = self.pod_info(spec, bound_at)
        if cpuset:
            info.extra[ASSIGNED_CPUSET] = cpuset
        if devices:
            info.extra[ASSIGNED_DEVICES] = devices
        self.framework.reserve(info, i, bound_at)
        return True

    def release(self, uid: str, now: float) -> PodInfo | None:
        """Free a placed pod (Unreserve) and wake pods waiting for room; the pod's info or None."""
        if self.waiting.pop(uid, None) is not None:
            self._waiting_version += 1
        entry = self.unreserve(uid)
        if self.quota is not None:
            self.quota.drop_pending(uid)
        self._events.add(POD_DELETE)
        return entry[0] if entry else None

    def unreserve(self, uid: str) -> tuple[PodInfo, int] | None:
        """Undo a placement (Unreserve) and remember its node as changed; None when not placed. A pod
        placed on a reservation and not bound gives the held room back to the reservation."""
        entry = self.framework.unreserve(uid)
        if entry is not None:
            self._dirty_rows.add(entry[1])
            nominated = entry[0].extra.pop(NOMINATION, None)
            if isinstance(nominated, Nomination):
                self.table.add_allocated(entry[1], nominated.use)
                self.reservations.unclaim(nominated.name, nominated.use)
        return entry

    def take_queued(self, uid: str) -> PodInfo | None:
        """Remove pod ``uid`` from the queue (any pool) for the current cycle's batch; None when not queued."""
        return self.queue.remove(uid)

    def park(self, uid: str, now: float, rejectors: frozenset[str], reasons: dict[str, int]) -> bool:
        """Re-park an unschedulable pod under ``rejectors`` (which events wake it); False when not parked."""
        if uid not in self.queue.unschedulable:
            return False
        self.queue.add_unschedulable(self.queue.unschedulable[uid].pod, now, rejectors, reasons)
        return True

    def forget(self, uid: str) -> None:
        """Drop a pod from the queue (e.g. bound by another scheduler replica), and its nomination."""
        self.queue.remove(uid)
        if self.quota is not None:
            self.quota.drop_pending(uid)
        if self.nominator:
            self.nominator.drop(uid)

    # ------------------------------------------------------------------ cycle

    def schedule_cycle(self, now: float) -> CycleOutcome:
        """One cycle at clock time ``now``: flush pools, then place active pods in QueueSort order,
        reserving each placement so that later pods see it. Unplaced pods become unschedulable;
        pods a Permit plugin holds wait (reserved) until allowed, rejected or timed out.

        With ``gc_between_cycles`` Python's cyclic garbage collector is paused during the cycle
        and runs after it: a full collection over a large heap takes ~100 ms, which would land in
        one pod's decision (bench/scheduler_inprocess.py)."""
        if not self.settings.gc_between_cycles or not gc.isenabled():
            return self._schedule_cycle(now)
        gc.disable()
        try:
            return self._schedule_cycle(now)
        finally:
            gc.enable()

    def _schedule_cycle(self, now: float) -> CycleOutcome:
        state = self.framework.begin_cycle(now)
        out = CycleOutcome()
        if self.nominator:
            self.nominator.expire(now)
        self._resolve_waiting(now, out)
        if self.quota is not None:
            self._quota_cycle(now, out)
        self.wake_helped(state, now)
        self.queue.flush(now)
        pods = self.queue.pop_batch(self.settings.max_pods_per_cycle)
        if not pods:
            self._take_released(out)
            return out
        for bp in self._batch_plugins:  # e.g. the rest of a gang joins its members
            pods = bp.complete_batch(pods, now)
        names = self.table.names
        failed: dict[bytes, ScheduleResult] = {}
        record = self._record
        for pod in pods:
            t0 = time.perf_counter()
            pod.attempts += 1
            pod.last_attempt_at = now
            key = equivalence_key(pod) if self._equivalence else None
            nominated = self._nominate(state, pod) if self.reservations.active else None
            preempted = -1
            if self.nominator and pod.uid in self.nominator.nominations:  # (a Nominator is falsy when empty)
                preempted = self._nominated_row(state, pod) if nominated is None else -1
                key = None  # its PostFilter must run: it keeps the nomination and holds the room again
            known = failed.get(key) if key is not None else None
            if nominated is not None:
                result = ScheduleResult(nominated.row, feasible=1)
                key = None
            elif preempted >= 0:  # the room its victims freed (Kubernetes: the nominated node first)
                result = ScheduleResult(preempted, feasible=1)
                if record is not None and self.nominator is not None:
                    result.record = self.nominator.placed_record(pod, preempted, now, record)
                key = None
            elif known is not None:
                # An equal pod found no node earlier in this cycle; the table only filled since.
                result = ScheduleResult(-1, dict(known.reasons), known.rejectors, 0, known.message, known.code)
                if known.record is not None:
                    result.record = known.record.for_attempt(pod.uid, pod.attempts)
                self.hint_stats["equivalent_failures"] += 1
            else:
                result = self.framework.schedule_one(state, pod, record)
                if (result.node < 0 and key is not None and result.nominated < 0
                        and ElasticQuota.name not in result.rejectors):
                    failed[key] = result
            ms = (time.perf_counter() - t0) * 1e3
            if result.record is not None:
                result.record.decision_ms = ms
                self.decisions.add(result.record)
            if result.node >= 0:
                if self.nominator:
                    self.nominator.drop(pod.uid)
                self.framework.reserve(pod, result.node, now)
                if nominated is not None:  # the held room (in the allocation already) covers this part
                    self.table.add_allocated(result.node, nominated.use, -1)
                    pod.extra[NOMINATION] = nominated
                    self.reservations.claim(nominated.name, nominated.use)
                permit = self.framework.permit(state, pod, result.node) if self.framework.profile.permit else None
                if permit is None or permit.ok:
                    out.placements.append(Placement(pod, names[result.node], ms,
                                                    nominated.name if nominated is not None else ""))
                elif permit.code == WAIT:
                    self.waiting[pod.uid] = (pod, result.node, now + permit.timeout_s)
                    self._waiting_version += 1
                    if pod.spec.gang is not None:  # the gang's latest count, for its waiting members' records
                        self._gang_waits[pod.spec.gang.name] = permit.reason
                    if result.record is not None:  # the record says what the pod waits for
                        result.record.status, result.record.message = WAIT, permit.reason
                else:
                    self.unreserve(pod.uid)
                    failed.clear()  # room was given back: equal pods may fit after all
                    result = ScheduleResult(-1, {permit.reason: 1}, frozenset({permit.reason.split(":")[0]}), 0,
                                            f"rejected by permit: {permit.reason}", UNSCHEDULABLE)
                    self.queue.add_unschedulable(pod, now, result.rejectors, result.reasons)
                    out.failures.append(Failure(pod, result, ms))
            elif result.nominated >= 0:
                self.queue.add_backoff(pod)  # a PostFilter made room: retry soon
                out.failures.append(Failure(pod, result, ms))
                if self.nominator:
                    out.evictions.extend(Eviction(e.victim, names[e.row], preempted_by(e.preemptor))
                                         for e in self.nominator.take_evictions() if not self.ordered_out(e.victim.uid))
            else:
                self.queue.add_unschedulable(pod, now, result.rejectors, result.reasons)
                out.failures.append(Failure(pod, result, ms))
        for bp in self._batch_plugins:
            bp.end_batch(now)
        if self._allowed:  # allowed in this cycle (a gang complete): bound with this cycle's placements
            self._place_allowed(out)
        self._take_released(out)  # members a gang sent back or a timeout released: each gets its reason
        return out

    def bind_failed(self, pod: PodInfo) -> None:
        """A placement the store refused: Unreserve it and retry after backoff."""
        self.unreserve(pod.uid)
        self.queue.add_backoff(pod)

    def explain(self, uid: str, now: float) -> DecisionRecord | None:
        """A dry-run decision (per-node detail) for a queued pod at clock time ``now``, or None
        when the pod is not queued. Reserves nothing; the current cycle's caches are reset."""
        pod = next((p for p in self.queue.pods() if p.uid == uid), None)
        if pod is None:
            return None
        t0 = time.perf_counter()
        rec = self.framework.explain(self.framework.begin_cycle(now), pod)
        rec.decision_ms = (time.perf_counter() - t0) * 1e3
        return rec

    def decision(self, uid: str) -> DecisionRecord | None:
        """The recorded decision of pod ``uid``'s latest attempt, or None when not recorded. A gang member
        waiting at Permit gets its gang's latest count (:meth:`_waiting_record`)."""
        return self._waiting_record(self.decisions.get(uid))
