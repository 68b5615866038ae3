"""The profiler service: NodeMetrics and pod events in, NodeProfiles out (REFERENCE.md §7).

Consumes ``node.metric.*``, ``pod.bound.*``, ``pod.status.*`` and ``node.registered.*``
(for allocatable, the cap of the reclaimable formulas); every ``publish_interval_s``
computes one :class:`NodeProfile` per live node and publishes it on ``profile.node.<node>`` when it differs
from the last one sent (``at`` aside) or that one is ``republish_interval_s`` old: consumers keep the newest
profile per node, so an unchanged profile carries no news.
"""

from __future__ import annotations

import math
from typing import Any

from colo import subjects
from colo.bus import MessageInfo
from colo.classes import priority_class_of
from colo.messages import NodeMetric, NodeSpec, PodBound, PodStatus, Usage
from colo.runtime import ServiceContext
from colo_profiler.model import ProfileModel
from colo_profiler.settings import ProfilerSettings


def metric_problem(metric: NodeMetric) -> str:
    """Why a decoded NodeMetric cannot be used ("" when it can)."""
    if not math.isfinite(metric.at):
        return f"NodeMetric.at is not a finite time: {metric.at}"
    if not metric.node:
        return "NodeMetric.node is empty"
    if any(not p.uid for p in metric.pods):
        return "NodeMetric.pods has a pod without uid"
    return ""


class ProfilerService:
    """The profiler (``python -m colo_profiler``); see module docstring."""

    name = "profiler"

    def __init__(self, settings: ProfilerSettings | None = None) -> None:
        self.settings = settings or ProfilerSettings()
        self.tick_interval_s = self.settings.tick_interval_s
        self.model = ProfileModel(self.settings)
        self.ctx: ServiceContext | None = None
        self.published = 0
        self.rejected = 0
        self._started = False

    async def start(self, ctx: ServiceContext) -> None:
        """Load nodes from the store, then subscribe to metrics and pod events."""
        self.ctx = ctx
        for spec in await ctx.store.list_nodes():
            self._node(spec)
        ctx.bus.subscribe(subjects.NODE_REGISTERED, self.on_node, durable="nodes")
        ctx.bus.subscribe(subjects.POD_BOUND, self.on_bound, durable="pod-bound")
        ctx.bus.subscribe(subjects.POD_STATUS, self.on_status, durable="pod-status")
        ctx.bus.subscribe(subjects.NODE_METRIC, self.on_metric, durable="metrics")
        self._started = True

    async def _reject(self, msg: Any, info: MessageInfo, reason: str) -> None:
        """Dead-letter a message that decoded but makes no sense; it is then acked, not retried."""
        self.rejected += 1
        assert self.ctx is not None
        await self.ctx.bus.reject(info, msg, reason)

    # ------------------------------------------------------------------ handlers

    def _node(self, spec: NodeSpec) -> None:
        self.model.node_registered(spec.name, Usage(cpu=spec.allocatable.cpu, memory=spec.allocatable.memory))

    async def on_node(self, spec: NodeSpec, info: MessageInfo) -> None:
        """A node registration: remember allocatable."""
        if not spec.name:
            await self._reject(spec, info, "NodeSpec.name is empty")
            return
        self._node(spec)

    async def on_bound(self, msg: PodBound, info: MessageInfo) -> None:
        """A binding: the pod's requests, priority class and start time."""
        if not msg.spec.uid or not msg.node or not math.isfinite(msg.at):
            await self._reject(msg, info, "PodBound needs spec.uid, node and a finite at")
            return
        r = msg.spec.requests
        self.model.pod_bound(msg.spec.uid, msg.node, r.cpu, r.memory, priority_class_of(msg.spec), msg.at)

    async def on_status(self, msg: PodStatus, info: MessageInfo) -> None:
        """Pod lifecycle: Running refreshes what we know, Succeeded/Failed drop the pod."""
        if not msg.uid or not math.isfinite(msg.at):
            await self._reject(msg, info, "PodStatus needs uid and a finite at")
            return
        if msg.phase in ("Succeeded", "Failed"):
            pod = self.model.pods.get(msg.uid)
            if pod is not None and pod.node == msg.node:
                self.model.pod_ended(msg.uid)
            return
        pod = self.model.pods.get(msg.uid)
        cls = msg.priority_class or (pod.priority_class if pod else None) or "none"
        req = msg.requests
        cpu, mem = (req.cpu, req.memory) if (req.cpu or req.memory) or pod is None else (
            pod.cpu_request, pod.memory_request)
        self.model.pod_bound(msg.uid, msg.node, cpu, mem, cls, msg.at)

    async def on_metric(self, metric: NodeMetric, info: MessageInfo) -> None:
        """One NodeMetric = one sample for every model of its node."""
        problem = metric_problem(metric)
        if problem:
            await self._reject(metric, info, problem)
            return
        self.model.ingest(metric)

    # ------------------------------------------------------------------ lifecycle

    async def tick(self, now: float) -> dict[str, float]:
        """Expire old models, publish the NodeProfiles that are due; returns counters."""
        assert self.ctx is not None
        expired = self.model.expire(now)
        due = self.model.due(now)
        items = []
        sent = []
        for name, profile in zip(due, self.model.profiles(due, now)):
            if self.model.worth_sending(profile):
                items.append((subjects.PROFILE_NODE, profile, f"profile-{name}-{now:.3f}", {"node": name}))
                sent.append(profile)
        if items:
            await self.ctx.bus.publish_many(items)
            self.published += len(items)
        for profile in sent:
            self.model.mark_published(profile.node, now, profile)
        for name in due:  # unchanged ones count as done for this interval too
            self.model.mark_published(name, now)
        return {"profiles": float(len(items)), "profiles_total": float(self.published),
                "nodes": float(len(self.model.nodes)), "pods": float(len(self.model.pods)),
                "samples_total": float(self.model.samples), "expired_nodes": float(len(expired)),
                "rejected_total": float(self.rejected)}

    async def stop(self) -> None:
        """Nothing to flush: models live in memory (see docs/profiler.md on restarts)."""

    def ready(self) -> bool:
        """Ready once subscribed."""
        return self._started

    def debug(self) -> dict[str, object]:
        """Counters and per-node model sizes for ``/debug/state``."""
        return {
            "nodes": {n: {"pods": len(node.pods), "last_seen": node.last_seen,
                          "last_published": node.last_published} for n, node in self.model.nodes.items()},
            "pods": len(self.model.pods),
            "histogram_rows": self.model.cpu.rows_in_use,
            "samples_total": self.model.samples,
            "published_total": self.published,
            "rejected_total": self.rejected,
        }
