"""LoadAware's arguments (Koordinator ``LoadAwareSchedulingArgs``) and their defaults from the settings."""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from colo_scheduler.settings import SchedulerSettings

AGGREGATION_TYPES = ("avg", "p50", "p90", "p95", "p99")
"""Statistics a NodeMetric aggregates (REFERENCE.md §2)."""

LOAD_RESOURCES = ("cpu", "memory")
"""Resources LoadAware measures, in column order."""


def _cpu_memory() -> dict[str, int]:
    return {"cpu": 1, "memory": 1}


def _map_problems(values: Mapping[str, int], where: str, lo: int, hi: int | None) -> list[str]:
    errors: list[str] = []
    for k, v in values.items():
        if k not in LOAD_RESOURCES:
            errors.append(f"{where}: unknown resource {k!r}; known: cpu, memory")
        if v < lo or (hi is not None and v > hi):
            errors.append(f"{where}: {k} must be within {lo}..{hi if hi is not None else '∞'}, got {v}")
    return errors


class AggregatedArgs(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Koordinator LoadAwareSchedulingAggregatedArgs: percentile thresholds over the NodeMetric's
    aggregated usage. The filter uses them when ``usage_thresholds`` and ``usage_aggregation_type``
    are set; the score uses ``score_aggregation_type`` when set. Durations in seconds, 0 = the
    longest window the node reports."""

    usage_thresholds: dict[str, int] = {}
    usage_aggregation_type: str = ""
    usage_aggregated_duration_s: int = 0
    score_aggregation_type: str = ""
    score_aggregated_duration_s: int = 0

    def problems(self) -> list[str]:
        """Every problem (thresholds 0..100 of cpu/memory, known statistics, durations ≥ 0)."""
        errors = _map_problems(self.usage_thresholds, "aggregated.usage_thresholds", 0, 100)
        for name in ("usage_aggregation_type", "score_aggregation_type"):
            value = getattr(self, name)
            if value and value not in AGGREGATION_TYPES:
                errors.append(f"aggregated.{name}: unknown statistic {value!r}; known: {', '.join(AGGREGATION_TYPES)}")
        if any(self.usage_thresholds.values()) and not self.usage_aggregation_type:
            errors.append("aggregated.usage_thresholds need aggregated.usage_aggregation_type")
        for name in ("usage_aggregated_duration_s", "score_aggregated_duration_s"):
            if getattr(self, name) < 0:
                errors.append(f"aggregated.{name} must be >= 0")
        return errors

    @property
    def filter_active(self) -> bool:
        """The filter uses aggregated thresholds (Koordinator filterWithAggregation)."""
        return bool(any(self.usage_thresholds.values()) and self.usage_aggregation_type)


class LoadAwareArgs(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Arguments of LoadAware (Koordinator LoadAwareSchedulingArgs). Thresholds are percent of
    allocatable per resource (``cpu``, ``memory``; 0 or absent = none), weights ≥ 0 with a
    positive sum, scaling factors percent. A map given in a profile replaces the default map
    whole. Defaults come from :class:`SchedulerSettings` (:func:`default_args`)."""

    filter_expired_node_metrics: bool = True
    node_metric_expiration_seconds: float = 180.0
    resource_weights: dict[str, int] = msgspec.field(default_factory=_cpu_memory)
    usage_thresholds: dict[str, int] = msgspec.field(default_factory=lambda: {"cpu": 65, "memory": 95})
    prod_usage_thresholds: dict[str, int] = {}
    score_according_prod_usage: bool = False
    estimated_scaling_factors: dict[str, int] = msgspec.field(default_factory=lambda: {"cpu": 85, "memory": 70})
    aggregated: AggregatedArgs = msgspec.field(default_factory=AggregatedArgs)
    follow_be_budget: bool = True
    """BE pods' CPU threshold (plain or aggregated) is raised to the node's SLO-driven BE budget threshold
    (``NodeMetric.be_budget.threshold_percent``, floored) where that is higher: the node agent lets BE work
    run up to it, so rejecting BE pods below it would cap CPU under what the budget allows. A Colo extension,
    not in Koordinator; nodes without a budget keep the plain thresholds."""

    def problems(self) -> list[str]:
        """Every problem of the arguments."""
        errors = _map_problems(self.usage_thresholds, "usage_thresholds", 0, 100)
        errors += _map_problems(self.prod_usage_thresholds, "prod_usage_thresholds", 0, 100)
        errors += _map_problems(self.resource_weights, "resource_weights", 0, None)
        errors += _map_problems(self.estimated_scaling_factors, "estimated_scaling_factors", 0, None)
        if sum(self.resource_weights.get(r, 0) for r in LOAD_RESOURCES) <= 0:
            errors.append("resource_weights: the weights of cpu and memory must sum to > 0")
        if not self.node_metric_expiration_seconds > 0:
            errors.append("node_metric_expiration_seconds must be > 0")
        return errors + self.aggregated.problems()


def default_args(settings: SchedulerSettings) -> LoadAwareArgs:
    """The arguments the settings imply (thresholds, weights, factors, expiry), so that existing
    ``COLO_SCHEDULER_*`` configuration keeps working."""
    return LoadAwareArgs(
        filter_expired_node_metrics=settings.filter_expired_metrics,
        node_metric_expiration_seconds=settings.metric_expiry_s,
        resource_weights={"cpu": settings.load_aware_cpu_weight, "memory": settings.load_aware_memory_weight},
        usage_thresholds={"cpu": settings.cpu_threshold_percent, "memory": settings.memory_threshold_percent},
        estimated_scaling_factors={"cpu": settings.cpu_estimation_factor_percent,
                                   "memory": settings.memory_estimation_factor_percent},
    )
