"""Reservations as submitted (``reservation.submitted``, :class:`colo.messages.ReservationSpec`): recorded, then
placed by the scheduler (REFERENCE.md §9; Koordinator's reserve pod).

A valid submission is recorded ``Pending`` in the store (:meth:`colo.reservations.ReservationStore.put_pending`)
and acked; an invalid one is dead-lettered with every problem and its field path
(:func:`colo.reservation_spec.reservation_problems`), as is one whose name another available reservation
holds. A redelivered submission (same name and ``created_at``) changes nothing. The leader places pending
reservations at the start of its cycles (:meth:`ReservationIntake.place_due`): with ``node`` set the store
reserves there as a bind would check it; with ``node`` "" a *reserve pod* of its ``requests`` and
``node_selector`` (:func:`reserve_pod`) goes through the profile's PreFilters, Filters and Scores
(:meth:`colo_scheduler.framework.runner.Framework.schedule_one`; its ``preemptionPolicy`` is ``Never``: a
reservation never preempts) and the reservation is held on the node chosen
(:meth:`~colo.reservations.ReservationStore.reserve`, which checks the room again atomically). One that fits
nowhere stays Pending with the scheduler's message as its reason (``colo get reservations``), is logged when
the reason changes and retried with backoff (``backoff_initial_s`` doubling up to ``backoff_max_s``); it ends
``Expired`` when its TTL (from ``created_at``) passes first, never silently dropped. A reservation is placed
by the replica that owns its name (:meth:`colo_scheduler.replicas.Replica.owns`). The store is re-read every
``resync_interval_s``, so a new leader or a restarted scheduler picks the pending ones up.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from colo.bus import MessageInfo
from colo.classes import PRIORITY_CLASS_LABEL, QOS_CLASS_LABEL
from colo.messages import PodSpec, ReservationSpec, Resources
from colo.reservation_spec import reservation_problems
from colo.reservations import PENDING_EXISTS, PENDING_KNOWN, ReservationStore
from colo.runtime import ServiceContext
from colo_scheduler.core import Scheduler
from colo_scheduler.podinfo import resource_vector
from colo_scheduler.replicas import Replica
from colo_scheduler.settings import SchedulerSettings

log = logging.getLogger("colo.scheduler.reservations")

RESERVE_POD_PREFIX = "reserve-pod-"
"""Uid prefix of the reserve pod a node-less reservation is placed as (never bound, never queued)."""


def reserve_pod(spec: ReservationSpec) -> PodSpec:
    """The pod a reservation without a node is placed as: its requests (one pod slot implied), namespace, node
    selector, the template's labels, priority and classes, ``preemption_policy="Never"``.

    Classes left unset are derived as for the pods the room is for (REFERENCE.md §1): ``batch-*`` requests make
    it BE (priority class batch unless set), ``mid-*`` requests priority class mid; otherwise as for any pod
    (:func:`colo.classes.qos_class_of`)."""
    r = spec.requests
    qos, prio = spec.qos_class, spec.priority_class
    if qos is None and QOS_CLASS_LABEL not in spec.labels and (r.batch_cpu or r.batch_memory):
        qos = "BE"
    if prio is None and PRIORITY_CLASS_LABEL not in spec.labels and spec.priority is None \
            and (r.mid_cpu or r.mid_memory):
        prio = "mid"
    return PodSpec(uid=RESERVE_POD_PREFIX + spec.name, name=RESERVE_POD_PREFIX + spec.name, namespace=spec.namespace,
                   labels=dict(spec.labels), priority=spec.priority, priority_class=prio, qos_class=qos,
                   requests=Resources(cpu=r.cpu, memory=r.memory, batch_cpu=r.batch_cpu, batch_memory=r.batch_memory,
                                      mid_cpu=r.mid_cpu, mid_memory=r.mid_memory),
                   node_selector=dict(spec.node_selector), created_at=spec.created_at, preemption_policy="Never")


class ReservationIntake:
    """Consumes ``reservation.submitted`` and places pending reservations (module doc). ``store`` gives the
    service's :class:`~colo.reservations.ReservationStore`; :meth:`attach` at the service's start."""

    def __init__(self, core: Scheduler, settings: SchedulerSettings, store: Callable[[], ReservationStore]) -> None:
        self.core = core
        self.settings = settings
        self._rs = store
        self.ctx: ServiceContext | None = None
        self.replica = Replica(settings.replica_index, settings.replicas)
        self._wake: asyncio.Event | None = None
        self.due: dict[str, float] = {}
        """Pending reservation name → clock time of its next placement attempt."""
        self.attempts: dict[str, int] = {}
        self._loaded_at: float | None = None
        self.totals = {"reservations_submitted": 0, "reservations_placed": 0, "reservation_attempts_failed": 0,
                       "reservations_expired_pending": 0, "reservations_rejected": 0}

    def attach(self, ctx: ServiceContext, replica: Replica, wake: asyncio.Event) -> None:
        """Use ``ctx`` (bus, clock), schedule ``replica``'s reservations and set ``wake`` on submissions."""
        self.ctx, self.replica, self._wake = ctx, replica, wake

    async def on_submitted(self, spec: ReservationSpec, info: MessageInfo) -> None:
        """Record a submission Pending (module doc); dead-letter it when invalid or its name is taken."""
        assert self.ctx is not None
        problems = reservation_problems(spec)
        if problems:
            await self._reject(spec, info, f"invalid reservation {spec.name!r}: " + "; ".join(problems))
            return
        now = self.ctx.clock.now()
        got = await self._rs().put_pending(spec, now)
        if got == PENDING_EXISTS:
            await self._reject(spec, info, f"reservation {spec.name!r} exists and holds room: release it or use "
                               "another name")
            return
        if got == PENDING_KNOWN:  # a redelivery, or another replica (or the leader) recorded it first
            rec = await self._rs().get(spec.name) if spec.name not in self.due else None
            if rec is None or rec.state != "Pending" or not self.replica.owns(spec.name):
                return
        else:
            self.totals["reservations_submitted"] += 1
        if self.replica.owns(spec.name):
            self.due[spec.name] = now
            self.attempts.pop(spec.name, None)
            if self._wake is not None:
                self._wake.set()

    async def _reject(self, spec: ReservationSpec, info: MessageInfo, reason: str) -> None:
        assert self.ctx is not None
        self.totals["reservations_rejected"] += 1
        await self.ctx.bus.reject(info, spec, reason)

    async def load(self, now: float) -> None:
        """Take every pending reservation of this replica from the store (due now unless already scheduled)."""
        names = {r.name for r, _ in await self._rs().pending() if self.replica.owns(r.name)}
        self.due = {n: self.due.get(n, now) for n in names}
        self.attempts = {n: a for n, a in self.attempts.items() if n in names}
        self._loaded_at = now

    async def place_due(self, now: float) -> bool:
        """Try to place each pending reservation whose attempt is due at clock time ``now`` (module doc);
        True when a reservation was placed or ended (the caller re-reads the reservations)."""
        if self._loaded_at is None or now - self._loaded_at >= self.settings.resync_interval_s:
            await self.load(now)
        if not any(t <= now for t in self.due.values()):
            return False
        rs = self._rs()
        pending = {r.name: (r, spec) for r, spec in await rs.pending()}
        changed = False
        for name in sorted(n for n, t in self.due.items() if t <= now):
            entry = pending.get(name)
            if entry is None:  # placed, ended or replaced meanwhile
                self._forget(name)
                continue
            rec, spec = entry
            if rec.expires_at <= now:
                await rs.end_pending(name, "Expired", f"ttl passed before it could be placed: {rec.reason}", now)
                log.warning("reservation %s expired before it could be placed: %s", name, rec.reason)
                self.totals["reservations_expired_pending"] += 1
                self._forget(name)
                changed = True
                continue
            node, why = self._choose(spec, now)
            if node:
                res = await rs.reserve(name, node, spec.requests, at=now, ttl_s=rec.expires_at - now,
                                       owners=tuple(spec.owners), allocate_once=spec.allocate_once,
                                       created_at=rec.created_at,
                                       reason="reserved on its node" if spec.node else "placed by the scheduler")
                if res.ok:
                    self._placed(name, node, spec)
                    changed = True
                    continue
                why = f"{node}: {res.reason}"
            await self._retry(name, rec.reason, why, now)
        return changed

    def _choose(self, spec: ReservationSpec, now: float) -> tuple[str, str]:
        """(node, "") to reserve on, or ("", why not)."""
        if spec.node:
            if spec.node not in self.core.table.index:
                return "", f"unknown node {spec.node}"
            return spec.node, ""
        framework = self.core.framework
        pod = self.core.pod_info(reserve_pod(spec), now)
        result = framework.schedule_one(framework.begin_cycle(now), pod)
        if result.node < 0:
            return "", result.message or "no node fits"
        return self.core.table.names[result.node], ""

    def _placed(self, name: str, node: str, spec: ReservationSpec) -> None:
        i = self.core.table.index.get(node)
        if i is not None:  # until the allocations are re-read: the next placement sees this one
            self.core.table.add_allocated(i, resource_vector(spec.requests, pods=1))
        self.totals["reservations_placed"] += 1
        log.info("reservation %s held on %s", name, node)
        self._forget(name)

    async def _retry(self, name: str, old_reason: str, why: str, now: float) -> None:
        n = self.attempts.get(name, 0) + 1
        self.attempts[name] = n
        s = self.settings
        self.due[name] = now + min(s.backoff_initial_s * 2 ** (n - 1), s.backoff_max_s)
        self.totals["reservation_attempts_failed"] += 1
        if why != old_reason:
            await self._rs().end_pending(name, "Pending", why, now)
            log.info("reservation %s not placed (attempt %d): %s", name, n, why)

    def _forget(self, name: str) -> None:
        self.due.pop(name, None)
        self.attempts.pop(name, None)

    def status(self) -> dict[str, object]:
        """Counters and the pending reservations of this replica (name → attempts so far)."""
        return {**self.totals, "pending": {n: self.attempts.get(n, 0) for n in sorted(self.due)}}
