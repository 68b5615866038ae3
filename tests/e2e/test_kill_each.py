"""SIGKILL each service mid-run and start it again: nothing lost, nothing bound twice, no pod
started twice by a node agent, Redis allocations equal the sum of bound pods' requests."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from colo.sim import traces as tr
from colo.sim.run import run_all
from colo.sim.scenario import Scenario, ScenarioParams, build_scenario
from colo.sim.services import SERVICES, Supervisor

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not (tr.traces_dir() / tr.NODE_LIST).exists(), reason=f"traces not found in {tr.traces_dir()}: set COLO_TRACES_DIR or run `make traces`"),
]

SHORT = ScenarioParams(nodes=6, hours=0.5, seed=2)
KILL_STEP = 8


@pytest.fixture(scope="module")
def scenario() -> Scenario:
    return build_scenario(SHORT)


@pytest.mark.parametrize("victim", [name for name, _ in SERVICES if name != "scheduler"])
def test_kill_and_restart_loses_nothing(scenario: Scenario, tmp_path: Path, victim: str) -> None:
    async def kill(step: int, now: float, sup: Supervisor) -> None:
        if step == KILL_STEP:
            await sup.restart(victim, crash=True)

    (result,) = asyncio.run(run_all(scenario, tmp_path, ("colo",), show_progress=False, hook=kill))
    m = result.metrics
    assert result.restarts == {victim: 1}
    assert m.tick_errors == []
    assert result.violations == []
    assert m.double_bound() == []
    assert m.unaccounted() == []
    assert set(m.submitted_at) - set(m.rejected) <= set(result.store_phases)
    assert all(code == 0 for code in result.exit_codes.values()), result.exit_codes
