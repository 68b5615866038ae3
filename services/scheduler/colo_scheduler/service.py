"""The scheduler service: events in, bindings (Redis) and PodBound / PodUnschedulable out.

Consumes ``pod.admitted`` in batches (each batch persisted as Pending PodRecords in one
pipeline before the messages are acked, so a crash never loses a pod), ``node.registered``,
``node.resource``, ``node.metric``, ``pod.status`` (Succeeded/Failed → release; reason
Evicted/Descheduled → requeue), ``node.deleted`` (:mod:`colo_scheduler.node_deletion`) and, when other
processes bind too (replicas, leader election), ``pod.bound``, and ``reservation.submitted`` (placed at the
start of the leader's cycles: :mod:`colo_scheduler.reservations_intake`). A cycle of :class:`colo_scheduler.core.Scheduler` binds its
placements with one pipelined :meth:`colo.store.Store.bind_many` and publishes the PodBound
events in one batch. Cycles run at every ``tick(now)`` and, under the wall clock, also
``batch_window_s`` after pods arrive (prompt cycles); a lock keeps them one at a time.
Replicas (:mod:`colo_scheduler.replicas`) and the lease (:mod:`colo_scheduler.lease`) decide
which pods, and whether, this process schedules. Invalid messages are dead-lettered with a
reason; the service keeps running. The handlers of the consumed subjects are in
:mod:`colo_scheduler.handlers`, the publishing of the events in :mod:`colo_scheduler.publishing`, the bind
path in :mod:`colo_scheduler.binding` and the debug views (``/debug``, ``/debug/pods/{uid}/decision``) in
:mod:`colo_scheduler.introspection`.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import socket
import time
from typing import Any

import numpy as np

from colo import subjects
from colo.clock import WallClock
from colo.messages import (
    NodeResource,
    PodSpec,
    PodUnschedulable,
    Resources,
)
from colo.reservations import ReservationStore
from colo.runtime import ServiceContext, StartRefused
from colo.settings import RuntimeSettings
from colo_scheduler.binding import SchedulerBinding
from colo_scheduler.core import CycleOutcome, Scheduler
from colo_scheduler.deletion import PodDeletion
from colo_scheduler.epoch import EpochWatch
from colo_scheduler.handlers import SchedulerEventHandlers
from colo_scheduler.heap import HeapFreezer
from colo_scheduler.introspection import LIVE_VALUES, SchedulerIntrospection
from colo_scheduler.lease import LeaderElector
from colo_scheduler.metrics import observe_cycle, watch_queue
from colo_scheduler.node_deletion import NodeDeletion
from colo_scheduler.publishing import SchedulerEventPublisher
from colo_scheduler.quota_events import QuotaEvents
from colo_scheduler.rebuild import pending_from_streams
from colo_scheduler.replicas import Replica
from colo_scheduler.reservations_intake import ReservationIntake
from colo_scheduler.settings import SchedulerSettings
from colo_scheduler.validation import node_problem as _node_problem
from colo_scheduler.validation import pod_problem as _pod_problem

log = logging.getLogger("colo.scheduler")

__all__ = ["LIVE_VALUES", "MAX_PUBLISHING", "SchedulerService"]

MAX_PUBLISHING = 4
"""Prompt cycles whose events may still be waiting for JetStream acks when the next cycle starts."""


class SchedulerService(SchedulerBinding, SchedulerIntrospection, SchedulerEventHandlers,
                       SchedulerEventPublisher, QuotaEvents):
    """The ``scheduler`` service (colo.runtime Service protocol).

    Raises ValueError at construction when ``settings.problems()`` is not empty.
    """

    name = "scheduler"

    def __init__(self, settings: SchedulerSettings) -> None:
        problems = settings.problems()
        if problems:
            raise ValueError("invalid scheduler settings: " + "; ".join(problems))
        self.settings = settings
        self.tick_interval_s = settings.tick_interval_s
        self.core = Scheduler(settings)
        self.ctx: ServiceContext | None = None
        self._ready = False
        self._last_resync = -math.inf
        self._dirty: set[str] = set()
        self._bind_unsure: set[str] = set()
        self._allocation_reads_open = 0  # allocation reads from the store still awaited
        self._releasing_nodes: dict[str, int] = {}  # node → status handlers releasing a pod of it in the store
        self._early_resources: dict[str, NodeResource] = {}
        self._unpublished: list[tuple[Any, Any, str | None, dict[str, str]]] = []
        # uid → (reasons, message, clock time) of the last PodUnschedulable published for it
        self._last_unschedulable: dict[str, tuple[dict[str, int], str, float]] = {}
        self.totals = {"pods_bound": 0, "bind_conflicts": 0, "unschedulable_attempts": 0,
                       "dead_letters": 0, "cycles": 0, "prompt_cycles": 0, "foreign_binds": 0,
                       "preemption_evictions": 0}
        self.replica = Replica(settings.replica_index, settings.replicas)
        """Completed at start with the runtime's instance name (:meth:`Replica.from_settings`)."""
        self.elector: LeaderElector | None = None
        self.claim: LeaderElector | None = None
        """This replica's shard claim (:meth:`_claim_shard`), None when not sharded."""
        self._cycle_lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._publishing: set[asyncio.Task[None]] = set()
        self._take_over_pending = False
        self._announce: dict[str, tuple[PodSpec, str, float]] = {}
        """Pods bound in the store but maybe never announced (a scheduler died between the bind and the
        PodBound ack): uid → (spec, node, bind time); the next cycle that leads publishes them."""
        self._releases_watch: list[set[str]] = []
        """Sets of uids released while a ``pod.bound`` batch waits for the store (see :meth:`_on_bound`)."""
        self.heap = HeapFreezer(settings.heap_freeze_interval_s, settings.heap_full_collect_interval_s)
        self._reservation_store: ReservationStore | None = None
        self._quota_max_sent: dict[str, dict[str, int]] = {}
        self.reservation_intake = ReservationIntake(self.core, settings, lambda: self.reservation_store)
        self.deletion = PodDeletion(self.core)
        self.node_deletion = NodeDeletion(self.core)
        self.epoch = EpochWatch(settings.store_epoch_check_s)

    # ------------------------------------------------------------------ lifecycle

    async def start(self, ctx: ServiceContext) -> None:
        """Load nodes, resources, allocations and pods from the store, subscribe, and start the
        prompt-cycle loop (wall clock only) and the leader elector (``leader_election``).

        Raises ValueError when leader election is on without a valid ``COLO_INSTANCE``, and
        :class:`colo.runtime.StartRefused` when another process runs this replica (:meth:`_claim_shard`).
        """
        self.ctx = ctx
        self.replica = Replica.from_settings(self.settings, ctx.settings.instance)
        watch_queue(lambda: self.core.queue.lengths(), lambda: len(self.core.waiting))
        await self._claim_shard()
        await self._load(ctx.clock.now())
        if self.heap.interval_s > 0:
            self.heap.freeze()  # the loaded cluster is long-lived
        bus = ctx.bus
        durable = self.replica.durable
        await self._subscribe_quotas(durable("quotas"))
        bus.subscribe_batch(subjects.POD_ADMITTED, self._on_admitted, durable=durable("admitted"))
        bus.subscribe(subjects.NODE_REGISTERED, self._on_node, durable=durable("nodes"))
        bus.subscribe(subjects.NODE_RESOURCE, self._on_node_resource, durable=durable("resources"))
        bus.subscribe(subjects.NODE_METRIC, self._on_metric, durable=durable("metrics"))
        bus.subscribe(subjects.POD_STATUS, self._on_status, durable=durable("status"))
        if self.replica.sees_foreign_binds:
            bus.subscribe_batch(subjects.POD_BOUND, self._on_bound, durable=durable("bound"))
        bus.subscribe(subjects.MIGRATION, self._on_migration, durable=durable("migration"))
        self.reservation_intake.attach(ctx, self.replica, self._wake)
        bus.subscribe(subjects.RESERVATION_SUBMITTED, self.reservation_intake.on_submitted,
                      durable=durable("reservations"))
        self.deletion.attach(ctx, self.replica, self._wake)
        bus.subscribe(subjects.POD_DELETED, self.deletion.on_deleted, durable=durable("deleted"))
        self.node_deletion.attach(ctx, self.replica)
        bus.subscribe(subjects.NODE_DELETED, self.node_deletion.on_deleted, durable=durable("node-deleted"))
        ctx.add_route("GET", "/debug/pods/{uid}/decision", self._decision_route)
        s = self.settings
        if s.leader_election:
            holder = f"{self.replica.instance}@{socket.gethostname()}:{os.getpid()}"
            self.elector = LeaderElector(ctx.store, self.replica.lease_name, holder, s.lease_duration_s,
                                         s.lease_renew_deadline_s, s.lease_retry_period_s, self._on_leadership)
            self._tasks.append(asyncio.create_task(self.elector.run(), name="scheduler:lease"))
        if s.prompt_cycles and isinstance(ctx.clock, WallClock):
            self._tasks.append(asyncio.create_task(self._prompt_loop(), name="scheduler:prompt"))
        self._ready = True

    async def _claim_shard(self) -> None:
        """With ``replicas`` > 1 (and no leader election, where several processes per shard are the
        point): hold the lease ``scheduler-r<i>-claim`` while running, renewed like the leader's.
        Two processes with one ``replica_index`` would share their durable consumers, and NATS would
        split every stream between them: each would schedule on part of the cluster's events.

        Waits up to ``lease_duration_s`` + ``lease_retry_period_s`` for a claim left by a crashed
        process to expire; raises :class:`colo.runtime.StartRefused` naming the holder when it is
        still held then (a live process renews it)."""
        s, store = self.settings, self._store()
        if s.replicas <= 1 or s.leader_election:
            return
        name = f"{self.replica.lease_name}-claim"
        assert self.ctx is not None
        holder = f"{self.ctx.settings.instance or 'scheduler'}@{socket.gethostname()}:{os.getpid()}"
        claim = LeaderElector(store, name, holder, s.lease_duration_s, s.lease_renew_deadline_s,
                              s.lease_retry_period_s)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + s.lease_duration_s + s.lease_retry_period_s
        while not await claim.try_once():
            if loop.time() >= deadline:
                raise StartRefused(
                    f"replica {s.replica_index} of {s.replicas} is already running (claim {name!r} held by "
                    f"{await store.lease_holder(name)}): two schedulers with one replica_index share their "
                    "consumers and each sees part of the events; give every replica its own "
                    "COLO_SCHEDULER_REPLICA_INDEX")
            await asyncio.sleep(s.lease_retry_period_s)
        self.claim = claim
        self._tasks.append(asyncio.create_task(claim.run(), name="scheduler:claim"))

    async def stop(self) -> None:
        """Wait for a running cycle, stop the prompt loop and the elector, and release the lease
        (a follower takes over at its next retry) and the shard claim. Pods need no flush: each is
        persisted on admission."""
        self._ready = False
        async with self._cycle_lock:  # the loops are idle (not inside a cycle) while we hold it
            for task in self._tasks:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            self._tasks.clear()
            await asyncio.gather(*self._publishing, return_exceptions=True)
        if self.elector is not None:
            await self.elector.release()
        if self.claim is not None:
            await self.claim.release()
            self.claim = None

    def runtime_problems(self, runtime: RuntimeSettings) -> list[str]:
        """Problems of these settings with the shared ones (checked by :func:`colo.runtime.main` before
        connecting): leader election needs a usable ``COLO_INSTANCE`` (:meth:`Replica.from_settings`)."""
        try:
            Replica.from_settings(self.settings, runtime.instance)
        except ValueError as exc:
            return [str(exc)]
        return []

    def ready(self) -> bool:
        """True once state is loaded and consumers are registered — on a follower too (a warm
        standby is ready to take over; whether it leads is in :meth:`debug`)."""
        return self._ready

    def leading(self) -> bool:
        """True when this process may schedule and bind: always without leader election, else
        while it holds the lease."""
        return self.elector is None or self.elector.is_leader()

    def _on_leadership(self, leader: bool) -> None:
        if leader:  # reconcile with what the previous leader bound before the first cycle
            self._take_over_pending = True
            self._wake.set()

    async def _take_over(self, now: float) -> None:
        """On election: adopt the queued pods that another leader bound meanwhile (their
        ``pod.bound`` may still be on its way) and reload every allocation."""
        self._take_over_pending = False
        queued = {p.uid: p for p in self.core.queue.pods()}
        bound = await self._store().bound_nodes(list(queued))
        cpusets = await self._store().bound_cpusets(list(bound)) if bound else {}
        devices = await self._store().bound_devices(list(bound)) if bound else {}
        for uid, (node, at) in bound.items():
            if uid in queued and uid not in self.core.framework.placed:
                if self.core.adopt(queued[uid].spec, node, at, cpusets.get(uid, ""), devices.get(uid, "")):
                    self._announce[uid] = (queued[uid].spec, node, at)  # the old leader may have died first
        await self._resync(now)
        log.info("took over scheduling: %d queued pods, %d already bound by the previous leader",
                 len(queued), len(bound))

    async def _load(self, now: float) -> None:
        store = self._store()
        await self.epoch.seen(store, now)
        for spec in await store.list_nodes():
            problem = _node_problem(spec.name, spec.allocatable, spec.capacity)
            if problem:  # written by something that skipped the checks: never schedule on it
                log.error("skipping stored node: %s", problem)
                continue
            self.core.on_node(spec, now)
        for nr in (await store.list_node_resources()).values():
            self.core.on_node_resource(nr, now)
        stored = await store.list_pods()
        for rec in stored:
            try:
                if rec.node and rec.phase in ("Pending", "Running"):
                    if (self.core.adopt(rec.spec, rec.node, rec.bound_at, rec.cpuset, rec.devices) and rec.phase == "Pending"
                            and self.replica.owns_pod(rec.spec)):
                        # bound, not started: its PodBound may have died with the last scheduler
                        self._announce[rec.spec.uid] = (rec.spec, rec.node, rec.bound_at)
                elif rec.phase == "Pending" and not rec.node and self.replica.owns_pod(rec.spec):
                    problem = _pod_problem(rec.spec)
                    if problem:
                        log.error("skipping stored pod: %s", problem)
                        continue
                    self.core.add_pod(rec.spec, now)
            except (OverflowError, ValueError) as exc:  # a corrupt record must not stop the start
                log.error("skipping stored pod %s: %r", rec.spec.uid, exc)
        if not await store.loaded_marker(self.replica.lease_name):  # a new or lost store: replay admissions
            await self._rebuild_pending(now, {rec.spec.uid for rec in stored},
                                        "store without this scheduler's marker (new or lost)")
            await store.mark_loaded(self.replica.lease_name, now)
        await self._resync(now)

    async def _after_epoch_change(self, now: float) -> None:
        """The store failed over or restarted (:mod:`colo_scheduler.epoch`): write back the pods this scheduler
        queues that the store lost, rebuild the other pending ones from the streams, re-read every allocation."""
        store = self._store()
        known = {rec.spec.uid for rec in await store.list_pods()}
        queued = [p.spec for p in self.core.queue.pods() if p.uid not in known]
        if queued:
            await store.admit_pending(queued, now)
            known |= {s.uid for s in queued}
        await self._rebuild_pending(now, known, f"store epoch changed (failover or restart; {len(queued)} "
                                                "queued pods written back)")
        await store.mark_loaded(self.replica.lease_name, now)
        await self._resync(now)

    async def _rebuild_pending(self, now: float, known: set[str], why: str) -> None:
        """Queue the pods admitted, not in the store, and neither bound, ended nor deleted according to the
        streams (:mod:`colo_scheduler.rebuild`), persisted as Pending first."""
        assert self.ctx is not None
        specs = await pending_from_streams(self.ctx.bus, self.replica.owns_pod, known)
        written = await self._store().admit_pending(specs, now) if specs else []
        for spec, ok in zip(specs, written):
            if ok:
                self.core.add_pod(spec, now)
        if specs or "epoch" in why:
            log.warning("%s: %d pending pods rebuilt from the pod.admitted stream", why, sum(written))

    def _store(self) -> Any:
        assert self.ctx is not None, "service not started"
        return self.ctx.store

    async def _sync_reservations(self, now: float | None = None) -> None:
        """Re-read the store's available reservations (after sweeping the expired ones when ``now`` is
        given); nodes whose reservations changed are re-read next cycle."""
        rs = self.reservation_store
        if now is not None:
            await rs.sweep(now)
        self._dirty |= self.core.reservations.set_reservations(await rs.available())

    async def _resync(self, now: float) -> None:
        await self._sync_reservations(now)  # the scheduler sweeps too: room never waits for the descheduler
        self._dirty.clear()  # before the read: a node a release marks during it stays marked
        self._allocation_reads_open += 1
        try:
            allocated = await self._store().all_allocated()
        finally:
            self._allocation_reads_open -= 1
        self._apply_allocated(allocated)
        self._last_resync = now

    async def _refresh(self, nodes: set[str]) -> None:
        self._allocation_reads_open += 1
        try:
            allocated = await self._store().allocated_many(nodes)
        finally:
            self._allocation_reads_open -= 1
        self._apply_allocated(allocated)

    def _apply_allocated(self, allocated: dict[str, Resources]) -> None:
        """Set the store's sums on the table, except on nodes with a release under way (the sums may
        or may not hold the pod yet): those are re-read next cycle."""
        releasing = self._releasing_nodes
        for name, r in allocated.items():
            if name in releasing:
                self._dirty.add(name)
            else:
                self.core.set_allocated(name, r, r.pods)

    # ------------------------------------------------------------------ cycle

    async def tick(self, now: float) -> dict[str, float]:
        """One scheduling cycle at clock time ``now``; returns counters for the report.

        Stats: ``pods_bound`` (this cycle), ``pods_bound_total``, ``bind_conflicts``,
        ``pods_unschedulable`` (current), ``queue_active|backoff|unschedulable``, ``nodes``,
        ``decision_ms_p50|p99`` (filter+score per pod, this cycle), ``cycle_ms``, ``leader``
        (1 when this process schedules). A follower (leader election) only refreshes its state.
        """
        async with self._cycle_lock:
            return await self._cycle(now)

    async def _prompt_loop(self) -> None:
        """Wall clock: a cycle ``batch_window_s`` after an admission (or a release while pods wait)
        woke the loop, and again at once while the active queue still holds pods."""
        window = self.settings.batch_window_s
        while True:
            await self._wake.wait()
            if window > 0:
                await asyncio.sleep(window)
            self._wake.clear()
            try:
                async with self._cycle_lock:
                    if self.leading():
                        self.totals["prompt_cycles"] += 1
                        await self._cycle(self._now(), background_publish=True, stats=False)
            except Exception:  # a Redis or NATS outage: the tick loop keeps retrying as well
                log.exception("prompt scheduling cycle failed")
                await asyncio.sleep(self.tick_interval_s)
            if self.core.queue.lengths()["active"] and self.leading():
                self._wake.set()

    async def _cycle(self, now: float, background_publish: bool = False, stats: bool = True) -> dict[str, float]:
        """One cycle; with ``background_publish`` its events are published by a task, so that the
        next cycle need not wait for their JetStream acks (at most :data:`MAX_PUBLISHING` in flight);
        without ``stats`` (prompt cycles, nobody reads them) it returns {}."""
        t_cycle = time.perf_counter()
        self.totals["cycles"] += 1
        leading = self.leading()
        if leading and self._take_over_pending:
            await self._take_over(now)
        if await self.epoch.changed(self._store(), now):
            try:
                await self._after_epoch_change(now)
            except BaseException:
                self.epoch.retry()
                raise
        if leading and await self.reservation_intake.place_due(now):
            await self._sync_reservations()  # marks the nodes of the reservations placed: re-read below
        if now - self._last_resync >= self.settings.resync_interval_s:
            await self._resync(now)
        elif self._dirty:
            dirty, self._dirty = self._dirty, set()
            try:
                await self._refresh(dirty)
            except BaseException:
                self._dirty |= dirty  # a Redis error: the next cycle re-reads them
                raise
        await self._flush_unpublished()
        if leading:
            out = self.core.schedule_cycle(now)
        else:  # a follower never begins a cycle, which is what trims the table's change log
            out = CycleOutcome()
            self.core.table.trim_changes()
        events: list[tuple[Any, Any, str | None, dict[str, str]]] = []
        if leading and self._announce:
            events.extend(self._announcements())
        bound = await self._bind(out, now, events) if out.placements else 0
        if leading:
            events.extend(self._quota_events(out, now))
        for p in out.placements:
            self._last_unschedulable.pop(p.pod.uid, None)
        for f in out.failures:
            if not self._report_unschedulable(f.pod.uid, f.result.reasons, f.result.message, now):
                continue
            failed = PodUnschedulable(uid=f.pod.uid, name=f.pod.spec.name, reasons=f.result.reasons,
                                      message=f.result.message, at=now, attempts=f.pod.attempts)
            events.append((subjects.POD_UNSCHEDULABLE, failed, f"unschedulable-{f.pod.uid}-{now!r}", {}))
        if out.evictions:
            events.extend(self._eviction_events(out.evictions, now))
        self.totals["pods_bound"] += bound
        self.totals["unschedulable_attempts"] += len(out.failures)
        if background_publish and events:
            while len(self._publishing) >= MAX_PUBLISHING:
                await asyncio.wait(self._publishing, return_when=asyncio.FIRST_COMPLETED)
            task = asyncio.create_task(self._publish(events), name="scheduler:publish")
            self._publishing.add(task)
            task.add_done_callback(self._publishing.discard)
        else:
            await self._publish(events)
        observe_cycle(out, time.perf_counter() - t_cycle)
        self.heap.maybe()
        if not stats:
            return {}
        lat = [p.decision_ms for p in out.placements] + [f.decision_ms for f in out.failures]
        q = self.core.queue.lengths()
        return {
            "pods_bound": float(bound),
            "pods_bound_total": float(self.totals["pods_bound"]),
            "bind_conflicts": float(self.totals["bind_conflicts"]),
            "pods_unschedulable": float(q["unschedulable"]),
            "queue_active": float(q["active"]),
            "queue_backoff": float(q["backoff"]),
            "queue_unschedulable": float(q["unschedulable"]),
            "nodes": float(self.core.table.n),
            "decision_ms_p50": float(np.percentile(lat, 50)) if lat else 0.0,
            "decision_ms_p99": float(np.percentile(lat, 99)) if lat else 0.0,
            "cycle_ms": (time.perf_counter() - t_cycle) * 1e3,
            "leader": 1.0 if leading else 0.0,
        }
