"""The demo report: terminal table, ``summary.json`` and a self-contained ``report.html``.

The table marks for every metric whether higher or lower is better (:data:`HIGHER_IS_BETTER`), is
followed by one line per metric whose value needs reading (:data:`METRIC_NOTES`) and by the headline, one
sentence per key metric (:mod:`colo.sim.report_headline`). The page (:mod:`colo.sim.report_page`) adds why
pods stayed unschedulable, the charts over time and the scenario as tables.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any, Sequence

from rich.console import Console
from rich.table import Table

from colo.sim.metrics import HIGHER_IS_BETTER, METRIC_NAMES, RunMetrics
from colo.sim.report_format import (
    METRIC_NOTES,
    QUOTA_COLUMNS,
    better,
    ceiling_line,
    fmt,
    ratio,
    table_metrics,
)
from colo.sim.report_headline import headline, verdict
from colo.sim.report_page import render_html

__all__ = ["METRIC_NOTES", "QUOTA_COLUMNS", "better", "print_table", "quota_table", "ratio", "render_html",
           "summary_dict", "write_report"]


def summary_dict(runs: Sequence[RunMetrics], description: dict[str, object]) -> dict[str, Any]:
    """The content of ``summary.json``: scenario description, per-run metrics, which way each metric is
    better, the notes, colo/baseline ratios, the headline sentences, mean batch/mid resources offered per run,
    the pods unschedulable at the end by reason, time series, tick errors and per-service tick time."""
    metrics = {r.name: r.summary() for r in runs}
    out: dict[str, Any] = {"scenario": description, "runs": metrics,
                           "higher_is_better": {k: HIGHER_IS_BETTER[k] for k in METRIC_NAMES},
                           "notes": {k: v for k, v in METRIC_NOTES.items() if k in METRIC_NAMES}}
    if "baseline" in metrics:
        # every other run over baseline; ``ratio_colo_over_baseline`` keeps its name for colo
        out["ratios_over_baseline"] = {
            name: {k: ratio(m[k], metrics["baseline"][k]) for k in METRIC_NAMES}
            for name, m in metrics.items() if name != "baseline"}
        if "colo" in metrics:
            out["ratio_colo_over_baseline"] = out["ratios_over_baseline"]["colo"]
    out["ceilings"] = {r.name: r.ceilings() for r in runs}
    out["headline"] = headline(out)
    out["verdict"] = verdict(out)
    out["offered"] = {r.name: r.offered() for r in runs}
    out["unschedulable_reasons"] = {r.name: r.unschedulable_breakdown().table() for r in runs}
    out["quotas"] = {r.name: r.jobs.quota_table() for r in runs}
    out["scheduler_evictions"] = {r.name: dict(sorted(r.jobs.eviction_reasons.items())) for r in runs}
    out["scheduler_victims"] = {r.name: r.jobs.victim_outcomes(r.completed_at) for r in runs}
    out["gang_waits_s"] = {r.name: sorted(r.jobs.gang_waits()) for r in runs}
    out["workloads_rejected"] = {r.name: dict(list(r.jobs.workloads_rejected.items())[:20]) for r in runs}
    out["series"] = {r.name: [asdict(s) for s in r.series] for r in runs}
    out["tick_errors"] = {r.name: r.tick_errors[:50] for r in runs}
    out["tick_wall_s"] = {r.name: {k: round(v, 2) for k, v in r.tick_wall_s.items()} for r in runs}
    return out


def print_table(summary: dict[str, Any], console: Console | None = None) -> None:
    """Print the table of every run (with each run's ratio over baseline; the rows of :func:`table_metrics`) and
    one line per run of its utilization ceilings (:func:`ceiling_line`) to the terminal."""
    console = console or Console()
    runs: dict[str, dict[str, float]] = summary["runs"]
    table = Table(title=f"Colo demo: {' vs '.join(runs)} (same scenario)")
    table.add_column("metric")
    table.add_column("better")
    for name in runs:
        table.add_column(name, justify="right")
    all_ratios: dict[str, dict[str, float | None]] = summary.get("ratios_over_baseline") or {}
    for name in all_ratios:
        table.add_column(f"{name} / baseline", justify="right")
    for metric in table_metrics(summary):
        row = [metric, better(metric)] + [fmt(metric, runs[n][metric]) for n in runs]
        for ratios in all_ratios.values():
            r = ratios[metric]
            if r is None:
                row.append("–")
            else:
                good = (r >= 1) == HIGHER_IS_BETTER[metric] or r == 1
                row.append(f"[{'green' if good else 'red'}]{r:.2f}×[/]")
        table.add_row(*row)
    console.print(table)
    ceilings: dict[str, dict[str, Any]] = summary.get("ceilings") or {}
    for name, c in ceilings.items():
        console.print(f"[bold]{name}[/]: {ceiling_line(runs[name], c)}", highlight=False, soft_wrap=True)
    for metric, note in METRIC_NOTES.items():
        if metric in METRIC_NAMES:
            console.print(f"[bold]{metric}[/]: {note}", highlight=False, soft_wrap=True)
    quotas: dict[str, dict[str, dict[str, Any]]] = summary.get("quotas") or {}
    if any(quotas.values()):
        console.print(quota_table(quotas))
    if summary.get("verdict"):
        console.print(f"[bold]{summary['verdict']}[/]", highlight=False, soft_wrap=True)
    for line in summary.get("headline") or []:
        console.print(f"• {line}", highlight=False, soft_wrap=True)


def quota_table(quotas: dict[str, dict[str, dict[str, Any]]]) -> Table:
    """Per run and team: min, used (mean and max over the steps) and runtime (mean) of the quota's CPU and
    memory resource (batch-cpu/batch-memory in colo, cpu/memory in baseline), and the steps it borrowed."""
    table = Table(title="Team quotas (QuotaStatus sampled every step)")
    table.add_column("run")
    table.add_column("quota")
    table.add_column("resources")
    for _, head in QUOTA_COLUMNS:
        table.add_column(head, justify="right")
    for run, teams in quotas.items():
        for team, row in teams.items():
            table.add_row(run, team, str(row["resources"]),
                          *(f"{row[k]:.0f}" if k == "borrowed_ticks" else f"{row[k]:.1f}" for k, _ in QUOTA_COLUMNS))
    return table


def write_report(out_dir: Path, runs: Sequence[RunMetrics], description: dict[str, object],
                 console: Console | None = None) -> dict[str, Any]:
    """Write ``summary.json`` and ``report.html`` under ``out_dir``, print the table; returns the summary."""
    out_dir.mkdir(parents=True, exist_ok=True)
    summary = summary_dict(runs, description)
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    text = ("GPU nodes and their LS/BE GPU pods from alibaba-gpu-v2023 (trace times compressed), batch tasks from "
            "alibaba-v2017; see docs/scenario.md \"GPU scenario\"." if description.get("gpu_pods") else
            "Nodes from alibaba-gpu-v2023, online LS services from alibaba-gpu-v2025 with Bitbrains "
            "GWA-T-12 usage series, batch tasks from alibaba-v2017; see docs/scenario.md.")
    (out_dir / "report.html").write_text(render_html(summary, runs, text))
    print_table(summary, console)
    return summary
