"""The demo report: terminal table, ``summary.json`` and a self-contained ``report.html``.

Charts are inline SVG written here (no plotting dependency): utilization over time, LS
CPU satisfaction, batch pods running/completed, suppress events and evictions, and the
batch and mid resources slo-manager offered (CPU cores, memory GiB), each baseline vs
colo. The page embeds the scenario description (docs/scenario.md). The table
marks for every metric whether higher or lower is better (:data:`HIGHER_IS_BETTER`) and is
followed by one line per metric whose value needs reading (:data:`METRIC_NOTES`).
"""

from __future__ import annotations

import html
import json
import math
from dataclasses import asdict
from pathlib import Path
from typing import Any, Sequence

from rich.console import Console
from rich.table import Table

from colo.sim.job_metrics import cpu_key
from colo.sim.metrics import HIGHER_IS_BETTER, METRIC_NAMES, RunMetrics

COLORS = {"baseline": "#7f7f7f", "colo": "#1f77b4"}
TEAM_COLORS = ("#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf")

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


def better(metric: str) -> str:
    """``↑ higher`` or ``↓ lower``: which way ``metric`` is better (:data:`HIGHER_IS_BETTER`)."""
    return "↑ higher" if HIGHER_IS_BETTER[metric] else "↓ lower"


def ratio(colo: float, baseline: float) -> float | None:
    """colo / baseline, or None when the baseline is 0."""
    return colo / baseline if baseline else None


def summary_dict(runs: Sequence[RunMetrics], description: dict[str, object]) -> dict[str, Any]:
    """The content of ``summary.json``: scenario description, per-run metrics, which way each metric is
    better, the notes, colo/baseline ratios, mean batch/mid resources offered per run, time series, tick errors
    and per-service tick time."""
    metrics = {r.name: r.summary() for r in runs}
    out: dict[str, Any] = {"scenario": description, "runs": metrics,
                           "higher_is_better": {k: HIGHER_IS_BETTER[k] for k in METRIC_NAMES},
                           "notes": {k: v for k, v in METRIC_NOTES.items() if k in METRIC_NAMES}}
    if "baseline" in metrics and "colo" in metrics:
        out["ratio_colo_over_baseline"] = {
            k: ratio(metrics["colo"][k], metrics["baseline"][k]) for k in METRIC_NAMES
        }
    out["offered"] = {r.name: r.offered() for r in runs}
    out["quotas"] = {r.name: r.jobs.quota_table() for r in runs}
    out["scheduler_evictions"] = {r.name: dict(sorted(r.jobs.eviction_reasons.items())) for r in runs}
    out["scheduler_victims"] = {r.name: r.jobs.victim_outcomes(r.completed_at) for r in runs}
    out["gang_waits_s"] = {r.name: sorted(r.jobs.gang_waits()) for r in runs}
    out["workloads_rejected"] = {r.name: dict(list(r.jobs.workloads_rejected.items())[:20]) for r in runs}
    out["series"] = {r.name: [asdict(s) for s in r.series] for r in runs}
    out["tick_errors"] = {r.name: r.tick_errors[:50] for r in runs}
    out["tick_wall_s"] = {r.name: {k: round(v, 2) for k, v in r.tick_wall_s.items()} for r in runs}
    return out


def _fmt(name: str, value: float) -> str:
    if name.endswith(("_avg", "satisfaction")) and "slowdown" not in name:
        return f"{value:.1%}"
    if name.endswith("_ms"):
        return f"{value:.2f}"
    if name.endswith("_cores"):
        return f"{value:.1f}"
    if name == "wall_s" or name == "batch_slowdown_avg":
        return f"{value:.2f}"
    return f"{value:.0f}"


def print_table(summary: dict[str, Any], console: Console | None = None) -> None:
    """Print the baseline vs colo table (with the ratio) to the terminal."""
    console = console or Console()
    runs: dict[str, dict[str, float]] = summary["runs"]
    table = Table(title="Colo demo: baseline vs colo (same scenario)")
    table.add_column("metric")
    table.add_column("better")
    for name in runs:
        table.add_column(name, justify="right")
    ratios = summary.get("ratio_colo_over_baseline")
    if ratios:
        table.add_column("colo / baseline", justify="right")
    for metric in METRIC_NAMES:
        row = [metric, better(metric)] + [_fmt(metric, runs[n][metric]) for n in runs]
        if ratios:
            r = ratios[metric]
            if r is None:
                row.append("–")
            else:
                good = (r >= 1) == HIGHER_IS_BETTER[metric] or r == 1
                row.append(f"[{'green' if good else 'red'}]{r:.2f}×[/]")
        table.add_row(*row)
    console.print(table)
    for metric, note in METRIC_NOTES.items():
        if metric in METRIC_NAMES:
            console.print(f"[bold]{metric}[/]: {note}", highlight=False, soft_wrap=True)
    quotas: dict[str, dict[str, dict[str, Any]]] = summary.get("quotas") or {}
    if any(quotas.values()):
        console.print(quota_table(quotas))


QUOTA_COLUMNS: tuple[tuple[str, str], ...] = (
    ("min_cores", "min cores"), ("used_avg_cores", "used avg"), ("used_max_cores", "used max"),
    ("runtime_avg_cores", "runtime avg"), ("min_gib", "min GiB"), ("used_avg_gib", "used avg GiB"),
    ("used_max_gib", "used max GiB"), ("runtime_avg_gib", "runtime avg GiB"), ("borrowed_ticks", "ticks > min"),
)
"""The per-team quota table's columns: (key of :meth:`JobMetrics.quota_table`, heading)."""


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


def nice_step(span: float, target: int = 4) -> float:
    """A 1, 2, 2.5 or 5 × 10^k step that cuts ``span`` into about ``target`` intervals."""
    if span <= 0:
        return 1.0
    raw = span / target
    mag: float = 10 ** math.floor(math.log10(raw))
    return next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)


def _svg_chart(title: str, series: dict[str, list[tuple[float, float]]], y_label: str,
               y_max: float | None = None, width: int = 560, height: int = 220,
               styles: dict[str, tuple[str, str]] | None = None) -> str:
    """An inline SVG line chart; ``series`` maps a name (a run, or ``<run> <part>``) to (hours, value) points.

    ``styles`` gives a series' (colour, SVG dash pattern, "" = solid); by default the run's colour, solid.
    """
    pad_l, pad_r, pad_t, pad_b = 50, 10, 24, 30
    xs = [x for pts in series.values() for x, _ in pts] or [0.0, 1.0]
    ys = [y for pts in series.values() for _, y in pts] or [0.0, 1.0]
    x0, x1 = min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1
    step = nice_step(y_max if y_max is not None else max(max(ys), 1e-9) * 1.05)
    top = step * math.ceil((y_max if y_max is not None else max(max(ys), 1e-9) * 1.05) / step)
    w, h = width - pad_l - pad_r, height - pad_t - pad_b

    def px(x: float) -> float:
        return pad_l + (x - x0) / (x1 - x0) * w

    def py(y: float) -> float:
        return pad_t + h - min(max(y / top, 0.0), 1.0) * h

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'font-family="sans-serif" font-size="11">',
             f'<text x="{pad_l}" y="14" font-weight="bold">{html.escape(title)}</text>',
             f'<rect x="{pad_l}" y="{pad_t}" width="{w}" height="{h}" fill="none" stroke="#ccc"/>']
    v = 0.0
    while v <= top + step / 2:
        y = py(v)
        parts.append(f'<line x1="{pad_l}" x2="{pad_l + w}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eee"/>')
        parts.append(f'<text x="{pad_l - 4}" y="{y + 4:.1f}" text-anchor="end">{v:g}</text>')
        v = round(v + step, 10)
    x_step = nice_step(x1 - x0, target=6)
    x = math.ceil(x0 / x_step) * x_step
    while x <= x1 + 1e-9:
        parts.append(f'<text x="{px(x):.1f}" y="{pad_t + h + 12}" text-anchor="middle">{x:g}</text>')
        x = round(x + x_step, 10)
    parts.append(f'<text x="{pad_l + w / 2}" y="{height - 4}" text-anchor="middle">hours (virtual time)</text>')
    parts.append(f'<text x="12" y="{pad_t + h / 2}" transform="rotate(-90 12 {pad_t + h / 2})" '
                 f'text-anchor="middle">{html.escape(y_label)}</text>')
    legend_x = pad_l + 8
    for name, pts in series.items():
        color, dash = (styles or {}).get(name, (COLORS.get(name, "#d62728"), ""))
        dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
        if pts:
            path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
            parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.6"{dash_attr} points="{path}"/>')
        parts.append(f'<text x="{legend_x}" y="{pad_t + 14}" fill="{color}">{html.escape(name)}</text>')
        legend_x += max(80, 7 * len(name) + 16)
    parts.append("</svg>")
    return "".join(parts)


def _charts(runs: Sequence[RunMetrics]) -> list[str]:
    def pts(run: RunMetrics, attr: str) -> list[tuple[float, float]]:
        return [(s.t / 3600.0, float(getattr(s, attr))) for s in run.series]

    def chart(title: str, attr: str, label: str, y_max: float | None = None) -> str:
        return _svg_chart(title, {r.name: pts(r, attr) for r in runs}, label, y_max)

    def offered(title: str, batch_attr: str, mid_attr: str, label: str) -> str:
        series: dict[str, list[tuple[float, float]]] = {}
        styles: dict[str, tuple[str, str]] = {}
        for r in runs:
            color = COLORS.get(r.name, "#d62728")
            series[f"{r.name} batch"], styles[f"{r.name} batch"] = pts(r, batch_attr), (color, "")
            series[f"{r.name} mid"], styles[f"{r.name} mid"] = pts(r, mid_attr), (color, "5,3")
        return _svg_chart(title, series, label, styles=styles)

    def quota_used(r: RunMetrics) -> str:
        series: dict[str, list[tuple[float, float]]] = {}
        styles: dict[str, tuple[str, str]] = {}
        for s in r.jobs.quota_series:
            key = cpu_key(s.min)
            for part, amounts, dash in (("used", s.used, ""), ("runtime", s.runtime, "5,3")):
                name = f"{s.quota} {part}"
                series.setdefault(name, []).append((s.t / 3600.0, amounts.get(key, 0) / 1000.0))
                styles[name] = (TEAM_COLORS[sorted({q.quota for q in r.jobs.quota_series}).index(s.quota)
                                            % len(TEAM_COLORS)], dash)
        return _svg_chart(f"{r.name}: team quota CPU used and runtime (cores)", series, "cores", styles=styles)

    quota_charts = [quota_used(r) for r in runs if r.jobs.quota_series]
    return [
        chart("CPU utilization (used / capacity)", "cpu_util", "fraction", 1.0),
        chart("Memory utilization (used / capacity)", "mem_util", "fraction", 1.0),
        chart("LS CPU satisfaction (served / demanded)", "ls_satisfaction", "fraction", 1.0),
        chart("Batch pods running", "batch_running", "pods"),
        chart("Batch pods completed (cumulative)", "batch_completed", "pods"),
        chart("BE suppress events (cumulative)", "suppress_events", "events"),
        chart("BE evictions (cumulative)", "evictions", "pods"),
        offered("Batch and mid resources offered (cores)", "batch_cpu_cores", "mid_cpu_cores", "cores"),
        offered("Batch and mid memory offered (GiB)", "batch_memory_gib", "mid_memory_gib", "GiB"),
        *quota_charts,
    ]


def render_html(summary: dict[str, Any], runs: Sequence[RunMetrics], scenario_text: str = "") -> str:
    """The self-contained HTML page (no external resources)."""
    rows = []
    ratios = summary.get("ratio_colo_over_baseline") or {}
    names = list(summary["runs"])
    for metric in METRIC_NAMES:
        cells = "".join(f"<td>{_fmt(metric, summary['runs'][n][metric])}</td>" for n in names)
        r = ratios.get(metric)
        cells += f"<td>{'–' if r is None else f'{r:.2f}×'}</td>" if ratios else ""
        rows.append(f"<tr><th>{metric}</th><td>{better(metric)}</td>{cells}</tr>")
    head = ("<th>better</th>" + "".join(f"<th>{html.escape(n)}</th>" for n in names)
            + ("<th>colo / baseline</th>" if ratios else ""))
    notes = "".join(f"<li><b>{m}</b>: {html.escape(t)}</li>" for m, t in METRIC_NOTES.items() if m in METRIC_NAMES)
    quota_rows = "".join(
        f"<tr><th>{html.escape(run)}</th><th>{html.escape(team)}</th><td>{html.escape(str(row['resources']))}</td>"
        + "".join(f"<td>{row[k]:.1f}</td>" for k, _ in QUOTA_COLUMNS) + "</tr>"
        for run, teams in (summary.get("quotas") or {}).items() for team, row in teams.items())
    quota_html = ("<h2>Team quotas</h2><table><tr><th>run</th><th>quota</th><th>resources</th>"
                  + "".join(f"<th>{h}</th>" for _, h in QUOTA_COLUMNS) + f"</tr>{quota_rows}</table>"
                  if quota_rows else "")
    desc = html.escape(json.dumps(summary["scenario"], indent=2, default=str))
    charts = "\n".join(f"<div class='chart'>{c}</div>" for c in _charts(runs))
    errors = summary.get("tick_errors", {})
    err_html = "".join(f"<li>{html.escape(n)}: {html.escape(e)}</li>" for n, es in errors.items() for e in es)
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Colo demo report</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:1200px}} table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:4px 10px;text-align:right}} th{{text-align:left}}
.chart{{display:inline-block;margin:6px}} pre{{background:#f6f6f6;padding:1em;overflow:auto}}</style></head>
<body><h1>Colo demo: baseline vs colo</h1>
<p>Both runs replay the same scenario built from real traces; <b>baseline</b> runs without co-location
(no batch resources, batch pods use native requests), <b>colo</b> with slo-manager's colocation profile.</p>
<table><tr><th>metric</th>{head}</tr>{''.join(rows)}</table>
<ul class="notes">{notes}</ul>
{quota_html}
<h2>Over time</h2>{charts}
<h2>Scenario</h2><p>{html.escape(scenario_text)}</p><pre>{desc}</pre>
{f'<h2>Tick errors</h2><ul>{err_html}</ul>' if err_html else ''}
</body></html>
"""


def write_report(out_dir: Path, runs: Sequence[RunMetrics], description: dict[str, object],
                 console: Console | None = None) -> dict[str, Any]:
    """Write ``summary.json`` and ``report.html`` under ``out_dir``, print the table; returns the summary."""
    out_dir.mkdir(parents=True, exist_ok=True)
    summary = summary_dict(runs, description)
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    text = ("Nodes from alibaba-gpu-v2023, online LS services from alibaba-gpu-v2025 with Bitbrains "
            "GWA-T-12 usage series, batch tasks from alibaba-v2017; see docs/scenario.md.")
    (out_dir / "report.html").write_text(render_html(summary, runs, text))
    print_table(summary, console)
    return summary
