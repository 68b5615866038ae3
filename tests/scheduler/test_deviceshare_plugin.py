"""DeviceShare in the scheduler core: GPUs chosen at Reserve, Filter by fit and model, Score by our
fragmentation-aware policy, released with the pod; an adopted pod books exactly its stored devices; the device
invariants (hypothesis): no GPU over 100 %, whole-GPU pods never share, a pod's GPUs all on its node and of an
allowed model (docs/gpu.md "The DeviceShare plugin")."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from sched_helpers import GI

from colo.messages import GPUInfo, GPURequest, NodeSpec, PodSpec, Resources, devices_parse
from colo_scheduler.core import Scheduler
from colo_scheduler.framework.interface import CycleState
from colo_scheduler.plugins.deviceshare.plugin import DeviceShare
from colo_scheduler.podinfo import ASSIGNED_DEVICES
from colo_scheduler.settings import SchedulerSettings


def gpu_node(name: str, n: int, model: str = "V100M16", cpu: int = 96_000) -> NodeSpec:
    r = Resources(cpu=cpu, memory=512 * GI, pods=110)
    return NodeSpec(name=name, capacity=r, allocatable=r,
                    gpus=[GPUInfo(index=i, model=model, memory_bytes=16 * GI) for i in range(n)])


def gpu_pod(uid: str, count: int = 1, milli: int = 1000, models: list[str] | None = None,
            cpu: int = 4000) -> PodSpec:
    return PodSpec(uid=uid, name=uid, requests=Resources(cpu=cpu, memory=GI),
                   gpu=GPURequest(count=count, milli=milli, models=models or []))


def plugin(core: Scheduler) -> DeviceShare:
    p = core.framework.profile.plugins["DeviceShare"]
    assert isinstance(p, DeviceShare)
    return p


def place(core: Scheduler, *pods: PodSpec, now: float = 1.0) -> dict[str, str]:
    for p in pods:
        core.add_pod(p, now)
    out = core.schedule_cycle(now)
    return {p.pod.uid: f"{p.node}:{p.pod.extra.get(ASSIGNED_DEVICES, '')}" for p in out.placements}


def test_whole_and_shared_gpus_are_booked_and_cpu_pods_get_none() -> None:
    core = Scheduler(SchedulerSettings(seed=1))
    core.on_node(gpu_node("g1", 2), 0.0)
    cpu = PodSpec(uid="cpu", name="cpu", requests=Resources(cpu=1000, memory=GI))
    got = place(core, gpu_pod("w"), gpu_pod("s1", milli=500), gpu_pod("s2", milli=500), cpu)
    assert got["cpu"] == "g1:"
    assert got["w"] in ("g1:0:1000", "g1:1:1000")
    whole = devices_parse(got["w"].split(":", 1)[1])[0][0]
    assert {got["s1"], got["s2"]} == {f"g1:{1 - whole}:500"}, "the two halves share the other GPU"
    out = (core.add_pod(gpu_pod("x", milli=100), 2.0), core.schedule_cycle(2.0))[1]
    assert not out.placements and "Insufficient GPU share" in out.failures[0].result.message


def test_model_restriction_and_nodes_without_gpus() -> None:
    core = Scheduler(SchedulerSettings(seed=1))
    core.on_node(gpu_node("v100", 2), 0.0)
    core.on_node(gpu_node("a100", 2, "A100"), 0.0)
    r = Resources(cpu=96_000, memory=512 * GI, pods=110)
    core.on_node(NodeSpec(name="cpu", capacity=r, allocatable=r), 0.0)
    got = place(core, gpu_pod("a", 2, models=["A100"]))
    assert got == {"a": "a100:0:1000,1:1000"}
    out = (core.add_pod(gpu_pod("t4", models=["T4"]), 2.0), core.schedule_cycle(2.0))[1]
    msg = out.failures[0].result.message
    assert "no GPU of model T4" in msg and "no GPUs" in msg


def test_score_prefers_the_node_it_fragments_least() -> None:
    core = Scheduler(SchedulerSettings(seed=1))
    core.on_node(gpu_node("g1", 1), 0.0)
    core.on_node(gpu_node("g2", 1), 0.0)
    assert place(core, gpu_pod("half", milli=500)) == {"half": "g1:0:500"}
    # a second half: the half-used GPU (g1) leaves a whole free GPU on g2, splitting g2 would not
    state = CycleState(2.0, core.table)
    scores = plugin(core).score(state, core.pod_info(gpu_pod("h2", milli=500), 2.0)).tolist()
    assert scores[0] > scores[1]
    assert place(core, gpu_pod("h2", milli=500), now=2.0) == {"h2": "g1:0:500"}


def test_release_gives_the_gpus_back_and_an_adopted_pod_books_its_stored_devices() -> None:
    core = Scheduler(SchedulerSettings(seed=1))
    core.on_node(gpu_node("g1", 4), 0.0)
    assert core.adopt(gpu_pod("old", 2), "g1", 0.5, devices="1:1000,3:1000")
    assert plugin(core).nodes["g1"].pods["old"] == ((1, 1000), (3, 1000))
    assert place(core, gpu_pod("new", 2)) == {"new": "g1:0:1000,2:1000"}
    core.release("old", 2.0)
    assert plugin(core).nodes["g1"].pods.keys() == {"new"}
    assert plugin(core).nodes["g1"].free.tolist()[:4] == [0, 1000, 0, 1000]


SHAPES = st.one_of(st.tuples(st.sampled_from([1, 2, 4, 8]), st.just(1000)),
                   st.tuples(st.just(1), st.sampled_from([100, 250, 300, 500, 700, 1000])))


@settings(max_examples=40, deadline=None)
@given(nodes=st.lists(st.tuples(st.sampled_from([1, 2, 4, 8]), st.sampled_from(["V100M16", "A100", "T4"])),
                      min_size=1, max_size=4),
       pods=st.lists(st.tuples(SHAPES, st.sampled_from([[], ["A100"], ["V100M16", "T4"]]),
                               st.integers(0, 16_000)), min_size=1, max_size=24),
       releases=st.lists(st.integers(0, 23), max_size=6))
def test_device_invariants(nodes: list[tuple[int, str]], pods: list[tuple[tuple[int, int], list[str], int]],
                           releases: list[int]) -> None:
    core = Scheduler(SchedulerSettings(seed=1))
    model_of: dict[str, str] = {}
    count_of: dict[str, int] = {}
    for k, (n, model) in enumerate(nodes):
        core.on_node(gpu_node(f"n{k}", n, model), 0.0)
        model_of[f"n{k}"], count_of[f"n{k}"] = model, n
    specs = {f"p{j}": gpu_pod(f"p{j}", count, milli, models, cpu)
             for j, ((count, milli), models, cpu) in enumerate(pods)}
    half = len(pods) // 2
    place(core, *list(specs.values())[:half])
    for r in releases:
        core.release(f"p{r}", 1.5)
    place(core, *list(specs.values())[half:], now=2.0)
    used: dict[tuple[str, int], int] = {}
    whole: dict[tuple[str, int], str] = {}
    for uid, (info, row) in core.framework.placed.items():
        node, spec = core.table.names[row], specs[uid]
        assert spec.gpu is not None
        devs = devices_parse(str(info.extra.get(ASSIGNED_DEVICES, "")))
        assert len(devs) == spec.gpu.count, f"{uid} got {devs}"
        assert not spec.gpu.models or model_of[node] in spec.gpu.models, f"{uid} on a {model_of[node]}"
        for idx, milli in devs:
            assert 0 <= idx < count_of[node], f"{uid}: GPU {idx} is not on {node}"
            assert milli == spec.gpu.milli
            used[(node, idx)] = used.get((node, idx), 0) + milli
            if milli == 1000:
                whole[(node, idx)] = uid
    assert all(v <= 1000 for v in used.values()), "no GPU over 100 %"
    assert all(used[k] == 1000 for k in whole), "a whole-GPU pod shares its GPU with nobody"
    book = plugin(core).nodes
    for (node, idx), v in used.items():
        assert book[node].free[idx] == 1000 - v, "the bookings agree with the assignments"
