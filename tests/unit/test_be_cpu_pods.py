"""CPU-heavy batch pods (colo.sim.be_cpu_pods, ``ScenarioParams.be_cpu_pods_fraction``): pods with the requests
of the gpu-v2023 CPU-only BE rows they come from, batch kind and class, CPU-time near the target share,
arrivals and lifetimes within the run, deterministic; the parameter's errors listed."""

from __future__ import annotations

import pytest

from colo.classes import validate_classes
from colo.sim import gpu_traces as gt
from colo.sim import traces as tr
from colo.sim.be_cpu_pods import MIN_LIFETIME_S, cpu_only_be_rows
from colo.sim.scenario import Scenario, ScenarioParams, build_scenario

pytestmark = pytest.mark.skipif(
    not (tr.traces_dir() / tr.NODE_LIST).exists() or not (tr.traces_dir() / gt.GPU_POD_LIST).exists(),
    reason=f"traces not found in {tr.traces_dir()}: set COLO_TRACES_DIR or run `make traces`")

PARAMS = ScenarioParams(nodes=10, hours=1.0, seed=5, jobs=True, be_cpu_pods_fraction=0.5)


@pytest.fixture(scope="module")
def scenario() -> Scenario:
    return build_scenario(PARAMS)


def _cpu_heavy(sc: Scenario) -> list[tuple[float, object]]:
    return [(a.at, a.pod) for a in sc.arrivals if a.pod.uid.startswith("becpu-")]


def test_pods_carry_the_requests_of_their_trace_rows(scenario: Scenario) -> None:
    rows = {r.name: r for r in cpu_only_be_rows()}
    assert len(rows) == 450
    pods = [p for p in scenario.batch_pods() if p.uid.startswith("becpu-")]
    assert pods and scenario.description["be_cpu_pods"] == len(pods)
    run_s = PARAMS.hours * 3600
    for p in pods:
        row = rows[p.app.removeprefix("becpu-")]
        assert (p.requests.cpu, p.requests.memory) == (row.cpu_milli, row.memory_bytes)
        assert p.limits == p.requests
        assert (p.qos_class, p.priority_class, p.priority) == ("BE", "batch", 5500)
        assert p.labels["colo.sim/kind"] == "batch"
        assert validate_classes(p) == []
        assert p.sim is not None and p.sim.kind == "batch"
        assert p.sim.duration_s == max(MIN_LIFETIME_S, min(float(row.lifetime_s), run_s))
        assert PARAMS.batch_warmup_s <= p.created_at < run_s


def test_cpu_time_reaches_the_target_share_by_at_most_one_pod(scenario: Scenario) -> None:
    pods = [p for p in scenario.batch_pods() if p.uid.startswith("becpu-")]
    cluster = int(scenario.description["cluster_cpu_milli"]) * PARAMS.hours * 3600  # type: ignore[call-overload]
    cpu_s = [p.requests.cpu * p.sim.duration_s for p in pods if p.sim is not None]
    assert sum(cpu_s) >= PARAMS.be_cpu_pods_fraction * cluster
    assert sum(cpu_s) - max(cpu_s) < PARAMS.be_cpu_pods_fraction * cluster
    assert scenario.description["be_cpu_offered_cpu_fraction"] == pytest.approx(sum(cpu_s) / cluster, abs=1e-4)


def test_same_seed_same_pods_and_zero_adds_none(scenario: Scenario) -> None:
    again = build_scenario(PARAMS)
    assert [(at, p.uid) for at, p in _cpu_heavy(again)] == [(at, p.uid) for at, p in _cpu_heavy(scenario)]  # type: ignore[attr-defined]
    off = build_scenario(ScenarioParams(nodes=10, hours=1.0, seed=5, jobs=True))
    assert _cpu_heavy(off) == [] and "be_cpu_pods" not in off.description
    # the v2017 batch work is the same with or without the CPU-heavy pods
    assert off.jobs() == scenario.jobs()


def test_arrival_fraction_gives_the_same_pods_earlier(scenario: Scenario) -> None:
    early = build_scenario(ScenarioParams(**{**PARAMS.__dict__, "be_cpu_pods_arrival_fraction": 0.25}))
    ats = [at for at, _ in _cpu_heavy(early)]
    end = PARAMS.batch_warmup_s + 0.25 * (PARAMS.hours * 3600 - PARAMS.batch_warmup_s)
    assert ats and min(ats) >= PARAMS.batch_warmup_s and max(ats) < end
    assert max(at for at, _ in _cpu_heavy(scenario)) > end  # spread over the whole window by default
    # the same draw: the same pods, only their arrival moves
    assert sorted(p.uid for _, p in _cpu_heavy(early)) == sorted(p.uid for _, p in _cpu_heavy(scenario))  # type: ignore[attr-defined]


@pytest.mark.parametrize(("params", "messages"), [
    pytest.param(ScenarioParams(be_cpu_pods_fraction=-0.1), ["be_cpu_pods_fraction must be within 0..10"],
                 id="negative"),
    pytest.param(ScenarioParams(be_cpu_pods_fraction=11), ["be_cpu_pods_fraction must be within 0..10"],
                 id="too-large"),
    pytest.param(ScenarioParams(be_cpu_pods_arrival_fraction=0), ["be_cpu_pods_arrival_fraction must be within (0, 1]"],
                 id="arrival-zero"),
    pytest.param(ScenarioParams(be_cpu_pods_arrival_fraction=1.5),
                 ["be_cpu_pods_arrival_fraction must be within (0, 1]"], id="arrival-above-one"),
    pytest.param(ScenarioParams(be_cpu_pods_fraction=-1, nodes=0),
                 ["nodes must be ≥ 1", "be_cpu_pods_fraction must be within 0..10"], id="listed-with-others"),
])
def test_bad_fraction_is_listed(params: ScenarioParams, messages: list[str]) -> None:
    assert all(any(m in p for p in params.problems()) for m in messages)
    with pytest.raises(ValueError, match="be_cpu_pods_"):
        build_scenario(params)
