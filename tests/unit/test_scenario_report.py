"""Run metrics, allocation invariants and the report (no servers needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from colo.messages import (
    PodBound,
    PodSpec,
    PodStatus,
    PodUnschedulable,
    QoSEvent,
    Resources,
    SimWorkload,
    TickAck,
)
from colo.sim.invariants import over_commitments
from colo.sim.metrics import METRIC_NAMES, RunMetrics
from colo.sim.report import ratio, render_html, summary_dict, write_report


def _pod(uid: str, duration: float = 0.0) -> PodSpec:
    sim = SimWorkload(kind="batch", cpu_milli=1000, duration_s=duration) if duration else None
    return PodSpec(uid=uid, name=uid, sim=sim)


def _bound(uid: str, node: str = "n1", ms: float = 1.0) -> PodBound:
    return PodBound(spec=_pod(uid), node=node, at=0.0, attempt_ms=ms)


def _status(uid: str, phase: str, at: float, reason: str = "") -> PodStatus:
    return PodStatus(uid=uid, node="n1", phase=phase, at=at, reason=reason)  # type: ignore[arg-type]


def _agent(**stats: float) -> TickAck:
    return TickAck(service="node-agent", seq=0, stats=stats)


@pytest.mark.parametrize(("events", "double"), [
    pytest.param([_bound("a")], [], id="bound-once"),
    pytest.param([_bound("a"), _bound("a", "n2")], ["a"], id="bound-twice"),
    pytest.param([_bound("a"), _status("a", "Failed", 5, "Evicted"), _bound("a", "n2")], [], id="rebound-after-evict"),
    pytest.param([_bound("a"), _bound("a", "n2"), _status("a", "Failed", 5, "Evicted")], [],
                 id="order-independent"),
    pytest.param([_bound("a"), _status("a", "Failed", 5, "Evicted"), _bound("a"), _bound("a")], ["a"],
                 id="twice-after-one-evict"),
])
def test_double_bound(events: list[object], double: list[str]) -> None:
    m = RunMetrics("colo")
    for e in events:
        m.on_bound(e) if isinstance(e, PodBound) else m.on_status(e)  # type: ignore[arg-type]
    assert m.double_bound() == double


def test_summary_metrics() -> None:
    m = RunMetrics("colo")
    m.submitted(_pod("b1", duration=100), at=0.0)
    m.submitted(_pod("b2", duration=200), at=60.0)
    m.submitted(_pod("ls"), at=0.0)
    m.submitted(_pod("x"), at=0.0)
    m.on_bound(_bound("b1", ms=2.0))
    m.on_bound(_bound("b2", ms=4.0))
    m.on_bound(_bound("ls", ms=6.0))
    m.on_unschedulable(PodUnschedulable(uid="x", name="x", reasons={"Insufficient cpu": 3}, message="", at=0))
    m.on_status(_status("b1", "Running", 0))
    m.on_status(_status("b1", "Succeeded", 150))
    m.on_status(_status("b2", "Failed", 100, "Evicted"))
    m.on_qos(QoSEvent(node="n1", kind="suppress", at=1))
    m.on_qos(QoSEvent(node="n1", kind="evict", at=1))
    m.on_ticks(60, [_agent(cpu_capacity_milli=1000, cpu_used_milli=500, mem_capacity_bytes=100,
                           mem_used_bytes=20, ls_cpu_demand_milli=100, ls_cpu_served_milli=100)])
    m.on_ticks(120, [_agent(cpu_capacity_milli=1000, cpu_used_milli=300, mem_capacity_bytes=100,
                            mem_used_bytes=40, ls_cpu_demand_milli=300, ls_cpu_served_milli=200)])
    s = m.summary()
    assert set(s) == set(METRIC_NAMES)
    assert s["cpu_util_avg"] == pytest.approx(0.4)
    assert s["mem_util_avg"] == pytest.approx(0.3)
    assert s["ls_cpu_satisfaction"] == pytest.approx(300 / 400)
    assert s["batch_tasks_completed"] == 1
    assert s["batch_slowdown_avg"] == pytest.approx(1.5)
    assert (s["be_evictions"], s["be_suppress_events"]) == (1, 1)
    assert s["sched_latency_p50_ms"] == pytest.approx(4.0)
    assert s["pods_unschedulable"] == 1
    assert sorted(m.pending()) == ["b2", "x"]
    assert m.unaccounted() == []
    assert [p.batch_completed for p in m.series] == [1, 1]


def test_unaccounted_pod_is_reported() -> None:
    m = RunMetrics("baseline")
    m.submitted(_pod("lost"), at=0.0)
    assert m.unaccounted() == ["lost"]


N = {"n1": Resources(cpu=4000, memory=8, pods=2)}


@pytest.mark.parametrize(("ext", "alloc", "violations"), [
    pytest.param({}, {"n1": Resources(cpu=4000, memory=8, pods=2)}, [], id="exactly-full"),
    pytest.param({}, {"n1": Resources(cpu=4001)}, ["n1: cpu allocated 4001 > allocatable 4000"], id="cpu"),
    pytest.param({}, {"n1": Resources(pods=3)}, ["n1: pods allocated 3 > allocatable 2"], id="pods"),
    pytest.param({}, {"n1": Resources(batch_cpu=1)}, ["n1: batch_cpu allocated 1 > offered 0"], id="no-offer"),
    pytest.param({"n1": Resources(batch_cpu=10, batch_memory=5)}, {"n1": Resources(batch_cpu=10, batch_memory=6)},
                 ["n1: batch_memory allocated 6 > offered 5"], id="batch-memory"),
    pytest.param({}, {"ghost": Resources(cpu=1)}, ["ghost: allocation on an unknown node"], id="unknown-node"),
])
def test_over_commitments(ext: dict[str, Resources], alloc: dict[str, Resources], violations: list[str]) -> None:
    assert over_commitments(N, ext, alloc) == violations


def test_report_files(tmp_path: Path) -> None:
    runs = []
    for name, used in (("baseline", 200), ("colo", 400)):
        m = RunMetrics(name)
        m.on_ticks(60, [_agent(cpu_capacity_milli=1000, cpu_used_milli=used, mem_capacity_bytes=1,
                               mem_used_bytes=0)])
        runs.append(m)
    summary = write_report(tmp_path, runs, {"nodes": 2})
    data = json.loads((tmp_path / "summary.json").read_text())
    assert data["runs"]["colo"]["cpu_util_avg"] == pytest.approx(0.4)
    assert data["ratio_colo_over_baseline"]["cpu_util_avg"] == pytest.approx(2.0)
    assert data["scenario"] == {"nodes": 2}
    page = (tmp_path / "report.html").read_text()
    # 9 charts over time + per run its pods unschedulable by reason (no batch offered: no offer chart)
    assert page.count("<svg") == 9 + 2 and "http" not in page.replace("http://www.w3.org/2000/svg", "")
    assert summary["runs"].keys() == {"baseline", "colo"}
    assert render_html(summary_dict(runs, {}), runs).startswith("<!DOCTYPE html>")


def test_modelled_interference_in_summary_series_and_charts(tmp_path: Path) -> None:
    runs = []
    for name, ticks in (("baseline", [(-1.0, -1.0), (-1.0, -1.0)]), ("colo", [(2.0, 10.0), (6.0, 30.0)])):
        m = RunMetrics(name)
        for i, (mean, top) in enumerate(ticks):
            m.on_ticks(60.0 * (i + 1), [_agent(cpu_capacity_milli=1000, cpu_used_milli=500, mem_capacity_bytes=1,
                                               ls_p99_inflation_mean_pct=mean, ls_p99_inflation_max_pct=top,
                                               ls_runq_wait_ratio=0.1 * (i + 1), ls_cpu_pressure_some=-1.0)])
        runs.append(m)
    colo, base = runs[1].summary(), runs[0].summary()
    assert (colo["ls_p99_inflation_avg_pct"], colo["ls_p99_inflation_max_pct"]) == (4.0, 30.0)
    assert (base["ls_p99_inflation_avg_pct"], base["ls_p99_inflation_max_pct"]) == (-1.0, -1.0)
    assert [s.ls_runq_wait_ratio for s in runs[1].series] == pytest.approx([0.1, 0.2])
    summary = write_report(tmp_path, runs, {"nodes": 2})
    assert summary["ratio_colo_over_baseline"]["ls_p99_inflation_avg_pct"] is None  # baseline not modelled
    page = (tmp_path / "report.html").read_text()
    # + the inflation chart and the run-queue wait chart (no run has PSI: no PSI chart)
    assert page.count("<svg") == 9 + 2 + 2
    assert "Modelled LS p99 latency inflation" in page and "Modelled LS run-queue wait" in page
    assert "Modelled LS CPU pressure" not in page


@pytest.mark.parametrize(("colo", "base", "expected"), [
    pytest.param(2.0, 1.0, 2.0, id="double"),
    pytest.param(1.0, 0.0, None, id="zero-baseline"),
])
def test_ratio(colo: float, base: float, expected: float | None) -> None:
    assert ratio(colo, base) == expected


@pytest.mark.parametrize(
    ("span", "target", "step"),
    [(1.0, 4, 0.25), (340.0, 4, 100.0), (2300.0, 4, 1000.0), (6.0, 6, 1.0), (1.0, 6, 0.2), (0.0, 4, 1.0)],
    ids=["fraction", "pods", "thousands", "six-hours", "one-hour", "empty"],
)
def test_chart_steps_are_round(span: float, target: int, step: float) -> None:
    from colo.sim.report_svg import nice_step

    assert nice_step(span, target) == pytest.approx(step)


GPU_ROWS = ("gpu_alloc_avg", "gpu_frag_avg", "gpu_pods_bound")


@pytest.mark.parametrize("description", [
    pytest.param({"nodes": 2}, id="no GPU pods in any run: no GPU rows"),
    pytest.param({"nodes": 2, "gpu_pods": 3}, id="a GPU scenario: the GPU rows, 0 or not"),
])
def test_gpu_rows_only_where_a_run_has_gpu_pods(description: dict[str, object]) -> None:
    """The saturated preset's three-run table printed gpu_alloc_avg, gpu_frag_avg and gpu_pods_bound as 0 for a
    scenario without GPU pods (its headline already left the GPU sentences out); summary.json keeps the figures."""
    import io

    from rich.console import Console

    from colo.sim.report import print_table

    runs = []
    for name in ("baseline", "colo", "colo-adaptive"):
        m = RunMetrics(name)
        m.on_ticks(60, [_agent(cpu_capacity_milli=1000, cpu_used_milli=300, mem_capacity_bytes=1, mem_used_bytes=0)])
        runs.append(m)
    summary = summary_dict(runs, description)
    out = io.StringIO()
    print_table(summary, Console(file=out, width=300))
    page = render_html(summary, runs)
    shown = "gpu_pods" in description
    for row in GPU_ROWS:
        assert (row in out.getvalue()) is shown and (f"<th>{row}</th>" in page) is shown
        assert summary["runs"]["colo-adaptive"][row] == 0.0
    assert "cpu_util_avg" in out.getvalue() and "<th>cpu_util_avg</th>" in page
    assert any(s.startswith("GPU") for s in summary["headline"]) is shown


def _intro(names: tuple[str, ...]) -> str:
    runs = []
    for name in names:
        m = RunMetrics(name)
        m.on_ticks(60, [_agent(cpu_capacity_milli=1000, cpu_used_milli=300, mem_capacity_bytes=1, mem_used_bytes=0)])
        runs.append(m)
    page = render_html(summary_dict(runs, {}), runs)
    return page.split("<p>Every run replays", 1)[1].split("</p>", 1)[0]


@pytest.mark.parametrize(("names", "expected"), [
    pytest.param(("baseline", "colo", "colo-adaptive-mem"),
                 "the same scenario built from real traces; <b>baseline</b> runs without co-location (no batch "
                 "resources, batch pods use native requests), <b>colo</b> with slo-manager's colocation profile and "
                 "the static thresholds, <b>colo-adaptive-mem</b> with the BE budget and more memory room: batch "
                 "memory reclaimed up to 80 % of capacity and BE memory eviction at 85 %.", id="without-colo-adaptive"),
    pytest.param(("baseline", "colo", "colo-adaptive", "colo-adaptive-mem"),
                 "the same scenario built from real traces; <b>baseline</b> runs without co-location (no batch "
                 "resources, batch pods use native requests), <b>colo</b> with slo-manager's colocation profile and "
                 "the static thresholds, <b>colo-adaptive</b> with it and the SLO-driven BE budget, "
                 "<b>colo-adaptive-mem</b> with the BE budget and more memory room: batch memory reclaimed up to 80 % "
                 "of capacity and BE memory eviction at 85 %.", id="saturated"),
])
def test_the_intro_describes_every_run(names: tuple[str, ...], expected: str) -> None:
    """The saturated report's intro described colo-adaptive but not colo-adaptive-mem, its fourth run."""
    assert " ".join(_intro(names).split()) == expected


def test_every_run_has_a_description() -> None:
    from colo.sim.report_page import RUN_DESCRIPTIONS
    from colo.sim.run import RUN_ENV

    assert list(RUN_DESCRIPTIONS) == list(RUN_ENV)
