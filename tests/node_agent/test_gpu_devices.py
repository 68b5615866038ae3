"""The node agent enforces and passes on the GPUs the scheduler assigned (``PodBound.devices``, docs/gpu.md "On
the node"): the sim backend refuses a pod whose devices overcommit a GPU or are not on the node, and the host
backend's process gets ``CUDA_VISIBLE_DEVICES`` and ``COLO_GPU_DEVICES`` (a real process; no GPU needed)."""

from __future__ import annotations

import time
from pathlib import Path

import msgspec

from colo.messages import GPUInfo, GPURequest, NodeSLO, NodeSpec, PodSpec, Resources, SimWorkload
from colo_node_agent.backends.gpus import gpu_env
from colo_node_agent.backends.host_pods import launch
from colo_node_agent.backends.sim import SimBackend, SimConfig

G = 10**9


def gpu_node(n: int) -> NodeSpec:
    cap = Resources(cpu=32_000, memory=64 * G, pods=110)
    return NodeSpec(name="g1", capacity=cap, allocatable=cap, cpus=32,
                    gpus=[GPUInfo(index=i, model="V100M16") for i in range(n)])


def sim(n: NodeSpec) -> SimBackend:
    return SimBackend([n], SimConfig(sub_step_s=10.0), lambda name: NodeSLO(node=name))


def gpu_pod(uid: str, count: int = 1, milli: int = 1000) -> PodSpec:
    return PodSpec(uid=uid, name=uid, qos_class="LS", priority=9500, requests=Resources(cpu=1000, memory=G),
                   gpu=GPURequest(count=count, milli=milli),
                   sim=SimWorkload(kind="batch", cpu_milli=1000, duration_s=10_000, memory_bytes=G // 10))


def test_sim_refuses_a_pod_that_overcommits_a_gpu_and_frees_gpus_when_a_pod_ends() -> None:
    b = sim(gpu_node(2))
    assert b.start_pod(gpu_pod("w"), "g1", devices=((0, 1000),))
    assert b.start_pod(gpu_pod("s1", milli=600), "g1", devices=((1, 600),))
    assert b.start_pod(gpu_pod("s2", milli=500), "g1", devices=((1, 500),))  # 1100 milli on GPU 1
    assert b.start_pod(gpu_pod("share-whole", milli=100), "g1", devices=((0, 100),))  # shares the whole GPU 0
    assert b.start_pod(gpu_pod("far"), "g1", devices=((5, 1000),))
    assert b.start_pod(gpu_pod("none"), "g1")
    res = b.advance(10.0)
    refused = {e.uid: (e.reason, e.message) for e in res.ended}
    assert set(refused) == {"s2", "share-whole", "far", "none"}
    assert all(r == "UnexpectedAdmissionError" for r, _ in refused.values())
    assert "GPU 1 overcommitted: 600 milli held by s1, 500 more asked" in refused["s2"][1]
    assert "GPU 0 overcommitted: 1000 milli held by w" in refused["share-whole"][1]
    assert "GPU 5 is not on this node" in refused["far"][1]
    assert "bound without devices" in refused["none"][1]
    assert sorted(b.pods_on("g1")) == ["s1", "w"]
    assert b.gpus[0].used == {0: 1000, 1: 600}
    b.evict_pod("s1", "Evicted", "test", 11.0)
    assert b.gpus[0].used[1] == 0
    assert b.start_pod(gpu_pod("s3", milli=500), "g1", devices=((1, 500),))
    res = b.advance(20.0)
    assert not res.ended and "s3" in b.pods_on("g1")
    assert res.stats["gpu_held_milli"] == 1500  # the tick's stats total the ledgers (the demo's cross-check)


def test_cpu_pods_start_on_gpu_nodes_untouched() -> None:
    b = sim(gpu_node(1))
    cpu = msgspec.structs.replace(gpu_pod("cpu"), gpu=None)
    assert b.start_pod(cpu, "g1")
    assert not b.advance(10.0).ended and b.gpus[0].used == {}


def test_host_process_gets_the_gpu_environment(tmp_path: Path) -> None:
    assert gpu_env(()) == {}
    env = gpu_env(((0, 1000), (3, 250)))
    assert env == {"CUDA_VISIBLE_DEVICES": "0,3", "COLO_GPU_DEVICES": "0:1000,3:250"}
    out = tmp_path / "env.txt"
    spec = PodSpec(uid="p", name="p", command=["/bin/sh", "-c", f"env > {out}"],
                   env={"CUDA_VISIBLE_DEVICES": "7", "MINE": "x"})
    proc = launch(spec, [], tmp_path, env)
    proc.wait(timeout=10)
    deadline = time.monotonic() + 10
    while not out.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    seen = dict(line.split("=", 1) for line in out.read_text().splitlines() if "=" in line)
    assert seen["CUDA_VISIBLE_DEVICES"] == "0,3", "the assigned GPUs win over the pod's own value"
    assert seen["COLO_GPU_DEVICES"] == "0:1000,3:250" and seen["MINE"] == "x"
