"""Named demo scenarios (``make demo SCENARIO=NAME``, ``python -m colo.sim --scenario NAME``).

A preset gives defaults for the scenario parameters and the runs; any option given on the command line wins
over the preset's value. ``default`` is the scenario of docs/scenario.md with the baseline and colo runs.
New presets register here, one entry each, with their own builder when they need other inputs than
:func:`~colo.sim.scenario.build_scenario` takes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from colo.sim.gpu_scenario import build_gpu_scenario
from colo.sim.scenario import Scenario, ScenarioParams, build_scenario


@dataclass(frozen=True)
class Preset:
    """A named scenario: ``params`` overrides of :class:`ScenarioParams` fields, the ``runs`` it compares (the
    keys of :data:`colo.sim.run.RUN_ENV`) and the ``build`` function that turns the parameters into a
    :class:`Scenario` (raises ValueError or TraceError as that function does)."""

    name: str
    summary: str
    params: dict[str, object] = field(default_factory=dict)
    runs: tuple[str, ...] = ("baseline", "colo")
    build: Callable[[ScenarioParams], Scenario] = build_scenario


PRESETS: dict[str, Preset] = {
    "default": Preset("default", "the trace-driven default: LS services and batch tasks, baseline vs colo"),
    "gpu": Preset("gpu", "gpu-v2023 GPU nodes with the trace's LS/BE GPU pods plus batch CPU tasks, baseline vs colo",
                  params={"nodes": 40, "hours": 2.0}, build=build_gpu_scenario),
    "saturated": Preset(
        "saturated", "batch demand well above what fits (20 nodes, 2 h, v2017 batch x0.25 plus gpu-v2023 CPU-only "
                     "BE pods at 2x the cluster's CPU-time, arriving over the first quarter of the batch window): "
                     "baseline, colo (static thresholds), colo-adaptive (SLO-driven BE budget), colo-adaptive-mem "
                     "(the budget with batch memory reclaimed up to 80 %), with the utilization ceilings",
        params={"nodes": 20, "hours": 2.0, "batch_scale": 0.25, "be_cpu_pods_fraction": 2.0,
                "be_cpu_pods_arrival_fraction": 0.25},
        runs=("baseline", "colo", "colo-adaptive", "colo-adaptive-mem")),
}
"""Every preset by name."""


def preset(name: str) -> Preset:
    """The preset called ``name``; raises ValueError naming the known ones when there is none."""
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown scenario {name!r}: known are {', '.join(sorted(PRESETS))}") from None
