"""The scheduler service's elastic quota traffic (docs/quota.md): ``quota.spec.*`` in (validated by the quota
tree: a refused quota is dead-lettered with every problem; an accepted one puts its max in the store, the
cap the bind script holds every replica to), and out, per cycle, the evictions of reclaimed quota on
``pod.evict.<node>`` (``by="scheduler"``) and the :class:`colo.messages.QuotaStatus` of every quota whose
used, request, runtime or pod counts changed, on ``quota.status.<name>``.

The quota tree lives in the scheduler's memory; the ``COLO_QUOTAS`` stream keeps the latest message per
quota, so at every start the scheduler recreates its quota consumer and the stream replays the whole tree
before the first cycle (under the wall clock it waits for the replay, up to :data:`REPLAY_WAIT_S`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import nats.js.errors

from colo import subjects
from colo.bus import MessageInfo, Subscription
from colo.clock import WallClock
from colo.messages import ElasticQuota
from colo.runtime import ServiceContext
from colo_scheduler.core import CycleOutcome, Scheduler

log = logging.getLogger("colo.scheduler")

REPLAY_WAIT_S = 10.0
"""Longest wait at start for the quota stream's replay (seconds, wall clock)."""

Event = tuple[Any, Any, str | None, dict[str, str]]


class QuotaEvents:
    """The quota part of :class:`colo_scheduler.service.SchedulerService`, which sets ``core`` and ``ctx``
    and provides ``_store``, ``_dead_letter`` and ``_wake``."""

    core: Scheduler
    ctx: ServiceContext | None
    totals: dict[str, int]
    _wake: asyncio.Event
    _store: Callable[[], Any]
    _dead_letter: Callable[..., Awaitable[None]]
    _quota_max_sent: dict[str, dict[str, int]]
    """Quota → the max last put in the store by this process."""

    async def _subscribe_quotas(self, durable: str) -> None:
        """Recreate this process's quota consumer (so that the stream replays every quota) and subscribe
        it; under the wall clock wait for the replay to be handled."""
        assert self.ctx is not None
        bus = self.ctx.bus
        stream = subjects.QUOTA_SPEC.stream
        assert stream is not None
        try:
            await bus.js.delete_consumer(stream, f"{bus.service}-{durable}")
        except nats.js.errors.NotFoundError:
            pass
        sub = bus.subscribe(subjects.QUOTA_SPEC, self._on_quota, durable=durable)
        if isinstance(self.ctx.clock, WallClock):
            await self._await_replay(sub)

    async def _await_replay(self, sub: Subscription[ElasticQuota]) -> None:
        await sub
        deadline = time.monotonic() + REPLAY_WAIT_S
        while time.monotonic() < deadline:
            try:
                if sub.idle and await sub.pending() == 0:
                    return
            except nats.js.errors.NotFoundError:
                return  # not started (consumers start later): the cycles wait for start_consumers anyway
            await asyncio.sleep(0.01)
        log.warning("quota replay still running after %.0f s; scheduling starts meanwhile", REPLAY_WAIT_S)

    async def _on_quota(self, spec: ElasticQuota, info: MessageInfo) -> None:
        """Apply one quota; dead-letter it with every problem when its name is not its subject's token or the
        tree refuses it, else set (or drop) its max in the store; a deleted quota's status is purged from the
        stream."""
        if not subjects.is_token(spec.name) or info.subject != subjects.QUOTA_SPEC.format(name=spec.name):
            # its status goes to quota.status.<name>: a name that is no subject token could never be published
            await self._dead_letter(spec, info, f"quota name {spec.name!r} is not the token of its subject "
                                                f"{info.subject} (letters, digits, _ and - only)")
            return
        problems = self.core.on_quota(spec)
        if problems:
            await self._dead_letter(spec, info, "; ".join(problems))
            return
        await self._sync_quota_max()
        if spec.deleted:  # its last status would stay in the stream (and in colo get quotas) for ever
            assert self.ctx is not None and subjects.QUOTA_STATUS.stream is not None
            await self.ctx.bus.js.purge_stream(subjects.QUOTA_STATUS.stream,
                                               subject=subjects.QUOTA_STATUS.format(name=spec.name))
        self._wake.set()

    async def _sync_quota_max(self) -> None:
        """Make the store's quota maxes those of the accepted quotas (a deferred child counts once applied)."""
        if self.core.quota is None:
            return
        store, sent = self._store(), self._quota_max_sent
        specs = self.core.quota.book.specs
        for name, q in specs.items():
            if sent.get(name) != q.max:
                await store.set_quota_max(name, dict(q.max))
                sent[name] = dict(q.max)
        for name in [n for n in sent if n not in specs]:
            await store.delete_quota(name)
            del sent[name]

    def _quota_events(self, out: CycleOutcome, now: float) -> list[Event]:
        """The cycle's changed quota statuses as events (its evictions, reclaims included, are published
        with the preemptions' by :meth:`~colo_scheduler.publishing.Publishing._eviction_events`)."""
        events: list[Event] = []
        if self.core.quota is not None:
            for st in self.core.quota.statuses(now):
                events.append((subjects.QUOTA_STATUS, st, None, {"name": st.name}))
        return events
