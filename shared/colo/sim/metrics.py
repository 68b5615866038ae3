"""Run metrics of one simulation run, computed from tick stats and the events on the bus.

:class:`RunMetrics` is fed by the coordinator (:mod:`colo.sim.run`): the scenario's
submissions, every :class:`~colo.messages.TickAck` and every ``PodBound``,
``PodUnschedulable``, ``PodStatus`` and ``QoSEvent`` it sees. It is pure bookkeeping
(no I/O) so that it is tested on its own. Definitions are in docs/scenario.md.
The batch and mid resources offered over time come from slo-manager's tick stats (the
Σ of the NodeResource values it last published for live nodes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from colo.messages import (
    EvictionCommand,
    PodAdmitted,
    PodBound,
    PodMigrationJob,
    PodRejected,
    PodSpec,
    PodStatus,
    PodUnschedulable,
    QoSEvent,
    QuotaStatus,
    Resources,
    TickAck,
    WorkloadRejected,
    WorkloadSpec,
)
from colo.sim.ceiling import CeilingTracker, ceiling_summary
from colo.sim.gpu_metrics import GpuUsage
from colo.sim.job_metrics import JobMetrics
from colo.sim.loops import EvictRebindCounter
from colo.sim.unschedulable import UnschedulableBreakdown, by_category, count_labels, dominant

METRIC_NAMES: tuple[str, ...] = (
    "cpu_util_avg", "mem_util_avg", "ls_cpu_satisfaction", "ls_p99_inflation_avg_pct", "ls_p99_inflation_max_pct",
    "batch_tasks_completed",
    "batch_slowdown_avg", "be_evictions", "be_oom_kills", "be_suppress_events", "migrations",
    "migrations_failed", "migrations_aborted", "evict_rebind_cycles",
    "sched_latency_p50_ms", "sched_latency_p99_ms", "pods_bound", "pods_unschedulable",
    "pods_pending", "batch_mid_cpu_offered_cores", "gangs_placed", "gangs_waiting", "gang_wait_p50_s",
    "gang_wait_p95_s", "gang_wait_max_s", "preemptions", "quota_reclaims", "workloads_rejected", "workloads_unadmitted",
    "cpu_ceiling_avg", "mem_ceiling_avg", "cpu_ceiling_share", "mem_ceiling_share",
    "gpu_alloc_avg", "gpu_frag_avg", "gpu_pods_bound", "wall_s",
)
"""The summary metrics of a run, in report order."""

HIGHER_IS_BETTER: dict[str, bool] = {
    "cpu_util_avg": True, "mem_util_avg": True, "ls_cpu_satisfaction": True, "ls_p99_inflation_avg_pct": False,
    "ls_p99_inflation_max_pct": False,
    "batch_tasks_completed": True, "batch_slowdown_avg": False, "be_evictions": False,
    "be_oom_kills": False, "be_suppress_events": False, "migrations": False, "migrations_failed": False,
    "migrations_aborted": False,
    "evict_rebind_cycles": False, "sched_latency_p50_ms": False,
    "sched_latency_p99_ms": False, "pods_bound": True, "pods_unschedulable": False,
    "pods_pending": False, "batch_mid_cpu_offered_cores": True, "gangs_placed": True, "gangs_waiting": False,
    "gang_wait_p50_s": False, "gang_wait_p95_s": False, "gang_wait_max_s": False, "preemptions": False,
    "quota_reclaims": False, "workloads_rejected": False, "workloads_unadmitted": False,
    "gpu_alloc_avg": True, "gpu_frag_avg": False, "gpu_pods_bound": True, "wall_s": False,
    "cpu_ceiling_avg": True, "mem_ceiling_avg": True, "cpu_ceiling_share": True, "mem_ceiling_share": True,
}

HARM_KEYS: tuple[str, ...] = ("ls_p99_inflation_mean_pct", "ls_p99_inflation_max_pct", "ls_runq_wait_ratio",
                              "ls_cpu_pressure_some")
"""The node agent's tick stats of the modelled interference, kept per tick in :class:`Sample` (same names)."""

MILLI_PER_CORE = 1000.0
BYTES_PER_GIB = float(1 << 30)


@dataclass
class Sample:
    """One point of the time series: virtual time ``t`` (s) and values at the end of that tick."""

    t: float
    cpu_util: float
    mem_util: float
    ls_satisfaction: float
    batch_running: int
    batch_completed: int
    suppress_events: int
    evictions: int
    batch_cpu_cores: float = 0.0
    """batch-cpu offered over the cluster (Σ of slo-manager's published NodeResource.batch_cpu), cores."""
    mid_cpu_cores: float = 0.0
    """mid-cpu offered over the cluster, cores."""
    batch_memory_gib: float = 0.0
    """batch-memory offered over the cluster, GiB (2^30 bytes)."""
    mid_memory_gib: float = 0.0
    """mid-memory offered over the cluster, GiB."""
    batch_cpu_allocated_cores: float = 0.0
    """batch-cpu allocated by binds over the cluster (Σ of the store's allocations after the tick), cores."""
    batch_memory_allocated_gib: float = 0.0
    """batch-memory allocated over the cluster, GiB."""
    pods_unschedulable: int = 0
    """Pods whose last attempt was unschedulable and that are not bound since."""
    unschedulable_reasons: dict[str, int] = field(default_factory=dict)
    """Those pods by dominant reason label (:mod:`colo.sim.unschedulable`), most pods first."""
    gpu_allocated: float = 0.0
    """Share of the cluster's GPUs held by bound pods (:mod:`colo.sim.gpu_metrics`), 0–1."""
    gpu_fragmented: float = 0.0
    """Share of the cluster's GPUs fragmented for the scenario's GPU pod shapes (FGD's F / GPUs), 0–1."""
    gpu_held_agent: float = 0.0
    """Share of the cluster's GPUs the sim node agent's ledgers hold at its tick (``gpu_held_milli``): the
    enforced view, before the step's binds; a cross-check of ``gpu_allocated``."""
    ls_p99_inflation_mean_pct: float = -1.0
    """The sim's modelled LS p99 latency inflation (percent over running alone), mean over LS pods, averaged over
    the tick; −1 where not modelled (docs/scenario.md "The interference model")."""
    ls_p99_inflation_max_pct: float = -1.0
    """The same, max over LS pods (averaged over the tick's sub-steps)."""
    ls_runq_wait_ratio: float = -1.0
    """Modelled run-queue wait of LS pods (s waited per s run), mean over LS pods; −1 unknown."""
    ls_cpu_pressure_some: float = -1.0
    """Modelled PSI ``cpu.some`` of LS pods (percent), mean over LS pods; −1 unknown."""


@dataclass
class RunMetrics:
    """Bookkeeping of one run (``name`` is ``baseline`` or ``colo``)."""

    name: str
    submitted_at: dict[str, float] = field(default_factory=dict)
    batch_duration_s: dict[str, float] = field(default_factory=dict)
    bound_node: dict[str, str] = field(default_factory=dict)
    bind_events: dict[str, int] = field(default_factory=dict)
    releases: dict[str, int] = field(default_factory=dict)
    rejected: dict[str, str] = field(default_factory=dict)
    attempt_ms: list[float] = field(default_factory=list)
    unschedulable: dict[str, dict[str, int]] = field(default_factory=dict)
    unschedulable_top: dict[str, str] = field(default_factory=dict)
    """Pod uid → the dominant reason label of its last unschedulable attempt (:mod:`colo.sim.unschedulable`)."""
    phase: dict[str, str] = field(default_factory=dict)
    completed_at: dict[str, float] = field(default_factory=dict)
    evictions: int = 0
    oom_kills: int = 0
    suppress_events: int = 0
    cpu_used: float = 0.0
    cpu_capacity: float = 0.0
    mem_used: float = 0.0
    mem_capacity: float = 0.0
    ls_demand: float = 0.0
    ls_served: float = 0.0
    cpu_util_ticks: list[float] = field(default_factory=list)
    mem_util_ticks: list[float] = field(default_factory=list)
    series: list[Sample] = field(default_factory=list)
    tick_errors: list[str] = field(default_factory=list)
    tick_wall_s: dict[str, float] = field(default_factory=dict)
    """Wall seconds each service spent answering ticks over the run (where the run's time goes)."""
    wall_s: float = 0.0
    migration_phase: dict[str, str] = field(default_factory=dict)
    """PodMigrationJob id → the last phase seen on ``migration.<phase>``."""
    migration_events: list[PodMigrationJob] = field(default_factory=list)
    """Every ``migration.<phase>`` event in arrival order (written to ``<run>-migrations.jsonl`` by the demo)."""
    _batch_running: set[str] = field(default_factory=set)
    """Batch pods whose phase is Running (kept with ``phase`` by :meth:`_set_phase`)."""
    _batch_completed: int = 0
    """Batch pods in ``completed_at``."""
    loops: EvictRebindCounter = field(default_factory=EvictRebindCounter)
    """BE memory evict→rebind cycles (:mod:`colo.sim.loops`)."""
    jobs: JobMetrics = field(default_factory=JobMetrics)
    """Gang waits, scheduler evictions and quota use (:mod:`colo.sim.job_metrics`)."""
    workload_at: dict[str, float] = field(default_factory=dict)
    """Workload uid → virtual time it was published; its pods count as submitted then."""
    owner_of: dict[str, str] = field(default_factory=dict)
    """Pod uid → its owner's uid (a workload's pods, from their ``PodAdmitted``)."""
    ceiling: CeilingTracker = field(default_factory=CeilingTracker)
    """The utilization ceiling the run's policy allows over time (:mod:`colo.sim.ceiling`)."""
    batch_cpu_per_memory: float = -1.0
    """The scenario's batch demand mix: its CPU-time over its memory-time, each as a fraction of the cluster's
    (−1 unknown; :func:`colo.sim.ceiling.ceiling_summary`)."""
    unschedulable_ticks: dict[str, float] = field(default_factory=dict)
    """Reason category → Σ over ticks of the pods unschedulable with it as dominant category."""
    gpus: GpuUsage | None = None
    """GPU bookings from the bindings (:mod:`colo.sim.gpu_metrics`); None = no GPU figures (all 0)."""

    def _set_phase(self, uid: str, phase: str) -> None:
        self.phase[uid] = phase
        if uid in self.batch_duration_s:
            if phase == "Running":
                self._batch_running.add(uid)
            else:
                self._batch_running.discard(uid)

    # ------------------------------------------------------------------ intake

    def submitted(self, pod: PodSpec, at: float) -> None:
        """A pod published at virtual time ``at`` (seconds)."""
        self.submitted_at[pod.uid] = at
        self._register_batch(pod)

    def submitted_workload(self, workload: WorkloadSpec, at: float) -> None:
        """A workload published at virtual time ``at``; its pods are counted when admission expands them
        (:meth:`on_admitted`), as submitted at ``at``."""
        self.workload_at[workload.uid] = at

    def on_admitted(self, msg: PodAdmitted) -> None:
        """A pod admitted. A workload's pod (unknown until admission names it) counts as submitted when its
        workload was; gang members start their gang's wait."""
        pod = msg.spec
        if pod.owner is not None:
            self.owner_of[pod.uid] = pod.owner.uid
        if pod.uid not in self.submitted_at:
            owner = pod.owner
            at = self.workload_at.get(owner.uid) if owner is not None else None
            self.submitted_at[pod.uid] = at if at is not None else msg.at
            self._register_batch(pod)
        self.jobs.on_admitted(msg)

    def on_evict(self, msg: EvictionCommand) -> None:
        """An eviction order (the scheduler's are preemptions or quota reclaims)."""
        self.jobs.on_evict(msg)

    def on_quota(self, msg: QuotaStatus) -> None:
        """A quota status (sampled each tick)."""
        self.jobs.on_quota(msg)

    def on_workload_rejected(self, msg: WorkloadRejected) -> None:
        """A workload refused by admission."""
        self.jobs.on_workload_rejected(msg)

    def _register_batch(self, pod: PodSpec) -> None:
        # the gpu scenario's GPU pods run as finite workloads too, but are not batch tasks
        if pod.sim is not None and pod.sim.kind == "batch" and pod.labels.get("colo.sim/kind") != "gpu":
            if pod.uid not in self.batch_duration_s and pod.uid in self.completed_at:
                self._batch_completed += 1
            self.batch_duration_s[pod.uid] = pod.sim.duration_s
            if self.phase.get(pod.uid) == "Running":
                self._batch_running.add(pod.uid)

    def on_bound(self, msg: PodBound) -> None:
        """A binding (see :meth:`double_bound` for the bound-twice check)."""
        uid = msg.spec.uid
        self.bind_events[uid] = self.bind_events.get(uid, 0) + 1
        self.bound_node[uid] = msg.node
        self._set_phase(uid, "Bound")
        self.unschedulable.pop(uid, None)
        self.unschedulable_top.pop(uid, None)
        self.attempt_ms.append(msg.attempt_ms)
        self.loops.on_bound(msg)
        self.jobs.on_bound(msg)
        self.ceiling.on_bound(msg)
        if self.gpus is not None:
            self.gpus.on_bound(msg)

    def on_unschedulable(self, msg: PodUnschedulable) -> None:
        """A failed scheduling attempt with its reasons."""
        if self.phase.get(msg.uid) in (None, "Pending", "Failed"):
            self.unschedulable[msg.uid] = dict(msg.reasons)
            self.unschedulable_top[msg.uid] = dominant(msg.reasons)

    def on_status(self, msg: PodStatus) -> None:
        """A lifecycle change reported by a node agent."""
        self._set_phase(msg.uid, msg.phase)
        self.ceiling.on_status(msg)
        if self.gpus is not None:
            self.gpus.on_status(msg)
        if msg.phase == "Succeeded" and msg.uid not in self.completed_at:
            self.completed_at[msg.uid] = msg.at
            if msg.uid in self.batch_duration_s:
                self._batch_completed += 1
        elif msg.phase == "Failed":
            if msg.reason in ("Evicted", "Descheduled"):
                self.evictions += 1
            elif msg.reason == "OOMKilled":
                self.oom_kills += 1
            # an evicted BE pod goes back to the queue: a later binding is not a double bind
            self.releases[msg.uid] = self.releases.get(msg.uid, 0) + 1
            self.bound_node.pop(msg.uid, None)

    def on_rejected(self, msg: PodRejected) -> None:
        """A pod refused by admission, with its reason."""
        self.rejected[msg.uid] = msg.reason

    def on_migration(self, msg: PodMigrationJob) -> None:
        """A descheduler migration job's phase change (the final phase counts: Succeeded, Failed, Aborted)."""
        self.migration_events.append(msg)
        if self.migration_phase.get(msg.id) not in ("Succeeded", "Failed", "Aborted"):
            self.migration_phase[msg.id] = msg.phase

    def on_qos(self, msg: QoSEvent) -> None:
        """A node agent QoS action; suppress events are counted."""
        if msg.kind == "suppress":
            self.suppress_events += 1
        self.loops.on_qos(msg)

    def on_ticks(self, t: float, acks: list[TickAck], allocated: Resources | None = None) -> None:
        """The acks of every service for the tick ending at ``t``; appends one time-series sample.

        Usage comes from the node agent's stats, the batch/mid resources offered from slo-manager's
        (``batch_cpu``, ``mid_cpu`` milli-cores; ``batch_memory``, ``mid_memory`` bytes; 0 when absent);
        ``allocated`` is the cluster's Σ allocation in the store after the tick (milli-cores, bytes; 0 when
        None); the pods still unschedulable are counted by dominant reason label (:func:`count_labels`).
        """
        stats: dict[str, float] = {}
        offered: dict[str, float] = {}
        for ack in acks:
            if ack.error:
                self.tick_errors.append(f"{ack.service}@{t:.0f}: {ack.error}")
            if ack.service == "node-agent":
                stats = ack.stats
            elif ack.service == "slo-manager":
                offered = ack.stats
        cap = stats.get("cpu_capacity_milli", 0.0)
        used = stats.get("cpu_used_milli", 0.0)
        mcap = stats.get("mem_capacity_bytes", 0.0)
        mused = stats.get("mem_used_bytes", 0.0)
        demand = stats.get("ls_cpu_demand_milli", 0.0)
        served = stats.get("ls_cpu_served_milli", 0.0)
        self.cpu_used += used
        self.cpu_capacity += cap
        self.mem_used += mused
        self.mem_capacity += mcap
        self.ls_demand += demand
        self.ls_served += served
        if cap:
            self.cpu_util_ticks.append(used / cap)
        if mcap:
            self.mem_util_ticks.append(mused / mcap)
        running = len(self._batch_running)
        pods = count_labels(self.unschedulable_top, self.bound_node)
        gpu_alloc, gpu_frag = self.gpus.sample(t) if self.gpus is not None else (0.0, 0.0)
        self.series.append(Sample(
            t=t, cpu_util=used / cap if cap else 0.0, mem_util=mused / mcap if mcap else 0.0,
            ls_satisfaction=served / demand if demand else 1.0, batch_running=running,
            batch_completed=self._batch_completed,
            suppress_events=self.suppress_events, evictions=self.evictions,
            batch_cpu_cores=offered.get("batch_cpu", 0.0) / MILLI_PER_CORE,
            mid_cpu_cores=offered.get("mid_cpu", 0.0) / MILLI_PER_CORE,
            batch_memory_gib=offered.get("batch_memory", 0.0) / BYTES_PER_GIB,
            mid_memory_gib=offered.get("mid_memory", 0.0) / BYTES_PER_GIB,
            batch_cpu_allocated_cores=(allocated.batch_cpu if allocated else 0) / MILLI_PER_CORE,
            batch_memory_allocated_gib=(allocated.batch_memory if allocated else 0) / BYTES_PER_GIB,
            pods_unschedulable=sum(pods.values()), unschedulable_reasons=pods,
            gpu_allocated=gpu_alloc, gpu_fragmented=gpu_frag,
            gpu_held_agent=(stats.get("gpu_held_milli", 0.0) / self.gpus.total_milli
                            if self.gpus is not None and self.gpus.total_milli else 0.0),
            **{k: stats.get(k, -1.0) for k in HARM_KEYS},
        ))
        self.jobs.sample(t)
        self.ceiling.sample()
        for cat, n in by_category(pods).items():
            self.unschedulable_ticks[cat] = self.unschedulable_ticks.get(cat, 0.0) + n

    # ------------------------------------------------------------------ results

    def double_bound(self) -> list[str]:
        """Pods bound more often than released + 1 (a pod may only be re-bound after it failed/was evicted).

        Counting makes the check independent of the order in which bindings and statuses arrive.
        """
        return sorted(uid for uid, n in self.bind_events.items() if n > self.releases.get(uid, 0) + 1)

    def unaccounted(self) -> list[str]:
        """Submitted pods neither bound, nor reported unschedulable with a reason, nor rejected."""
        return sorted(uid for uid in self.submitted_at
                      if uid not in self.bind_events and not self.unschedulable.get(uid)
                      and uid not in self.rejected)

    def pending(self) -> list[str]:
        """Pods submitted but never bound (or evicted and not bound again) at the end."""
        return [uid for uid in self.submitted_at
                if uid not in self.bound_node and self.phase.get(uid) not in ("Succeeded",)]

    def unadmitted_workloads(self) -> list[str]:
        """Workloads published with no pod admitted and not rejected by the end (admission never answered)."""
        owners = set(self.owner_of.values())
        return sorted(uid for uid in self.workload_at
                      if uid not in owners and uid not in self.jobs.workloads_rejected)

    def unschedulable_breakdown(self) -> UnschedulableBreakdown:
        """The pods unschedulable now (their last attempt failed, not bound since) grouped by reason."""
        return UnschedulableBreakdown.of(self.unschedulable, self.bound_node)

    def offered(self) -> dict[str, float]:
        """Means over the run's ticks of the batch/mid resources offered: ``batch_cpu_cores``,
        ``mid_cpu_cores``, ``batch_memory_gib``, ``mid_memory_gib`` (0 without ticks)."""
        n = len(self.series)
        fields = ("batch_cpu_cores", "mid_cpu_cores", "batch_memory_gib", "mid_memory_gib")
        return {f: sum(getattr(s, f) for s in self.series) / n if n else 0.0 for f in fields}

    def ceilings(self, cpu_util_avg: float | None = None, mem_util_avg: float | None = None) -> dict[str, Any]:
        """The ceiling figures of :func:`colo.sim.ceiling.ceiling_summary` for this run's utilization (the means
        over its ticks unless given)."""
        cpu = cpu_util_avg if cpu_util_avg is not None else (
            float(np.mean(self.cpu_util_ticks)) if self.cpu_util_ticks else 0.0)
        mem = mem_util_avg if mem_util_avg is not None else (
            float(np.mean(self.mem_util_ticks)) if self.mem_util_ticks else 0.0)
        return ceiling_summary(self.ceiling, cpu, mem, self.unschedulable_ticks, self.batch_cpu_per_memory)

    def inflation(self) -> dict[str, float]:
        """``ls_p99_inflation_avg_pct``: mean over ticks of the per-tick mean over LS pods of the modelled p99
        inflation; ``ls_p99_inflation_max_pct``: the largest per-tick max (percent; −1 when no tick had it)."""
        means = [s.ls_p99_inflation_mean_pct for s in self.series if s.ls_p99_inflation_mean_pct >= 0]
        maxes = [s.ls_p99_inflation_max_pct for s in self.series if s.ls_p99_inflation_max_pct >= 0]
        return {"ls_p99_inflation_avg_pct": float(np.mean(means)) if means else -1.0,
                "ls_p99_inflation_max_pct": max(maxes) if maxes else -1.0}

    def summary(self) -> dict[str, float]:
        """The metrics of :data:`METRIC_NAMES` (fractions 0–1, counts, milliseconds, seconds, cores)."""
        slowdowns = [
            (done - self.submitted_at[uid]) / self.batch_duration_s[uid]
            for uid, done in self.completed_at.items()
            if uid in self.batch_duration_s and self.batch_duration_s[uid] > 0 and uid in self.submitted_at
        ]
        lat = np.array(self.attempt_ms) if self.attempt_ms else np.zeros(1)
        unsched = [uid for uid in self.unschedulable if uid not in self.bound_node]
        offered = self.offered()
        cpu_avg = float(np.mean(self.cpu_util_ticks)) if self.cpu_util_ticks else 0.0
        mem_avg = float(np.mean(self.mem_util_ticks)) if self.mem_util_ticks else 0.0
        ceiling = self.ceilings(cpu_avg, mem_avg)
        return {
            "cpu_util_avg": cpu_avg,
            "mem_util_avg": mem_avg,
            "ls_cpu_satisfaction": self.ls_served / self.ls_demand if self.ls_demand else 1.0,
            **self.inflation(),
            "batch_tasks_completed": float(sum(1 for u in self.completed_at if u in self.batch_duration_s)),
            "batch_slowdown_avg": float(np.mean(slowdowns)) if slowdowns else 0.0,
            "be_evictions": float(self.evictions),
            "be_oom_kills": float(self.oom_kills),
            "be_suppress_events": float(self.suppress_events),
            "migrations": float(sum(1 for p in self.migration_phase.values() if p == "Succeeded")),
            "migrations_failed": float(sum(1 for p in self.migration_phase.values() if p == "Failed")),
            "migrations_aborted": float(sum(1 for p in self.migration_phase.values() if p == "Aborted")),
            "evict_rebind_cycles": float(self.loops.count),
            "sched_latency_p50_ms": float(np.percentile(lat, 50)),
            "sched_latency_p99_ms": float(np.percentile(lat, 99)),
            "pods_bound": float(len(self.bind_events)),
            "pods_unschedulable": float(len(unsched)),
            "pods_pending": float(len(self.pending())),
            "batch_mid_cpu_offered_cores": offered["batch_cpu_cores"] + offered["mid_cpu_cores"],
            **self.jobs.summary(),
            "workloads_unadmitted": float(len(self.unadmitted_workloads())),
            **{k: ceiling[k] for k in ("cpu_ceiling_avg", "mem_ceiling_avg", "cpu_ceiling_share", "mem_ceiling_share")},
            "gpu_alloc_avg": float(np.mean([s.gpu_allocated for s in self.series])) if self.series else 0.0,
            "gpu_frag_avg": float(np.mean([s.gpu_fragmented for s in self.series])) if self.series else 0.0,
            "gpu_pods_bound": float(len(self.gpus.gpu_pods_bound)) if self.gpus is not None else 0.0,
            "wall_s": self.wall_s,
        }
