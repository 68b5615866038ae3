"""The report's "Why pods stayed unschedulable" section, next to the batch resources offered and unallocated.

From ``summary.json``: per run, ``unschedulable_reasons`` (the end-of-run table of
:meth:`colo.sim.unschedulable.UnschedulableBreakdown.table`) and the time series (``series``: each sample's
``unschedulable_reasons``, ``batch_cpu_cores`` offered and ``batch_cpu_allocated_cores``, memory alike). The
section has, per run, a sentence of the end state, the table of reasons, a table over time (pods by reason
category, batch-cpu and batch-memory offered and unallocated) and two charts: pods by category, and batch-cpu
offered / allocated / unallocated. Unallocated = offered − allocated, floored at 0 (an offer may shrink below
what pods already bound hold; they are not evicted for it).
"""

from __future__ import annotations

import html
from typing import Any

from colo.sim.report_svg import DASHED, LineStyle, Points, nice_step, svg_chart
from colo.sim.unschedulable import CATEGORIES, by_category

CATEGORY_STYLES: dict[str, LineStyle] = {
    "memory": LineStyle("#d62728", "", "square"),
    "cpu": LineStyle("#1f77b4", DASHED, "circle"),
    "gpu": LineStyle("#17becf", "6,2", "triangle"),
    "pods": LineStyle("#9467bd", "2,2", "triangle"),
    "gang": LineStyle("#ff7f0e", "8,3,2,3", "diamond"),
    "quota": LineStyle("#2ca02c", "4,4", "circle"),
    "placement": LineStyle("#8c564b", "1,3", "square"),
}
"""One colour, dash and marker per reason category (:data:`colo.sim.unschedulable.CATEGORIES`)."""

OFFER_STYLES: dict[str, LineStyle] = {
    "offered": LineStyle("#1f77b4", "", "square"),
    "allocated": LineStyle("#2ca02c", DASHED, "circle"),
    "unallocated": LineStyle("#d62728", "2,2", "triangle"),
}


def unallocated(offered: float, allocated: float) -> float:
    """Offered − allocated, 0 when the allocation is above the (shrunk) offer."""
    return max(0.0, offered - allocated)


def _hours(sample: dict[str, Any]) -> float:
    return float(sample["t"]) / 3600.0


def end_sentence(run: str, rows: list[dict[str, Any]], last: dict[str, Any] | None) -> str:
    """What the end of ``run`` looked like: pods unschedulable, batch-cpu/-memory offered and unallocated,
    and the pods of each category, most first."""
    pods = sum(int(r["pods"]) for r in rows)
    if not pods:
        return f"{run}: no pod was unschedulable at the end."
    cats = {c: n for c, n in by_category({r["label"]: int(r["pods"]) for r in rows}).items() if n}
    parts = ", ".join(f"{n} for {c}" for c, n in sorted(cats.items(), key=lambda kv: (-kv[1], kv[0])))
    top = rows[0]
    text = f"{run}: {pods} pods unschedulable at the end"
    if last is not None and not float(last.get("batch_cpu_cores", 0.0)) and not float(
            last.get("batch_memory_gib", 0.0)):
        text += " (this run offers no batch resources: batch pods request native cpu and memory)"
    elif last is not None:
        cpu = float(last.get("batch_cpu_cores", 0.0))
        cpu_free = unallocated(cpu, float(last.get("batch_cpu_allocated_cores", 0.0)))
        mem = float(last.get("batch_memory_gib", 0.0))
        mem_free = unallocated(mem, float(last.get("batch_memory_allocated_gib", 0.0)))
        text += (f" while {cpu:,.1f} batch cores were offered ({cpu_free:,.1f} unallocated) and "
                 f"{mem:,.1f} GiB of batch memory ({mem_free:,.1f} GiB unallocated)")
    return (f"{text}; by dominant reason {parts}. Most common: “{html.escape(str(top['label']))}” "
            f"({top['pods']} pods).")


def reasons_table(rows: list[dict[str, Any]]) -> str:
    """The end-of-run table: reason, category, pods (dominant reason), pods with it on some node, nodes."""
    body = "".join(f"<tr><th>{html.escape(str(r['label']))}</th><td>{html.escape(str(r['category']))}</td>"
                   f"<td>{r['pods']}</td><td>{r['pods_any']}</td><td>{r['nodes']}</td></tr>" for r in rows)
    return ("<table class='reasons'><tr><th>reason (last attempt)</th><th>category</th><th>pods (dominant)</th>"
            "<th>pods it rejected on ≥ 1 node</th><th>node rejections</th></tr>" + body + "</table>")


def _sampled(series: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """About ten samples at round hours, and the last one."""
    if not series:
        return []
    span = _hours(series[-1]) - _hours(series[0])
    step = nice_step(span, target=8) if span > 0 else 1.0
    out, next_h = [], _hours(series[0])
    for s in series:
        if _hours(s) >= next_h - 1e-9:
            out.append(s)
            next_h += step
    if out[-1] is not series[-1]:
        out.append(series[-1])
    return out


def over_time_table(series: list[dict[str, Any]]) -> str:
    """Pods unschedulable by category and the batch resources offered and unallocated, at round hours."""
    head = ("<tr><th>hours</th><th>unschedulable</th>" + "".join(f"<th>{c}</th>" for c in CATEGORIES)
            + "<th>batch cores offered</th><th>unallocated</th><th>batch GiB offered</th><th>unallocated</th></tr>")
    rows = []
    for s in _sampled(series):
        cats = by_category(s.get("unschedulable_reasons") or {})
        cpu, mem = float(s.get("batch_cpu_cores", 0.0)), float(s.get("batch_memory_gib", 0.0))
        rows.append(f"<tr><th>{_hours(s):g}</th><td>{s.get('pods_unschedulable', 0)}</td>"
                    + "".join(f"<td>{cats[c]}</td>" for c in CATEGORIES)
                    + f"<td>{cpu:,.1f}</td><td>{unallocated(cpu, float(s.get('batch_cpu_allocated_cores', 0.0))):,.1f}</td>"
                    + f"<td>{mem:,.1f}</td>"
                    + f"<td>{unallocated(mem, float(s.get('batch_memory_allocated_gib', 0.0))):,.1f}</td></tr>")
    return "<table class='reasons-over-time'>" + head + "".join(rows) + "</table>"


def charts(run: str, series: list[dict[str, Any]]) -> list[str]:
    """The run's pods-by-category chart (categories that ever had a pod) and, when the run offered batch-cpu,
    its offered / allocated / unallocated chart."""
    cats: dict[str, Points] = {c: [] for c in CATEGORIES}
    for s in series:
        counts = by_category(s.get("unschedulable_reasons") or {})
        for c in CATEGORIES:
            cats[c].append((_hours(s), float(counts[c])))
    used = {c: pts for c, pts in cats.items() if any(v for _, v in pts)}
    out = [svg_chart(f"{run}: pods unschedulable by dominant reason", used or {"none": []}, "pods",
                     styles=CATEGORY_STYLES)]
    if any(float(s.get("batch_cpu_cores", 0.0)) for s in series):
        offer: dict[str, Points] = {"offered": [], "allocated": [], "unallocated": []}
        for s in series:
            o, a = float(s.get("batch_cpu_cores", 0.0)), float(s.get("batch_cpu_allocated_cores", 0.0))
            offer["offered"].append((_hours(s), o))
            offer["allocated"].append((_hours(s), a))
            offer["unallocated"].append((_hours(s), unallocated(o, a)))
        out.append(svg_chart(f"{run}: batch-cpu offered, allocated, unallocated (cores)", offer, "cores",
                             styles=OFFER_STYLES))
    return out


def reasons_html(summary: dict[str, Any]) -> str:
    """The whole section (empty when the summary has no ``unschedulable_reasons``)."""
    reasons: dict[str, list[dict[str, Any]]] = summary.get("unschedulable_reasons") or {}
    if not reasons:
        return ""
    series: dict[str, list[dict[str, Any]]] = summary.get("series") or {}
    parts = ["<h2 id='unschedulable'>Why pods stayed unschedulable</h2>",
             "<p>Each pod still unschedulable counts once, under the reason of its last attempt that rejected most "
             "nodes (the scheduler's diagnosis, “0/N nodes are available: …”); <i>rejected on ≥ 1 node</i> counts "
             "the pods that reason turned away from at least one node. Unallocated = offered − allocated "
             "(batch-cpu, batch-memory) <b>summed over all nodes</b> at the end of the step: a pod needs its whole "
             "request on <b>one</b> node, so cores and GiB left over in small pieces on many nodes "
             "(fragmentation) can add up to more than a pod asks while no single node fits it. The table over "
             "time samples <b>instants</b> (the step at each round hour), not the interval between them: a figure "
             "in a chart can peak between two rows.</p>"]
    for run, rows in reasons.items():
        run_series = series.get(run) or []
        parts.append(f"<h3>{html.escape(run)}</h3><p class='reasons-summary'>"
                     f"{end_sentence(html.escape(run), rows, run_series[-1] if run_series else None)}</p>")
        if rows:
            parts.append(reasons_table(rows))
        parts.append(over_time_table(run_series))
        parts.append("".join(f"<div class='chart'>{c}</div>" for c in charts(run, run_series)))
    return "\n".join(parts)
