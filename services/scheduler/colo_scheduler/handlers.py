"""The scheduler service's event handlers: what each consumed subject does to the decision core and the store.

``pod.admitted`` (batches: dead-letter invalid pods, persist the rest as Pending, queue them), ``node.registered``,
``node.resource`` (kept until its node registers), ``node.metric``, ``pod.status`` (Succeeded/Failed → release in
the store, then in the table; reason Evicted/Descheduled → requeue), ``pod.bound`` of other binders (adopt) and
``migration.*`` (re-read the reservations). Invalid messages are dead-lettered with a reason. The service
(:mod:`colo_scheduler.service`) subscribes them and owns the state they change.
"""

from __future__ import annotations

import asyncio
import logging
import math
from typing import Any, Awaitable, Callable

from colo import subjects
from colo.bus import MessageInfo
from colo.clock import knows_time
from colo.messages import (
    NodeMetric,
    NodeResource,
    NodeSpec,
    PodAdmitted,
    PodBound,
    PodMigrationJob,
    PodRecord,
    PodSpec,
    PodStatus,
    allocations_devices,
    devices_format,
)
from colo.runtime import ServiceContext
from colo_scheduler.core import Scheduler
from colo_scheduler.replicas import Replica
from colo_scheduler.settings import SchedulerSettings
from colo_scheduler.validation import MAX_QUANTITY
from colo_scheduler.validation import metric_problem as _metric_problem
from colo_scheduler.validation import node_problem as _node_problem
from colo_scheduler.validation import pod_problem as _pod_problem

log = logging.getLogger("colo.scheduler")

REQUEUE_REASONS = frozenset({"Evicted", "Descheduled", "Preempted"})
"""PodStatus reasons after which a released pod goes back to the queue (docs/architecture.md)."""


def _leave(counts: dict[str, int], key: str) -> None:
    """Count one holder of ``key`` less, dropping the key at zero."""
    left = counts.pop(key) - 1
    if left:
        counts[key] = left


class SchedulerEventHandlers:
    """The handlers of :class:`colo_scheduler.service.SchedulerService`, which sets the state below at
    construction and provides ``_store`` (the context's :class:`colo.store.Store`) and ``_sync_reservations``."""

    settings: SchedulerSettings
    core: Scheduler
    ctx: ServiceContext | None
    replica: Replica
    totals: dict[str, int]
    _dirty: set[str]
    _allocation_reads_open: int
    _releasing_nodes: dict[str, int]
    _early_resources: dict[str, NodeResource]
    _last_unschedulable: dict[str, tuple[dict[str, int], str, float]]
    _releases_watch: list[set[str]]
    _wake: asyncio.Event
    _store: Callable[[], Any]
    _sync_reservations: Callable[..., Awaitable[None]]

    async def _dead_letter(self, msg: Any, info: MessageInfo, reason: str) -> None:
        assert self.ctx is not None
        self.totals["dead_letters"] += 1
        await self.ctx.bus.reject(info, msg, reason)

    async def _on_admitted(self, items: list[tuple[PodAdmitted, MessageInfo]]) -> None:
        """A batch of admissions: dead-letter invalid pods, skip other shards' pods and pods already
        known, persist the rest as Pending in one pipeline, queue them and wake a prompt cycle.
        Idempotent per message (the bus hands a failed batch back one message at a time)."""
        placed, queue = self.core.framework.placed, self.core.queue
        fresh: dict[str, PodSpec] = {}
        for msg, info in items:
            spec = msg.spec
            problem = _pod_problem(spec)
            if problem:
                await self._dead_letter(msg, info, problem)
                continue
            uid = spec.uid
            if uid in placed or uid in queue or uid in fresh or not self.replica.owns_pod(spec):
                continue  # redelivery, or another replica's pod
            fresh[uid] = spec
        if not fresh:
            return
        now = self._now()
        specs = list(fresh.values())
        written = await self._store().admit_pending(specs, now)
        for spec, ok in zip(specs, written):
            if ok:  # else already bound or finished: a replayed admission
                self.core.add_pod(spec, now)
        self._wake.set()

    async def _on_node(self, spec: NodeSpec, info: MessageInfo) -> None:
        problem = _node_problem(spec.name, spec.allocatable, spec.capacity)
        if problem:
            await self._dead_letter(spec, info, problem)
            return
        if await self._deleted_since(spec.name, info.stream_seq):
            log.info("node %s: registration older than its deletion ignored (stream sequence %d)", spec.name,
                     info.stream_seq)
            return
        offer = self.core.table.retired_offer(spec.name)
        if offer is not None:
            # the node's deletion took its offer out of the store, whose bind limits it is; slo-manager
            # republishes an unchanged offer only at its next tick (the table applies it again); an offer that
            # came while the node was deleted is the newer one
            early_offer = self._early_resources.get(spec.name)
            await self._store().put_node_resource(early_offer if early_offer is not None else offer)
        now = self._now()
        self.core.on_node(spec, now)
        early = self._early_resources.pop(spec.name, None)
        if early is not None:
            self.core.on_node_resource(early, now)
        self._dirty.add(spec.name)

    async def _deleted_since(self, node: str, stream_seq: int) -> bool:
        """Whether deleted node ``node`` (a retired row) was deleted by an order published after stream sequence
        ``stream_seq`` of COLO_NODES: a registration from before it, handled late (node_deletion.py has its own
        consumer), must not bring the node back. One bus request, for retired nodes only."""
        table = self.core.table
        i = table.index.get(node)
        if i is None or i not in table.retired:
            return False
        assert self.ctx is not None
        return await self.ctx.bus.last_seq(subjects.NODE_DELETED, node=node) > stream_seq

    async def _on_node_resource(self, nr: NodeResource, info: MessageInfo) -> None:
        if not all(0 <= v <= MAX_QUANTITY for v in (nr.batch_cpu, nr.batch_memory, nr.mid_cpu, nr.mid_memory)):
            await self._dead_letter(nr, info, f"invalid NodeResource: allocatable out of range 0..{MAX_QUANTITY}")
            return
        if nr.node not in self.core.table.index and (problem := _node_problem(nr.node)):
            await self._dead_letter(nr, info, f"NodeResource of an {problem}")  # it would never register
            return
        table = self.core.table
        if nr.node not in table.index or table.index[nr.node] in table.retired:  # unknown or deleted
            self._early_resources[nr.node] = nr  # applied when the node registers (again)
            return
        self.core.on_node_resource(nr, self._now())

    async def _on_metric(self, metric: NodeMetric, info: MessageInfo) -> None:
        assert self.ctx is not None
        now = self._now()
        # a simulated scheduler restarted since the last tick reads 0 until its first one: it cannot
        # tell a metric of the current step from one far ahead (tests/scheduler/test_restart_clock_metric.py)
        max_ahead_s = self.settings.metric_expiry_s if knows_time(self.ctx.clock) else math.inf
        problem = _metric_problem(metric, now, max_ahead_s)
        if problem:
            await self._dead_letter(metric, info, problem)
            return
        self.core.on_metric(metric, now)

    async def _on_status(self, st: PodStatus, info: MessageInfo) -> None:
        if st.phase not in ("Succeeded", "Failed"):
            return
        store = self._store()
        now = self._now()
        # The store first, then the table: a cycle in between still counts the pod, so it never
        # binds on room the store holds. Sums read while the release is under way are not applied
        # to its nodes (_apply_allocated), and reads still open when it ends may hold the pod: both
        # re-read the nodes next cycle, so the table never counts the pod out twice.
        entry = self.core.framework.placed.get(st.uid)
        table_node = self.core.table.names[entry[1]] if entry is not None else ""
        nodes = {st.node, table_node} - {""}
        for n in nodes:
            self._releasing_nodes[n] = self._releasing_nodes.get(n, 0) + 1
        try:
            released = await store.release(st.uid, st.phase, st.reason, st.at, node=st.node)
        except BaseException:
            self._dirty |= nodes  # the store may have released it before the error: re-read
            raise
        finally:
            for n in nodes:
                _leave(self._releasing_nodes, n)
        if not released and st.node and table_node and table_node != st.node:
            placed = None  # a stale status: the pod was bound again elsewhere since (the store kept it)
        else:
            placed = self.core.release(st.uid, now)
        for watch in self._releases_watch:
            watch.add(st.uid)
        if released and self.core.reservations.reusable:
            self._dirty |= nodes  # a pod on a reusable reservation gave its part back to it, not to the node
            await self._sync_reservations()
        self._last_unschedulable.pop(st.uid, None)
        if placed is None or not released or self._allocation_reads_open:
            # a pod we did not place (another replica; our sums may count it), one another replica
            # released in the store first (sums read since then already left it out, and the table
            # took it out again), or a read still open that may hold it: re-read the nodes
            self._dirty |= nodes
        if self.core.queue.unschedulable:
            self._wake.set()  # room was freed: the hints may wake a waiting pod
        if st.reason not in REQUEUE_REASONS:
            return
        rec = await store.get_pod(st.uid)
        if rec is None or not self.replica.owns_pod(rec.spec) or await store.bound_node(st.uid) is not None:
            return  # unknown, or already bound again
        if rec.phase == "Pending" and st.uid in self.core.queue:
            return  # redelivery after requeue
        reason = f"{st.reason}: {st.message}" if st.message else st.reason  # "Evicted: Preempted by ns/name"
        await store.put_pod(PodRecord(spec=rec.spec, phase="Pending", reason=reason, updated_at=now))
        await self._sync_reservations()  # a migrated pod's reservation was made before its eviction
        self.core.add_pod(rec.spec, now)
        self._wake.set()

    async def _on_bound(self, items: list[tuple[PodBound, MessageInfo]]) -> None:
        """PodBound events of other binders (other shards, an earlier leader): count those pods on
        their nodes (:meth:`Scheduler.adopt`, which also drops them from this queue). An event is
        applied only when the store still holds exactly that binding (node and time) and no
        release of the pod arrived meanwhile, so a late event never resurrects a finished pod (one
        adopted while its release is under way is released again when the store's release returns)."""
        placed = self.core.framework.placed
        foreign = [m for m, _ in items if m.spec.uid not in placed]
        if not foreign:
            return
        released: set[str] = set()
        self._releases_watch.append(released)
        try:
            bindings = await self._store().bound_nodes([m.spec.uid for m in foreign])
        finally:
            self._releases_watch.remove(released)
        for m in foreign:
            uid = m.spec.uid
            if bindings.get(uid) != (m.node, m.at) or uid in released or uid in placed:
                continue
            if self.core.adopt(m.spec, m.node, m.at, m.cpuset, devices_format(allocations_devices(m.devices))):
                self.totals["foreign_binds"] += 1
                self._last_unschedulable.pop(uid, None)
                # adopt adds the pod to the node's sums, which a refresh since the bind may already
                # include: the next cycle re-reads the node's allocation (absolute) from the store
                self._dirty.add(m.node)

    async def _on_migration(self, job: PodMigrationJob, info: MessageInfo) -> None:
        """A migration job changed phase: its reservation was made or ended; re-read them and the
        target's allocation."""
        await self._sync_reservations()
        if job.target in self.core.table.index:
            self._dirty.add(job.target)
        self._wake.set()

    def _now(self) -> float:
        assert self.ctx is not None
        return self.ctx.clock.now()
