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
    consecutive_high_rounds: Annotated[int, msgspec.Meta(ge=0)] = 5
    """A high node becomes a source only after MORE than this many consecutive high rounds."""
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
