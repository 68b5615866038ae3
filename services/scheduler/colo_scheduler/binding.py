"""The scheduler service's bind path: a cycle's placements bound in the store in one pipeline (fenced by the
lease when elected), those on a reservation one by one, a gang whole or not at all
(:mod:`colo_scheduler.gangbind`); PodBound events queued for the successes, refused pods put back. Part of
:class:`colo_scheduler.service.SchedulerService`, which sets the state below at construction and provides
``_store``, ``_refresh`` and ``_sync_reservations``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from colo import subjects
from colo.messages import PodBound, device_allocations, devices_parse
from colo.reservations import ReservationStore
from colo.store import REASON_ALREADY_BOUND, REASON_LEASE_LOST, BindResult
from colo_scheduler.core import CycleOutcome, Scheduler
from colo_scheduler.gangbind import bind_requests, settle_gang_binds
from colo_scheduler.lease import LeaderElector
from colo_scheduler.metrics import observe_binds
from colo_scheduler.podinfo import ASSIGNED_CPUSET, ASSIGNED_DEVICES

log = logging.getLogger("colo.scheduler")


class SchedulerBinding:
    """The bind part of :class:`colo_scheduler.service.SchedulerService`."""

    core: Scheduler
    elector: LeaderElector | None
    totals: dict[str, int]
    _reservation_store: ReservationStore | None
    _dirty: set[str]
    _bind_unsure: set[str]
    """Pods whose bind call failed without an answer (Redis down or restarted mid-call): maybe bound. Their
    next bind that finds them bound already settles them as bound (:meth:`_settle_unsure`)."""
    _store: Callable[[], Any]
    _refresh: Callable[[set[str]], Awaitable[None]]
    _sync_reservations: Callable[..., Awaitable[None]]

    @property
    def reservation_store(self) -> ReservationStore:
        """The store's reservations (:mod:`colo.reservations`), on the context's Redis connection."""
        store = self._store()
        rs = self._reservation_store
        if rs is None or rs.redis is not store.redis:
            rs = self._reservation_store = ReservationStore(store.redis, store.keys)
        return rs

    async def _bind(self, out: CycleOutcome, now: float,
                    events: list[tuple[Any, Any, str | None, dict[str, str]]]) -> int:
        """Bind the cycle's placements in one pipeline (fenced by the lease when elected); queue
        PodBound events for the successes, put refused pods back (backoff) and re-read their
        nodes. Returns how many were bound."""
        fence = self.elector.fence() if self.elector is not None else None
        if self.elector is not None and fence is None:  # lease lost during the cycle: bind nothing
            for p in out.placements:
                self.core.bind_failed(p.pod)
            observe_binds(out.placements, None, 0.0)
            return 0
        t0 = time.perf_counter()
        try:
            results = await self._bind_placements(out.placements, now, fence)
        except Exception as exc:
            self._bind_error(out, exc)
            return 0
        bind_ms = (time.perf_counter() - t0) * 1e3
        observe_binds(out.placements, results, bind_ms / 1e3)
        bound = 0
        stale: set[str] = {p.node for p in out.placements if p.reservation}  # the store's sums are exact
        unsure: dict[str, Any] = {}
        for p, res in zip(out.placements, results):
            uid = p.pod.uid
            was_unsure = uid in self._bind_unsure
            if was_unsure:
                self._bind_unsure.discard(uid)
            if res.ok or res.reason == f"{REASON_ALREADY_BOUND} {p.node}":  # the latter: a resent or retried bind
                bound += 1
                if p.reservation:
                    self.core.bound_on_reservation(p.pod)
                msg = PodBound(spec=p.pod.spec, node=p.node, at=now, attempt_ms=p.decision_ms + bind_ms,
                               queued_s=max(0.0, now - p.pod.queued_at),
                               cpuset=str(p.pod.extra.get(ASSIGNED_CPUSET) or ""),
                               devices=device_allocations(devices_parse(str(p.pod.extra.get(ASSIGNED_DEVICES) or ""))))
                # the bind time makes a rebind (after an eviction) a new message for the dedup window
                events.append((subjects.POD_BOUND, msg, f"bound-{p.pod.uid}-{now!r}", {"node": p.node}))
            elif res.reason.startswith(REASON_ALREADY_BOUND) and was_unsure:
                unsure[uid] = p  # our own earlier bind, on another node, whose answer was lost
            elif res.reason.startswith(REASON_ALREADY_BOUND):
                self.core.unreserve(p.pod.uid)  # bound elsewhere: not ours to retry
            elif res.reason == REASON_LEASE_LOST:
                self.core.bind_failed(p.pod)
                if self.elector is not None:
                    self.elector.lost("the store refused a fenced bind")
            else:
                self.totals["bind_conflicts"] += 1
                log.info("bind of %s on %s refused: %s", p.pod.uid, p.node, res.reason)
                self.core.bind_failed(p.pod)
                stale.add(p.node)
                if p.reservation:
                    self.core.reservations.forget(p.reservation)  # re-read below: the store decides
        if unsure:
            bound += await self._settle_unsure(unsure, events, stale)
        if any(p.reservation for p in out.placements):
            await self._sync_reservations()
        if stale:
            await self._refresh(stale)
        return bound

    def _bind_error(self, out: CycleOutcome, exc: Exception) -> None:
        """The bind call raised (Redis unavailable, or a connection lost mid-call): none of the cycle's
        placements is known to be bound. Each is released in the scheduler's memory and retried after its
        backoff; those the store did bind are found bound at their next bind (:meth:`_settle_unsure`)."""
        self.totals["bind_errors"] = self.totals.get("bind_errors", 0) + 1
        log.warning("binding %d pods failed, releasing them to retry: %s: %s", len(out.placements),
                    type(exc).__name__, exc)
        for p in out.placements:
            self.core.bind_failed(p.pod)
            self._bind_unsure.add(p.pod.uid)
            self._dirty.add(p.node)  # the store's sums are re-read before the next placements
            if p.reservation:
                self.core.reservations.forget(p.reservation)

    async def _settle_unsure(self, unsure: dict[str, Any], events: list[tuple[Any, Any, str | None, dict[str, str]]],
                             stale: set[str]) -> int:
        """Pods refused as "already bound to <another node>" whose earlier bind call failed without an answer:
        that bind was applied. Adopt each on the node the store holds and announce it (PodBound with the
        store's bind time). Returns how many were adopted."""
        found = await self._store().bound_nodes(list(unsure))
        cpusets = await self._store().bound_cpusets(list(found)) if found else {}
        devices = await self._store().bound_devices(list(found)) if found else {}
        adopted = 0
        for uid, p in unsure.items():
            self.core.unreserve(uid)
            stale.add(p.node)
            if uid not in found:
                continue
            node, at = found[uid]
            stale.add(node)
            if self.core.adopt(p.pod.spec, node, at, cpusets.get(uid, ""), devices.get(uid, "")):
                adopted += 1
                events.append((subjects.POD_BOUND, PodBound(
                    spec=p.pod.spec, node=node, at=at, cpuset=cpusets.get(uid, ""),
                    devices=device_allocations(devices_parse(devices.get(uid, "")))), f"bound-{uid}-{at!r}",
                    {"node": node}))
        return adopted

    async def _bind_placements(self, placements: list[Any], now: float, fence: Any) -> list[Any]:
        """Bind placements in the store, fenced by ``fence``: plain ones with one :meth:`Store.bind_many`, those on
        a reservation one by one with :meth:`ReservationStore.bind_on` (few: migrated pods); results in order."""
        store = self._store()
        plain = [k for k, p in enumerate(placements) if not p.reservation]
        results: list[Any] = [None] * len(placements)
        if plain:
            chain = self.core.quota.chain_of if self.core.quota is not None else (lambda pod: ())
            got = await store.bind_many(bind_requests([placements[k] for k in plain], now, chain), fence=fence)
            for k, r in zip(plain, got):
                results[k] = r
        for k, p in enumerate(placements):
            if p.reservation:
                res = await self.reservation_store.bind_on(p.reservation, p.pod.spec, p.node, now, fence)
                results[k] = BindResult(res.ok, res.reason)
        return await settle_gang_binds(store, placements, results, now)  # a gang binds whole or not at all
