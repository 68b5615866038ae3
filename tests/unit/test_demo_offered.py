"""The demo records the batch and mid resources slo-manager offers, summarizes and charts them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from colo.messages import TickAck
from colo.sim.metrics import RunMetrics
from colo.sim.report import write_report

GIB = 1 << 30


def _acks(batch_cpu: float, mid_cpu: float, batch_mem: float, mid_mem: float) -> list[TickAck]:
    return [
        TickAck(service="node-agent", seq=0, stats={"cpu_capacity_milli": 100_000, "cpu_used_milli": 40_000}),
        TickAck(service="profiler", seq=0, stats={"batch_cpu": 999.0}),  # another service's stats are ignored
        TickAck(service="slo-manager", seq=0, stats={"batch_cpu": batch_cpu, "mid_cpu": mid_cpu,
                                                     "batch_memory": batch_mem, "mid_memory": mid_mem}),
    ]


def _runs() -> list[RunMetrics]:
    base, colo = RunMetrics("baseline"), RunMetrics("colo")
    offers = [(20_000, 0, 40 * GIB, 0), (30_000, 6_000, 50 * GIB, 8 * GIB), (10_000, 2_000, 30 * GIB, 4 * GIB)]
    for k, (bc, mc, bm, mm) in enumerate(offers):
        base.on_ticks(60.0 * k, _acks(0, 0, 0, 0))
        colo.on_ticks(60.0 * k, _acks(bc, mc, bm, mm))
    return [base, colo]


def test_series_and_summary_follow_slo_manager_stats() -> None:
    base, colo = _runs()
    assert [s.batch_cpu_cores for s in colo.series] == [20.0, 30.0, 10.0]
    assert [s.mid_cpu_cores for s in colo.series] == [0.0, 6.0, 2.0]
    assert [s.batch_memory_gib for s in colo.series] == [40.0, 50.0, 30.0]
    assert [s.mid_memory_gib for s in colo.series] == [0.0, 8.0, 4.0]
    assert colo.offered() == pytest.approx({"batch_cpu_cores": 20.0, "mid_cpu_cores": 8 / 3,
                                            "batch_memory_gib": 40.0, "mid_memory_gib": 4.0})
    assert colo.summary()["batch_mid_cpu_offered_cores"] == pytest.approx(20.0 + 8 / 3)
    assert base.summary()["batch_mid_cpu_offered_cores"] == 0.0


def test_no_slo_manager_ack_records_nothing_offered() -> None:
    m = RunMetrics("colo")
    m.on_ticks(60.0, [TickAck(service="node-agent", seq=0, stats={"cpu_capacity_milli": 1000})])
    assert (m.series[0].batch_cpu_cores, m.series[0].mid_cpu_cores) == (0.0, 0.0)
    assert RunMetrics("empty").offered()["mid_cpu_cores"] == 0.0


def _polyline_after(page: str, title: str, series: str) -> list[tuple[float, float]]:
    """Points of the polyline of ``series`` in the chart titled ``title``."""
    svg = page[page.index(title):]
    svg = svg[:svg.index("</svg>")]
    lines = re.findall(r'<polyline class="series" data-series="([^"]*)"[^>]*points="([^"]*)"/>', svg)
    pts = dict(lines)[series]
    return [(float(x), float(y)) for x, y in (xy.split(",") for xy in pts.split())]


def test_report_has_the_offered_chart_and_figure(tmp_path: Path) -> None:
    runs = _runs()
    summary = write_report(tmp_path, runs, {"nodes": 2})
    page = (tmp_path / "report.html").read_text()
    title = "Batch and mid resources offered (cores)"
    assert title in page and "Batch and mid memory offered (GiB)" in page
    # 9 charts over time + per run its unschedulable pods by reason + the colo run's batch-cpu offer
    assert page.count("<svg") == 9 + 2 + 1
    for name in ("baseline batch", "baseline mid", "colo batch", "colo mid"):
        assert len(_polyline_after(page, title, name)) == 3
    # in SVG y grows downwards: the colo batch line is highest (smallest y) at the 30-core tick
    colo_batch = _polyline_after(page, title, "colo batch")
    assert min(colo_batch, key=lambda p: p[1]) == colo_batch[1]
    assert len({y for _, y in _polyline_after(page, title, "baseline batch")}) == 1
    styles = dict(re.findall(r'data-series="([^"]*)" fill="none" stroke="([^"]*)"', page[page.index(title):]))
    assert styles["colo batch"] != styles["colo mid"]  # batch and mid in their colours, baseline dashed
    assert re.search(r'data-series="baseline mid" fill="none" stroke="[^"]*" stroke-width="1.6" stroke-dasharray=',
                     page)
    row = re.search(r"<tr><th>batch_mid_cpu_offered_cores</th>(.*?)</tr>", page)
    assert row is not None and "<td>0.0</td>" in row.group(1) and "<td>22.7</td>" in row.group(1)
    assert summary["ratio_colo_over_baseline"]["batch_mid_cpu_offered_cores"] is None
    data = json.loads((tmp_path / "summary.json").read_text())
    assert data["offered"]["colo"]["mid_cpu_cores"] == pytest.approx(8 / 3)
    assert data["offered"]["baseline"] == {"batch_cpu_cores": 0.0, "mid_cpu_cores": 0.0,
                                           "batch_memory_gib": 0.0, "mid_memory_gib": 0.0}
    assert [s["mid_cpu_cores"] for s in data["series"]["colo"]] == [0.0, 6.0, 2.0]
