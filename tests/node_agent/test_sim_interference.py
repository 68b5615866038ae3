"""The sim backend with the interference model: BE load harms LS pods as the calibration table says, less
under SCHED_IDLE; NodeMetric carries the modelled signals of LS pods; the BE budget's signal seam."""

from __future__ import annotations

import numpy as np
import pytest
from interference_tables import TABLE

from colo.messages import CPUSuppressStrategy, NodeSLO, NodeSpec, PodSpec, Resources, SimWorkload
from colo_node_agent.backends.interference_model import InterferenceModel, parse_calibration
from colo_node_agent.backends.sim import SimBackend, SimConfig

G = 10**9
MODEL = InterferenceModel(parse_calibration(TABLE, "test-table"))


def node(name: str, cores: int = 8) -> NodeSpec:
    cap = Resources(cpu=cores * 1000, memory=10 * G, pods=110)
    return NodeSpec(name=name, capacity=cap, allocatable=cap, cpus=cores)


def ls_pod(uid: str, cpu_milli: int) -> PodSpec:
    return PodSpec(uid=uid, name=uid, qos_class="LS", priority=9500, requests=Resources(cpu=cpu_milli, memory=G),
                   sim=SimWorkload(kind="series", step_s=60, cpu_util=[1.0], cpu_scale_milli=cpu_milli,
                                   memory_util=[1.0], memory_scale_bytes=G))


def be_pod(uid: str, cpu_milli: int) -> PodSpec:
    # batch-cpu 100 m: the BE group's shares stay low, so without SCHED_IDLE LS keeps its CPU by shares and
    # the harm is the model's alone
    return PodSpec(uid=uid, name=uid, qos_class="BE", priority=5500,
                   requests=Resources(batch_cpu=100, batch_memory=G // 10),
                   sim=SimWorkload(kind="batch", cpu_milli=cpu_milli, duration_s=36000, memory_bytes=G // 10))


def run(model: InterferenceModel | None, be_milli: int) -> tuple[SimBackend, dict[str, float]]:
    """Node ``idle`` (BE SCHED_IDLE) and node ``plain`` (no isolation), each an LS pod of 2 cores and
    ``be_milli`` of BE demand; suppress off so that the BE load is the same on both."""
    def slo(name: str) -> NodeSLO:
        return NodeSLO(node=name, cpu_suppress=CPUSuppressStrategy(enabled=False), be_cpu_idle=name == "idle")

    b = SimBackend([node("idle"), node("plain")], SimConfig(interference=model), slo)
    for name in ("idle", "plain"):
        assert b.start_pod(ls_pod(f"ls-{name}", 2000), name)
        if be_milli:
            assert b.start_pod(be_pod(f"be-{name}", be_milli), name)
    b.advance(60)
    return b, b.advance(360).stats


def test_be_without_sched_idle_inflates_ls_latency_more_and_costs_satisfaction() -> None:
    b, stats = run(MODEL, 4000)  # BE 4 of 8 cores: be_fraction 0.5
    inflation = b.ls_signal("latency_inflation")
    assert inflation.tolist() == pytest.approx([5.0, 300.0])  # the table's rows at 0.5: sched_idle, none
    assert b.ls_signal("runq_wait").tolist() == pytest.approx([0.1, 1.0])
    assert b.ls_signal("cpu_pressure").tolist() == pytest.approx([2.0, 40.0])
    assert (b.ls_signal("cpi") == -1).all()
    # served = demand / (1 + p50 inflation): sched_idle p50 2.0 ms = alone → 2000 m; none 6.0 ms → 2000 / 3
    assert stats["ls_cpu_demand_milli"] == pytest.approx(4000)
    assert stats["ls_cpu_served_milli"] == pytest.approx(2000 + 2000 / 3)
    assert stats["ls_cpu_served_milli"] / stats["ls_cpu_demand_milli"] < 1.0
    assert stats["ls_p99_inflation_mean_pct"] == pytest.approx(152.5)
    assert stats["ls_p99_inflation_max_pct"] == pytest.approx(300.0)
    assert stats["ls_runq_wait_ratio"] == pytest.approx(0.55)


def test_node_metric_carries_the_ls_pods_signals() -> None:
    b, _ = run(MODEL, 4000)
    metrics = {m.node: m for m in b.node_metrics(420)}
    pods = {p.uid: p for m in metrics.values() for p in m.pods}
    assert pods["be-idle"].interference is None and pods["be-plain"].interference is None
    plain = pods["ls-plain"].interference
    assert plain is not None
    assert plain.latency_inflation_percent == pytest.approx(300.0)
    assert plain.runq_wait_ratio == pytest.approx(1.0) and plain.cpu_pressure_some == pytest.approx(40.0)
    assert plain.cpi == -1
    idle = pods["ls-idle"].interference
    assert idle is not None and idle.latency_inflation_percent == pytest.approx(5.0)
    assert metrics["plain"].ls_cpu_served < metrics["plain"].ls_cpu_demand


def test_no_be_no_harm() -> None:
    b, stats = run(MODEL, 0)
    assert b.ls_signal("latency_inflation").tolist() == [0.0, 0.0]
    assert b.ls_signal("runq_wait").tolist() == pytest.approx([0.05, 0.05])  # the table's LS-alone value
    assert stats["ls_cpu_served_milli"] == pytest.approx(stats["ls_cpu_demand_milli"])
    assert stats["ls_p99_inflation_max_pct"] == 0.0


def test_without_a_model_nothing_is_harmed_and_signals_are_unknown() -> None:
    b, stats = run(None, 4000)
    for kind in ("runq_wait", "cpu_pressure", "cpi", "latency_inflation"):
        assert (b.ls_signal(kind) == -1).all()
    assert stats["ls_cpu_served_milli"] == pytest.approx(stats["ls_cpu_demand_milli"])
    assert stats["ls_p99_inflation_mean_pct"] == -1 and stats["ls_runq_wait_ratio"] == -1
    assert all(p.interference is None for m in b.node_metrics(420) for p in m.pods)
    with pytest.raises(ValueError, match="unknown LS signal 'ipc'"):
        b.ls_signal("ipc")


def test_a_node_without_ls_pods_has_no_signal() -> None:
    b = SimBackend([node("n1"), node("n2")], SimConfig(interference=MODEL), lambda n: NodeSLO(node=n))
    b.start_pod(ls_pod("ls", 1000), "n1")
    b.start_pod(be_pod("be", 2000), "n2")
    b.advance(60)
    assert b.ls_signal("runq_wait")[1] == -1 and b.ls_signal("runq_wait")[0] >= 0
    assert np.isfinite(b.ls_signal("latency_inflation")).all()
