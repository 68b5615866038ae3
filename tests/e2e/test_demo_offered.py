"""End to end: the batch and mid resources the demo reports are what slo-manager offered.

A short scenario through the five services: the colo run offers batch resources from the first
metrics on and mid resources once the profiler's prod pods are past their cold start
(:data:`colo.sim.run.SIM_ENV`), i.e. the profiler's prod-reclaimable reaches slo-manager; the
baseline offers neither. The report charts both and gives the mean.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from colo.settings import load_settings
from colo.sim import traces as tr
from colo.sim.report import write_report
from colo.sim.run import SIM_ENV, RunResult, run_all
from colo.sim.scenario import ScenarioParams, build_scenario
from colo_profiler.settings import ENV_PREFIX, ProfilerSettings

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not (tr.traces_dir() / tr.NODE_LIST).exists(),
                       reason=f"traces not found in {tr.traces_dir()}: set COLO_TRACES_DIR or run `make traces`"),
]

PARAMS = ScenarioParams(nodes=4, hours=1.5, seed=1)
COLD_START_S = load_settings(ProfilerSettings, ENV_PREFIX, env=SIM_ENV).cold_start_s


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, RunResult]:
    out = tmp_path_factory.mktemp("offered")
    results = asyncio.run(run_all(build_scenario(PARAMS), out, ("baseline", "colo"), show_progress=False))
    return {r.metrics.name: r for r in results}


def test_cold_start_fits_the_scenario() -> None:
    assert COLD_START_S < PARAMS.hours * 3600 - 600, "mid must get a chance to appear"


def test_colo_offers_batch_then_mid(runs: dict[str, RunResult]) -> None:
    colo = runs["colo"].metrics
    assert colo.tick_errors == []
    series = colo.series
    assert len(series) == int(PARAMS.hours * 3600 // 60) + 1
    assert any(s.batch_cpu_cores > 0 and s.batch_memory_gib > 0 for s in series)
    assert all(s.mid_cpu_cores == 0 for s in series if s.t < COLD_START_S), "prod pods are cold: nothing to reclaim"
    late = [s for s in series if s.t >= COLD_START_S + 120]
    assert late and any(s.mid_cpu_cores > 0 for s in late), "prod-reclaimable never reached slo-manager"
    summary = colo.summary()
    assert summary["batch_mid_cpu_offered_cores"] == pytest.approx(
        sum(s.batch_cpu_cores + s.mid_cpu_cores for s in series) / len(series))
    assert summary["batch_mid_cpu_offered_cores"] > 0


def test_baseline_offers_nothing(runs: dict[str, RunResult]) -> None:
    base = runs["baseline"].metrics
    assert base.series and all(
        (s.batch_cpu_cores, s.mid_cpu_cores, s.batch_memory_gib, s.mid_memory_gib) == (0, 0, 0, 0)
        for s in base.series)
    assert base.summary()["batch_mid_cpu_offered_cores"] == 0


def test_report_charts_the_offer(runs: dict[str, RunResult], tmp_path: Path) -> None:
    summary = write_report(tmp_path, [runs["baseline"].metrics, runs["colo"].metrics], {"nodes": PARAMS.nodes})
    page = (tmp_path / "report.html").read_text()
    assert "Batch and mid resources offered (cores)" in page
    assert summary["offered"]["colo"]["mid_cpu_cores"] > 0
    assert summary["offered"]["baseline"]["batch_cpu_cores"] == 0
