"""Formatting shared by the demo report's terminal table, its page and its headline."""

from __future__ import annotations

from typing import Any

from colo.sim.metrics import HIGHER_IS_BETTER, METRIC_NAMES

METRIC_NOTES: dict[str, str] = {
    "be_evictions": "BE memory eviction (node memory ≥ 70 %) runs in both; baseline may pack BE by native requests past it",
    "be_suppress_events": "follow LS usage only (same trace in both runs): the BE cpuset is resized with or without BE",
    "pods_pending": "pods_unschedulable + pods not yet (re)tried or rejected; equal once every waiting pod had a try",
    "batch_mid_cpu_offered_cores": "batch + mid cores offered; both come from the same unused capacity",
    "gang_wait_p50_s": "first member admitted → min_member bound, virtual s; gang rows are 0 when tasks enter as bare pods",
    "preemptions": "scheduler evictions for priority (reason 'Preempted by …'); quota_reclaims: those naming the quota",
}
"""One line for each metric whose value reads wrong without it, printed under the table and on the page;
docs/scenario.md "Reading the table" gives the whole argument with its sources (REFERENCE.md §3, §5)."""

QUOTA_COLUMNS: tuple[tuple[str, str], ...] = (
    ("min_cores", "min cores"), ("used_avg_cores", "used avg"), ("used_max_cores", "used max"),
    ("runtime_avg_cores", "runtime avg"), ("min_gib", "min GiB"), ("used_avg_gib", "used avg GiB"),
    ("used_max_gib", "used max GiB"), ("runtime_avg_gib", "runtime avg GiB"), ("borrowed_ticks", "ticks > min"),
)
"""The per-team quota table's columns: (key of :meth:`JobMetrics.quota_table`, heading)."""


GPU_METRICS: tuple[str, ...] = ("gpu_alloc_avg", "gpu_frag_avg", "gpu_pods_bound")
"""The table rows that only a scenario with GPU pods fills (:mod:`colo.sim.gpu_metrics`)."""


def table_metrics(summary: dict[str, Any]) -> list[str]:
    """The metric rows of the report's table (terminal and page), in :data:`METRIC_NAMES` order: every metric,
    but the :data:`GPU_METRICS` only when the scenario has GPU pods (``scenario.gpu_pods``) or a run has a GPU
    figure other than 0. Without GPU pods they are 0 in every run and say nothing, as the GPU charts and headline
    sentences left out then (docs/scenario.md "GPU scenario"); ``summary.json`` keeps them."""
    runs: dict[str, dict[str, float]] = summary.get("runs") or {}
    gpu = bool((summary.get("scenario") or {}).get("gpu_pods")) or any(
        r.get(m, 0.0) != 0 for r in runs.values() for m in GPU_METRICS)
    return [m for m in METRIC_NAMES if gpu or m not in GPU_METRICS]


def better(metric: str) -> str:
    """``↑ higher`` or ``↓ lower``: which way ``metric`` is better (:data:`HIGHER_IS_BETTER`)."""
    return "↑ higher" if HIGHER_IS_BETTER[metric] else "↓ lower"


def ratio(colo: float, baseline: float) -> float | None:
    """colo / baseline, or None when the baseline is 0 or either is negative (−1: not measured)."""
    return colo / baseline if baseline and baseline > 0 and colo >= 0 else None


def fmt(name: str, value: float) -> str:
    """A metric's value as the table prints it: fractions (``_avg``, ``_share``, satisfaction) as percent (``26.0%``), milliseconds with 2
    decimals, cores with 1, percents (``_pct``) with 1 and ``–`` when negative (not modelled), counts and seconds
    whole."""
    if name.endswith("_pct"):
        return f"{value:.1f}%" if value >= 0 else "–"
    if name.endswith(("_avg", "satisfaction", "_share")) and "slowdown" not in name:
        return f"{value:.1%}"
    if name.endswith("_ms"):
        return f"{value:.2f}"
    if name.endswith("_cores"):
        return f"{value:.1f}"
    if name == "wall_s" or name == "batch_slowdown_avg":
        return f"{value:.2f}"
    return f"{value:.0f}"


def ceiling_line(metrics: dict[str, float], ceiling: dict[str, Any]) -> str:
    """One run's ceilings in words: ``CPU 37.9% of a 60.1% ceiling (63.1%), memory 47.6% of 62.0% (76.8%);
    binds: memory (1,432 pod-ticks unschedulable for memory, 12 for cpu)`` (docs/scenario.md "Utilization
    ceilings"); the BE budget's mean threshold is added when the run had one."""
    ticks = ceiling.get("unschedulable_pod_ticks") or {}
    text = (f"CPU {fmt('cpu_util_avg', metrics['cpu_util_avg'])} of a "
            f"{fmt('cpu_ceiling_avg', ceiling['cpu_ceiling_avg'])} ceiling "
            f"({fmt('cpu_ceiling_share', ceiling['cpu_ceiling_share'])}), memory "
            f"{fmt('mem_util_avg', metrics['mem_util_avg'])} of {fmt('mem_ceiling_avg', ceiling['mem_ceiling_avg'])} "
            f"({fmt('mem_ceiling_share', ceiling['mem_ceiling_share'])}); binds: {ceiling['binds']} "
            f"({ticks.get('memory', 0):,.0f} pod-ticks unschedulable for memory, {ticks.get('cpu', 0):,.0f} for cpu)")
    if ceiling.get("cpu_if_memory_full", -1.0) >= 0:
        text += (f"; the batch mix at the memory ceiling would bring CPU to "
                 f"{fmt('cpu_util_avg', ceiling['cpu_if_memory_full'])}")
    if ceiling.get("be_budget_threshold_avg", -1.0) >= 0:
        text += f"; BE budget threshold {ceiling['be_budget_threshold_avg']:.1f}% on average"
    return text
