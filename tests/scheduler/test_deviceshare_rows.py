"""DeviceShare's compiled Filter and Score over table rows (plugins/deviceshare/rows.py) against the plugin's
per-node Python reference (``fit``, ``evaluate(..., fresh=True)``), through placements, releases, CPU pods and
target rebuilds (the score cache must never serve a stale row); min-max normalisation and the reasons of
``explain`` as tables; when CPU pods are scored (``score_cpu_pods`` None, True, False)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sched_helpers import GI

from colo.messages import GPUInfo, GPURequest, NodeSpec, PodSpec, Resources
from colo_scheduler.core import Scheduler
from colo_scheduler.framework.interface import CycleState
from colo_scheduler.plugins.deviceshare.plugin import (
    NO_FIT,
    RAW_PER_GPU,
    DeviceShare,
    DeviceShareArgs,
    normalize_min_max,
)
from colo_scheduler.settings import SchedulerSettings


def gpu_node(name: str, n: int, model: str = "V100M16", cpu: int = 96_000) -> NodeSpec:
    r = Resources(cpu=cpu, memory=512 * GI, pods=110)
    gpus = [GPUInfo(index=i, model=model, memory_bytes=16 * GI) for i in range(n)]
    return NodeSpec(name=name, capacity=r, allocatable=r, gpus=gpus)


def cpu_node(name: str, cpu: int = 64_000) -> NodeSpec:
    r = Resources(cpu=cpu, memory=512 * GI, pods=110)
    return NodeSpec(name=name, capacity=r, allocatable=r)


def pod(uid: str, count: int = 0, milli: int = 1000, models: list[str] | None = None, cpu: int = 4000) -> PodSpec:
    gpu = GPURequest(count=count, milli=milli, models=models or []) if count else None
    return PodSpec(uid=uid, name=uid, requests=Resources(cpu=cpu, memory=GI), gpu=gpu)


def plugin(core: Scheduler) -> DeviceShare:
    p = core.framework.profile.plugins["DeviceShare"]
    assert isinstance(p, DeviceShare)
    return p


def place(core: Scheduler, *pods: PodSpec, now: float = 1.0) -> int:
    for p in pods:
        core.add_pod(p, now)
    return len(core.schedule_cycle(now).placements)


def assert_matches_reference(core: Scheduler, spec: PodSpec) -> None:
    """filter/filter_rows/filter_node, score/score_rows/score_node equal the per-node Python reference."""
    ds, table = plugin(core), core.table
    state = CycleState(3.0, table)
    info = core.pod_info(spec, 3.0)
    rows = np.arange(table.n, dtype=np.intp)
    if spec.gpu is not None:
        want = [ds.fit(table, i, spec.gpu) for i in range(table.n)]
        got = ds.filter(state, info)
        assert got is not None and got.tolist() == want
        assert ds.filter_rows(state, info, rows[::-1]).tolist() == want[::-1]
        assert [ds.filter_node(state, info, i) for i in range(table.n)] == want
    req = ds.score_request(info)
    if req is None:
        assert ds.score(state, info).tolist() == [0] * table.n
        return
    ref = []
    for i in range(table.n):
        s = ds.evaluate(table, i, req, spec.requests.cpu, fresh=True)[0]
        ref.append(round(s * RAW_PER_GPU) if math.isfinite(s) else NO_FIT)
    assert ds.score(state, info).tolist() == ref
    assert ds.score_rows(state, info, rows[::-1]).tolist() == ref[::-1]
    assert [ds.score_node(state, info, i) for i in range(table.n)] == ref


REQUESTS = {
    "whole GPU": pod("q", 1),
    "two whole GPUs": pod("q", 2),
    "half a GPU": pod("q", 1, 500),
    "a tenth, lots of CPU": pod("q", 1, 100, cpu=40_000),
    "A100 only": pod("q", 1, 300, ["A100"]),
    "a model no node has": pod("q", 1, 500, ["H100"]),
    "CPU pod": pod("q"),
}


@pytest.mark.parametrize("policy", ["Ours", "FGD"])
@pytest.mark.parametrize("name", list(REQUESTS))
def test_compiled_rows_equal_the_reference(policy: str, name: str) -> None:
    core = Scheduler(SchedulerSettings(seed=1))
    plugin(core).args = DeviceShareArgs(policy=policy)  # type: ignore[arg-type]
    for k, (n, model) in enumerate([(8, "V100M16"), (4, "A100"), (2, "A100"), (1, "T4")]):
        core.on_node(gpu_node(f"g{k}", n, model), 0.0)
    core.on_node(cpu_node("c0"), 0.0)
    assert_matches_reference(core, REQUESTS[name])  # before any GPU pod: the default target
    place(core, pod("a", 1, 500, cpu=8000), pod("b", 2, cpu=20_000), pod("c", 1, 250, ["A100"]), pod("d"))
    assert_matches_reference(core, REQUESTS[name])  # placed (the seen target has a CPU need now)
    assert place(core, pod("e", cpu=70_000), now=1.5) == 1  # too big for c0: a GPU node's CPU, not its GPUs
    assert core.framework.placed["e"][1] != core.table.index["c0"]
    assert_matches_reference(core, REQUESTS[name])  # the cache must see the row's CPU change
    core.release("b", 2.0)
    assert_matches_reference(core, REQUESTS[name])  # released: the cache must not serve the old rows


@settings(max_examples=25, deadline=None)
@given(nodes=st.lists(st.tuples(st.sampled_from([1, 2, 4, 8]), st.sampled_from(["V100M16", "A100"]),
                                st.sampled_from([16_000, 96_000])), min_size=1, max_size=5),
       pods=st.lists(st.tuples(st.sampled_from([0, 1, 1, 2]), st.sampled_from([200, 500, 1000]),
                               st.integers(0, 30_000)), min_size=1, max_size=20),
       probe=st.tuples(st.sampled_from([0, 1, 2]), st.sampled_from([300, 1000]), st.integers(0, 20_000)))
def test_compiled_rows_equal_the_reference_on_random_clusters(
        nodes: list[tuple[int, str, int]], pods: list[tuple[int, int, int]], probe: tuple[int, int, int]) -> None:
    core = Scheduler(SchedulerSettings(seed=1))
    plugin(core).args = DeviceShareArgs(refresh_every=2)  # target rebuilt often: caches cleared often
    for k, (n, model, cpu) in enumerate(nodes):
        core.on_node(gpu_node(f"g{k}", n, model, cpu), 0.0)
    core.on_node(cpu_node("c0"), 0.0)
    for j, (count, milli, cpu) in enumerate(pods):
        place(core, pod(f"p{j}", count, milli if count == 1 else 1000, cpu=cpu))
        if j % 3 == 2:
            core.release(f"p{j - 1}", 1.5)
    count, milli, cpu = probe
    assert_matches_reference(core, pod("probe", count, milli if count == 1 else 1000, cpu=cpu))
    ds = plugin(core)
    for name, gpus in ds.nodes.items():  # the row arrays agree with the bookings
        assert ds.rows.free[core.table.index[name]].tolist() == gpus.free.tolist()


@pytest.mark.parametrize(("raw", "feasible", "want"), [
    pytest.param([5, 1, 3], [True, True, True], [100, 0, 50], id="spread onto 0..100"),
    pytest.param([5, 1, 3], [False, True, True], [0, 0, 100], id="min and max over feasible rows only"),
    pytest.param([7, 7, 2], [True, True, False], None, id="one value everywhere feasible"),
    pytest.param([1, 2], [False, False], None, id="nothing feasible"),
    pytest.param([NO_FIT, -20_000, -10_000], [False, True, True], [0, 0, 100], id="negative raw scores"),
])
def test_min_max(raw: list[int], feasible: list[bool], want: list[int] | None) -> None:
    got = normalize_min_max(np.array(raw, np.int64), np.array(feasible, np.bool_))
    assert (0 if want is None else want) == (got if isinstance(got, int) else got.dense(len(raw)).tolist())


@pytest.mark.parametrize(("request_", "want"), [
    pytest.param(pod("q", 1, 1000, ["T4"]), {"no GPUs": 1, "no GPU of model T4": 2}, id="model"),
    pytest.param(pod("q", 4), {"no GPUs": 1, "Insufficient nvidia.com/gpu": 1}, id="whole GPUs"),
    pytest.param(pod("q", 1, 800), {"no GPUs": 1, "Insufficient GPU share": 1}, id="share"),
])
def test_explain_reasons(request_: PodSpec, want: dict[str, int]) -> None:
    core = Scheduler(SchedulerSettings(seed=1))
    core.on_node(gpu_node("g8", 8), 0.0)
    core.on_node(gpu_node("g1", 1), 0.0)
    core.on_node(cpu_node("c0"), 0.0)
    place(core, pod("half", 1, 500))  # g1's only GPU half used (the first pod takes the tighter node)
    assert core.framework.placed["half"][1] == core.table.index["g1"]
    ds = plugin(core)
    info = core.pod_info(request_, 2.0)
    state = CycleState(2.0, core.table)
    feasible = ds.filter(state, info)
    assert feasible is not None
    assert ds.explain(state, info, ~feasible) == want


@pytest.mark.parametrize(("mode", "seen_gpu_pod", "scored"), [
    pytest.param(None, False, False, id="auto before any GPU pod: the target asks no CPU"),
    pytest.param(None, True, True, id="auto once GPU pods with CPU were seen"),
    pytest.param(True, False, True, id="on"),
    pytest.param(False, True, False, id="off"),
])
def test_when_cpu_pods_are_scored(mode: bool | None, seen_gpu_pod: bool, scored: bool) -> None:
    core = Scheduler(SchedulerSettings(seed=1))
    plugin(core).args = DeviceShareArgs(score_cpu_pods=mode)
    core.on_node(gpu_node("g1", 8, cpu=16_000), 0.0)
    core.on_node(cpu_node("cpu", 16_000), 0.0)
    if seen_gpu_pod:
        assert place(core, pod("seen", 1, cpu=2000)) == 1  # target: 2 cores per GPU
    hog = core.pod_info(pod("hog", cpu=12_000), 2.0)
    state = CycleState(2.0, core.table)
    ds = plugin(core)
    raw = ds.score(state, hog).tolist()
    if scored:
        assert raw[1] == 0 and raw[0] < 0, "12 cores on the GPU node would strand its GPUs; none elsewhere"
    else:
        assert raw == [0, 0]
    assert ds.filter(state, hog) is None, "fitting is unchanged"
