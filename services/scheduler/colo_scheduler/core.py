"""The scheduler's synchronous core: node table + framework + queue, without I/O.

The service (:mod:`colo_scheduler.service`) feeds it events and binds what it
places; tests drive it directly. Times are clock seconds; ``decision_ms`` is wall
time measured with :func:`time.perf_counter`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from colo.messages import NodeMetric, NodeResource, NodeSpec, PodSpec, Resources
from colo_scheduler.framework.interface import NODE_ADD, NODE_METRIC, NODE_RESOURCE, POD_DELETE
from colo_scheduler.framework.registry import ProfileConfig, build_profile
from colo_scheduler.framework.runner import Framework, ScheduleResult
from colo_scheduler.plugins import default_profile_config, new_in_tree_registry
from colo_scheduler.podinfo import PodInfo, make_pod_info
from colo_scheduler.queue import SchedulingQueue
from colo_scheduler.settings import SchedulerSettings
from colo_scheduler.table import NodeTable


@dataclass(slots=True)
class Placement:
    """A pod reserved on ``node`` (name) in this cycle, awaiting bind."""

    pod: PodInfo
    node: str
    decision_ms: float


@dataclass(slots=True)
class Failure:
    """A pod no node accepted in this cycle, with the framework's diagnosis."""

    pod: PodInfo
    result: ScheduleResult
    decision_ms: float


@dataclass(slots=True)
class CycleOutcome:
    """What one cycle did: placements (reserved, to bind) and failures (now unschedulable)."""

    placements: list[Placement] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)


class Scheduler:
    """Pure scheduling state machine; raises ValueError for an invalid profile at construction."""

    def __init__(self, settings: SchedulerSettings, profile: ProfileConfig | None = None) -> None:
        self.settings = settings
        self.table = NodeTable(report_interval_s=settings.metric_report_interval_s)
        profile_obj = build_profile(profile or default_profile_config(settings), new_in_tree_registry(),
                                    settings)
        self.framework = Framework(profile_obj, self.table, settings.seed)
        self.queue = SchedulingQueue(profile_obj.queue_sort.sort_key, settings.backoff_initial_s,
                                     settings.backoff_max_s, settings.unschedulable_retry_s)
        self.interest = {name: getattr(p, "events", frozenset()) for name, p in profile_obj.plugins.items()}

    # ------------------------------------------------------------------ pods

    def pod_info(self, spec: PodSpec, now: float) -> PodInfo:
        """PreFilter state of ``spec`` (request vector, estimate) with ``queued_at = now``."""
        s = self.settings
        return make_pod_info(spec, s.cpu_estimation_factor_percent, s.memory_estimation_factor_percent,
                             s.default_cpu_estimate_milli, s.default_memory_estimate_bytes, queued_at=now)

    def add_pod(self, spec: PodSpec, now: float) -> bool:
        """Queue a pending pod; False when it is already queued or placed."""
        if spec.uid in self.framework.placed or spec.uid in self.queue:
            return False
        return self.queue.add(self.pod_info(spec, now))

    def adopt(self, spec: PodSpec, node: str, bound_at: float) -> bool:
        """Count an already bound pod (loaded from the store) on ``node``; False for unknown nodes
        or pods already placed. Allocation sums should afterwards be set from the store."""
        i = self.table.index.get(node)
        if i is None or spec.uid in self.framework.placed:
            return False
        self.queue.remove(spec.uid)
        self.framework.reserve(self.pod_info(spec, bound_at), i, bound_at)
        return True

    def release(self, uid: str, now: float) -> PodInfo | None:
        """Free a placed pod (Unreserve) and wake pods waiting for room; the pod's info or None."""
        entry = self.framework.unreserve(uid)
        self.queue.move_on_event(POD_DELETE, now, self.interest)
        return entry[0] if entry else None

    def forget(self, uid: str) -> None:
        """Drop a pod from the queue (e.g. bound by another scheduler replica)."""
        self.queue.remove(uid)

    # ------------------------------------------------------------------ nodes

    def on_node(self, spec: NodeSpec, now: float) -> bool:
        """Register or update a node; moves pods waiting for node changes. True when changed."""
        changed = self.table.upsert_node(spec)
        if changed:
            self.queue.move_on_event(NODE_ADD, now, self.interest)
        return changed

    def on_node_resource(self, nr: NodeResource, now: float) -> bool:
        """Apply batch/mid allocatable; moves pods waiting for it. True when changed."""
        changed = self.table.set_node_resource(nr)
        if changed:
            self.queue.move_on_event(NODE_RESOURCE, now, self.interest)
        return changed

    def on_metric(self, metric: NodeMetric, now: float) -> bool:
        """Apply a node metric; moves pods the load filter rejected. True when applied."""
        applied = self.table.set_metric(metric)
        if applied:
            self.queue.move_on_event(NODE_METRIC, now, self.interest)
        return applied

    def set_allocated(self, node: str, allocated: Resources, pods: int) -> None:
        """Overwrite a node's allocation with the store's sums (``pods`` = number of pods)."""
        self.table.set_allocated(node, allocated, pods)

    # ------------------------------------------------------------------ cycle

    def schedule_cycle(self, now: float) -> CycleOutcome:
        """One cycle at clock time ``now``: flush pools, then place active pods in QueueSort order,
        reserving each placement so that later pods see it. Unplaced pods become unschedulable."""
        self.queue.flush(now)
        pods = self.queue.pop_batch(self.settings.max_pods_per_cycle)
        out = CycleOutcome()
        if not pods:
            return out
        state = self.framework.begin_cycle(now)
        names = self.table.names
        for pod in pods:
            t0 = time.perf_counter()
            pod.attempts += 1
            pod.last_attempt_at = now
            result = self.framework.schedule_one(state, pod)
            if result.node >= 0:
                self.framework.reserve(pod, result.node, now)
                out.placements.append(Placement(pod, names[result.node], (time.perf_counter() - t0) * 1e3))
            else:
                self.queue.add_unschedulable(pod, now, result.rejectors, result.reasons)
                out.failures.append(Failure(pod, result, (time.perf_counter() - t0) * 1e3))
        return out

    def bind_failed(self, pod: PodInfo) -> None:
        """A placement the store refused: Unreserve it and retry after backoff."""
        self.framework.unreserve(pod.uid)
        self.queue.add_backoff(pod)

    def explain(self, uid: str, now: float) -> dict[str, object] | None:
        """Per-plugin filter rejections and scores for a queued pod, or None when not queued."""
        pod = next((p for p in self.queue.pods() if p.uid == uid), None)
        if pod is None:
            return None
        return self.framework.explain(self.framework.begin_cycle(now), pod)
