"""End to end: a tiny ``gpu`` scenario (4 GPU nodes, 24 virtual minutes) through the five services, baseline and
colo side by side: the GPU figures reach summary.json and the page, no invariant is violated, no GPU is held
above 100 % (by the bindings or by the sim node agents' ledgers)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from rich.console import Console

from colo.sim import gpu_traces as gt
from colo.sim import traces as tr
from colo.sim.presets import preset
from colo.sim.report import write_report
from colo.sim.run import run_all
from colo.sim.scenario import ScenarioParams

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not (tr.traces_dir() / gt.GPU_POD_LIST).exists(),
                       reason=f"traces not found in {tr.traces_dir()}: set COLO_TRACES_DIR or run `make traces`"),
]


def test_tiny_gpu_run_reports_gpu_allocation_and_fragmentation(tmp_path: Path) -> None:
    chosen = preset("gpu")
    scenario = chosen.build(ScenarioParams(nodes=4, hours=0.4, seed=1, jobs=True))
    assert scenario.gpu_pods()
    results = asyncio.run(run_all(scenario, tmp_path, chosen.runs, show_progress=False))
    for r in results:
        assert r.violations == [], r.metrics.name
        assert r.metrics.tick_errors == []
        assert r.metrics.unaccounted() == []
    with (tmp_path / "table.txt").open("w") as table:
        write_report(tmp_path, [r.metrics for r in results], scenario.description, Console(file=table, width=200))
    summary = json.loads((tmp_path / "summary.json").read_text())
    for run in ("baseline", "colo"):
        m = summary["runs"][run]
        assert m["gpu_pods_bound"] > 0 and 0 < m["gpu_alloc_avg"] <= 1 and 0 <= m["gpu_frag_avg"] <= 1
        series = summary["series"][run]
        assert max(s["gpu_allocated"] for s in series) <= 1
        assert 0 < max(s["gpu_held_agent"] for s in series) <= 1
    page = (tmp_path / "report.html").read_text()
    assert "GPU fragmentation (FGD" in page and "GPUs allocated" in page
    assert any(line.startswith("GPU allocation") for line in summary["headline"])
    assert "gpu_alloc_avg" in (tmp_path / "table.txt").read_text()
