"""The demo's named scenarios: an option given wins over the preset, the preset over the default."""

from __future__ import annotations

import argparse

import pytest

from colo.sim import presets
from colo.sim.demo import add_arguments, scenario_params
from colo.sim.presets import Preset
from colo.sim.scenario import ScenarioParams


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(list(argv))


@pytest.mark.parametrize(("argv", "preset_params", "want"), [
    pytest.param((), {}, ScenarioParams(jobs=True), id="defaults-with-jobs"),
    pytest.param((), {"nodes": 7, "batch_scale": 3.0}, ScenarioParams(nodes=7, batch_scale=3.0, jobs=True),
                 id="preset-over-default"),
    pytest.param(("--nodes", "4"), {"nodes": 7}, ScenarioParams(nodes=4, jobs=True), id="option-over-preset"),
    pytest.param(("--no-jobs",), {"jobs": True}, ScenarioParams(jobs=False), id="no-jobs-over-preset"),
    pytest.param((), {"jobs": False}, ScenarioParams(jobs=False), id="preset-without-jobs"),
])
def test_scenario_params_precedence(argv: tuple[str, ...], preset_params: dict[str, object],
                                    want: ScenarioParams) -> None:
    assert scenario_params(_args(*argv), Preset("p", "test", preset_params)) == want


def test_unknown_scenario_names_the_known_ones() -> None:
    with pytest.raises(ValueError, match="known are default"):
        presets.preset("nope")
