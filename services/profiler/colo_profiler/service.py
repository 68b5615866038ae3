"""The profiler service: NodeMetrics and pod events in, NodeProfiles and WorkloadProfiles out (REFERENCE.md §7).

Consumes ``node.metric.*``, ``pod.bound.*``, ``pod.status.*`` and ``node.registered.*``
(for allocatable, the cap of the reclaimable formulas); every ``publish_interval_s``
computes one :class:`NodeProfile` per live node and publishes it on ``profile.node.<node>`` when it differs
from the last one sent (``at`` aside) or that one is ``republish_interval_s`` old: consumers keep the newest
profile per node, so an unchanged profile carries no news. Workload predictions go the same way, one
:class:`WorkloadProfile` per namespace on ``profile.workload.<namespace>``.

The model is checkpointed to Redis (one blob, :mod:`colo_profiler.checkpoint`) every
``checkpoint_interval_s`` and on stop, and restored on start before subscribing; a checkpoint that cannot
be restored is logged and ignored.
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from typing import Any

from colo import subjects
from colo.bus import MessageInfo
from colo.classes import priority_class_of
from colo.messages import NodeMetric, NodeSpec, PodBound, PodStatus, Usage
from colo.runtime import ServiceContext
from colo.validation import MAX_QUANTITY
from colo_profiler import checkpoint
from colo_profiler.histogram import MAX_TIME_S
from colo_profiler.metrics import PredictionMetrics
from colo_profiler.model import ProfileModel
from colo_profiler.settings import ProfilerSettings


def quantity_problem(what: str, *, clamps_negative: bool = False, **amounts: int) -> str:
    """"" when every amount (milli-cores, bytes) is within 0..:data:`colo.validation.MAX_QUANTITY` (any value
    up to it when ``clamps_negative``: measured usage below 0 is clamped), else the reason naming the first
    one out of range: a decoded int can reach 2^64 (msgspec decodes it), which the checkpoint's msgpack
    cannot encode and the predictions should never see."""
    for name, v in amounts.items():
        if v > MAX_QUANTITY or (v < 0 and not clamps_negative):
            return f"{what}.{name} = {v} is out of range (0..{MAX_QUANTITY})"
    return ""


def metric_problem(metric: NodeMetric) -> str:
    """Why a decoded NodeMetric cannot be used ("" when it can)."""
    if not abs(metric.at) <= MAX_TIME_S:  # NaN and inf fail too
        return f"NodeMetric.at is not a time within ±{MAX_TIME_S:g} s: {metric.at}"
    usages = [("node_usage", metric.node_usage.cpu, metric.node_usage.memory),
              ("system_usage", metric.system_usage.cpu, metric.system_usage.memory),
              *((f"pods[{p.uid[:40]}]", p.cpu, p.memory) for p in metric.pods)]
    problem = next((q for name, cpu, memory in usages
                    if (q := quantity_problem(f"NodeMetric.{name}", clamps_negative=True, cpu=cpu, memory=memory))),
                   "")
    if problem:
        return problem
    if not metric.node:
        return "NodeMetric.node is empty"
    if not _is_token(metric.node, NODE_NAME_MAX):
        return (f"NodeMetric.node {metric.node[:80]!r} cannot name a profile.node subject (letters, digits, "
                f"'_' and '-', at most {NODE_NAME_MAX} characters)")
    if any(not p.uid for p in metric.pods):
        return "NodeMetric.pods has a pod without uid"
    return ""


NAMESPACE_MAX = 63
"""Longest namespace taken for a workload model (a Kubernetes namespace is a DNS-1123 label, ≤ 63 characters)."""
NODE_NAME_MAX = 253
"""Longest node name taken (a Kubernetes node name is a DNS-1123 subdomain, ≤ 253 characters)."""
_TOKEN = re.compile(r"[A-Za-z0-9_-]+")


def _is_token(name: str, max_len: int = NAMESPACE_MAX) -> bool:
    """Whether ``name`` can be the last token of ``profile.workload.<namespace>`` or ``profile.node.<node>``.

    Checked here in full (``re.fullmatch``: a trailing newline passes a ``$``-anchored pattern and nats-py
    then refuses the subject) and with a length cap (a subject over nats-server's 4 KiB protocol line gets
    the connection closed): one such name must not fail every tick's publishing.
    """
    return len(name) <= max_len and _TOKEN.fullmatch(name) is not None


CHECKPOINT_NAME = "profiler"
"""Name of the profiler's checkpoint in the store (key ``<prefix>:checkpoint:profiler``)."""


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
        self.checkpoints = 0
        self.checkpoint_bytes = 0
        self.checkpoint_s = 0.0
        self.checkpoint_failures = 0
        """Periodic checkpoint writes that failed (each retried at the next tick)."""
        """Wall time of the last checkpoint write, seconds."""
        self.restored_from: float | None = None
        """``saved_at`` of the checkpoint restored on start, None if none was."""
        self.last_checkpoint: float | None = None
        """Clock time of the last checkpoint written, seconds."""
        self._checkpoint_from: float | None = None
        self._expire_from = -math.inf
        self._started = False
        self.prediction_metrics = PredictionMetrics()
        """Prediction vs usage for ``/metrics`` (:mod:`colo_profiler.metrics`)."""

    async def start(self, ctx: ServiceContext) -> None:
        """Restore the checkpoint, load nodes from the store, then subscribe to metrics and pod events."""
        self.ctx = ctx
        if self.settings.checkpoint_interval_s > 0:
            await self._restore(ctx)
        for spec in await ctx.store.list_nodes():
            self._node(spec)
        ctx.bus.subscribe(subjects.NODE_REGISTERED, self.on_node, durable="nodes")
        ctx.bus.subscribe(subjects.POD_BOUND, self.on_bound, durable="pod-bound")
        ctx.bus.subscribe(subjects.POD_STATUS, self.on_status, durable="pod-status")
        ctx.bus.subscribe(subjects.NODE_METRIC, self.on_metric, durable="metrics")
        self._started = True

    async def _restore(self, ctx: ServiceContext) -> None:
        """Replace the empty model by the stored checkpoint, if any; an unusable one is logged and ignored."""
        blob = await ctx.store.get_checkpoint(CHECKPOINT_NAME)
        if blob is None:
            ctx.log.info("profiler: no checkpoint, starting empty")
            return
        try:
            cp = checkpoint.decode(blob)
            self.model = checkpoint.restore(cp, self.settings)
        except checkpoint.CheckpointError as exc:
            ctx.log.warning("profiler: ignoring checkpoint %s (%d bytes), starting empty: %s",
                            ctx.store.checkpoint_key(CHECKPOINT_NAME), len(blob), exc)
            return
        # A checkpoint of an earlier profiler may hold names that cannot name a subject (it took them):
        # dropped, or every tick's publishing would fail.
        bad_nodes = [n for n in self.model.nodes if not _is_token(n, NODE_NAME_MAX)]
        bad_workloads = [k for k in self.model.workloads if not _is_token(k[0])]
        if bad_nodes or bad_workloads:
            ctx.log.warning("profiler: checkpoint models dropped, their names cannot name a subject: nodes %s, "
                            "workload namespaces %s", [n[:80] for n in bad_nodes],
                            sorted({k[0][:80] for k in bad_workloads}))
            self.model.forget(bad_nodes, bad_workloads)
        self.restored_from = cp.saved_at
        # The models were not "unseen" while no profiler ran: let the metrics backlog arrive before expiring.
        self._expire_from = ctx.clock.now() + self.settings.expiry_s
        ctx.log.info("profiler: restored checkpoint of %.1f (%d bytes): %d nodes, %d pods, %d workloads",
                     cp.saved_at, len(blob), len(self.model.nodes), len(self.model.pods), len(self.model.workloads))

    async def write_checkpoint(self, now: float) -> int:
        """Write the model to Redis as one blob (msgpack and zlib in a worker thread); returns its size, bytes."""
        assert self.ctx is not None
        started = time.perf_counter()
        cp = checkpoint.snapshot(self.model, now)
        blob = await asyncio.to_thread(checkpoint.encode, cp)
        await self.ctx.store.put_checkpoint(CHECKPOINT_NAME, blob)
        self.checkpoints += 1
        self.checkpoint_bytes = len(blob)
        self.checkpoint_s = time.perf_counter() - started
        self.last_checkpoint = self._checkpoint_from = now
        return len(blob)

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
        problem = quantity_problem("NodeSpec.allocatable", cpu=spec.allocatable.cpu, memory=spec.allocatable.memory)
        if problem:
            await self._reject(spec, info, problem)
            return
        self._node(spec)

    async def on_bound(self, msg: PodBound, info: MessageInfo) -> None:
        """A binding: the pod's requests, priority class and start time."""
        if not msg.spec.uid or not msg.node or not abs(msg.at) <= MAX_TIME_S:
            await self._reject(msg, info, f"PodBound needs spec.uid, node and an at within ±{MAX_TIME_S:g} s")
            return
        r = msg.spec.requests
        problem = quantity_problem("PodBound.spec.requests", cpu=r.cpu, memory=r.memory)
        if problem:
            await self._reject(msg, info, problem)
            return
        workload = (msg.spec.namespace, msg.spec.app) if msg.spec.app and _is_token(msg.spec.namespace) else None
        self.model.pod_bound(msg.spec.uid, msg.node, r.cpu, r.memory, priority_class_of(msg.spec), msg.at,
                             workload)

    async def on_status(self, msg: PodStatus, info: MessageInfo) -> None:
        """Pod lifecycle: Running refreshes what we know, Succeeded/Failed drop the pod."""
        if not msg.uid or not abs(msg.at) <= MAX_TIME_S:
            await self._reject(msg, info, f"PodStatus needs uid and an at within ±{MAX_TIME_S:g} s")
            return
        problem = quantity_problem("PodStatus.requests", cpu=msg.requests.cpu, memory=msg.requests.memory)
        if problem:
            await self._reject(msg, info, problem)
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
        self.prediction_metrics.observe(metric, self.model)

    # ------------------------------------------------------------------ lifecycle

    async def tick(self, now: float) -> dict[str, float]:
        """Expire old models, publish the NodeProfiles and WorkloadProfiles that are due, checkpoint when
        due; returns counters."""
        assert self.ctx is not None
        expired = self.model.expire(now) if now >= self._expire_from else []
        due = self.model.due(now)
        items: list[tuple[Any, Any, str, dict[str, str]]] = []
        sent = []
        pm = self.prediction_metrics
        pm.score()  # the predictions of earlier ticks against the usage reported since
        for name, profile in zip(due, self.model.profiles(due, now)):
            pm.predict(profile)
            if self.model.worth_sending(profile):
                items.append((subjects.PROFILE_NODE, profile, f"profile-{name}-{now:.3f}", {"node": name}))
                sent.append(profile)
        workloads = self.model.workload_updates(now)
        items += [(subjects.PROFILE_WORKLOAD, w, f"workloads-{w.namespace}-{now:.3f}", {"namespace": w.namespace})
                  for w in workloads]
        if items:
            await self.ctx.bus.publish_many(items)
            self.published += len(items)
        for profile in sent:
            self.model.mark_published(profile.node, now, profile)
        for name in due:  # unchanged ones count as done for this interval too
            self.model.mark_published(name, now)
        pm.keep(self.model.nodes, self.model)
        iv = self.settings.checkpoint_interval_s
        if iv > 0:
            if self._checkpoint_from is None:
                self._checkpoint_from = now  # the first one an interval after start
            elif now - self._checkpoint_from >= iv:
                try:
                    await self.write_checkpoint(now)
                except Exception as exc:  # Redis down or slow: this tick's profiles are out; the next tick retries
                    self.checkpoint_failures += 1
                    self.ctx.log.warning("profiler: checkpoint at %.1f failed (%s: %s); retrying next tick",
                                         now, type(exc).__name__, exc)
        return {"profiles": float(len(sent)), "workload_profiles": float(len(workloads)),
                "profiles_total": float(self.published), "nodes": float(len(self.model.nodes)),
                "pods": float(len(self.model.pods)), "workloads": float(len(self.model.workloads)),
                "samples_total": float(self.model.samples), "expired_nodes": float(len(expired)),
                "rejected_total": float(self.rejected), "checkpoints_total": float(self.checkpoints),
                "checkpoint_failures_total": float(self.checkpoint_failures)}

    async def stop(self) -> None:
        """Write a last checkpoint (consumers have stopped, so it holds everything acknowledged)."""
        if self.ctx is not None and self._started and self.settings.checkpoint_interval_s > 0:
            size = await self.write_checkpoint(self.ctx.clock.now())
            self.ctx.log.info("profiler: checkpoint on stop, %d bytes in %.3f s", size, self.checkpoint_s)

    def ready(self) -> bool:
        """Ready once subscribed."""
        return self._started

    def debug(self) -> dict[str, object]:
        """Counters and per-node model sizes for ``/debug/state``."""
        return {
            "nodes": {n: {"pods": len(node.pods), "last_seen": node.last_seen,
                          "last_published": node.last_published} for n, node in self.model.nodes.items()},
            "pods": len(self.model.pods),
            "workloads": {f"{ns}/{app}": {"pods": len(wl.pods), "first_seen": wl.first_seen,
                                          "last_seen": wl.last_seen}
                          for (ns, app), wl in sorted(self.model.workloads.items())},
            "histogram_rows": self.model.cpu.rows_in_use,
            "samples_total": self.model.samples,
            "workload_samples_total": self.model.workload_samples,
            "published_total": self.published,
            "rejected_total": self.rejected,
            "checkpoint": {"written_total": self.checkpoints, "failed_total": self.checkpoint_failures,
                           "last_bytes": self.checkpoint_bytes,
                           "last_s": self.checkpoint_s, "last_at": self.last_checkpoint,
                           "restored_from": self.restored_from},
        }
