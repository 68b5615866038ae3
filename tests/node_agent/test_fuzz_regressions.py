"""Node agent inputs the fuzz run (tests/fuzz) found mishandled, each a regression test."""

from __future__ import annotations

import pytest

from colo.messages import PodSpec, Resources, SimWorkload
from colo_node_agent.service import pod_problems

G = 10**9


@pytest.mark.parametrize("sim", [
    pytest.param(SimWorkload(kind="series", step_s=1e-320, cpu_util=[0.5], cpu_scale_milli=1000), id="tiny-step"),
    pytest.param(SimWorkload(kind="series", step_s=float("inf"), cpu_util=[0.5], cpu_scale_milli=1000),
                 id="infinite-step"),
    pytest.param(SimWorkload(kind="series", cpu_util=[float("inf")], cpu_scale_milli=1000), id="infinite-util"),
    pytest.param(SimWorkload(kind="batch", cpu_milli=500, duration_s=float("inf")), id="infinite-duration"),
    pytest.param(SimWorkload(kind="series", cpu_util=[0.5], cpu_scale_milli=2**64), id="huge-scale"),
])
def test_a_sim_workload_the_model_cannot_compute_is_refused(sim: SimWorkload) -> None:
    """Found by the fuzz run: a PodBound whose ``sim.step_s`` was 1e-320 (or a series value 1e999, decoded as
    inf) was started, and every demand computation cast inf/NaN to int64 (numpy ``RuntimeWarning: invalid value
    encountered in cast``), indexing the usage series with garbage."""
    spec = PodSpec(uid="p1", name="p1", requests=Resources(cpu=1000, memory=G), sim=sim)
    assert pod_problems(spec) != []


def test_an_ordinary_sim_workload_is_accepted() -> None:
    spec = PodSpec(uid="p1", name="p1", sim=SimWorkload(kind="series", step_s=60, cpu_util=[0.5, 1.0],
                                                        cpu_scale_milli=2000, memory_util=[0.2], memory_scale_bytes=G))
    assert pod_problems(spec) == []
