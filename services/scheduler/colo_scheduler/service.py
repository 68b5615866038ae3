"""The scheduler service: events in, bindings (Redis) and PodBound / PodUnschedulable out.

Consumes ``pod.admitted`` (persisted as a Pending PodRecord before the handler returns,
so a crash never loses a pod), ``node.registered``, ``node.resource``, ``node.metric``
and ``pod.status`` (Succeeded/Failed → release; reason Evicted/Descheduled → requeue).
``tick(now)`` runs one cycle of :class:`colo_scheduler.core.Scheduler` and binds its
placements with one pipelined :meth:`colo.store.Store.bind_many`. Invalid messages are
dead-lettered with a reason; the service keeps running.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any

import numpy as np
from aiohttp import web

from colo import subjects
from colo.bus import MessageInfo
from colo.messages import (
    RESOURCE_NAMES,
    NodeMetric,
    NodeResource,
    NodeSpec,
    PodAdmitted,
    PodBound,
    PodRecord,
    PodStatus,
    PodUnschedulable,
    Resources,
)
from colo.runtime import ServiceContext
from colo.store import REASON_ALREADY_BOUND
from colo_scheduler.core import Scheduler
from colo_scheduler.settings import SchedulerSettings

log = logging.getLogger("colo.scheduler")

REQUEUE_REASONS = frozenset({"Evicted", "Descheduled"})
"""PodStatus reasons after which a released pod goes back to the queue (docs/architecture.md)."""


MAX_QUANTITY = 2**50
"""Largest accepted resource amount (milli-cores, bytes, count). Larger values are absurd and
would overflow the int64 columns of the node table once summed or scaled (×200 estimates)."""

MAX_PRIORITY = 2**31 - 1
"""Kubernetes pod priority is an int32."""


def _negative(r: Resources) -> list[str]:
    """Names of ``r``'s fields outside 0..:data:`MAX_QUANTITY` (the name "negative" is historical)."""
    return [n for n in RESOURCE_NAMES if not 0 <= getattr(r, n) <= MAX_QUANTITY]


class SchedulerService:
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
        self._early_resources: dict[str, NodeResource] = {}
        self._unpublished: list[tuple[Any, Any, str | None, dict[str, str]]] = []
        # uid → (reasons, message, clock time) of the last PodUnschedulable published for it
        self._last_unschedulable: dict[str, tuple[dict[str, int], str, float]] = {}
        self.totals = {"pods_bound": 0, "bind_conflicts": 0, "unschedulable_attempts": 0,
                       "dead_letters": 0}

    # ------------------------------------------------------------------ lifecycle

    async def start(self, ctx: ServiceContext) -> None:
        """Load nodes, resources, allocations and pods from the store, then subscribe."""
        self.ctx = ctx
        await self._load(ctx.clock.now())
        bus = ctx.bus
        bus.subscribe(subjects.POD_ADMITTED, self._on_admitted, durable="admitted")
        bus.subscribe(subjects.NODE_REGISTERED, self._on_node, durable="nodes")
        bus.subscribe(subjects.NODE_RESOURCE, self._on_node_resource, durable="resources")
        bus.subscribe(subjects.NODE_METRIC, self._on_metric, durable="metrics")
        bus.subscribe(subjects.POD_STATUS, self._on_status, durable="status")
        ctx.add_route("GET", "/debug/pods/{uid}/decision", self._decision_route)
        self._ready = True

    async def stop(self) -> None:
        """Nothing to flush: every pod is persisted on admission."""
        self._ready = False

    def ready(self) -> bool:
        """True once state is loaded and consumers are registered."""
        return self._ready

    async def _load(self, now: float) -> None:
        store = self._store()
        for spec in await store.list_nodes():
            self.core.on_node(spec, now)
        for nr in (await store.list_node_resources()).values():
            self.core.on_node_resource(nr, now)
        for rec in await store.list_pods():
            try:
                if rec.node and rec.phase in ("Pending", "Running"):
                    self.core.adopt(rec.spec, rec.node, rec.bound_at)
                elif rec.phase == "Pending" and not rec.node:
                    self.core.add_pod(rec.spec, now)
            except (OverflowError, ValueError) as exc:  # a corrupt record must not stop the start
                log.error("skipping stored pod %s: %r", rec.spec.uid, exc)
        await self._resync(now)

    def _store(self) -> Any:
        assert self.ctx is not None, "service not started"
        return self.ctx.store

    async def _resync(self, now: float) -> None:
        for name, r in (await self._store().all_allocated()).items():
            self.core.set_allocated(name, r, r.pods)
        self._last_resync = now
        self._dirty.clear()

    async def _refresh(self, nodes: set[str]) -> None:
        for name in nodes:
            r = await self._store().allocated(name)
            self.core.set_allocated(name, r, r.pods)

    async def _dead_letter(self, msg: Any, info: MessageInfo, reason: str) -> None:
        assert self.ctx is not None
        self.totals["dead_letters"] += 1
        await self.ctx.bus.reject(info, msg, reason)

    # ------------------------------------------------------------------ handlers

    async def _on_admitted(self, msg: PodAdmitted, info: MessageInfo) -> None:
        spec = msg.spec
        bad = _negative(spec.requests) + _negative(spec.limits)
        if spec.priority is not None and not -MAX_PRIORITY - 1 <= spec.priority <= MAX_PRIORITY:
            bad.append("priority")
        if not spec.uid or bad:
            await self._dead_letter(msg, info, f"invalid pod {spec.uid!r}: empty uid or negative or out of"
                                    f" range {bad} (resources 0..{MAX_QUANTITY}, priority int32)")
            return
        if spec.uid in self.core.framework.placed or spec.uid in self.core.queue:
            return  # redelivery
        store = self._store()
        rec = await store.get_pod(spec.uid)
        if rec is not None and (rec.node or rec.phase != "Pending"):
            return  # already bound or finished: a replayed admission
        now = self._now()
        await store.put_pod(PodRecord(spec=spec, phase="Pending", updated_at=now))
        self.core.add_pod(spec, now)

    async def _on_node(self, spec: NodeSpec, info: MessageInfo) -> None:
        bad = _negative(spec.allocatable) + _negative(spec.capacity)
        if not spec.name or bad:
            await self._dead_letter(spec, info, f"invalid node {spec.name!r}: empty name or negative or"
                                    f" allocatable/capacity out of range 0..{MAX_QUANTITY} {bad}")
            return
        now = self._now()
        self.core.on_node(spec, now)
        early = self._early_resources.pop(spec.name, None)
        if early is not None:
            self.core.on_node_resource(early, now)
        self._dirty.add(spec.name)

    async def _on_node_resource(self, nr: NodeResource, info: MessageInfo) -> None:
        if not all(0 <= v <= MAX_QUANTITY for v in (nr.batch_cpu, nr.batch_memory, nr.mid_cpu, nr.mid_memory)):
            await self._dead_letter(nr, info, f"invalid NodeResource: allocatable out of range 0..{MAX_QUANTITY}")
            return
        if nr.node not in self.core.table.index:
            self._early_resources[nr.node] = nr  # applied when the node registers
            return
        self.core.on_node_resource(nr, self._now())

    async def _on_metric(self, metric: NodeMetric, info: MessageInfo) -> None:
        u = metric.node_usage
        if not (0 <= u.cpu <= MAX_QUANTITY and 0 <= u.memory <= MAX_QUANTITY) or not math.isfinite(metric.at):
            await self._dead_letter(metric, info, f"invalid NodeMetric: usage out of range 0..{MAX_QUANTITY}"
                                    " or non-finite time")
            return
        self.core.on_metric(metric, self._now())

    async def _on_status(self, st: PodStatus, info: MessageInfo) -> None:
        if st.phase not in ("Succeeded", "Failed"):
            return
        store = self._store()
        now = self._now()
        released = await store.release(st.uid, st.phase, st.reason, st.at)
        placed = self.core.release(st.uid, now)
        self._last_unschedulable.pop(st.uid, None)
        if placed is None and released:
            self._dirty.add(st.node)  # a pod we did not place (another replica): re-read the node
        if st.reason not in REQUEUE_REASONS:
            return
        rec = await store.get_pod(st.uid)
        if rec is None or await store.bound_node(st.uid) is not None:
            return  # unknown, or already bound again
        if rec.phase == "Pending" and st.uid in self.core.queue:
            return  # redelivery after requeue
        await store.put_pod(PodRecord(spec=rec.spec, phase="Pending", reason=st.reason, updated_at=now))
        self.core.add_pod(rec.spec, now)

    def _now(self) -> float:
        assert self.ctx is not None
        return self.ctx.clock.now()

    # ------------------------------------------------------------------ cycle

    async def tick(self, now: float) -> dict[str, float]:
        """One scheduling cycle at clock time ``now``; returns counters for the report.

        Stats: ``pods_bound`` (this cycle), ``pods_bound_total``, ``bind_conflicts``,
        ``pods_unschedulable`` (current), ``queue_active|backoff|unschedulable``, ``nodes``,
        ``decision_ms_p50|p99`` (filter+score per pod, this cycle), ``cycle_ms``.
        """
        t_cycle = time.perf_counter()
        if now - self._last_resync >= self.settings.resync_interval_s:
            await self._resync(now)
        elif self._dirty:
            await self._refresh(self._dirty)
            self._dirty.clear()
        await self._flush_unpublished()
        out = self.core.schedule_cycle(now)
        bound = 0
        events: list[tuple[Any, Any, str | None, dict[str, str]]] = []
        if out.placements:
            t0 = time.perf_counter()
            results = await self._store().bind_many(
                [(p.pod.uid, p.node, p.pod.spec.requests, now) for p in out.placements])
            bind_ms = (time.perf_counter() - t0) * 1e3
            stale: set[str] = set()
            for p, res in zip(out.placements, results):
                if res.ok:
                    bound += 1
                    msg = PodBound(spec=p.pod.spec, node=p.node, at=now, attempt_ms=p.decision_ms + bind_ms,
                                   queued_s=max(0.0, now - p.pod.queued_at))
                    events.append((subjects.POD_BOUND, msg, f"bound-{p.pod.uid}-{p.pod.attempts}",
                                   {"node": p.node}))
                elif res.reason.startswith(REASON_ALREADY_BOUND):
                    self.core.unreserve(p.pod.uid)  # bound elsewhere: not ours to retry
                else:
                    self.totals["bind_conflicts"] += 1
                    log.info("bind of %s on %s refused: %s", p.pod.uid, p.node, res.reason)
                    self.core.bind_failed(p.pod)
                    stale.add(p.node)
            await self._refresh(stale)
        for p in out.placements:
            self._last_unschedulable.pop(p.pod.uid, None)
        for f in out.failures:
            if not self._report_unschedulable(f.pod.uid, f.result.reasons, f.result.message, now):
                continue
            failed = PodUnschedulable(uid=f.pod.uid, name=f.pod.spec.name, reasons=f.result.reasons,
                                   message=f.result.message, at=now, attempts=f.pod.attempts)
            events.append((subjects.POD_UNSCHEDULABLE, failed, f"unschedulable-{f.pod.uid}-{f.pod.attempts}", {}))
        self.totals["pods_bound"] += bound
        self.totals["unschedulable_attempts"] += len(out.failures)
        await self._publish(events)
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
        }

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
        except Exception:
            # Bindings are already in the store; msg ids make the retry idempotent.
            log.exception("publishing %d scheduler events failed; retrying next tick", len(events))
            self._unpublished.extend(events)

    async def _flush_unpublished(self) -> None:
        events, self._unpublished = self._unpublished, []
        await self._publish(events)

    # ------------------------------------------------------------------ introspection

    def debug(self) -> dict[str, object]:
        """Queue sizes, node count, totals and the reasons of up to 50 unschedulable pods."""
        unsched = list(self.core.queue.unschedulable.values())[:50]
        return {
            "queue": self.core.queue.lengths(),
            "nodes": self.core.table.n,
            "placed": len(self.core.framework.placed),
            "totals": dict(self.totals),
            "unschedulable": {u.pod.uid: u.reasons for u in unsched},
        }

    async def _decision_route(self, request: web.Request) -> web.Response:
        """The pod's recorded decision (``?live=1``: a dry run now, for a queued pod) as JSON; 404
        naming what is known when there is none."""
        uid = request.match_info["uid"]
        names = self.core.table.names
        rec = None if request.query.get("live") else self.core.decision(uid)
        source = "recorded"
        if rec is None:
            rec = self.core.explain(uid, self._now())
            source = "dry-run"
        if rec is None:
            where = "placed" if uid in self.core.framework.placed else "unknown to this scheduler"
            return web.json_response({"error": f"no decision recorded for pod {uid} ({where}); records keep "
                                      f"the last {self.settings.decision_records} pods"}, status=404)
        body = rec.to_json(names)
        body["source"] = source
        return web.json_response(body)
