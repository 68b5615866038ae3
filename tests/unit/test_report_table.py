"""The demo table says which way each metric is better and explains the values that read wrong."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console

from colo.messages import TickAck
from colo.sim.metrics import HIGHER_IS_BETTER, METRIC_NAMES, RunMetrics
from colo.sim.report import METRIC_NOTES, better, write_report
from colo.sim.report_format import GPU_METRICS, table_metrics
from colo.sim.run import make_progress


def _runs() -> list[RunMetrics]:
    runs = []
    for name, used in (("baseline", 200), ("colo", 400)):
        m = RunMetrics(name)
        m.on_ticks(60, [TickAck(service="node-agent", seq=0, stats={"cpu_capacity_milli": 1000,
                                                                    "cpu_used_milli": used})])
        runs.append(m)
    return runs


def test_every_metric_row_says_which_way_is_better(tmp_path: Path) -> None:
    console = Console(record=True, width=200)
    summary = write_report(tmp_path, _runs(), {"nodes": 2}, console)
    text = console.export_text()
    rows = table_metrics(summary)
    assert rows == [m for m in METRIC_NAMES if m not in GPU_METRICS]  # no GPU pods: no GPU rows
    for metric in rows:
        row = next(line for line in text.splitlines() if f" {metric} " in line)
        assert ("↑ higher" if HIGHER_IS_BETTER[metric] else "↓ lower") in row
    assert better("cpu_util_avg") == "↑ higher" and better("be_evictions") == "↓ lower"
    assert summary["higher_is_better"] == {m: HIGHER_IS_BETTER[m] for m in METRIC_NAMES}
    page = (tmp_path / "report.html").read_text()
    assert page.count("↑ higher") + page.count("↓ lower") == len(rows)


def test_notes_explain_evictions_suppress_and_pending_in_one_line_each(tmp_path: Path) -> None:
    assert set(METRIC_NOTES) == {"be_evictions", "be_suppress_events", "pods_pending", "batch_mid_cpu_offered_cores",
                                 "gang_wait_p50_s", "preemptions"}
    console = Console(record=True, width=200)
    write_report(tmp_path, _runs(), {}, console)
    text = console.export_text()
    for metric, note in METRIC_NOTES.items():
        assert f"{metric}: {note}" in text.splitlines()  # one line, at 120 columns too
        assert len(f"{metric}: {note}") <= 120
    assert "memory eviction" in METRIC_NOTES["be_evictions"] and "native requests" in METRIC_NOTES["be_evictions"]
    assert "LS usage" in METRIC_NOTES["be_suppress_events"]
    assert "pods_unschedulable" in METRIC_NOTES["pods_pending"]
    assert "same unused capacity" in METRIC_NOTES["batch_mid_cpu_offered_cores"]
    data = json.loads((tmp_path / "summary.json").read_text())
    assert data["notes"] == METRIC_NOTES
    page = (tmp_path / "report.html").read_text()
    assert all(f"<b>{m}</b>" in page for m in METRIC_NOTES)


def test_progress_bar_names_its_unit() -> None:
    progress = make_progress()
    task = progress.add_task("baseline", total=361, status="bound 10 · done 2 · unsched 0")
    progress.update(task, completed=361)
    rendered = Console(record=True, width=160)
    rendered.print(progress.make_tasks_table(progress.tasks))
    assert "361/361 ticks of 60 s · bound 10" in rendered.export_text()
