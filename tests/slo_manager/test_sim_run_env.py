"""The demo's runs (colo.sim.run.RUN_ENV) are valid slo-manager settings and set what their names say."""

from __future__ import annotations

import pytest

from colo.settings import load_settings
from colo.sim.run import RUN_ENV
from colo_slo_manager.settings import ENV_PREFIX, SloManagerSettings


def _settings(run: str) -> SloManagerSettings:
    env = {k: v for k, v in RUN_ENV[run].items() if k.startswith(ENV_PREFIX + "_")}
    return load_settings(SloManagerSettings, ENV_PREFIX, env=env)


@pytest.mark.parametrize("run", sorted(RUN_ENV))
def test_every_run_loads(run: str) -> None:
    _settings(run)


def test_colo_adaptive_mem_is_colo_adaptive_with_more_memory_room() -> None:
    adaptive, mem = _settings("colo-adaptive"), _settings("colo-adaptive-mem")
    assert adaptive.be_budget_enabled and mem.be_budget_enabled
    # judged by what the sim models (docs/node-agent.md "BE budget": the packaged table's run-queue wait is not)
    assert adaptive.node_slo.be_budget.signal == mem.node_slo.be_budget.signal == "latency_inflation"
    assert (adaptive.batch.memory_reclaim_threshold_percent, adaptive.node_slo.memory_evict.threshold_percent) == (65, 70)
    assert (mem.batch.memory_reclaim_threshold_percent, mem.node_slo.memory_evict.threshold_percent) == (80, 85)
    # everything else is the same policy
    assert adaptive.node_slo.cpu_suppress == mem.node_slo.cpu_suppress
    assert adaptive.batch.cpu_reclaim_threshold_percent == mem.batch.cpu_reclaim_threshold_percent
