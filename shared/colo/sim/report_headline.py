"""The report's headline: one sentence per key metric saying what co-location bought, from ``summary.json``.

Each sentence gives the baseline and the colo figure (formatted as the table does, :func:`fmt`), their ratio
colo / baseline and whether that is better or worse (:data:`colo.sim.metrics.HIGHER_IS_BETTER`); a further run
(``colo-adaptive``) adds its figure and its ratio over colo to each sentence and a sentence to the verdict. Nothing is
written by hand: a sentence is built from ``summary["runs"]`` and ``summary["ratio_colo_over_baseline"]``.
"""

from __future__ import annotations

from typing import Any

from colo.sim.metrics import HIGHER_IS_BETTER
from colo.sim.report_format import fmt

HEADLINE_METRICS: tuple[tuple[str, str], ...] = (
    ("cpu_util_avg", "CPU utilization (mean used / capacity)"),
    ("mem_util_avg", "Memory utilization (mean used / capacity)"),
    ("batch_tasks_completed", "Batch tasks completed"),
    ("be_evictions", "BE evictions"),
    ("ls_cpu_satisfaction", "LS CPU satisfaction (served / demanded)"),
    ("ls_p99_inflation_avg_pct", "Modelled LS p99 latency inflation (mean over LS pods)"),
)
"""(metric, what the sentence calls it), in headline order."""

JOB_HEADLINE_METRICS: tuple[tuple[str, str], ...] = (
    ("gang_wait_p50_s", "The median gang wait (first member admitted → min_member bound)"),
    ("gang_wait_p95_s", "The 95th-percentile gang wait"),
    ("preemptions", "Preemptions by high-priority jobs"),
    ("quota_reclaims", "Quota reclaims"),
)
"""The sentences added when the batch tasks enter as jobs (gangs, quotas, priorities)."""

GPU_HEADLINE_METRICS: tuple[tuple[str, str], ...] = (
    ("gpu_alloc_avg", "GPU allocation (mean share of the cluster's GPUs held by bound pods)"),
    ("gpu_frag_avg", "GPU fragmentation (mean FGD F / the cluster's GPUs)"),
    ("gpu_pods_bound", "GPU pods bound"),
)
"""The sentences added when the scenario has GPU pods (``scenario.gpu_pods``, the ``gpu`` preset)."""


WHY: dict[str, str] = {
    "be_evictions": "co-location puts more BE work on the nodes, so BE memory and CPU eviction (Koordinator's BE eviction strategies, docs/node-agent.md) "
                    "have more to evict",
    "preemptions": "by design: a high-priority job preempts lower-priority pods when no node has room, and "
                   "co-location keeps the nodes fuller",
    "quota_reclaims": "a team that borrowed idle min beyond its runtime gives it back when the lender needs it "
                      "(docs/quota.md)",
    "ls_p99_inflation_avg_pct": "co-location runs more BE work beside the LS pods, and the interference model "
                                "(docs/scenario.md) says what that load does to their tail latency",
}
"""Why a metric that counts disruptions rose with co-location: appended to its sentence when it rose."""


def verdict(summary: dict[str, Any]) -> str:
    """One line before the sentences: the ratios of CPU and memory utilization and batch tasks completed, and LS
    CPU satisfaction (``Co-location raised CPU use 1.13× and memory 1.24× and finished more batch tasks (1.14×),
    with LS CPU satisfaction unchanged at 100.0%.``), plus the colo run's modelled LS p99 inflation, against
    baseline's, when it has one (``… at 100.0% and a modelled LS p99 latency inflation of 3.1% against 0.4% in
    baseline.``); "" without both runs or any of those metrics."""
    runs: dict[str, dict[str, float]] = summary.get("runs") or {}
    ratios: dict[str, float | None] = summary.get("ratio_colo_over_baseline") or {}
    need = ("cpu_util_avg", "mem_util_avg", "batch_tasks_completed", "ls_cpu_satisfaction")
    if "baseline" not in runs or "colo" not in runs or any(m not in runs["colo"] or m not in runs["baseline"]
                                                          for m in need):
        return ""

    def times(m: str) -> str:
        r = ratios.get(m)
        return f"{r:.2f}×" if r is not None else "from 0 to " + _value(m, runs["colo"][m])

    def moved(m: str) -> str:
        return "raised" if runs["colo"][m] >= runs["baseline"][m] else "lowered"

    b, c = _value("ls_cpu_satisfaction", runs["baseline"]["ls_cpu_satisfaction"]), _value(
        "ls_cpu_satisfaction", runs["colo"]["ls_cpu_satisfaction"])
    ls = f"unchanged at {c}" if b == c else f"{'up' if runs['colo']['ls_cpu_satisfaction'] > runs['baseline']['ls_cpu_satisfaction'] else 'down'} from {b} to {c}"
    line = (f"Co-location {moved('cpu_util_avg')} CPU use {times('cpu_util_avg')} and memory "
            f"{times('mem_util_avg')} and finished {_batch_tasks(runs, ratios.get('batch_tasks_completed'))}, with "
            f"LS CPU satisfaction {ls}{_harm(runs)}.")
    others = verdict_others(summary)
    return f"{line} {others}" if others else line


def _batch_tasks(runs: dict[str, dict[str, float]], ratio: float | None) -> str:
    """``more batch tasks (1.07×)``, ``fewer batch tasks (0.80×)``, ``as many batch tasks (1.00×)``; ``(from 0 to
    12)`` when baseline finished none (``ratio`` None)."""
    m = "batch_tasks_completed"
    b, c = runs["baseline"][m], runs["colo"][m]
    how = f"{ratio:.2f}×" if ratio is not None else f"from {_value(m, b)} to {_value(m, c)}"
    return f"{'more' if c > b else 'fewer' if c < b else 'as many'} batch tasks ({how})"


def _harm(runs: dict[str, dict[str, float]]) -> str:
    """`` and a modelled LS p99 latency inflation of 22.8% against 19.0% in baseline`` (``(not modelled in
    baseline)`` when baseline has none); "" when colo has none (−1)."""
    m = "ls_p99_inflation_avg_pct"
    colo, base = runs["colo"].get(m, -1.0), runs["baseline"].get(m, -1.0)
    if colo < 0:
        return ""
    against = f"against {_value(m, base)} in baseline" if base >= 0 else "(not modelled in baseline)"
    return f" and a modelled LS p99 latency inflation of {_value(m, colo)} {against}"


def _value(metric: str, value: float) -> str:
    return fmt(metric, value) + (" s" if metric.endswith("_s") else "")


def sentence(metric: str, label: str, baseline: float, colo: float, ratio: float | None) -> str:
    """One headline sentence, e.g. ``CPU utilization … rose from 23.4% in baseline to 26.0% with co-location
    (1.11×, better).``; ``ratio`` None (baseline 0) says so instead of a ratio."""
    b, c = _value(metric, baseline), _value(metric, colo)
    if b == c:
        times = "1.00×" if ratio is not None else "baseline 0, no ratio"
        return f"{label}: {b} in baseline and {c} with co-location ({times}, the same)."
    good = (colo > baseline) == HIGHER_IS_BETTER[metric]
    verb = "rose" if colo > baseline else "fell"
    times = f"{ratio:.2f}×" if ratio is not None else "baseline 0, no ratio"
    return f"{label} {verb} from {b} in baseline to {c} with co-location ({times}, {'better' if good else 'worse'})."


def unmeasured(metric: str, label: str, baseline: float, colo: float) -> str:
    """The sentence of a metric that a run did not measure (−1, e.g. the interference inflation without a
    calibration table): ``…: – in baseline and – with co-location (no ratio: not measured in either run).``"""
    which = "either run" if baseline < 0 and colo < 0 else ("baseline" if baseline < 0 else "the colo run")
    return (f"{label}: {_value(metric, baseline)} in baseline and {_value(metric, colo)} with co-location "
            f"(no ratio: not measured in {which}).")


def jobs_on(summary: dict[str, Any]) -> bool:
    """Whether the batch tasks entered as jobs: the scenario's ``params.jobs``, else any gang in a run."""
    params = (summary.get("scenario") or {}).get("params")
    if isinstance(params, dict) and "jobs" in params:
        return bool(params["jobs"])
    return any(r.get("gangs_placed", 0) or r.get("gangs_waiting", 0) for r in summary.get("runs", {}).values())


def headline(summary: dict[str, Any]) -> list[str]:
    """The sentences for :data:`HEADLINE_METRICS` (and :data:`JOB_HEADLINE_METRICS` when :func:`jobs_on`,
    :data:`GPU_HEADLINE_METRICS` when the scenario has GPU pods), empty unless the summary has both a ``baseline`` and a ``colo`` run."""
    runs: dict[str, dict[str, float]] = summary.get("runs") or {}
    if "baseline" not in runs or "colo" not in runs:
        return []
    ratios: dict[str, float | None] = summary.get("ratio_colo_over_baseline") or {}
    metrics = (HEADLINE_METRICS + (JOB_HEADLINE_METRICS if jobs_on(summary) else ())
               + (GPU_HEADLINE_METRICS if (summary.get("scenario") or {}).get("gpu_pods") else ()))
    others = [name for name in runs if name not in ("baseline", "colo")]
    out = []
    for m, label in metrics:
        if m not in runs["baseline"] or m not in runs["colo"]:
            continue
        if min(runs["baseline"][m], runs["colo"][m]) < 0:
            out.append(unmeasured(m, label, runs["baseline"][m], runs["colo"][m]))
            continue
        text = sentence(m, label, runs["baseline"][m], runs["colo"][m], ratios.get(m))
        if m in WHY and runs["colo"][m] > runs["baseline"][m]:
            text = f"{text[:-1]}: {WHY[m]}."
        for name in others:
            if runs[name].get(m, -1.0) >= 0:  # absent or not measured (−1) in that run: no clause
                text = f"{text[:-1]}; {other_clause(m, name, runs[name][m], runs['colo'][m])}."
        out.append(text)
    return out


def other_clause(metric: str, run: str, value: float, colo: float) -> str:
    """A further run's figure for a headline sentence, against colo's: ``colo-adaptive 41.2% (1.09× colo,
    better)``; "the same as colo" when they print alike, "colo 0, no ratio" when colo's is 0."""
    v, c = _value(metric, value), _value(metric, colo)
    if v == c:
        return f"{run} {v} (the same as colo)"
    good = (value > colo) == HIGHER_IS_BETTER[metric]
    times = f"{value / colo:.2f}× colo" if colo else "colo 0, no ratio"
    return f"{run} {v} ({times}, {'better' if good else 'worse'})"


def verdict_others(summary: dict[str, Any]) -> str:
    """For each run besides baseline and colo, one sentence against colo: CPU and memory utilization, batch
    tasks completed and LS CPU satisfaction (``colo-adaptive against colo: CPU use 1.10×, memory 1.02×, batch
    tasks 1.05×, LS CPU satisfaction 99.9%, modelled LS p99 inflation 4.2%.``, the inflation where modelled); ""
    without colo or other runs."""
    runs: dict[str, dict[str, float]] = summary.get("runs") or {}
    if "colo" not in runs:
        return ""
    colo = runs["colo"]
    parts = []
    for name, r in runs.items():
        if name in ("baseline", "colo"):
            continue

        def times(m: str, r: dict[str, float] = r) -> str:
            return f"{r[m] / colo[m]:.2f}×" if colo.get(m) else "colo 0"

        inflation = r.get("ls_p99_inflation_avg_pct", -1.0)
        harm = (f", modelled LS p99 inflation {_value('ls_p99_inflation_avg_pct', inflation)}"
                if inflation >= 0 else "")
        parts.append(f"{name} against colo: CPU use {times('cpu_util_avg')}, memory {times('mem_util_avg')}, "
                     f"batch tasks {times('batch_tasks_completed')}, LS CPU satisfaction "
                     f"{_value('ls_cpu_satisfaction', r['ls_cpu_satisfaction'])}{harm}.")
    return " ".join(parts)
