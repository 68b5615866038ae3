"""Scheduler settings (``COLO_SCHEDULER_*`` environment variables or YAML).

Every default cites its source; units are in the field names or docstrings.
"""

from __future__ import annotations

from typing import Any

import msgspec

from colo.settings import SettingsError


class ProfileSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The scheduling profile (Kubernetes KubeSchedulerProfile): plugins per extension point, score
    weights and per-plugin arguments. A field left None keeps the default profile's choice
    (docs/scheduler.md "Default profile"); ``plugin_args`` maps a plugin name to its arguments,
    checked against the plugin's typed argument struct at start (every problem listed).

    Example (YAML under ``profile:``)::

        filter: [NodeSelector, TaintToleration, NodeResourcesFit, LoadAware]
        score: {LoadAware: 1, NodeResourcesFit: 1}
        plugin_args:
          NodeResourcesFit: {scoring_strategy: {type: MostAllocated}}
          LoadAware: {usage_thresholds: {cpu: 70, memory: 90}}
    """

    queue_sort: str | None = None
    pre_filter: list[str] | None = None
    filter: list[str] | None = None
    post_filter: list[str] | None = None
    pre_score: list[str] | None = None
    score: dict[str, int] | None = None
    reserve: list[str] | None = None
    permit: list[str] | None = None
    pre_bind: list[str] | None = None
    bind: str | None = None
    plugin_args: dict[str, Any] = {}
    """Plugin name → its arguments (a mapping; anything else is reported by the plugin's check, with
    the other plugins' problems)."""
    percentage_of_nodes_to_score: int = 100
    """Kubernetes percentageOfNodesToScore (1..100); 100 = consider every node."""
    min_feasible_nodes_to_find: int = 100
    """Kubernetes minFeasibleNodesToFind: sampling never looks for fewer feasible nodes."""


class SchedulerSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Typed settings of the scheduler service: plain data, checked field by field.

    Construction raises :class:`colo.settings.SettingsError` (a ValueError) listing every
    constraint violation of :meth:`problems`. The profile's plugins and their arguments are
    checked against the plugin registry by :class:`colo_scheduler.profiles.ValidatedSchedulerSettings`
    (what the service loads, so that they are listed with these) and whenever a
    :class:`colo_scheduler.core.Scheduler` builds the profile.
    """

    tick_interval_s: float = 1.0
    """Seconds between scheduling cycles under the wall clock."""

    cpu_threshold_percent: int = 65
    """LoadAware filter: reject a node whose estimated CPU usage exceeds this percent of
    allocatable (0 = no CPU threshold). REFERENCE.md §4."""

    memory_threshold_percent: int = 95
    """LoadAware filter threshold for memory, percent of allocatable (0 = none). REFERENCE.md §4."""

    cpu_estimation_factor_percent: int = 85
    """Estimate of a pod's CPU = max(limit, request) × factor / 100. REFERENCE.md §4."""

    memory_estimation_factor_percent: int = 70
    """Estimate of a pod's memory = max(limit, request) × factor / 100. REFERENCE.md §4."""

    default_cpu_estimate_milli: int = 250
    """CPU estimate of a pod without CPU requests or limits, milli-cores. REFERENCE.md §4."""

    default_memory_estimate_bytes: int = 200 * 1024 * 1024
    """Memory estimate of a pod without memory requests or limits, bytes (200 MiB). REFERENCE.md §4."""

    metric_expiry_s: float = 180.0
    """A NodeMetric at least this old (seconds) is expired. REFERENCE.md §2."""

    filter_expired_metrics: bool = True
    """Reject nodes whose metric expired (True) or let them pass with load score 0. REFERENCE.md §4."""

    load_aware_weight: int = 1
    """Weight of the LoadAware score (0–100 per node) in the total."""

    least_allocated_weight: int = 1
    """Weight of the NodeResourcesLeastAllocated score (0–100 per node) in the total."""

    batch_balanced_weight: int = 1
    """Weight of the BatchResourcesBalancedAllocation score (batch pods: balanced batch-cpu / batch-memory,
    docs/scheduler.md); 0 leaves the plugin out of the default profile."""

    load_aware_cpu_weight: int = 1
    """Weight of CPU in the LoadAware weighted mean. REFERENCE.md §4 (1/1)."""

    load_aware_memory_weight: int = 1
    """Weight of memory in the LoadAware weighted mean. REFERENCE.md §4 (1/1)."""

    backoff_initial_s: float = 1.0
    """Backoff of a pod after its first failed attempt, clock seconds; doubles per attempt
    (Kubernetes podInitialBackoffSeconds)."""

    backoff_max_s: float = 10.0
    """Cap of the per-pod backoff, clock seconds (Kubernetes podMaxBackoffSeconds)."""

    unschedulable_retry_s: float = 300.0
    """An unschedulable pod is retried at the latest after this many clock seconds, even
    without a cluster event that could help: the safety net behind the queueing hints, which
    wake a pod as soon as a changed node (release, NodeResource, metric, registration) would
    pass its filters. Default = Kubernetes podMaxInUnschedulablePodsDuration (5 min)."""

    unschedulable_event_interval_s: float = 600.0
    """A pod that stays unschedulable for the same reasons is reported again (PodUnschedulable)
    only after this many clock seconds; a changed verdict is reported at once. Like the
    Kubernetes event recorder, which folds repeats of an identical event into one."""

    resync_interval_s: float = 30.0
    """Clock seconds between reloads of every node's allocation from the store (other
    scheduler replicas bind too)."""

    store_epoch_check_s: float = 2.0
    """Clock seconds between reads of the store's data epoch (Redis replication ID): a change (a failover or
    restart that may have lost writes) re-queues the pods the store lost (:mod:`colo_scheduler.epoch`)."""

    seed: int = 0
    """Seed of the random generator that breaks score ties."""

    max_pods_per_cycle: int = 2000
    """At most this many pods are taken from the active queue per scheduling cycle."""

    prompt_cycles: bool = True
    """Under the wall clock, run a cycle as soon as pods are admitted (after ``batch_window_s``)
    instead of waiting for the next tick; the timed tick keeps running (backoff, retries,
    resync). Never under the simulator's virtual clock, where ticks alone drive cycles so that
    runs are reproducible."""

    batch_window_s: float = 0.002
    """Seconds a prompt cycle waits after the first admission that woke it, so that pods
    arriving together are scheduled and bound in one cycle (one pipelined bind, one batch of
    PodBound events). Like the Kubernetes scheduler's batching of binds, on a much shorter
    scale: 2 ms is small against the 50 ms submit→bound target and amortises the bind and
    publish round trips over every pod of the window."""

    replicas: int = 1
    """Number of parallel scheduler replicas (shards). Each schedules only the pods whose
    ``crc32(uid) mod replicas`` equals its ``replica_index``; all bind through the store's
    atomic bind script (DESIGN.md §5), which never over-commits a node."""

    replica_index: int = 0
    """This replica's shard, 0..replicas−1."""

    leader_election: bool = False
    """Single-active mode: several replicas of a shard keep warm state, only the holder of
    the Redis lease schedules and binds (fenced). Needs ``COLO_INSTANCE`` (a stable name per
    replica, which also names its consumers)."""

    lease_duration_s: float = 6.0
    """Lease TTL in Redis, seconds. Kubernetes leader election defaults to 15 s (leaseDuration)
    with renewDeadline 10 s and retryPeriod 2 s; these are scaled down (6/4/1) so that a follower
    takes over within duration + retry period = 7 s of a leader's crash, under the 10 s goal."""

    lease_renew_deadline_s: float = 4.0
    """The leader stops scheduling when it has not renewed the lease for this long, seconds
    (Kubernetes renewDeadline; must be < lease_duration_s)."""

    lease_retry_period_s: float = 1.0
    """Seconds between acquire attempts of a follower and renewals of the leader (Kubernetes
    retryPeriod; must be < lease_renew_deadline_s)."""

    heap_freeze_interval_s: float = 1.0
    """Every this many seconds (between cycles) the objects alive are moved out of the garbage
    collector's reach (``gc.freeze``), so that its collections never walk the whole heap of bound
    pods: full collections over ~1M objects paused the scheduler 100–400 ms every few seconds
    (colo_scheduler/heap.py). 0 = leave the collector alone."""

    heap_full_collect_interval_s: float = 3600.0
    """Seconds between full collections of the frozen heap (unfreeze, collect, freeze: one pause
    of a few hundred ms), which free cyclic garbage that was still alive when frozen. 0 = never."""

    decision_records: int = 10000
    """Keep the decision record (filters' rejected nodes, scores of the chosen node and the
    runner-up) of the last this many pods for ``GET /debug/pods/{uid}/decision``; 0 = none."""

    decision_detail: str = "summary"
    """What the record of a placed pod holds besides the scores: ``"summary"`` which filter
    rejected each node (a bit per node and filter, a few microseconds per pod); ``"nodes"``
    also each rejected node's reason (a pass per rejecting filter: tens of microseconds per pod
    on 5,000 nodes, bench/scheduler_inprocess.py). Records of unschedulable pods always carry the
    reason counts per filter; dry runs (``?live=1``) always give per-node reasons."""

    profile: ProfileSettings = msgspec.field(default_factory=ProfileSettings)
    """Plugins, weights and plugin arguments; validated when the scheduler starts (exit 2 listing
    every problem: :mod:`colo_scheduler.profiles`)."""

    gc_between_cycles: bool = True
    """Pause Python's cyclic garbage collector during a scheduling cycle (it runs between cycles),
    so that no collection pause lands inside a pod's decision."""

    def __post_init__(self) -> None:
        problems = self.problems()
        if problems:
            raise SettingsError(problems, "scheduler settings")

    def problems(self) -> list[str]:
        """Every constraint violation (empty when valid)."""
        errors: list[str] = []
        for name in ("cpu_threshold_percent", "memory_threshold_percent"):
            if not 0 <= getattr(self, name) <= 100:
                errors.append(f"{name} must be within 0..100")
        for name in ("cpu_estimation_factor_percent", "memory_estimation_factor_percent",
                     "default_cpu_estimate_milli", "default_memory_estimate_bytes",
                     "load_aware_weight", "least_allocated_weight", "batch_balanced_weight",
                     "load_aware_cpu_weight", "load_aware_memory_weight"):
            if getattr(self, name) < 0:
                errors.append(f"{name} must be >= 0")
        if self.load_aware_cpu_weight + self.load_aware_memory_weight <= 0:
            errors.append("load_aware_cpu_weight + load_aware_memory_weight must be > 0")
        for name in ("tick_interval_s", "metric_expiry_s", "backoff_initial_s", "backoff_max_s",
                     "unschedulable_retry_s", "resync_interval_s", "unschedulable_event_interval_s",
                     "store_epoch_check_s"):
            if getattr(self, name) <= 0:
                errors.append(f"{name} must be > 0")
        if self.backoff_max_s < self.backoff_initial_s:
            errors.append("backoff_max_s must be >= backoff_initial_s")
        if self.decision_records < 0:
            errors.append("decision_records must be >= 0")
        if self.decision_detail not in ("nodes", "summary"):
            errors.append("decision_detail must be 'nodes' or 'summary'")
        if self.max_pods_per_cycle <= 0:
            errors.append("max_pods_per_cycle must be > 0")
        if not 0 <= self.batch_window_s <= 1:
            errors.append("batch_window_s must be within 0..1")
        if self.replicas < 1:
            errors.append("replicas must be >= 1")
        elif not 0 <= self.replica_index < self.replicas:
            errors.append("replica_index must be within 0..replicas-1")
        if not self.lease_duration_s > self.lease_renew_deadline_s > self.lease_retry_period_s > 0:
            errors.append("lease timing needs lease_duration_s > lease_renew_deadline_s > lease_retry_period_s > 0")
        for name in ("heap_freeze_interval_s", "heap_full_collect_interval_s"):
            if getattr(self, name) < 0:
                errors.append(f"{name} must be >= 0")
        return errors
