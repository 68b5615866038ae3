"""The node agent service: hosts nodes on a backend, runs pods bound to them, reports (docs/node-agent.md).

Backends: ``sim`` (many virtual nodes, :mod:`.backends.sim`) or ``host`` (this Linux machine, real processes in
real cgroups, :mod:`.backends.host`). start(): register every node (store + ``node.registered``), adopt pods
already bound to them (restart), consume
``pod.bound.<node>``, ``pod.evict.<node>`` and ``node.slo.<node>`` for its nodes. tick(now): advance the backend
to ``now`` (strategies run every sub-step), publish pod status changes, QoS events and — every report
interval — one NodeMetric per node. Bad input is dead-lettered with a reason; the service keeps running.
"""

from __future__ import annotations

import asyncio
import logging
import math
import socket
from typing import Any

import msgspec
from redis.exceptions import RedisError

from colo import codec, permissions, subjects
from colo.bus import BusError, MessageInfo
from colo.classes import priority_class_of, qos_class_of
from colo.messages import (
    DELETE_EVICTION_REASON,
    EvictionCommand,
    NodeSLO,
    NodeSpec,
    PodBound,
    PodSpec,
    PodStatus,
    QoSEvent,
    SimWorkload,
    allocations_devices,
    cpuset_parse,
    devices_parse,
    with_hostname_label,
)
from colo.runtime import ServiceContext
from colo.validation import MAX_QUANTITY
from colo_node_agent import metrics
from colo_node_agent.backends.base import NodeBackend
from colo_node_agent.backends.host import HostBackend, HostConfig, HostConfigError, host_problems
from colo_node_agent.backends.interference_model import load_model
from colo_node_agent.backends.sim import PodEnd, SimBackend, SimConfig
from colo_node_agent.backends.sim_interference import STAT_KEYS as HARM_STAT_KEYS
from colo_node_agent.lost import LOST_MESSAGE, lost_pods
from colo_node_agent.reconcile import reconcile
from colo_node_agent.settings import NodeAgentSettings, validate_slo_values

log = logging.getLogger("colo.node-agent")

ENDED_MEMORY = 100_000
"""Pods that ended here remembered (uid → bind time) so that a redelivered PodBound never restarts one."""
LAST_END_MEMORY = 10_000
"""Pods whose last end here is remembered whole (phase, reason), for reconciliation to release a binding whose
release was lost (:mod:`colo_node_agent.reconcile`)."""

STAT_KEYS: tuple[str, ...] = (
    "cpu_capacity_milli", "cpu_used_milli", "mem_capacity_bytes", "mem_used_bytes", "ls_cpu_demand_milli",
    "ls_cpu_served_milli", "be_cpu_used_milli", "batch_completed", "be_evictions", "oom_kills",
    "suppress_events", "pods_running", "gpu_held_milli", *HARM_STAT_KEYS,
)
"""Keys of the stats dict returned by :meth:`NodeAgentService.tick` (see docs/node-agent.md)."""


class NodeConfigError(ValueError):
    """The nodes file is missing or does not hold a JSON list of NodeSpec."""


def agent_id(node_names: list[str], instance: str = "") -> str:
    """The identity of one agent process in its durable consumer names.

    Several agents share the service name ``node-agent``; each needs consumers of its own
    (filtered to its nodes), and a restarted agent must find its own again. The identity is
    ``COLO_INSTANCE`` when set, else a digest of the sorted node names it hosts
    (:func:`colo.permissions.node_agent_id`: its NATS user may touch only the consumers so named).
    """
    return permissions.node_agent_id(node_names, instance)


def load_nodes(path: str) -> list[NodeSpec]:
    """Read a JSON list of NodeSpec from ``path``. Raises NodeConfigError naming the problem."""
    if not path:
        raise NodeConfigError("COLO_NODE_AGENT_NODES_FILE is not set: the sim backend needs its nodes")
    try:
        with open(path, "rb") as f:
            nodes = codec.decode(f.read(), list[NodeSpec])
    except OSError as exc:
        raise NodeConfigError(f"cannot read nodes file {path}: {exc}") from exc
    except codec.DecodeError as exc:
        raise NodeConfigError(f"nodes file {path}: {exc}") from exc
    names = [n.name for n in nodes]
    if len(set(names)) != len(names):
        raise NodeConfigError(f"nodes file {path}: duplicate node names")
    return nodes


def host_config(settings: NodeAgentSettings) -> HostConfig:
    """The host backend's configuration from the settings (node name: ``node_name`` or the hostname)."""
    s = settings
    return HostConfig(node_name=s.node_name or socket.gethostname().lower(), cgroup_root=s.cgroup_root,
                      cgroup_parent=s.cgroup_parent, state_dir=s.state_dir, loop_s=s.loop_s, window_s=s.window_s,
                      node_scope=s.node_scope, termination_grace_s=s.termination_grace_s,
                      cpu_capacity_milli=s.cpu_capacity_milli, memory_capacity_bytes=s.memory_capacity_bytes,
                      interference_signals=s.interference_signals, gpus=s.gpus)


MIN_SIM_STEP_S = 0.001
"""Shortest usage-series step taken (seconds): the demand model indexes the series with int64
``(t − start) / step_s``, which a step near 0 overflows."""


def sim_problems(w: SimWorkload) -> list[str]:
    """Why the sim backend cannot model ``w`` (empty when it can): a series step ≥ :data:`MIN_SIM_STEP_S`
    and finite, amounts within 0..:data:`colo.validation.MAX_QUANTITY`, utilizations and duration finite and
    ≥ 0 (JSON's 1e999 decodes as inf)."""
    out: list[str] = []
    if w.kind == "series" and not (MIN_SIM_STEP_S <= w.step_s < math.inf):
        out.append(f"sim.step_s must be finite and >= {MIN_SIM_STEP_S}, got {w.step_s}")
    if not all(0 <= v <= MAX_QUANTITY for v in (w.cpu_scale_milli, w.memory_scale_bytes, w.cpu_milli,
                                                 w.memory_bytes)) or not 0 <= w.duration_s < math.inf:
        out.append(f"sim workload amounts must be within 0..{MAX_QUANTITY} and duration_s finite and >= 0")
    if not all(0 <= v < math.inf for v in (*w.cpu_util, *w.memory_util)):
        out.append("sim utilization series must be finite and >= 0")
    return out


def pod_problems(spec: PodSpec, backend: str = "sim") -> list[str]:
    """Why a bound pod cannot be run on ``backend`` (empty when it can)."""
    out: list[str] = []
    if not spec.uid:
        out.append("pod has no uid")
    if backend == "host" and not spec.command:
        out.append("pod has no command: the host backend runs PodSpec.command")
    w = spec.sim
    if w is not None:
        out.extend(sim_problems(w))
    return out


class NodeAgentService:
    """The node agent for a set of nodes on the ``sim`` backend, or for this machine on the ``host`` backend.

    ``nodes`` overrides ``settings.nodes_file`` (sim; tests, embedding). With ``backend=host`` the machine is
    checked here (cgroup controllers mounted, parent and state directory writable): ValueError listing every
    problem, so that ``python -m colo_node_agent`` exits 2 before connecting; on ``sim`` the interference
    calibration is loaded here (CalibrationError, a ValueError, listing every problem of a bad file).
    """

    name = "node-agent"

    def __init__(self, settings: NodeAgentSettings, nodes: list[NodeSpec] | None = None) -> None:
        self.settings = settings
        self.tick_interval_s = settings.loop_s if settings.backend == "host" else settings.sub_step_s
        self._nodes = nodes
        if settings.backend == "host":
            problems = host_problems(host_config(settings))
            if problems:
                raise HostConfigError(problems)
        # a bad calibration table stops the agent before it connects (CalibrationError is a ValueError)
        self._interference = None if settings.backend == "host" else load_model(
            settings.interference_calibration, settings.interference_be_kinds)
        self.ctx: ServiceContext | None = None
        self.backend: NodeBackend | None = None
        self.bound_at: dict[str, float] = {}
        self._ended: dict[str, float] = {}
        self._last_end: dict[str, tuple[PodEnd, float]] = {}
        self._registered: dict[str, NodeSpec] = {}
        self._last_reconcile = 0.0
        self.reconcile_fixes: dict[str, int] = {}
        self.last_report: float | None = None
        self.counters = {"started": 0, "adopted": 0, "ended": 0, "dead_lettered": 0, "metrics_published": 0}
        self._cpu_capacity: dict[str, int] = {}
        """Node → CPU capacity, milli-cores (what suppress takes away is measured against it)."""
        self._started = False
        # consumers run concurrently: a pod's start, eviction and end must publish in the order they happen
        self._lock = asyncio.Lock()

    # ------------------------------------------------------------------ lifecycle

    async def start(self, ctx: ServiceContext) -> None:
        """Build the backend, register nodes, adopt bound pods, subscribe. Raises NodeConfigError."""
        self.ctx = ctx
        s = self.settings
        now = ctx.clock.now()
        if s.backend == "host":
            if ctx.settings.sim:
                raise NodeConfigError("the host backend runs real processes on the wall clock: unset COLO_SIM")
            host = HostBackend(host_config(s), s.default_slo, start=now, clock=ctx.clock.now)
            self.backend, nodes = host, [host.spec]
        else:
            nodes = self._nodes if self._nodes is not None else load_nodes(s.nodes_file)
            self.backend = SimBackend(
                nodes, SimConfig(sub_step_s=s.sub_step_s, system_cpu_fraction=s.system_cpu_fraction,
                                 system_memory_fraction=s.system_memory_fraction, cgroup_version=s.cgroup_version,
                                 window_s=s.window_s, max_gap_s=s.max_gap_s,
                                 interference=self._interference),
                s.default_slo, start=now)
        store_lost = bool(await ctx.store.missing_nodes([n.name for n in nodes]))
        items: list[tuple[Any, Any, str | None, dict[str, str]]] = []
        for spec in nodes:  # every node carries kubernetes.io/hostname, as in Kubernetes
            reg = msgspec.structs.replace(with_hostname_label(spec), registered_at=now)
            await ctx.store.put_node(reg)
            self._registered[spec.name] = reg
            items.append((subjects.NODE_REGISTERED, reg, f"node-registered-{spec.name}-{now:.3f}",
                          {"node": spec.name}))
        await ctx.bus.publish_many(items)
        self._cpu_capacity = {spec.name: spec.capacity.cpu for spec in nodes}
        metrics.register_nodes(nodes)
        await self._adopt(nodes, now)
        names = [n.name for n in nodes]
        if store_lost:
            await self._report_lost(names, now)
        agent = agent_id(names, ctx.settings.instance)
        ctx.bus.subscribe(subjects.POD_BOUND, self.on_pod_bound, durable=f"bound-{agent}", keys={"node": names})
        ctx.bus.subscribe(subjects.POD_EVICT, self.on_pod_evict, durable=f"evict-{agent}", keys={"node": names})
        ctx.bus.subscribe(subjects.NODE_SLO, self.on_node_slo, durable=f"slo-{agent}", keys={"node": names})
        self._started = True
        self._last_reconcile = now
        ctx.log.info("node-agent: %d nodes on the %s backend", len(nodes), s.backend)

    async def _adopt(self, nodes: list[NodeSpec], now: float) -> None:
        """Run the pods the store says are bound to our nodes (after a restart); none is started twice.

        sim: every bound pod is re-created (counted ``adopted``). host: pods still running since the last
        agent were adopted by the backend (``adopted``, same processes); bound pods it does not know are
        launched (``started``); pods it runs that are no longer bound here are evicted.
        """
        assert self.ctx is not None and self.backend is not None
        host = self.backend if isinstance(self.backend, HostBackend) else None
        statuses = []
        bound: set[str] = set()
        for spec in nodes:
            for rec in await self.ctx.store.pods_on(spec.name):
                uid = rec.spec.uid
                bound.add(uid)
                if rec.phase in ("Succeeded", "Failed") or pod_problems(rec.spec, self.settings.backend):
                    continue
                if host is not None and host.has_pod(uid):
                    if host.is_running(uid):
                        self.bound_at[uid] = rec.bound_at
                        self.counters["adopted"] += 1
                        statuses.append(self._status_item(rec.spec, spec.name, "Running", "", "", now))
                    continue
                if self.backend.start_pod(rec.spec, spec.name, _cpus(rec.cpuset, uid), _devices(rec.devices, uid)):
                    self.bound_at[uid] = rec.bound_at
                    self.counters["adopted" if host is None else "started"] += 1
                    statuses.append(self._status_item(rec.spec, spec.name, "Running", "", "", now))
        if host is not None:
            for uid in [u for u in host.pods_on(host.names[0]) if u not in bound]:
                end = host.evict_pod(uid, "Evicted", "no longer bound to this node", now)
                if end is not None:
                    statuses.append(self._end_item(end))
        if statuses:
            await self.ctx.bus.publish_many(statuses)

    async def _report_lost(self, names: list[str], now: float) -> None:
        """Report the pods the last agent ran on our nodes that nobody runs now (:mod:`colo_node_agent.lost`);
        a stream that cannot be read is logged, not raised (the agent runs without the report)."""
        assert self.ctx is not None and self.backend is not None
        running = {spec.uid for name in names for spec in self.backend.running(name)}
        try:
            lost = await lost_pods(self.ctx.bus, set(names), running,
                                   consumer=f"history-{agent_id(names, self.ctx.settings.instance)}")
        except BusError as exc:
            log.warning("pods lost with the store not reported: %s", exc)
            return
        items = []
        for bound in lost:
            subject, status, _, keys = self._status_item(bound.spec, bound.node, "Failed", "Evicted", LOST_MESSAGE,
                                                         now)
            items.append((subject, status, f"status-{bound.spec.uid}-{bound.at:.3f}-Failed-lost", keys))
        if items:
            self.counters["lost"] = self.counters.get("lost", 0) + len(items)
            log.warning("%d pods bound to our nodes before the store was lost no longer run: reported Failed/"
                        "Evicted", len(items))
            await self.ctx.bus.publish_many(items)

    async def stop(self) -> None:
        """Release the backend: the host backend saves its state and leaves the pods running (the next agent
        adopts them); the sim backend lives in memory."""
        if isinstance(self.backend, HostBackend):
            self.backend.close()
        self._started = False

    def ready(self) -> bool:
        """True once nodes are registered and consumers are set up."""
        return self._started

    def debug(self) -> dict[str, object]:
        """Counters and a per-node summary."""
        nodes = self.backend.debug() if self.backend is not None else {}
        return {"counters": dict(self.counters), "reconcile_fixes": dict(self.reconcile_fixes),
                "last_report": self.last_report, "nodes": nodes}

    # ------------------------------------------------------------------ handlers

    async def _reject(self, msg: Any, info: MessageInfo, reason: str) -> None:
        assert self.ctx is not None
        self.counters["dead_lettered"] += 1
        await self.ctx.bus.reject(info, msg, reason)

    async def on_pod_bound(self, msg: PodBound, info: MessageInfo) -> None:
        """Start a pod bound to one of our nodes (idempotent: replays and duplicates are ignored)."""
        async with self._lock:
            await self._start_bound(msg, info)

    async def _start_bound(self, msg: PodBound, info: MessageInfo) -> None:
        assert self.ctx is not None and self.backend is not None
        problems = pod_problems(msg.spec, self.settings.backend)
        try:
            cpuset = cpuset_parse(msg.cpuset)
        except ValueError as exc:
            problems.append(f"cpuset: {msg.cpuset!r} is not a CPU list ({exc})")
        try:
            devices = allocations_devices(msg.devices)
        except (KeyError, ValueError) as exc:
            problems.append(f"devices: {msg.devices!r} are not GPU allocations ({exc})")
        if msg.node not in self.backend.index:
            problems.append(f"node {msg.node!r} is not hosted by this agent")
        if problems:
            await self._reject(msg, info, "; ".join(problems))
            return
        uid = msg.spec.uid
        if self.backend.has_pod(uid):
            return
        bound = await self.ctx.store.bound_node(uid)
        if bound is not None and bound != msg.node:
            log.info("pod %s: binding to %s is stale (now bound to %s)", uid, msg.node, bound)
            return
        ended_bound_at = self._ended.get(uid)
        if ended_bound_at is not None and msg.at <= ended_bound_at:
            # a redelivered PodBound of a pod that already ran here: never start it twice (a pod bound
            # again after an eviction carries a later bind time)
            log.info("pod %s: PodBound of a pod that already ended here ignored", uid)
            return
        rec = await self.ctx.store.get_pod(uid)
        if rec is not None and rec.phase in ("Succeeded", "Failed"):
            log.info("pod %s: PodBound for a finished pod (%s) ignored", uid, rec.phase)
            return
        if not self.backend.start_pod(msg.spec, msg.node, cpuset, devices):
            return
        now = self.ctx.clock.now()
        self.bound_at[uid] = msg.at
        self.counters["started"] += 1
        await self.ctx.store.set_phase(uid, "Running", "", now)
        subject, status, msg_id, keys = self._status_item(msg.spec, msg.node, "Running", "", "", now)
        await self.ctx.bus.publish(subject, status, msg_id=msg_id, **keys)

    async def on_pod_evict(self, msg: EvictionCommand, info: MessageInfo) -> None:
        """Evict a pod on an order (descheduler); unknown pods are ignored (already gone)."""
        async with self._lock:
            await self._evict(msg, info)

    async def _evict(self, msg: EvictionCommand, info: MessageInfo) -> None:
        assert self.ctx is not None and self.backend is not None
        if msg.node not in self.backend.index or not msg.uid:
            await self._reject(msg, info, f"eviction for pod {msg.uid!r} on node {msg.node!r} not hosted here")
            return
        now = self.ctx.clock.now()
        # a deletion ends the pod for good (reason Deleted); any other order is an eviction the scheduler requeues
        reason = DELETE_EVICTION_REASON if msg.reason == DELETE_EVICTION_REASON else "Evicted"
        end = self.backend.evict_pod(msg.uid, reason, msg.reason or f"evicted by {msg.by}", now)
        if end is None:
            return
        event = QoSEvent(node=end.node, kind="evict", at=now, reason=msg.reason, pods=[msg.uid],
                         detail={"by": msg.by})
        if reason != DELETE_EVICTION_REASON:
            metrics.ordered_eviction(end.node)
        await self.ctx.bus.publish_many([self._end_item(end),
                                         (subjects.NODE_QOS, event, None, {"node": end.node})])

    async def on_node_slo(self, msg: NodeSLO, info: MessageInfo) -> None:
        """Adopt a NodeSLO for one of our nodes; invalid policies are dead-lettered."""
        assert self.backend is not None
        problems = validate_slo_values(msg)
        if not problems and msg.node not in self.backend.index:
            problems.append(f"node {msg.node!r} is not hosted by this agent")
        if problems:
            await self._reject(msg, info, "; ".join(problems))
            return
        self.backend.set_slo(msg)

    # ------------------------------------------------------------------ tick

    def _status_item(self, spec: PodSpec, node: str, phase: str, reason: str, message: str,
                     at: float) -> tuple[Any, Any, str | None, dict[str, str]]:
        status = PodStatus(uid=spec.uid, node=node, phase=phase, at=at,  # type: ignore[arg-type]
                           reason=reason, message=message, requests=spec.requests,
                           qos_class=qos_class_of(spec), priority_class=priority_class_of(spec))
        msg_id = f"status-{spec.uid}-{self.bound_at.get(spec.uid, 0.0):.3f}-{phase}"
        return subjects.POD_STATUS, status, msg_id, {"node": node}

    def _end_item(self, end: PodEnd) -> tuple[Any, Any, str | None, dict[str, str]]:
        item = self._status_item(end.spec, end.node, end.phase, end.reason, end.message, end.at)
        self._ended[end.uid] = self.bound_at.pop(end.uid, end.at)
        while len(self._ended) > ENDED_MEMORY:
            del self._ended[next(iter(self._ended))]
        self._last_end.pop(end.uid, None)
        self._last_end[end.uid] = (end, self.ctx.clock.now() if self.ctx is not None else end.at)
        while len(self._last_end) > LAST_END_MEMORY:
            del self._last_end[next(iter(self._last_end))]
        self.counters["ended"] += 1
        return item

    async def tick(self, now: float) -> dict[str, float]:
        """Advance to ``now``; publish statuses, QoS events, cgroup failures and due NodeMetrics; return stats."""
        async with self._lock:
            return await self._tick(now)

    async def _tick(self, now: float) -> dict[str, float]:
        assert self.ctx is not None and self.backend is not None
        res = self.backend.advance(now)
        items = [self._end_item(end) for end in res.ended]
        items += [(subjects.NODE_QOS, ev, None, {"node": ev.node}) for ev in res.events]
        while self.backend.cgroup_failures:
            node, rec = self.backend.cgroup_failures.popleft()
            event = QoSEvent(node=node, kind="cgroup", at=rec.at, reason=f"{rec.error}: {rec.message}",
                             detail={"cgroup": rec.cgroup, "resource": rec.resource, "value": str(rec.new)})
            items.append((subjects.NODE_QOS, event, None, {"node": node}))
        due = self.last_report is None or now - self.last_report >= self.settings.report_interval_s - 1e-6
        if due or res.pressure_started:
            # a node whose BE memory pressure began reports at once: the slo-manager withdraws its batch-memory
            # without waiting for the next report interval
            only = None if due else set(res.pressure_started)
            if due:
                self.last_report = now
            for metric in self.backend.node_metrics(now):
                if only is not None and metric.node not in only:
                    continue
                items.append((subjects.NODE_METRIC, metric, f"metric-{metric.node}-{now:.3f}",
                              {"node": metric.node}))
                self.counters["metrics_published"] += 1
                metrics.observe_node_metric(metric, self._cpu_capacity.get(metric.node, 0))
        if items:
            await self.ctx.bus.publish_many(items)
        metrics.observe_events(ev for _, ev, _, _ in items if isinstance(ev, QoSEvent))
        interval = self.settings.reconcile_interval_s
        if interval > 0 and now - self._last_reconcile >= interval - 1e-6:
            self._last_reconcile = now
            await self._reconcile(now)
        return {k: float(res.stats.get(k, 0.0)) for k in STAT_KEYS}

    async def _reconcile(self, now: float) -> None:
        """One reconciliation pass (:mod:`colo_node_agent.reconcile`); a Redis failure is logged and the pass
        tried again next interval, never raised into the tick."""
        assert self.ctx is not None and self.backend is not None
        try:
            out = await reconcile(self.ctx.store, self.backend, self._registered, now, bound_at=self.bound_at,
                                  ended=self._last_end, grace_s=self.settings.reconcile_grace_s,
                                  status_item=self._status_item,
                                  problems=lambda spec: pod_problems(spec, self.settings.backend))
        except RedisError as exc:
            log.warning("reconcile at %.3f failed, tried again in %.0f s: %r", now,
                        self.settings.reconcile_interval_s, exc)
            return
        for end in out.stopped:
            self._end_item(end)  # remembered (a redelivered PodBound never restarts it), not published
        for kind, n in out.fixes.items():
            self.reconcile_fixes[kind] = self.reconcile_fixes.get(kind, 0) + n
        if out.fixes:
            log.warning("reconcile at %.3f fixed the store: %s", now,
                        ", ".join(f"{n} {kind}" for kind, n in sorted(out.fixes.items())))
        if out.items:
            await self.ctx.bus.publish_many(out.items)

def _cpus(text: str, uid: str) -> tuple[int, ...]:
    """The CPU ids of a stored binding's cpuset; () (the agent chooses) when it does not parse."""
    try:
        return cpuset_parse(text)
    except ValueError as exc:
        log.error("pod %s: stored cpuset %r ignored: %s", uid, text, exc)
        return ()


def _devices(text: str, uid: str) -> tuple[tuple[int, int], ...]:
    """The GPUs of a stored binding ((index, milli), ...); () when it does not parse (logged; the sim backend
    then refuses a GPU pod)."""
    try:
        return devices_parse(text)
    except ValueError as exc:
        log.error("pod %s: stored devices %r ignored: %s", uid, text, exc)
        return ()
