"""Descheduler settings (environment prefix ``COLO_DESCHEDULER``), defaults from REFERENCE.md §6."""

from __future__ import annotations

from typing import Annotated

import msgspec

ENV_PREFIX = "COLO_DESCHEDULER"
"""Environment prefix of the descheduler's own settings."""

Percent = Annotated[int, msgspec.Meta(ge=0, le=100)]


class Thresholds(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Usage thresholds in percent of node allocatable, per resource."""

    cpu: Percent = 0
    """CPU threshold, percent."""
    memory: Percent = 0
    """Memory threshold, percent."""
    pods: Percent | None = None
    """Pod-count threshold, percent of the node's ``allocatable.pods``; None = pods not considered (the
    reference's default: a resource left out of the thresholds does not count)."""


class LowThresholds(Thresholds, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Low thresholds; defaults from the reference's shipped example (REFERENCE.md §6)."""

    cpu: Percent = 45
    """CPU low threshold, percent."""
    memory: Percent = 55
    """Memory low threshold, percent."""


class HighThresholds(Thresholds, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """High thresholds; defaults from the reference's shipped example (REFERENCE.md §6)."""

    cpu: Percent = 75
    """CPU high threshold, percent."""
    memory: Percent = 80
    """Memory high threshold, percent."""


class WindowLimit(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """At most ``max_migrations`` migrations within ``window_s`` (a migration counts while it runs and for
    ``window_s`` after it finished; colo_descheduler/limits.py)."""

    max_migrations: Annotated[int, msgspec.Meta(ge=0)] = 0
    """Migrations allowed in the window; 0 = no limit."""
    window_s: Annotated[float, msgspec.Meta(gt=0)] = 300.0
    """Window length, seconds."""


class DeschedulerSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Settings of the descheduler (LowNodeLoad); defaults are the reference's shipped example.

    The reference ships LowNodeLoad disabled; Colo runs it by default (``enabled``)
    because the descheduler has no other job.
    """

    enabled: bool = True
    """Run LowNodeLoad rounds at all; when false tick() only keeps state fresh."""
    low_thresholds: LowThresholds = LowThresholds()
    """A node is *low* when every resource is at or below these percentages."""
    high_thresholds: HighThresholds = HighThresholds()
    """A node is *high* when any resource is above these percentages."""
    interval_s: Annotated[float, msgspec.Meta(ge=0)] = 10.0
    """Minimum time between two rounds, seconds (0 = every tick, as in the demo)."""
    consecutive_high_rounds: Annotated[int, msgspec.Meta(ge=1)] = 5
    """N: a high node becomes a source at its N-th consecutive high round (count >= N; N = 1 = the first
    round it is high), the reference's ``consecutiveAbnormalities`` (default 5)."""
    metric_expiry_s: Annotated[float, msgspec.Meta(gt=0)] = 180.0
    """NodeMetrics older than this are stale and ignored (REFERENCE.md §2)."""
    max_migrating_per_node: Annotated[int, msgspec.Meta(ge=0)] = 2
    """At most this many running migrations off one node."""
    eviction_rate_per_s: Annotated[float, msgspec.Meta(gt=0)] = 10.0
    """Token-bucket refill rate of evictions, per second of the service clock."""
    eviction_burst: Annotated[int, msgspec.Meta(ge=1)] = 10
    """Token-bucket size (evictions that may go out at once)."""
    migration_ttl_s: Annotated[float, msgspec.Meta(gt=0)] = 300.0
    """A migration whose end was never reported stops counting after this long (job TTL 5 min)."""
    tick_interval_s: Annotated[float, msgspec.Meta(gt=0)] = 10.0
    """Period of tick() under the wall clock, seconds."""
    booking_ttl_s: Annotated[float, msgspec.Meta(gt=0)] = 900.0
    """Backstop of a migration's booking (usage taken off its source, added to its target), seconds after the
    eviction: normally it ends when the metrics show the move (colo_descheduler/booking.py), which takes one
    300 s window plus up to one 60 s report after the pod left or the replacement started; 900 s leaves room
    for a slow rebind (our choice)."""
    node_window_limit: WindowLimit = WindowLimit(max_migrations=2, window_s=300.0)
    """Migrations off one source node per window: 2 per 5 min (the reference's 2 migrating pods per node, held
    over its 5-minute limiter duration)."""
    namespace_window_limit: WindowLimit = WindowLimit()
    """Migrations of one namespace per window; off by default (the reference has no namespace default)."""
    workload_window_s: Annotated[float, msgspec.Meta(ge=0)] = 300.0
    """Window of the per-workload limit: at most max unavailable (REFERENCE.md §6: > 10 replicas 10 %, 4–10 2,
    < 4 1) migrations of one workload within it; 5 min as the reference's workload object limiter; 0 = off."""
    global_window_limit: WindowLimit = WindowLimit(window_s=60.0)
    """Migrations in the whole cluster per window; off by default (the eviction rate limit already caps the
    cluster)."""
    evict_local_storage_pods: bool = False
    """Evict pods with local storage (``PodSpec.local_storage``: emptyDir / hostPath volumes), whose data is
    lost; false as the reference's ``evictLocalStoragePods``. Mirror and static pods are never evicted."""

    migration_jobs: bool = True
    """Evict through PodMigrationJobs (reserve on the target in the store, evict, wait for the replacement;
    docs/descheduler.md "Migration jobs"); false sends a round's evictions at once, with no reservation."""
    migration_pending_timeout_s: Annotated[float, msgspec.Meta(gt=0)] = 60.0
    """A job still Pending (not arbitrated, or its reservation refused) after this long is Aborted, seconds."""
    migration_running_timeout_s: Annotated[float, msgspec.Meta(gt=0)] = 300.0
    """A Running job whose replacement is not bound on the reservation after this long Fails, seconds;
    also the reservation's TTL (the reference's job TTL, 5 min, REFERENCE.md §6)."""
    max_running_per_workload: Annotated[int, msgspec.Meta(ge=0)] = 2
    """At most this many Running jobs per workload (namespace/app); Pending jobs never count."""
    max_running_total: Annotated[int, msgspec.Meta(ge=0)] = 10
    """At most this many Running jobs in all; Pending jobs never count."""
    migration_history_s: Annotated[int, msgspec.Meta(ge=1)] = 3600
    """A finished job (and its reservation) stays readable in the store this long (``colo get migrations``)."""
    pod_window_limit: WindowLimit = WindowLimit(max_migrations=1, window_s=3600.0)
    """Migrations of one pod per window: a pod moved in the last hour is not moved again (our choice; the
    reference has no per-pod limit). Each move restarts the pod; a pod that keeps being the best cure of one
    node after another is carried along by the trace's load, not relieving anything: on the 2-hour audited run
    one batch pod went 0967 → 0129 → 0967 → 0275 → 0912 within 64 minutes. 1 per hour means at most 2 in any
    2 hours; another pod, or a later round, relieves the node (colo_descheduler/limits.py)."""
    relief_hold_s: Annotated[float, msgspec.Meta(ge=0)] = 1800.0
    """A node that lost a pod to a migration is no source again for this long after that eviction, seconds
    (it keeps its high streak, as a settling node; 0 = off). Our choice: on the 2-hour audited run a small node
    whose every pod alone is over the high threshold lost its pod 4 times in 45 minutes, each time refilled by
    the scheduler, and swung between high and low 4 times more than without the descheduler."""

    def __post_init__(self) -> None:
        """Low thresholds must not exceed high ones, and ``pods`` is set in both or in neither (a node could
        otherwise be low and high at once, or never low); raises ValueError listing every problem."""
        problems = []
        low, high = self.low_thresholds, self.high_thresholds
        for name in ("cpu", "memory"):
            if getattr(low, name) > getattr(high, name):
                problems.append(f"low_thresholds.{name} ({getattr(low, name)}) exceeds high_thresholds.{name} "
                                f"({getattr(high, name)})")
        if (low.pods is None) != (high.pods is None):
            problems.append("low_thresholds.pods and high_thresholds.pods must both be set or both be unset")
        elif low.pods is not None and high.pods is not None and low.pods > high.pods:
            problems.append(f"low_thresholds.pods ({low.pods}) exceeds high_thresholds.pods ({high.pods})")
        if problems:
            raise ValueError("; ".join(problems))
