"""The ``gpu`` demo scenario (colo.sim.gpu_scenario): nodes from the GPU node list, GPU pods with the requests,
QoS and order of the trace rows they come from, batch tasks as in the default scenario; and the GPU figures
(colo.sim.gpu_metrics) against a direct definition of FGD's fragmentation."""

from __future__ import annotations

import io
import random
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from colo.messages import (
    GPUInfo,
    GPURequest,
    NodeSpec,
    PodBound,
    PodSpec,
    PodStatus,
    Resources,
    TickAck,
    device_allocations,
)
from colo.sim import gpu_traces as gt
from colo.sim import traces as tr
from colo.sim.gpu_metrics import GpuUsage, Shape, fragmentation
from colo.sim.gpu_scenario import QOS_MAP, GpuParams, build_gpu_scenario
from colo.sim.metrics import RunMetrics
from colo.sim.presets import preset
from colo.sim.report import write_report
from colo.sim.scenario import ScenarioParams

needs_traces = pytest.mark.skipif(not (tr.traces_dir() / gt.GPU_POD_LIST).exists(),
                                  reason=f"traces not found in {tr.traces_dir()}: set COLO_TRACES_DIR")

SMALL = ScenarioParams(nodes=10, hours=1.0, seed=3, jobs=True)


@needs_traces
def test_gpu_pods_carry_the_requests_of_their_trace_rows() -> None:
    sc = build_gpu_scenario(SMALL)
    rows = {r.name: r for r in gt.load_gpu_pods()}
    gpu_nodes = {n.sn: n for n in gt.load_gpu_nodes()}
    assert len(sc.nodes) == 10 and all(n.name in gpu_nodes and len(n.gpus) == gpu_nodes[n.name].gpu
                                       for n in sc.nodes)
    pods = sc.gpu_pods()
    assert pods and sc.description["gpu_pods"] == len(pods)
    requested = 0
    for p in pods:
        row = rows[p.app]
        assert p.gpu is not None and row.num_gpu > 0
        assert (p.gpu.count, p.gpu.milli) == (row.num_gpu, row.gpu_milli if row.num_gpu == 1 else 1000)
        assert (p.requests.cpu, p.requests.memory) == (row.cpu_milli, row.memory_bytes)
        assert (p.qos_class, p.priority_class, p.priority) == QOS_MAP[row.qos]
        assert p.sim is not None and p.sim.duration_s == max(1.0, row.lifetime_s)
        requested += row.gpu_total_milli
    assert requested >= GpuParams().demand * sc.description["cluster_gpus"] * 1000  # type: ignore[operator]
    # the trace's creation order and relative spacing, compressed by one factor
    arrivals = [a for a in sc.arrivals if a.pod.gpu is not None]
    k = sc.description["gpu_time_compression"]
    created = [rows[a.pod.app].creation_s for a in arrivals]
    assert created == sorted(created)
    assert all(a.at == pytest.approx(SMALL.batch_warmup_s + (c - GpuParams().window_start_s) / k, rel=1e-4, abs=0.01)  # type: ignore[operator]
               for a, c in zip(arrivals, created))
    assert {p.qos_class for p in pods} == {"LS", "BE"}
    # batch CPU work as the default scenario makes it (jobs here)
    assert sc.jobs() and sc.quotas and all(w.workload.template.gpu is None for w in sc.workloads)


@needs_traces
def test_the_gpu_preset_builds_from_the_same_seed_the_same_scenario() -> None:
    p = preset("gpu")
    params = ScenarioParams(**{**p.params, "nodes": 6, "hours": 0.5, "jobs": False})  # type: ignore[arg-type]
    a, b = p.build(params), p.build(params)
    assert [x.pod for x in a.arrivals] == [x.pod for x in b.arrivals] and a.nodes == b.nodes
    assert a.batch_pods() and a.gpu_pods()


def test_bad_gpu_parameters_are_listed_together() -> None:
    with pytest.raises(ValueError) as err:
        build_gpu_scenario(ScenarioParams(nodes=0), gpu=GpuParams(demand=0, lifetime_compression=-1))
    assert all(w in str(err.value) for w in ("nodes must be", "demand must be", "lifetime_compression must be"))


def _direct_f(free: list[int], cpu: int, model: str, shapes: list[tuple[Shape, float]]) -> float:
    """FGD's F written out per docs/gpu.md "The fragmentation measure"."""
    total = 0.0
    for s, p in shapes:
        fits = cpu >= s.cpu and (not s.models or model in s.models) and sum(f >= s.milli for f in free) >= s.count
        total += p * (sum(f for f in free if f < s.milli) if fits else sum(free))
    return total


def test_fragmentation_matches_the_direct_definition_on_random_nodes() -> None:
    rng = random.Random(7)
    for _ in range(200):
        n = rng.randint(1, 6)
        free = np.array([[rng.choice([0, 130, 500, 540, 1000]) if g < 4 else 0 for g in range(8)]
                         for _ in range(n)], dtype=np.int64)
        cpu = np.array([rng.randint(0, 64_000) for _ in range(n)], dtype=np.int64)
        models = [rng.choice(["T4", "G2"]) for _ in range(n)]
        shapes = [(Shape(rng.choice([0, 4000, 16000]), rng.choice([1, 1, 2]), rng.choice([250, 460, 1000]),
                         rng.choice([(), ("T4",)])), rng.random()) for _ in range(rng.randint(1, 4))]
        got = fragmentation(free, cpu, models, shapes)
        want = [_direct_f(list(free[i]), int(cpu[i]), models[i], shapes) for i in range(n)]
        assert got == pytest.approx(want)


def _node(name: str, gpus: int, cpu: int = 32_000) -> NodeSpec:
    res = Resources(cpu=cpu, memory=1 << 36, pods=110)
    return NodeSpec(name=name, capacity=res, allocatable=res, gpus=[GPUInfo(index=k, model="T4") for k in range(gpus)])


def _pod(uid: str, count: int, milli: int, cpu: int = 4000) -> PodSpec:
    return PodSpec(uid=uid, name=uid, requests=Resources(cpu=cpu), gpu=GPURequest(count=count, milli=milli))


@pytest.mark.parametrize(("binds", "ends", "alloc", "frag", "violations"), [
    pytest.param([], [], 0.0, 0.0, 0, id="empty: nothing fragmented for a half-GPU shape"),
    pytest.param([("a", "n1", [(0, 500)])], [], 0.0625, 0.0, 0, id="half a GPU: the other half fits the shape"),
    pytest.param([("a", "n1", [(0, 700)])], [], 0.0875, 0.0375, 0, id="0.3 GPU left below the shape: fragmented"),
    pytest.param([("a", "n1", [(0, 700)])], [("a", "n1", "Succeeded")], 0.0, 0.0, 0, id="freed when the pod ends"),
    pytest.param([("a", "n1", [(0, 700)])], [("a", "n2", "Failed")], 0.0875, 0.0375, 0,
                 id="an end on another node frees nothing"),
    pytest.param([("a", "n1", [(0, 700)]), ("b", "n1", [(0, 700)])], [], 0.125, 0.0, 1, id="GPU over 100 %: counted full, the violation named"),
])
def test_gpu_usage_rows(binds: list[tuple[str, str, list[tuple[int, int]]]], ends: list[tuple[str, str, str]],
                        alloc: float, frag: float, violations: int) -> None:
    # 2 nodes × 4 GPUs = 8 GPUs; target: one shape of half a GPU and 4 cores
    u = GpuUsage.of([_node("n1", 4), _node("n2", 4)], [_pod("t", 1, 500)])
    for uid, node, devices in binds:
        u.on_bound(PodBound(spec=_pod(uid, 1, devices[0][1]), node=node, at=1.0, devices=device_allocations(devices)))
    for uid, node, phase in ends:
        u.on_status(PodStatus(uid=uid, node=node, phase=phase, at=2.0))  # type: ignore[arg-type]
    assert u.sample(60.0) == pytest.approx((alloc, frag))
    assert len(u.violations) == violations


def test_a_node_out_of_cpu_strands_all_its_free_gpus() -> None:
    u = GpuUsage.of([_node("n1", 2, cpu=8000)], [_pod("t", 1, 1000, cpu=4000)])
    u.on_bound(PodBound(spec=PodSpec(uid="cpu", name="cpu", requests=Resources(cpu=6000)), node="n1", at=1.0))
    assert u.sample(60.0) == pytest.approx((0.0, 1.0))


@pytest.mark.parametrize("with_gpu_pods", [pytest.param(True, id="gpu scenario"),
                                           pytest.param(False, id="no GPU pods: no GPU charts or sentences")])
def test_report_shows_gpu_figures_only_with_gpu_pods(with_gpu_pods: bool, tmp_path: Path) -> None:
    nodes = [_node("n1", 4), _node("n2", 4)]
    runs = []
    for name in ("baseline", "colo"):
        m = RunMetrics(name=name, gpus=GpuUsage.of(nodes, [_pod("t", 1, 500)] if with_gpu_pods else []))
        m.on_bound(PodBound(spec=_pod("a", 1, 700), node="n1", at=1.0, devices=device_allocations([(0, 700)])))
        m.on_ticks(60.0, [TickAck(service="node-agent", seq=1, stats={"gpu_held_milli": 700.0})])
        runs.append(m)
    description = {"gpu_pods": 1} if with_gpu_pods else {}
    summary = write_report(tmp_path, runs, description, Console(file=io.StringIO(), width=200))
    assert summary["runs"]["colo"]["gpu_alloc_avg"] == pytest.approx(0.0875)
    assert summary["series"]["colo"][0]["gpu_held_agent"] == pytest.approx(0.0875)
    page = (tmp_path / "report.html").read_text()
    assert ("GPU fragmentation (FGD" in page) is with_gpu_pods
    assert any(s.startswith("GPU allocation") for s in summary["headline"]) is with_gpu_pods
