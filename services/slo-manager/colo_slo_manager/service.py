"""The slo-manager service: admission, batch/mid allocatable per node, NodeSLO per node.

Consumes ``pod.submitted`` (admission → ``pod.admitted`` / ``pod.rejected``), ``workload.submitted`` and
``podgroup.submitted`` (:mod:`colo_slo_manager.workloads`: workloads expanded into pods, the Job controller),
``node.registered``, ``node.metric``, ``profile.node``, ``pod.bound`` and ``pod.status``.
``tick(now)`` recomputes every node's batch/mid allocatable (REFERENCE.md §3), writes and
publishes ``node.resource`` where :func:`colo_slo_manager.publish.decide` says so, and
publishes ``node.slo`` for new nodes and when a node's policy changes.

The policy settings are hot-reloaded from the YAML file and a NATS key-value entry
(:mod:`colo_slo_manager.reload`); each new configuration is announced on
``config.applied.slo-manager``, each refused one on ``config.rejected.slo-manager``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import msgspec

from colo import codec, subjects
from colo.bus import MessageInfo
from colo.clock import VirtualClock
from colo.messages import (
    ConfigApplied,
    ConfigRejected,
    NodeMetric,
    NodeProfile,
    NodeResource,
    NodeSLO,
    NodeSpec,
    PodAdmitted,
    PodBound,
    PodRejected,
    PodSpec,
    PodStatus,
    Usage,
)
from colo.validation import identity_problems
from colo_slo_manager import metrics
from colo_slo_manager.admission import admit
from colo_slo_manager.allocatable import Allocatable, compute_allocatable_of, node_problems, node_reserved
from colo_slo_manager.be_budget import cpu_reclaim_percent
from colo_slo_manager.config import Composed
from colo_slo_manager.memory_pressure import eviction_headroom, under_pressure
from colo_slo_manager.nodeslo import cluster_of, render_node_slo, same_policy
from colo_slo_manager.publish import decide, metric_is_stale
from colo_slo_manager.reload import ConfigWatcher
from colo_slo_manager.settings import ENV_PREFIX, SloManagerSettings
from colo_slo_manager.state import ClusterState
from colo_slo_manager.thresholds import settings_warnings
from colo_slo_manager.workloads import WorkloadAdmission

if TYPE_CHECKING:
    from colo.runtime import ServiceContext

log = logging.getLogger("colo_slo_manager")

def _msg_id(prefix: str, key: str) -> str:
    """A de-duplication id ``prefix-key``; keys that are not plain tokens are hashed."""
    if key and all(c.isalnum() or c in "-_." for c in key) and len(key) <= 200:
        return f"{prefix}-{key}"
    return f"{prefix}-h{hashlib.sha256(key.encode()).hexdigest()[:32]}"


def _admission_id(prefix: str, uid: str, created_at: float) -> str:
    """The de-duplication id of an admission outcome: per submission (uid and its ``created_at``), so that a
    redelivered submission is announced once while a corrected resubmission of the uid is announced again."""
    return _msg_id(prefix, f"{uid}-{created_at!r}" if created_at else uid)


MAX_ANNOUNCED_ERRORS = 100
"""Most problems a ConfigRejected lists (the log has them all)."""
MAX_ERROR_CHARS = 1000
"""Longest problem text in a ConfigRejected: 100 of them stay far under NATS's 1 MB default max payload."""


def announced_errors(errors: list[str]) -> list[str]:
    """``errors`` as a ConfigRejected carries them: the first :data:`MAX_ANNOUNCED_ERRORS`, each cut to
    :data:`MAX_ERROR_CHARS`, then one ``… and N more`` line. A 44 kB value of 5,000 unknown keys
    gives 5,000 problems, 1.1 MB: over the max payload, the rejection would not be announced at all."""
    out = [e if len(e) <= MAX_ERROR_CHARS else e[:MAX_ERROR_CHARS - 1] + "…" for e in errors[:MAX_ANNOUNCED_ERRORS]]
    if len(errors) > MAX_ANNOUNCED_ERRORS:
        out.append(f"… and {len(errors) - MAX_ANNOUNCED_ERRORS} more problems (all in the slo-manager log)")
    return out


class SloManagerService:
    """slo-manager as a :class:`colo.runtime.Service` (see docs/slo-manager.md).

    ``tick`` returns stats: ``nodes``; ``batch_cpu``/``mid_cpu`` (milli-cores) and
    ``batch_memory``/``mid_memory`` (bytes) currently offered over all nodes;
    ``pods_admitted`` and ``pods_rejected`` since start; ``resources_published``,
    ``resets`` and ``slos_published`` in this tick.

    ``config_path`` is the YAML file watched for changes (default ``COLO_SLO_MANAGER_CONFIG`` of
    ``env``, which defaults to ``os.environ``); ``settings`` must be what that file and ``env`` give
    (as :func:`colo.runtime.main` loads them) or, without a file, the base the key-value
    configuration is laid over.
    """

    name = "slo-manager"

    def __init__(self, settings: SloManagerSettings | None = None, *, config_path: str | None = None,
                 env: Mapping[str, str] | None = None) -> None:
        self.settings = settings or SloManagerSettings()
        """The configuration in force; replaced as a whole (one assignment) by a hot reload."""
        self.tick_interval_s = self.settings.tick_interval_s
        self._env = dict(os.environ if env is None else env)
        self._config_path = config_path or self._env.get(f"{ENV_PREFIX}_CONFIG") or None
        self.config: ConfigWatcher | None = None
        """The configuration watcher, from :meth:`start` on."""
        self.config_applied = 0
        self.config_rejected = 0
        self.last_rejection: dict[str, object] | None = None
        self._config_at = 0.0
        self._restart_required: tuple[str, ...] = ()
        self._policy_changed = False
        """Set when a new configuration comes in force: the next tick publishes every changed value."""
        self.state = ClusterState()
        self.computed: dict[str, Allocatable] = {}
        self.admitted = 0
        self.rejected = 0
        self.invalid_nodes: dict[str, str] = {}
        self._reserved: dict[str, tuple[NodeSpec, Usage]] = {}
        """node → (the spec it was computed for, its NodeReserved): recomputed when the spec changes."""
        self._rendered: dict[str, tuple[NodeSpec, SloManagerSettings, NodeSLO]] = {}
        """node → (the spec, the settings, the NodeSLO last rendered from them): an unchanged spec
        under unchanged settings renders the same policy and is not rendered again."""
        self._ctx: ServiceContext | None = None
        self._ready = False
        self.workloads = WorkloadAdmission(lambda: self.settings, self._publish_admissions)
        """Workloads, PodGroups and the Job controller (:mod:`colo_slo_manager.workloads`)."""
        self._publishing = asyncio.Lock()
        """Held while NodeResources are decided and published (a tick, a BE memory pressure change), so
        that neither publishes a decision the other has overtaken."""

    @property
    def ctx(self) -> ServiceContext:
        """The runtime context; raises RuntimeError before :meth:`start`."""
        if self._ctx is None:
            raise RuntimeError("slo-manager not started")
        return self._ctx

    # ------------------------------------------------------------------ lifecycle

    async def start(self, ctx: ServiceContext) -> None:
        """Read the key-value configuration (applied when valid, before anything is handled); load nodes,
        last published resources and bound pods from the store; subscribe; announce the configuration
        in force on ``config.applied.slo-manager``."""
        self._ctx = ctx
        self._config_at = ctx.clock.now()
        self.config = ConfigWatcher(self.settings, path=self._config_path, env=self._env,
                                    on_applied=self._on_config_applied, on_rejected=self._on_config_rejected)
        await self.config.start(ctx.bus)
        store = ctx.store
        for node in await store.list_nodes():
            await self._put_node(node)
        self.state.published.update(await store.list_node_resources())
        for record in await store.list_pods():
            self.state.put_record(record)
        bus = ctx.bus
        bus.subscribe(subjects.POD_SUBMITTED, self.on_pod_submitted, durable="submitted")
        bus.subscribe(subjects.NODE_REGISTERED, self.on_node_registered, durable="nodes")
        bus.subscribe(subjects.NODE_METRIC, self.on_node_metric, durable="metrics")
        bus.subscribe(subjects.PROFILE_NODE, self.on_node_profile, durable="profiles")
        bus.subscribe(subjects.POD_BOUND, self.on_pod_bound, durable="bound")
        bus.subscribe(subjects.POD_STATUS, self.on_pod_status, durable="status")
        await self.workloads.start(ctx, bus)
        self._ready = True
        metrics.config_in_force(self.config.current.version, self._config_at, 1 + self.config_applied)
        await self._announce("start", self.config.current)

    async def stop(self) -> None:
        """Stop watching the configuration; nothing to flush: every publish is awaited in the handler
        or tick that made it."""
        self._ready = False
        if self.config is not None:
            await self.config.stop()

    # ------------------------------------------------------------------ configuration

    async def _on_config_applied(self, composed: Composed, trigger: str) -> None:
        """Put ``composed`` in force (one assignment: every handler and tick sees the old or the new
        settings whole), re-render NodeSLOs and republish changed resources on the next tick, announce."""
        self.settings = composed.settings
        self._policy_changed = True
        self.config_applied += 1
        self._config_at = self.ctx.clock.now()
        self._restart_required = composed.restart_required
        metrics.APPLIED.labels(self.name, trigger).inc()
        metrics.config_in_force(composed.version, self._config_at, 1 + self.config_applied)
        log.info("configuration %s in force (from %s)", composed.version, trigger)
        if composed.restart_required:
            log.warning("configuration %s changes %s: takes effect after a restart", composed.version,
                        ", ".join(composed.restart_required))
        for warning in settings_warnings(composed.settings):
            log.warning("configuration %s: %s", composed.version, warning)
        if self._ready:  # during start the configuration in force is announced once, at the end
            await self._announce(trigger, composed)

    async def _on_config_rejected(self, errors: list[str], trigger: str) -> None:
        """Log every problem, count, keep for /debug/state and announce; the configuration in force stays."""
        version = self.config.current.version if self.config is not None else ""
        log.error("new configuration (from %s) rejected with %d problems; %s stays in force", trigger,
                  len(errors), version)
        for e in errors:
            log.error("  - %s", e)
        self.config_rejected += 1
        metrics.REJECTED.labels(self.name, trigger).inc()
        now = self.ctx.clock.now()
        announced = announced_errors(errors)
        self.last_rejection = {"at": now, "trigger": trigger, "errors": announced}
        await self.ctx.bus.publish(subjects.CONFIG_REJECTED, ConfigRejected(
            service=self.name, trigger=trigger, errors=announced, version_in_force=version, at=now),
            service=self.name)

    async def _announce(self, trigger: str, composed: Composed) -> None:
        sources = self.config.sources if self.config is not None else {}
        await self.ctx.bus.publish(subjects.CONFIG_APPLIED, ConfigApplied(
            service=self.name, version=composed.version, trigger=trigger, at=self.ctx.clock.now(),
            sources=sources, restart_required=list(composed.restart_required),
            warnings=settings_warnings(composed.settings)), service=self.name)

    def ready(self) -> bool:
        """True once state is loaded and consumers are registered."""
        return self._ready

    # ------------------------------------------------------------------ handlers

    async def _reject_invalid(self, info: MessageInfo, msg: Any, reason: str) -> None:
        await self.ctx.bus.reject(info, msg, reason)

    async def on_pod_submitted(self, pod: PodSpec, info: MessageInfo) -> None:
        """Admission: publish PodAdmitted (msg id ``admitted-<uid>``) or PodRejected (``rejected-<uid>``). A pod
        naming a PodGroup gets its gang first, or is rejected when the group is unknown
        (:meth:`colo_slo_manager.workloads.WorkloadAdmission.pod_with_gang`)."""
        joined = await self.workloads.pod_with_gang(pod, info)
        now = self.ctx.clock.now()
        result = joined if isinstance(joined, PodRejected) else admit(joined, self.settings, now)
        if isinstance(result, PodRejected):
            result = msgspec.structs.replace(result, namespace=pod.namespace, created_at=pod.created_at)
            if not identity_problems(pod):  # the store keys it by uid: a refused pod stays visible (colo get pods)
                await self.ctx.store.record_rejected(pod, result.reason, now)
        await self._publish_admission(result)

    async def _publish_admission(self, result: PodAdmitted | PodRejected) -> None:
        await self._publish_admissions([result])

    async def _publish_admissions(self, results: list[PodAdmitted | PodRejected]) -> None:
        """Each result on ``pod.admitted`` / ``pod.rejected`` in one batch of publishes, counted."""
        items: list[tuple[Any, Any, str | None, dict[str, str]]] = []
        for result in results:
            if isinstance(result, PodAdmitted):
                items.append((subjects.POD_ADMITTED, result, _admission_id("admitted", result.spec.uid,
                                                                            result.spec.created_at), {}))
            else:
                log.info("rejected pod %s: %s", result.name, result.reason)
                items.append((subjects.POD_REJECTED, result, _admission_id("rejected", result.uid,
                                                                            result.created_at), {}))
        await self.ctx.bus.publish_many(items)
        rejected = sum(1 for r in results if isinstance(r, PodRejected))
        self.admitted += len(results) - rejected
        self.rejected += rejected
        metrics.admissions(len(results) - rejected, rejected)

    async def _put_node(self, node: NodeSpec) -> bool:
        problems = node_problems(node)
        if problems:
            self.invalid_nodes[node.name] = "; ".join(problems)
            return False
        self.invalid_nodes.pop(node.name, None)
        self.state.put_node(node)
        return True

    async def on_node_registered(self, node: NodeSpec, info: MessageInfo) -> None:
        """Record a node; an unusable spec (no capacity, bad CPU list, a name that is not a subject token or
        not the subject's) is dead-lettered with the reason. A node whose NodeResource the store lost (the node was
        deleted) gets one at the next tick. Raises RedisError (the message is redelivered)."""
        if not info.subject.endswith(f".{node.name}"):
            await self._reject_invalid(info, node, f"invalid node {node.name!r}: registered on subject {info.subject}")
            return
        if not await self._put_node(node):
            await self._reject_invalid(info, node, f"invalid node {node.name!r}: {self.invalid_nodes[node.name]}")
            return
        if node.name in self.state.published and await self.ctx.store.get_node_resource(node.name) is None:
            # deleted meanwhile (colo delete node: its NodeResource and bind limits went with it), registered again:
            # publish at the next tick as for a new node, not once the last publish is max_publish_age_s old
            del self.state.published[node.name]

    async def on_node_metric(self, metric: NodeMetric, info: MessageInfo) -> None:
        """Keep the newest metric per node; a metric for another node than its subject is dead-lettered."""
        if not metric.node or not info.subject.endswith(f".{metric.node}"):
            await self._reject_invalid(info, metric, f"metric for node {metric.node!r} on subject {info.subject}")
            return
        if self.state.put_metric(metric):
            await self._on_pressure_change(metric)

    async def _on_pressure_change(self, metric: NodeMetric) -> None:
        """Publish the node's NodeResource at once when ``metric``'s BE memory pressure differs from the last
        published one (docs/slo-manager.md "BE memory"): under the wall clock the next tick may be
        ``tick_interval_s`` away. Not under the virtual clock, where the tick follows the node agent's at
        once and the services' ticks alone decide, so that runs are reproducible."""
        name = metric.node
        last = self.state.published.get(name)
        if (isinstance(self.ctx.clock, VirtualClock) or last is None or last.reset or name not in self.state.nodes
                or (metric.memory_pressure is not None) == last.memory_pressure):
            return
        async with self._publishing:
            now = self.ctx.clock.now()
            computed = self._compute(name, now)
            s = self.settings
            out = decide(name, self.state.published.get(name), self.state.metrics.get(name), computed, now,
                         enabled=s.colocation_enabled, diff_threshold_percent=s.diff_threshold_percent,
                         max_age_s=s.max_publish_age_s, stale_after_s=s.metric_stale_reset_s)
            if out is None:
                return
            if computed is not None:
                self.computed[name] = computed
            await self.ctx.store.put_node_resources([out])
            await self.ctx.bus.publish(subjects.NODE_RESOURCE, out, msg_id=_msg_id("pressure", f"{name}-{now:.3f}"),
                                       node=name)
            self.state.published[name] = out
            metrics.offered(self.state.published, self.state.nodes)

    async def on_node_profile(self, profile: NodeProfile, info: MessageInfo) -> None:
        """Keep the newest profiler output per node (prod-reclaimable for mid resources)."""
        if not profile.node or not info.subject.endswith(f".{profile.node}"):
            await self._reject_invalid(info, profile,
                                       f"profile for node {profile.node!r} on subject {info.subject}")
            return
        self.state.put_profile(profile)

    async def on_pod_bound(self, msg: PodBound, info: MessageInfo) -> None:
        """A pod now holds resources on its node."""
        if not msg.spec.uid or not msg.node:
            await self._reject_invalid(info, msg, "binding without pod uid or node")
            return
        self.state.on_bound(msg)

    async def on_pod_status(self, msg: PodStatus, info: MessageInfo) -> None:
        """A pod's phase changed on its node."""
        if not msg.uid or not msg.node:
            await self._reject_invalid(info, msg, "status without pod uid or node")
            return
        self.state.on_status(msg)
        await self.workloads.on_pod_status(msg)

    # ------------------------------------------------------------------ tick

    def _compute(self, name: str, now: float) -> Allocatable | None:
        metric = self.state.metrics.get(name)
        if not self.settings.colocation_enabled or metric is None:
            return None
        if metric_is_stale(metric, now, self.settings.metric_stale_reset_s):
            return None
        node = self.state.nodes[name]
        cached = self._reserved.get(name)
        if cached is None or cached[0] is not node:
            cached = self._reserved[name] = (node, node_reserved(node))
        summary = self.state.pod_summary(name)
        slo = self.state.slos.get(name)
        reclaim = cpu_reclaim_percent(self.settings.batch, metric, slo, now)
        computed = compute_allocatable_of(node, cached[1], metric, summary, self.state.profiles.get(name),
                                          self.settings.batch, self.settings.mid, cpu_reclaim_percent=reclaim)
        evict = slo.memory_evict if slo is not None else self.settings.node_slo.memory_evict
        computed = eviction_headroom(computed, metric, node.capacity.memory, summary.be_memory_request, evict)
        return under_pressure(computed, metric)

    def _render(self, name: str, node: NodeSpec, now: float) -> NodeSLO | None:
        """The NodeSLO to publish for ``node`` at ``now`` when its policy changed, else None."""
        rendered = self._rendered.get(name)
        s = self.settings
        if (rendered is not None and rendered[0] is node and rendered[1] is s
                and self.state.slos.get(name) is rendered[2]):
            return None  # same spec, same settings: same policy as the one published
        slo = render_node_slo(node, cluster_of(s), s.node_pools, now)
        changed = not same_policy(self.state.slos.get(name), slo)
        if changed:
            self.state.slos[name] = slo
        self._rendered[name] = (node, s, self.state.slos[name])
        return slo if changed else None

    async def tick(self, now: float) -> dict[str, float]:
        """Recompute and publish per node at clock time ``now`` (seconds); returns the stats.

        The first tick after a new configuration came in force publishes every value that changed at
        all (diff threshold 0), so that a new policy does not wait for ``max_publish_age_s``.
        """
        async with self._publishing:
            return await self._tick(now)

    async def _tick(self, now: float) -> dict[str, float]:
        s = self.settings
        diff_threshold = 0 if self._policy_changed else s.diff_threshold_percent
        self._policy_changed = False
        slos: list[tuple[Any, Any, str | None, dict[str, str]]] = []
        resources: list[NodeResource] = []
        for name in sorted(self.state.nodes):
            slo = self._render(name, self.state.nodes[name], now)
            if slo is not None:
                slos.append((subjects.NODE_SLO, slo, _msg_id("slo", f"{name}-{now:.3f}"), {"node": name}))
            computed = self._compute(name, now)
            if computed is not None:
                self.computed[name] = computed
            else:
                self.computed.pop(name, None)
            out = decide(name, self.state.published.get(name), self.state.metrics.get(name), computed, now,
                         enabled=s.colocation_enabled, diff_threshold_percent=diff_threshold,
                         max_age_s=s.max_publish_age_s, stale_after_s=s.metric_stale_reset_s)
            if out is not None:
                resources.append(out)
        # The store first: a scheduler that hears of the change must find it when binding.
        await self.ctx.store.put_node_resources(resources)
        items = slos + [(subjects.NODE_RESOURCE, r, _msg_id("resource", f"{r.node}-{now:.3f}"), {"node": r.node})
                        for r in resources]
        if items:
            await self.ctx.bus.publish_many(items)
        for res in resources:
            self.state.published[res.node] = res
        metrics.offered(self.state.published, self.state.nodes)
        self.state.forget_finished(now)
        return self._stats(len(resources), sum(1 for r in resources if r.reset), len(slos))

    def _stats(self, published: int, resets: int, slos: int) -> dict[str, float]:
        offered = [r for r in self.state.published.values() if not r.reset and r.node in self.state.nodes]
        return {
            "nodes": float(len(self.state.nodes)),
            "batch_cpu": float(sum(r.batch_cpu for r in offered)),
            "batch_memory": float(sum(r.batch_memory for r in offered)),
            "mid_cpu": float(sum(r.mid_cpu for r in offered)),
            "mid_memory": float(sum(r.mid_memory for r in offered)),
            "pods_admitted": float(self.admitted),
            "pods_rejected": float(self.rejected),
            "resources_published": float(published),
            "resets": float(resets),
            "slos_published": float(slos),
        }

    def debug(self) -> dict[str, object]:
        """Per-node state for GET /debug/state: last published and last computed values, metric time, pods."""
        nodes: dict[str, object] = {}
        for name in sorted(self.state.nodes):
            metric = self.state.metrics.get(name)
            published = self.state.published.get(name)
            computed = self.computed.get(name)
            nodes[name] = {
                "metric_at": metric.at if metric else None,
                "published": codec.to_builtins(published) if published else None,
                "computed": dataclasses.asdict(computed) if computed else None,
                "pods": len(self.state.pods_on(name)),
                "pool": self.state.slos[name].pool if name in self.state.slos else None,
            }
        return {
            "colocation_enabled": self.settings.colocation_enabled,
            "config": self._config_debug(),
            "pods_admitted": self.admitted,
            "pods_rejected": self.rejected,
            "invalid_nodes": dict(self.invalid_nodes),
            "workloads": len(self.workloads.records),
            "pod_groups": len(self.workloads.groups),
            "nodes": nodes,
        }

    def _config_debug(self) -> dict[str, object]:
        """The configuration in force (version, sources, settings), reloads and the last rejection."""
        current = self.config.current if self.config is not None else None
        return {
            "version": current.version if current is not None else "",
            "since": self._config_at,
            "sources": self.config.sources if self.config is not None else {},
            "applied": self.config_applied,
            "rejected": self.config_rejected,
            "restart_required": list(self._restart_required),
            "last_rejection": self.last_rejection,
            "settings": msgspec.to_builtins(self.settings),
        }
