"""The scheduler's synchronous core: node table + framework + queue, without I/O.

The service (:mod:`colo_scheduler.service`) feeds it events and binds what it
places; tests drive it directly. Times are clock seconds; ``decision_ms`` is wall
time measured with :func:`time.perf_counter`.
"""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass, field

import numpy as np

from colo.messages import ElasticQuota as ElasticQuotaSpec
from colo.messages import NodeMetric, NodeResource, NodeSpec, PodSpec, Resources
from colo_scheduler.framework.classcache import class_key, spec_class_key
from colo_scheduler.framework.decision import DecisionLog, DecisionRecord
from colo_scheduler.framework.interface import (
    NODE_ADD,
    NODE_METRIC,
    NODE_RESOURCE,
    POD_DELETE,
    UNSCHEDULABLE,
    WAIT,
    BatchPlugin,
    CycleState,
)
from colo_scheduler.framework.registry import ProfileConfig, build_profile
from colo_scheduler.framework.runner import Framework, ScheduleResult
from colo_scheduler.hints import fits_any_row
from colo_scheduler.plugins import new_in_tree_registry, profile_config
from colo_scheduler.plugins.bememorypressure import BEMemoryPressure
from colo_scheduler.plugins.coscheduling import Coscheduling
from colo_scheduler.plugins.elasticquota import QUOTA_CHANGE, ElasticQuota
from colo_scheduler.plugins.loadaware import LoadAware
from colo_scheduler.plugins.maxinstance import MaxInstancePerNode
from colo_scheduler.plugins.nodeaffinity import NodeAffinity
from colo_scheduler.plugins.noderesources import NodeResourcesFit
from colo_scheduler.plugins.nodeselector import NodeSelector
from colo_scheduler.plugins.nodeunschedulable import NodeUnschedulable
from colo_scheduler.plugins.preemption import DefaultPreemption, Nominator
from colo_scheduler.plugins.preemption.victims import passes
from colo_scheduler.plugins.qosadmission import QoSAdmission
from colo_scheduler.plugins.reservation import Nomination, Reservation
from colo_scheduler.plugins.tainttoleration import TaintToleration
from colo_scheduler.podinfo import PodInfo, clone_pod_info, make_pod_info, pod_priority
from colo_scheduler.queue import SchedulingQueue
from colo_scheduler.settings import SchedulerSettings
from colo_scheduler.table import NodeTable

EQUIVALENCE_FILTERS = (NodeSelector, NodeAffinity, TaintToleration, NodeResourcesFit, MaxInstancePerNode,
                       LoadAware, NodeUnschedulable, BEMemoryPressure)
"""Filters whose verdict depends only on :func:`equivalence_key` and on table state that a
cycle only fills (Reserve adds requests, estimates and app counts; nothing is freed)."""

NOMINATION = "reservation"
"""Key of a pod's :class:`Nomination` in ``PodInfo.extra`` while it is placed on a reservation and not bound."""

EQUIVALENCE_PRE_FILTERS = (QoSAdmission, NodeAffinity, Coscheduling)
"""PreFilters whose verdict depends only on the pod's spec (so on :func:`equivalence_key`) within a
cycle (Coscheduling: the gang is part of the spec, and its verdict holds for every member of a cycle)."""


def preempted_by(preemptor: PodInfo) -> str:
    """The eviction reason of a preemption's victims: ``Preempted by <namespace>/<name>``."""
    return f"Preempted by {preemptor.spec.namespace}/{preemptor.spec.name}"


def equivalence_key(pod: PodInfo) -> bytes:
    """The pod's scheduling class (:func:`colo_scheduler.framework.classcache.class_key`): two pods
    with equal keys pass exactly the same nodes in the same table state."""
    return class_key(pod)


@dataclass(slots=True)
class Placement:
    """A pod reserved on ``node`` (name) in this cycle, awaiting bind."""

    pod: PodInfo
    node: str
    decision_ms: float
    reservation: str = ""
    """The reservation the bind consumes ("" for none; :mod:`colo_scheduler.plugins.reservation`)."""


@dataclass(slots=True)
class Failure:
    """A pod no node accepted in this cycle, with the framework's diagnosis."""

    pod: PodInfo
    result: ScheduleResult
    decision_ms: float


@dataclass(slots=True)
class Eviction:
    """A placed pod to evict from ``node`` (name) for ``reason`` (``Preempted by <ns>/<name>``, or a quota's
    reclaim of its lent min); the service publishes it on ``pod.evict``."""

    pod: PodInfo
    node: str
    reason: str


@dataclass(slots=True)
class CycleOutcome:
    """What one cycle did: placements (reserved, to bind), failures (now unschedulable) and evictions
    (victims of preemption, and pods taken off their nodes to give a quota its lent min back)."""

    placements: list[Placement] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    evictions: list[Eviction] = field(default_factory=list)


class Scheduler:
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

    def adopt(self, spec: PodSpec, node: str, bound_at: float) -> bool:
        """Count an already bound pod (loaded from the store) on ``node``; False for unknown nodes
        or pods already placed. Allocation sums should afterwards be set from the store."""
        i = self.table.index.get(node)
        if i is None or spec.uid in self.framework.placed:
            return False
        self.queue.remove(spec.uid)
        if self.nominator:
            self.nominator.drop(spec.uid)  # bound elsewhere: its held room is free again
        self.framework.reserve(self.pod_info(spec, bound_at), i, bound_at)
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

    def bound_on_reservation(self, pod: PodInfo) -> None:
        """The store bound ``pod`` on its reservation: the room is the pod's now (a later release frees it)."""
        nominated = pod.extra.pop(NOMINATION, None)
        if isinstance(nominated, Nomination):
            self.reservations.unclaim(nominated.name, nominated.use)

    def node_changed(self, row: int, event: str) -> None:
        """Record that node ``row`` may accept more pods after ``event``; the next cycle wakes the
        unschedulable pods that now pass every filter on it (:meth:`wake_helped`)."""
        self._dirty_rows.add(row)
        self._events.add(event)

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

    # ------------------------------------------------------------------ nodes

    def on_node(self, spec: NodeSpec, now: float) -> bool:
        """Register or update a node; moves pods waiting for node changes. True when changed."""
        changed = self.table.upsert_node(spec)
        if changed:
            self.node_changed(self.table.index[spec.name], NODE_ADD)
        return changed

    def on_node_resource(self, nr: NodeResource, now: float) -> bool:
        """Apply batch/mid allocatable; moves pods waiting for it. True when changed."""
        changed = self.table.set_node_resource(nr)
        if changed:
            self.node_changed(self.table.index[nr.node], NODE_RESOURCE)
        return changed

    def on_metric(self, metric: NodeMetric, now: float) -> bool:
        """Apply a node metric; moves pods the load filter rejected. True when applied."""
        applied = self.table.set_metric(metric)
        if applied:
            self.node_changed(self.table.index[metric.node], NODE_METRIC)
        return applied

    def set_allocated(self, node: str, allocated: Resources, pods: int) -> None:
        """Overwrite a node's allocation with the store's sums (``pods`` = number of pods); a node
        whose free amount grew in any column counts as changed (pods released elsewhere)."""
        i = self.table.index.get(node)
        if i is None:
            return
        before = self.table.free[i].copy()
        self.table.set_allocated(node, allocated, pods)
        for pod in self._held_on().get(i, ()):  # held at Permit: reserved here, not in the store's sums yet
            nominated = pod.extra.get(NOMINATION)
            self.table.add_allocated(i, pod.request - nominated.use if isinstance(nominated, Nomination) else pod.request)
        held = self.nominator.held_on(i) if self.nominator else None
        if held is not None:  # the store does not know the room held for preemptors
            self.table.add_allocated(i, held)
        if bool((self.table.free[i] > before).any()):
            self.node_changed(i, POD_DELETE)

    def _held_on(self) -> dict[int, list[PodInfo]]:
        """Row → pods held at Permit on it (rebuilt when the waiting pods changed)."""
        if self._held[0] != self._waiting_version:
            rows: dict[int, list[PodInfo]] = {}
            for pod, row, _ in self.waiting.values():
                rows.setdefault(row, []).append(pod)
            self._held = (self._waiting_version, rows)
        return self._held[1]

    # ------------------------------------------------------------------ queueing hints

    def wake_helped(self, state: CycleState, now: float) -> int:
        """Move back the unschedulable pods the changes since the last cycle may help; returns how many.

        Pods rejected by filters only wake when they now pass every filter on a changed node
        (:func:`colo_scheduler.hints.fits_any_row`, at ``state``); pods rejected otherwise (a
        PreFilter, no nodes) keep the event rule: wake when a rejecting plugin registered one of
        the events seen. The queue's timed retry stays the safety net (time-driven changes such
        as metric expiry)."""
        rows, events = self._dirty_rows, self._events
        self._dirty_rows, self._events = set(), set()
        pool = self.queue.unschedulable
        if not pool or not events:
            return 0
        hinted = []
        wake: list[str] = []
        for uid, u in pool.items():
            if u.rejectors and u.rejectors <= self._filter_names:
                hinted.append(u.pod)
            elif not u.rejectors or any(e in self.interest.get(r, frozenset()) for r in u.rejectors
                                        for e in events):
                wake.append(uid)
        if hinted and rows:
            row_arr = np.fromiter(sorted(rows), np.intp, len(rows))
            if self._equivalence:  # equal pods pass the same nodes: check one per equivalence class
                groups: dict[bytes, list[PodInfo]] = {}
                for p in hinted:
                    groups.setdefault(equivalence_key(p), []).append(p)
                classes = list(groups.values())
                ok = fits_any_row(self.framework.profile.filter, state, [g[0] for g in classes], row_arr)
                helped = {p.uid for k in np.flatnonzero(ok) for p in classes[k]}
                wake.extend(p.uid for p in hinted if p.uid in helped)
            else:
                ok = fits_any_row(self.framework.profile.filter, state, hinted, row_arr)
                wake.extend(hinted[k].uid for k in np.flatnonzero(ok))
        moved = self.queue.wake(wake, now)
        self.hint_stats["woken"] += moved
        self.hint_stats["skipped"] += len(pool)  # pods still parked after the move
        return moved

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
                                         for e in self.nominator.take_evictions())
            else:
                self.queue.add_unschedulable(pod, now, result.rejectors, result.reasons)
                out.failures.append(Failure(pod, result, ms))
        for bp in self._batch_plugins:
            bp.end_batch(now)
        if self._allowed:  # allowed in this cycle (a gang complete): bound with this cycle's placements
            self._place_allowed(out)
        return out

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
            else:
                out.evictions.append(Eviction(r.member.pod, names[r.member.row], r.reason))

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
        """The recorded decision of pod ``uid``'s latest attempt, or None when not recorded."""
        return self.decisions.get(uid)
