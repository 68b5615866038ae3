"""The descheduler service: LowNodeLoad over fresh metrics → eviction orders (REFERENCE.md §6).

Consumes ``node.registered.*``, ``node.resource.*``, ``node.metric.*``, ``pod.bound.*`` and ``pod.status.*``;
reads the store's allocations before each round (a target must have the room the store checks,
targetroom.py); each round (at most every ``interval_s``) publishes an :class:`EvictionCommand`
(reason ``LowNodeLoad``) on ``pod.evict.<node>`` per victim, then tracks the
migration until its replacement runs, and its booking until the metrics show the move.
"""

from __future__ import annotations

import math
from typing import Any

from colo import subjects
from colo.bus import MessageInfo
from colo.clock import knows_time
from colo.messages import EvictionCommand, NodeMetric, NodeResource, NodeSpec, PodBound, PodStatus
from colo.runtime import ServiceContext
from colo_descheduler.cluster import ClusterView
from colo_descheduler.lownodeload import LowNodeLoad, RoundResult
from colo_descheduler.metrics import TickCounters, observe_tick
from colo_descheduler.migration_runner import MigrationController
from colo_descheduler.ratelimit import TokenBucket
from colo_descheduler.settings import DeschedulerSettings

REASON = "LowNodeLoad"

MAX_OFFER = 2**50
"""Largest batch/mid offer taken from a NodeResource (the scheduler's bound on quantities)."""


class DeschedulerService:
    """The descheduler (``python -m colo_descheduler``); see module docstring."""

    name = "descheduler"

    def __init__(self, settings: DeschedulerSettings | None = None) -> None:
        self.settings = settings or DeschedulerSettings()
        self.tick_interval_s = self.settings.tick_interval_s
        self.cluster = ClusterView(self.settings)
        self.balancer = LowNodeLoad(self.settings)
        self.bucket = TokenBucket(self.settings.eviction_rate_per_s, self.settings.eviction_burst)
        self.ctx: ServiceContext | None = None
        self.rounds = 0
        self.evictions = 0
        self.rejected = 0
        self.last_round_at: float | None = None
        self.last_result = RoundResult()
        self._started = False
        self.jobs: MigrationController | None = None
        """The PodMigrationJob controller (``migration_jobs``), set at start."""
        self._metered = TickCounters()

    async def start(self, ctx: ServiceContext) -> None:
        """Load nodes and bound pods from the store, then subscribe."""
        self.ctx = ctx
        for spec in await ctx.store.list_nodes():
            self.cluster.on_node(spec)
        for res in (await ctx.store.list_node_resources()).values():
            self.cluster.on_resource(res)
        for rec in await ctx.store.list_pods():
            if rec.node and rec.phase in ("Pending", "Running"):
                self.cluster.on_bound(PodBound(spec=rec.spec, node=rec.node, at=rec.bound_at))
        if self.settings.migration_jobs:
            self.jobs = MigrationController(self.settings, ctx.store, self.cluster, ctx.bus.publish_many, self.name,
                                            REASON)
            await self.jobs.load()
        ctx.bus.subscribe(subjects.NODE_REGISTERED, self.on_node, durable="nodes")
        ctx.bus.subscribe(subjects.POD_BOUND, self.on_bound, durable="pod-bound")
        ctx.bus.subscribe(subjects.POD_STATUS, self.on_status, durable="pod-status")
        ctx.bus.subscribe(subjects.NODE_METRIC, self.on_metric, durable="metrics")
        ctx.bus.subscribe(subjects.NODE_RESOURCE, self.on_resource, durable="node-resource")
        self._started = True

    async def _reject(self, msg: Any, info: MessageInfo, reason: str) -> None:
        """Dead-letter a message that decoded but makes no sense; it is acked, not retried."""
        self.rejected += 1
        assert self.ctx is not None
        await self.ctx.bus.reject(info, msg, reason)

    # ------------------------------------------------------------------ handlers

    async def on_node(self, spec: NodeSpec, info: MessageInfo) -> None:
        """A node registration: its allocatable."""
        if not spec.name or spec.allocatable.cpu < 0 or spec.allocatable.memory < 0:
            await self._reject(spec, info, "NodeSpec needs a name and non-negative allocatable")
            return
        self.cluster.on_node(spec)

    async def on_metric(self, metric: NodeMetric, info: MessageInfo) -> None:
        """Keep the newest metric of the node; a metric without a node, a finite ``at`` or a finite
        ``window_s`` >= 0 is dead-lettered (a negative window would end its node's bookings at once)."""
        if not metric.node or not math.isfinite(metric.at):
            await self._reject(metric, info, "NodeMetric needs a node and a finite at")
            return
        if not (math.isfinite(metric.window_s) and metric.window_s >= 0):
            # a negative window "starts" after ``at``: it would end every booking of the node at once
            await self._reject(metric, info, f"NodeMetric window_s {metric.window_s!r} must be finite and >= 0")
            return
        if problem := self._dated_ahead("NodeMetric", metric.at):
            await self._reject(metric, info, problem)
            return
        self.cluster.on_metric(metric)

    async def on_resource(self, res: NodeResource, info: MessageInfo) -> None:
        """A node's batch/mid offer (the store's bind limits for batch-*/mid-*)."""
        if not res.node or not math.isfinite(res.at):
            await self._reject(res, info, "NodeResource needs a node and a finite at")
            return
        offers = (res.batch_cpu, res.batch_memory, res.mid_cpu, res.mid_memory)
        if not all(0 <= v <= MAX_OFFER for v in offers):
            await self._reject(res, info, f"NodeResource offers {offers} out of range 0..{MAX_OFFER}")
            return
        if problem := self._dated_ahead("NodeResource", res.at):
            await self._reject(res, info, problem)
            return
        self.cluster.on_resource(res)

    def _dated_ahead(self, kind: str, at: float) -> str:
        """Why a report at ``at`` (s) is refused for being more than ``metric_expiry_s`` ahead of the clock ("" if
        not): the view keeps the newest report per node, so one dated ahead would shadow every correct one after it,
        and a metric dated ahead would stay fresh for ever. A simulated clock that has not had its first tick
        (a restarted service) cannot tell, and refuses nothing."""
        assert self.ctx is not None
        now = self.ctx.clock.now()
        if knows_time(self.ctx.clock) and at > now + self.settings.metric_expiry_s:
            return f"{kind} dated {at - now:.0f} s ahead of the descheduler's clock (at most {self.settings.metric_expiry_s:g} s)"
        return ""

    async def on_bound(self, msg: PodBound, info: MessageInfo) -> None:
        """A binding."""
        if not msg.spec.uid or not msg.node or not math.isfinite(msg.at):
            await self._reject(msg, info, "PodBound needs spec.uid, node and a finite at")
            return
        self.cluster.on_bound(msg)

    async def on_status(self, msg: PodStatus, info: MessageInfo) -> None:
        """Pod lifecycle; ends migrations."""
        if not msg.uid or not msg.node:
            await self._reject(msg, info, "PodStatus needs uid and node")
            return
        self.cluster.on_status(msg)

    # ------------------------------------------------------------------ rounds

    def run_round(self, now: float) -> RoundResult:
        """One LowNodeLoad round over the current view at ``now`` (no I/O); books the migrations."""
        s = self.settings
        self.cluster.expire(now, s.migration_ttl_s)
        loads = self.cluster.fresh_loads(now, s.metric_expiry_s)
        unavailable, replicas = self.cluster.workload_counts()
        result = self.balancer.run(loads, self.cluster.lazy_candidates(loads), self.cluster.migrating_per_node(),
                                   unavailable, replicas, lambda: self.bucket.try_take(now),
                                   lambda pod, planned: self.cluster.refuse(pod, now, planned, replicas),
                                   self.cluster.fits)
        if self.jobs is None:  # else booked when its job evicts
            for ev in result.evictions:
                self.cluster.start_migration(ev, now)
        self.rounds += 1
        self.last_round_at = now
        self.last_result = result
        return result

    async def tick(self, now: float) -> dict[str, float]:
        """Run a round when enabled and due; publish its eviction orders; returns counters."""
        assert self.ctx is not None
        s = self.settings
        result: RoundResult | None = None
        if s.enabled and (self.last_round_at is None or now - self.last_round_at >= s.interval_s):
            # the store's allocations are the truth of the targets' room (other schedulers' binds, every
            # reservation); one script call per 1,000 nodes each round
            self.cluster.refresh_allocated(await self.ctx.store.allocated_many(list(self.cluster.allocatable)))
            result = self.run_round(now)
        if self.jobs is not None:
            items = await self.jobs.tick(now, result.evictions if result else ())
            if items:
                await self.ctx.bus.publish_many(items)
            self.evictions = self.jobs.counts["evictions"]
        elif result is not None:
            items = []
            for ev in result.evictions:
                bound_at = self.cluster.pods[ev.uid].bound_at if ev.uid in self.cluster.pods else 0.0
                cmd = EvictionCommand(uid=ev.uid, node=ev.source, reason=REASON, at=now, by=self.name)
                items.append((subjects.POD_EVICT, cmd, f"evict-{ev.uid}-{ev.source}-{bound_at:.3f}",
                              {"node": ev.source}))
            if items:
                await self.ctx.bus.publish_many(items)
                self.evictions += len(items)
        observe_tick(self._metered, self.rounds, self.evictions, self.jobs.counts if self.jobs else None,
                     len(self.cluster.migrations))
        stats = {"rounds": float(self.rounds), "evictions": float(self.evictions),
                "round_evictions": float(len(result.evictions) if result else 0),
                "high_nodes": float(len(result.high) if result else 0),
                "low_nodes": float(len(result.low) if result else 0),
                "migrating": float(len(self.cluster.migrations)),
                "rejected_total": float(self.rejected)}
        if self.jobs is not None:
            stats.update(self.jobs.stats())
        return stats

    async def stop(self) -> None:
        """Nothing to flush: the view is rebuilt from the store and streams on start."""

    def ready(self) -> bool:
        """Ready once subscribed."""
        return self._started

    def debug(self) -> dict[str, object]:
        """Last round, streaks, migrations and active migration jobs for ``/debug/state``."""
        r = self.last_result
        return {
            "enabled": self.settings.enabled,
            "rounds": self.rounds,
            "evictions": self.evictions,
            "rejected": self.rejected,
            "last_round_at": self.last_round_at,
            "last_round": {"low": r.low, "high": r.high, "sources": r.sources,
                           "evictions": [ev.uid for ev in r.evictions], "skipped": r.skipped,
                           "settling": r.settling},
            "high_rounds": dict(self.balancer.high_rounds),
            "migrations": {u: {"source": m.source, "target": m.target, "started_at": m.started_at}
                           for u, m in self.cluster.migrations.items()},
            "bookings": {u: {"source": b.source, "target": b.target_node, "left_at": b.left_at,
                             "bound_at": b.bound_at, "source_done": b.source_done, "target_done": b.target_done}
                         for u, b in self.cluster.bookings.items()},
            "jobs": {} if self.jobs is None else {
                j.id: {"phase": j.phase, "uid": j.uid, "source": j.source, "target": j.target,
                       "reservation": j.reservation, "reason": j.reason} for j in self.jobs.jobs.values()},
        }
