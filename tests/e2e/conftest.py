"""The demo scenario with jobs (20 nodes, 1 h) and its two runs, shared by the end-to-end modules that read
them (test_demo_jobs.py checks gangs, quotas and priorities; test_report_browser.py renders its report): the
pair of runs is made once per session."""

from __future__ import annotations

import asyncio

import pytest

from colo.sim.run import RunResult, run_all
from colo.sim.scenario import Scenario, ScenarioParams, build_scenario

JOBS_PARAMS = ScenarioParams(nodes=20, hours=1.0, seed=1, jobs=True)
"""20 nodes, 1 virtual hour, batch tasks as jobs: gangs, two teams' quotas, high-priority jobs."""


@pytest.fixture(scope="session")
def jobs_scenario() -> Scenario:
    return build_scenario(JOBS_PARAMS)


@pytest.fixture(scope="session")
def jobs_runs(jobs_scenario: Scenario, tmp_path_factory: pytest.TempPathFactory) -> dict[str, RunResult]:
    out = tmp_path_factory.mktemp("demo-jobs")
    results = asyncio.run(run_all(jobs_scenario, out, ("baseline", "colo"), show_progress=False))
    return {r.metrics.name: r for r in results}
