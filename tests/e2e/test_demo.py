"""End to end: a shortened demo scenario through the five services as processes.

Invariants (DESIGN.md §10): no node over-committed on any resource incl. batch-* (checked
in Redis after every tick), no pod bound twice, every pod placed or reported unschedulable
with a reason (or rejected by admission with one), LS CPU satisfaction ≥ 0.99, services
stop cleanly. The restart test kills the scheduler mid-run and starts it again: nothing
lost, nothing bound twice.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from colo.sim import traces as tr
from colo.sim.run import RunResult, run_all
from colo.sim.scenario import Scenario, ScenarioParams, build_scenario
from colo.sim.services import Supervisor

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not (tr.traces_dir() / tr.NODE_LIST).exists(), reason=f"traces not found in {tr.traces_dir()}: set COLO_TRACES_DIR or run `make traces`"),
]

SHORT = ScenarioParams(nodes=8, hours=1.0, seed=1)
RESTART_STEP = 20


@pytest.fixture(scope="module")
def scenario() -> Scenario:
    return build_scenario(SHORT)


@pytest.fixture(scope="module")
def runs(scenario: Scenario, tmp_path_factory: pytest.TempPathFactory) -> dict[str, RunResult]:
    out = tmp_path_factory.mktemp("demo")
    results = asyncio.run(run_all(scenario, out, ("baseline", "colo"), show_progress=False))
    return {r.metrics.name: r for r in results}


def _check_invariants(result: RunResult, scenario: Scenario) -> None:
    m = result.metrics
    assert m.tick_errors == []
    assert result.violations == []
    assert m.double_bound() == []
    assert m.unaccounted() == []
    for uid, reasons in m.unschedulable.items():
        assert reasons and all(n > 0 for n in reasons.values()), uid
    assert set(m.submitted_at) == {a.pod.uid for a in scenario.arrivals}
    assert m.summary()["ls_cpu_satisfaction"] >= 0.99
    assert all(code == 0 for code in result.exit_codes.values()), result.exit_codes


@pytest.mark.parametrize("run", ["baseline", "colo"])
def test_invariants(runs: dict[str, RunResult], scenario: Scenario, run: str) -> None:
    _check_invariants(runs[run], scenario)


@pytest.mark.parametrize("run", ["baseline", "colo"])
def test_work_gets_done(runs: dict[str, RunResult], scenario: Scenario, run: str) -> None:
    s = runs[run].metrics.summary()
    ls = {p.uid for p in scenario.ls_pods()}
    assert ls <= set(runs[run].metrics.bind_events), "every LS pod placed"
    assert s["batch_tasks_completed"] > 0
    assert 0 < s["cpu_util_avg"] < 1


def test_colo_offers_batch_resources(runs: dict[str, RunResult]) -> None:
    colo = runs["colo"].allocated
    base = runs["baseline"].allocated
    assert sum(a.batch_cpu for a in colo.values()) >= 0
    assert sum(a.batch_cpu for a in base.values()) == 0, "baseline never uses batch resources"
    assert runs["colo"].metrics.bind_events, "colo bound pods"


def test_scheduler_restart_loses_nothing(scenario: Scenario, tmp_path: Path) -> None:
    async def kill_scheduler(step: int, now: float, sup: Supervisor) -> None:
        if step == RESTART_STEP:
            await sup.restart("scheduler", crash=True)

    (result,) = asyncio.run(run_all(scenario, tmp_path, ("colo",), show_progress=False, hook=kill_scheduler))
    assert result.restarts == {"scheduler": 1}
    _check_invariants(result, scenario)
    submitted = set(result.metrics.submitted_at)
    # nothing lost: every pod that reached the scheduler is in the store
    assert submitted - set(result.metrics.rejected) <= set(result.store_phases)
