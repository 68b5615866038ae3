"""The report's charts over time, baseline vs colo (inline SVG, :mod:`colo.sim.report_svg`).

Utilization, LS CPU satisfaction, batch pods running/completed, suppress events, evictions (one line per run:
baseline grey dashed with circles, colo blue solid with squares), the batch and mid resources slo-manager
offered (colour per kind: batch blue, mid orange; dash per run as above), the sim's modelled LS p99 latency
inflation (mean blue, max red over LS pods) and interference signals when a run modelled them, per run, each
team's quota CPU used (solid) and runtime (dashed) and, with GPU pods, GPU allocation and fragmentation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from colo.sim.job_metrics import cpu_key
from colo.sim.metrics import RunMetrics
from colo.sim.report_svg import DASHED, RUN_STYLES, LineStyle, Points, svg_chart

TEAM_COLORS = ("#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf")
KIND_COLORS = {"batch": "#1f77b4", "mid": "#ff7f0e"}
"""The colours of the offered chart's kinds; its dash and marker say the run (:data:`RUN_STYLES`)."""


def _pts(run: RunMetrics, attr: str) -> Points:
    return [(s.t / 3600.0, float(getattr(s, attr))) for s in run.series]


def _run_style(run: str) -> LineStyle:
    return RUN_STYLES.get(run, LineStyle("#d62728", "2,2", "triangle"))


def _offered(runs: Sequence[RunMetrics], title: str, batch_attr: str, mid_attr: str, label: str) -> str:
    series: dict[str, Points] = {}
    styles: dict[str, LineStyle] = {}
    for r in runs:
        st = _run_style(r.name)
        for kind, attr in (("batch", batch_attr), ("mid", mid_attr)):
            name = f"{r.name} {kind}"
            series[name], styles[name] = _pts(r, attr), LineStyle(KIND_COLORS[kind], st.dash, st.marker)
    return svg_chart(title, series, label, styles=styles)


def _quota_used(r: RunMetrics) -> str:
    series: dict[str, Points] = {}
    styles: dict[str, LineStyle] = {}
    teams = sorted({q.quota for q in r.jobs.quota_series})
    for s in r.jobs.quota_series:
        key = cpu_key(s.min)
        color = TEAM_COLORS[teams.index(s.quota) % len(TEAM_COLORS)]
        for part, amounts, dash, mark in (("used", s.used, "", "square"), ("runtime", s.runtime, DASHED, "circle")):
            name = f"{s.quota} {part}"
            series.setdefault(name, []).append((s.t / 3600.0, amounts.get(key, 0) / 1000.0))
            styles[name] = LineStyle(color, dash, mark)
    return svg_chart(f"{r.name}: team quota CPU used and runtime (cores)", series, "cores", styles=styles)


def charts(runs: Sequence[RunMetrics]) -> list[str]:
    """Every chart of the "Over time" section, as SVG strings."""
    def chart(title: str, attr: str, label: str, y_max: float | None = None) -> str:
        series = {r.name: _pts(r, attr) for r in runs}
        if len(series) > 1 and all(pts == next(iter(series.values())) for pts in series.values()):
            # equal lines hide each other: one line in the last run's style, and the legend says so
            name = " = ".join(reversed(series)) + " (lines coincide)"
            return svg_chart(title, {name: series[runs[-1].name]}, label, y_max,
                             styles={name: _run_style(runs[-1].name)})
        return svg_chart(title, series, label, y_max)

    return [
        chart("CPU utilization (used / capacity)", "cpu_util", "fraction", 1.0),
        chart("Memory utilization (used / capacity)", "mem_util", "fraction", 1.0),
        chart("LS CPU satisfaction (served / demanded)", "ls_satisfaction", "fraction", 1.0),
        chart("Batch pods running", "batch_running", "pods"),
        chart("Batch pods completed (cumulative)", "batch_completed", "pods"),
        chart("BE suppress events (cumulative)", "suppress_events", "events"),
        chart("BE evictions (cumulative)", "evictions", "pods"),
        _offered(runs, "Batch and mid resources offered (cores)", "batch_cpu_cores", "mid_cpu_cores", "cores"),
        _offered(runs, "Batch and mid memory offered (GiB)", "batch_memory_gib", "mid_memory_gib", "GiB"),
        *_interference(runs),
        *(_quota_used(r) for r in runs if r.jobs.quota_series),
        *(_gpu_charts(chart) if any(r.gpus is not None and r.gpus.shapes for r in runs) else []),
    ]


HARM_COLORS = {"mean": "#1f77b4", "max": "#d62728"}
"""The inflation chart's statistics over LS pods; dash and marker say the run (:data:`RUN_STYLES`)."""


def _interference(runs: Sequence[RunMetrics]) -> list[str]:
    """The modelled LS p99 inflation (mean and max over LS pods) and LS run-queue wait and PSI charts; none when
    no run has the interference model (every value −1)."""
    if not any(s.ls_p99_inflation_mean_pct >= 0 for r in runs for s in r.series):
        return []
    series: dict[str, Points] = {}
    styles: dict[str, LineStyle] = {}
    for r in runs:
        st = _run_style(r.name)
        for stat in ("mean", "max"):
            name = f"{r.name} {stat}"
            series[name] = [(t, max(v, 0.0)) for t, v in _pts(r, f"ls_p99_inflation_{stat}_pct")]
            styles[name] = LineStyle(HARM_COLORS[stat], st.dash, st.marker)
    out = [svg_chart("Modelled LS p99 latency inflation over LS pods (%)", series, "percent", styles=styles)]
    for attr, title, label in (("ls_runq_wait_ratio", "Modelled LS run-queue wait (mean over LS pods)",
                                "s waited / s run"),
                               ("ls_cpu_pressure_some", "Modelled LS CPU pressure, PSI cpu some (mean over LS pods)",
                                "percent")):
        if any(getattr(s, attr) >= 0 for r in runs for s in r.series):
            out.append(svg_chart(title, {r.name: [(t, max(v, 0.0)) for t, v in _pts(r, attr)] for r in runs}, label))
    return out


def _gpu_charts(chart: Callable[[str, str, str, float | None], str]) -> list[str]:
    """The GPU charts of a scenario with GPU pods (:mod:`colo.sim.gpu_metrics`): the share of the cluster's
    GPUs allocated by the bindings, the share the sim node agents hold (their ledgers, at their tick) and
    the share fragmented for the scenario's pod shapes (FGD's F / GPUs)."""
    return [chart("GPUs allocated (share of the cluster's GPUs, bindings)", "gpu_allocated", "fraction", 1.0),
            chart("GPUs held by the node agents (share, at their tick)", "gpu_held_agent", "fraction", 1.0),
            chart("GPU fragmentation (FGD: F / the cluster's GPUs)", "gpu_fragmented", "fraction", None)]
