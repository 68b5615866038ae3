"""The self-contained ``report.html`` of the demo (no external resources).

Top to bottom: the headline (:mod:`colo.sim.report_headline`), the metric table with its notes, the
utilization ceilings (:mod:`colo.sim.ceiling`), the team quotas, why pods stayed unschedulable (:mod:`colo.sim.report_reasons`), the charts over time
(:mod:`colo.sim.report_charts`), the scenario as tables (:mod:`colo.sim.report_scenario`) and tick errors.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from typing import Any

from colo.sim.metrics import HIGHER_IS_BETTER, METRIC_NAMES, RunMetrics
from colo.sim.report_charts import charts
from colo.sim.report_format import METRIC_NOTES, QUOTA_COLUMNS, better, fmt, table_metrics
from colo.sim.report_headline import headline, verdict
from colo.sim.report_reasons import reasons_html
from colo.sim.report_scenario import scenario_html

STYLE = """body{font-family:sans-serif;margin:2em;max-width:1240px} table{border-collapse:collapse;margin:6px 0}
td,th{border:1px solid #ccc;padding:4px 10px;text-align:right;vertical-align:top} th{text-align:left}
.verdict{font-size:1.15em;margin:.3em 0} .chart{display:inline-block;margin:6px} .headline{font-size:1.05em;line-height:1.5;background:#f3f7fb;
border-left:4px solid #1f77b4;padding:.6em 1.2em .6em 2em} .better{color:#1a7f37} .worse{color:#b42318}
table.kv table.kv{margin:0} table.kv td{text-align:left} .scenario-part{display:inline-block;vertical-align:top;
margin:0 1.5em 1em 0}"""


def _metric_table(summary: dict[str, Any]) -> str:
    all_ratios: dict[str, dict[str, float | None]] = summary.get("ratios_over_baseline") or (
        {"colo": summary["ratio_colo_over_baseline"]} if summary.get("ratio_colo_over_baseline") else {})
    names = list(summary["runs"])
    rows = []
    for metric in table_metrics(summary):
        cells = "".join(f"<td>{fmt(metric, summary['runs'][n][metric])}</td>" for n in names)
        for ratios in all_ratios.values():
            r = ratios.get(metric)
            good = r is not None and ((r >= 1) == HIGHER_IS_BETTER[metric] or r == 1)
            cells += "<td>–</td>" if r is None else f"<td class='{'better' if good else 'worse'}'>{r:.2f}×</td>"
        rows.append(f"<tr><th>{metric}</th><td>{better(metric)}</td>{cells}</tr>")
    head = ("<th>better</th>" + "".join(f"<th>{html.escape(n)}</th>" for n in names)
            + "".join(f"<th>{html.escape(n)} / baseline</th>" for n in all_ratios))
    return f"<table class='metrics'><tr><th>metric</th>{head}</tr>{''.join(rows)}</table>"


def _ceiling_table(summary: dict[str, Any]) -> str:
    """Per run: utilization, the ceiling its policy allows and the share reached, per resource; the BE
    budget's mean threshold; the batch pod-ticks unschedulable for cpu and memory; what binds."""
    ceilings: dict[str, dict[str, Any]] = summary.get("ceilings") or {}
    if not ceilings:
        return ""
    rows = []
    for name, c in ceilings.items():
        m = summary["runs"][name]
        ticks = c.get("unschedulable_pod_ticks") or {}
        budget = c.get("be_budget_threshold_avg", -1.0)
        rows.append(f"<tr><th>{html.escape(name)}</th>"
                    + "".join(f"<td>{fmt(k, v)}</td>" for k, v in (
                        ("cpu_util_avg", m["cpu_util_avg"]), ("cpu_ceiling_avg", c["cpu_ceiling_avg"]),
                        ("cpu_ceiling_share", c["cpu_ceiling_share"]), ("mem_util_avg", m["mem_util_avg"]),
                        ("mem_ceiling_avg", c["mem_ceiling_avg"]), ("mem_ceiling_share", c["mem_ceiling_share"])))
                    + f"<td>{f'{budget:.1f}%' if budget >= 0 else '–'}</td>"
                    + f"<td>{fmt('cpu_util_avg', c['cpu_if_memory_full']) if c.get('cpu_if_memory_full', -1) >= 0 else '–'}</td>"
                    + f"<td>{ticks.get('cpu', 0):,.0f}</td><td>{ticks.get('memory', 0):,.0f}</td>"
                    + f"<td><b>{html.escape(str(c['binds']))}</b></td></tr>")
    head = ("<tr><th>run</th><th>CPU used</th><th>CPU ceiling</th><th>share</th><th>memory used</th>"
            "<th>memory ceiling</th><th>share</th><th>BE budget threshold</th><th>CPU if memory full</th>"
            "<th>pod-ticks unschedulable: cpu</th>"
            "<th>memory</th><th>binds</th></tr>")
    return ("<h2 id='ceilings'>Utilization ceilings</h2><p>The ceiling is what each run's policy lets the nodes "
            "reach: system + LS usage + the room batch pods may request (batch resources offered, or in baseline "
            "the allocatable the LS requests leave), CPU capped by the suppress budget and memory by the BE "
            "eviction threshold, node by node, averaged over the run (docs/scenario.md \"Utilization ceilings\"). "
            "Share = mean utilization / ceiling. <i>CPU if memory full</i>: system + LS CPU + the batch demand's "
            "CPU per memory × the memory ceiling's room, the CPU use the batch mix allows once memory is full. <i>Binds</i>: the resource for which more batch pods stayed "
            f"unschedulable (pods × ticks by dominant reason).</p><table class='ceilings'>{head}{''.join(rows)}</table>")


def _quota_table(summary: dict[str, Any]) -> str:
    quota_rows = "".join(
        f"<tr><th>{html.escape(run)}</th><th>{html.escape(team)}</th><td>{html.escape(str(row['resources']))}</td>"
        + "".join(f"<td>{row[k]:.0f}</td>" if k == "borrowed_ticks" else f"<td>{row[k]:.1f}</td>"
                  for k, _ in QUOTA_COLUMNS) + "</tr>"
        for run, teams in (summary.get("quotas") or {}).items() for team, row in teams.items())
    if not quota_rows:
        return ""
    return ("<h2>Team quotas</h2><table><tr><th>run</th><th>quota</th><th>resources</th>"
            + "".join(f"<th>{h}</th>" for _, h in QUOTA_COLUMNS) + f"</tr>{quota_rows}</table>")


def _cold_start_s() -> float:
    from colo.sim.run import SIM_ENV

    return float(SIM_ENV.get("COLO_PROFILER_COLD_START_S", 24 * 3600))


RUN_DESCRIPTIONS: dict[str, str] = {
    "baseline": "runs without co-location (no batch resources, batch pods use native requests)",
    "colo": "with slo-manager's colocation profile and the static thresholds",
    "colo-adaptive": "with it and the SLO-driven BE budget",
    "colo-adaptive-mem": "with the BE budget and more memory room: batch memory reclaimed up to 80 % of capacity and "
                         "BE memory eviction at 85 %",
}
"""What each run of :data:`colo.sim.run.RUN_ENV` changes, in the page's opening paragraph."""


def _run_descriptions(names: Iterable[str]) -> str:
    """``<b>baseline</b> runs without co-location (…), <b>colo</b> with …`` for the runs present, in order; a run
    without a description is named only."""
    return ", ".join(f"<b>{html.escape(n)}</b> {RUN_DESCRIPTIONS[n]}" if n in RUN_DESCRIPTIONS
                     else f"<b>{html.escape(n)}</b>" for n in names)


def _headline(summary: dict[str, Any]) -> str:
    sentences = summary.get("headline") or headline(summary)
    if not sentences:
        return ""
    items = "".join(f"<li>{html.escape(s)}</li>" for s in sentences)
    line = summary.get("verdict") or verdict(summary)
    top = f"<p class='verdict'><b>{html.escape(line)}</b></p>" if line else ""
    return f"<h2>What co-location bought</h2>{top}<ul class='headline'>{items}</ul>"


def render_html(summary: dict[str, Any], runs: Sequence[RunMetrics], scenario_text: str = "") -> str:
    """The page for ``summary`` (:func:`colo.sim.report.summary_dict`) and the runs' time series."""
    notes = "".join(f"<li><b>{m}</b>: {html.escape(t)}</li>" for m, t in METRIC_NOTES.items() if m in METRIC_NAMES)
    over_time = "\n".join(f"<div class='chart'>{c}</div>" for c in charts(runs))
    errors = summary.get("tick_errors", {})
    err_html = "".join(f"<li>{html.escape(n)}: {html.escape(e)}</li>" for n, es in errors.items() for e in es)
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Colo demo report</title>
<style>{STYLE}</style></head>
<body><h1>Colo demo: {html.escape(" vs ".join(summary["runs"]))}</h1>
<p>Every run replays the same scenario built from real traces; {_run_descriptions(summary["runs"])}.</p>
{_headline(summary)}
<h2>Metrics</h2>
{_metric_table(summary)}
<ul class="notes">{notes}</ul>
{_ceiling_table(summary)}
{_quota_table(summary)}
{reasons_html(summary)}
<h2 id="over-time">Over time</h2>
<p>Mid resources (prod pods' reclaimable CPU and memory, docs/profiler.md) are offered only for pods older than the
profiler's cold start (<code>COLO_PROFILER_COLD_START_S</code>, {_cold_start_s():g} s in simulations): in a run of
about that length they appear in the last steps only — a real effect of the cold start, not of the sampling.</p>
{over_time}
<h2 id="scenario">Scenario</h2><p>{html.escape(scenario_text)}</p>
{scenario_html(summary.get("scenario") or {})}
{f'<h2>Tick errors</h2><ul>{err_html}</ul>' if err_html else ''}
</body></html>
"""
