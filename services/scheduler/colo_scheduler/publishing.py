"""The scheduler service's outgoing events: PodBound announcements of bindings that may never have gone out,
rate-limited PodUnschedulable verdicts, and batch publishing that drops what cannot be published and keeps the
rest for the next cycle when NATS fails (msg ids make the retry idempotent). The service
(:mod:`colo_scheduler.service`) builds the events of each cycle and owns the state used here.
"""

from __future__ import annotations

import logging
from typing import Any

from colo import subjects
from colo.messages import EvictionCommand, PodBound, PodSpec, device_allocations, devices_parse
from colo.runtime import ServiceContext
from colo_scheduler.core import Eviction, Scheduler
from colo_scheduler.podinfo import ASSIGNED_CPUSET, ASSIGNED_DEVICES
from colo_scheduler.settings import SchedulerSettings

log = logging.getLogger("colo.scheduler")


def _publishable(event: tuple[Any, Any, str | None, dict[str, str]]) -> bool:
    """Whether ``event`` (subject, message, msg id, keys) can be published; logs why not."""
    subject, msg, _, keys = event
    try:
        if not isinstance(msg, subject.type):
            raise TypeError(f"{subject.pattern} carries {subject.type.__name__}, got {type(msg).__name__}")
        subject.format(**keys)
    except (TypeError, ValueError) as exc:
        log.error("dropping an event that cannot be published: %s", exc)
        return False
    return True


class SchedulerEventPublisher:
    """The publishing part of :class:`colo_scheduler.service.SchedulerService`, which sets the state below at
    construction. Events are (subject, message, msg id, routing keys) tuples."""

    settings: SchedulerSettings
    core: Scheduler
    ctx: ServiceContext | None
    _announce: dict[str, tuple[PodSpec, str, float]]
    _last_unschedulable: dict[str, tuple[dict[str, int], str, float]]
    _unpublished: list[tuple[Any, Any, str | None, dict[str, str]]]
    totals: dict[str, int]

    def _announcements(self) -> list[tuple[Any, Any, str | None, dict[str, str]]]:
        """PodBound events of :attr:`_announce` whose binding is still this scheduler's view (placed on
        that node), with the message id the original bind used (``bound-<uid>-<bind time>``), so that
        JetStream drops those that did go out within its duplicate window; node agents ignore a
        PodBound of a pod they already run."""
        placed, names = self.core.framework.placed, self.core.table.names
        events: list[tuple[Any, Any, str | None, dict[str, str]]] = []
        for uid, (spec, node, at) in self._announce.items():
            entry = placed.get(uid)
            if entry is not None and names[entry[1]] == node:
                cpuset = str(entry[0].extra.get(ASSIGNED_CPUSET) or "")  # the booked cpuset, from the store
                devices = device_allocations(devices_parse(str(entry[0].extra.get(ASSIGNED_DEVICES) or "")))
                events.append((subjects.POD_BOUND, PodBound(spec=spec, node=node, at=at, cpuset=cpuset,
                                                            devices=devices),
                               f"bound-{uid}-{at!r}", {"node": node}))
        self._announce.clear()
        return events

    def _eviction_events(self, evictions: list[Eviction], now: float) -> list[tuple[Any, Any, str | None,
                                                                                 dict[str, str]]]:
        """``pod.evict.<node>`` orders (by ``"scheduler"``) for the victims of the cycle's preemptions and
        quota reclaims (counted apart: a reclaim's reason starts with ``quota``); the node agents answer with
        a Failed/Evicted PodStatus, which requeues them (handlers.py)."""
        reclaims = sum(1 for e in evictions if e.reason.startswith("quota"))
        self.totals["quota_evictions"] = self.totals.get("quota_evictions", 0) + reclaims
        self.totals["preemption_evictions"] = self.totals.get("preemption_evictions", 0) + len(evictions) - reclaims
        return [(subjects.POD_EVICT, EvictionCommand(uid=e.pod.uid, node=e.node, reason=e.reason, at=now,
                                                     by="scheduler"),
                 f"preempt-{e.pod.uid}-{e.node}-{now!r}", {"node": e.node}) for e in evictions]

    def _report_unschedulable(self, uid: str, reasons: dict[str, int], message: str, now: float) -> bool:
        """Whether this failed attempt is published: a new or changed verdict at once, a repeat of the
        last published one only after ``unschedulable_event_interval_s``."""
        last = self._last_unschedulable.get(uid)
        if (last is not None and last[0] == reasons and last[1] == message
                and now - last[2] < self.settings.unschedulable_event_interval_s):
            return False
        self._last_unschedulable[uid] = (reasons, message, now)
        return True

    async def _publish(self, events: list[tuple[Any, Any, str | None, dict[str, str]]]) -> None:
        if not events:
            return
        assert self.ctx is not None
        try:
            await self.ctx.bus.publish_many(events)
        except (TypeError, ValueError):
            # an event that cannot be formatted fails the whole batch before anything is sent: drop
            # it (retrying it would hold back every later event for good) and publish the others
            usable = [ev for ev in events if _publishable(ev)]
            if len(usable) < len(events):
                await self._publish(usable)
                return
            log.exception("publishing %d scheduler events failed; retrying next tick", len(events))
            self._unpublished.extend(events)
        except Exception:
            # Bindings are already in the store; msg ids make the retry idempotent.
            log.exception("publishing %d scheduler events failed; retrying next tick", len(events))
            self._unpublished.extend(events)

    async def _flush_unpublished(self) -> None:
        events, self._unpublished = self._unpublished, []
        await self._publish(events)
