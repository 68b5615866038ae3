"""The sim backend runs the cpuset, burst, memory QoS and blkio strategies through the same cgroup writes, and
its CPU sharing reads the results back (quota scaled by burst caps demand; BE never gets LSE CPUs)."""

from __future__ import annotations

import pytest

from colo.messages import (
    BlkIOLimit,
    BlkIOStrategy,
    CPUBurstStrategy,
    CPUSetStrategy,
    MemoryQoSStrategy,
    NodeSLO,
    NodeSpec,
    PodSpec,
    Resources,
    SimWorkload,
)
from colo_node_agent.backends.sim import SimBackend, SimConfig
from colo_node_agent.cgroups.resources import cpuset_parse

G = 10**9


def node(cores: int = 8, reserved: str = "") -> NodeSpec:
    cap = Resources(cpu=cores * 1000, memory=64 * G, pods=110)
    return NodeSpec(name="n1", capacity=cap, allocatable=cap, cpus=cores, reserved_cpus=reserved)


def sim(slo: NodeSLO, n: NodeSpec | None = None) -> SimBackend:
    return SimBackend([n or node()], SimConfig(sub_step_s=10.0), lambda name: msgspec_replace(slo, name))


def msgspec_replace(slo: NodeSLO, name: str) -> NodeSLO:
    import msgspec

    return msgspec.structs.replace(slo, node=name)


def pod(uid: str, qos: str, cpu: int, demand: int, limit: int = 0, mem: int = G) -> PodSpec:
    return PodSpec(uid=uid, name=uid, qos_class=qos, priority=9500,  # type: ignore[arg-type]
                   requests=Resources(cpu=cpu, memory=mem), limits=Resources(cpu=limit, memory=2 * mem if limit else 0),
                   sim=SimWorkload(kind="series", step_s=60, cpu_util=[1.0], cpu_scale_milli=demand,
                                   memory_util=[1.0], memory_scale_bytes=mem))


def be(uid: str, cpu: int = 4000) -> PodSpec:
    return PodSpec(uid=uid, name=uid, qos_class="BE", priority=5500,
                   requests=Resources(batch_cpu=1000, batch_memory=G // 10),
                   sim=SimWorkload(kind="batch", cpu_milli=cpu, duration_s=10_000, memory_bytes=G // 10))


def cpus(b: SimBackend, path: str) -> set[int]:
    return set(cpuset_parse(b.fs[0].read(f"cpuset/{path}/cpuset.cpus")))


def test_lse_cpus_are_exclusive_and_come_back() -> None:
    b = sim(NodeSLO(node="n1", be_cpu_idle=False), node(8, reserved="0"))
    assert b.start_pod(pod("lse", "LSE", 2000, 2000, limit=2000), "n1")
    assert b.start_pod(pod("ls", "LS", 1000, 1000), "n1")
    assert b.start_pod(be("b"), "n1")
    b.advance(60.0)
    lse = cpus(b, "kubepods/podlse")
    assert len(lse) == 2 and 0 not in lse
    assert cpus(b, "kubepods/burstable/podls") == set(range(1, 8)) - lse
    assert not cpus(b, "kubepods/besteffort") & (lse | {0})
    assert not cpus(b, "kubepods/besteffort/podb") & (lse | {0})
    b.evict_pod("lse", "Evicted", "", 70.0)
    assert cpus(b, "kubepods/burstable") == set(range(1, 8))
    assert set(b.candidates[0]) == set(range(1, 8))


def test_cpusets_off_puts_everyone_on_every_unreserved_cpu() -> None:
    b = sim(NodeSLO(node="n1", cpuset=CPUSetStrategy(enabled=False)), node(8, reserved="0"))
    assert b.start_pod(pod("lse", "LSE", 2000, 2000, limit=2000), "n1")
    assert cpus(b, "kubepods/podlse") == set(range(1, 8))


@pytest.mark.parametrize(("policy", "served_after_s"), [
    ("none", 1000),          # held at its 1-core limit
    ("cpuBurstOnly", 1000),  # cfs_burst_us is written, but a steady state has no bursts to absorb
    ("cfsQuotaBurstOnly", 3000),  # throttled, idle pool: quota x1.2 per round up to 300 %
    ("auto", 3000),
], ids=["none", "burst-only", "quota-scaling", "auto"])
def test_burst_lets_a_throttled_ls_pod_use_idle_cpu(policy: str, served_after_s: int) -> None:
    b = sim(NodeSLO(node="n1", cpu_burst=CPUBurstStrategy(policy=policy)), node(16))  # type: ignore[arg-type]
    assert b.start_pod(pod("ls", "LS", 1000, 5000, limit=1000), "n1")
    res = b.advance(300.0)
    key = b.pods.where["ls"]
    assert round(float(b.pods.cpu_used[key])) == served_after_s
    quota = b.ex[0].read("kubepods/burstable/podls", "cpu.cfs_quota_us")
    assert quota == served_after_s * 100
    burst = b.ex[0].read("kubepods/burstable/podls", "cpu.cfs_burst_us")
    assert burst == (min(1_000_000, quota) if policy in ("cpuBurstOnly", "auto") else 0)  # type: ignore[operator]
    assert any(e.kind == "burst" for e in res.events) == (served_after_s > 1000)


def test_burst_scales_down_when_the_share_pool_is_overloaded() -> None:
    b = sim(NodeSLO(node="n1", cpu_burst=CPUBurstStrategy(policy="cfsQuotaBurstOnly")), node(8))
    assert b.start_pod(pod("ls", "LS", 1000, 5000, limit=1000), "n1")
    b.advance(300.0)  # pool (3000 + 160 system) / 8000 = 40 %: idle, quota up to 300 %
    assert b.ex[0].read("kubepods/burstable/podls", "cpu.cfs_quota_us") == 300_000
    assert b.start_pod(pod("hog", "LS", 2000, 3000), "n1")  # (3000 + 3000 + 160) / 8000 = 77 %: overload
    b.advance(600.0)
    assert b.ex[0].read("kubepods/burstable/podls", "cpu.cfs_quota_us") == 100_000
    b.set_slo(NodeSLO(node="n1"))
    assert b.ex[0].read("kubepods/burstable/podls", "cpu.cfs_quota_us") == 100_000


def test_memory_qos_and_blkio_reach_the_tree() -> None:
    b = sim(NodeSLO(node="n1"))
    assert b.start_pod(pod("ls", "LS", 1000, 500, limit=2000, mem=4 * G), "n1")
    assert b.start_pod(be("b"), "n1")
    assert b.fs[0].read("memory/kubepods/burstable/podls/memory.min") == "0"
    b.set_slo(NodeSLO(node="n1", memory_qos=MemoryQoSStrategy(enabled=True, min_percent=50, throttling_percent=50),
                      blkio=BlkIOStrategy(enabled=True, be=[BlkIOLimit(device="8:0", read_bps=10**6)])))
    assert b.fs[0].read("memory/kubepods/burstable/podls/memory.min") == str(2 * G)
    assert b.fs[0].read("memory/kubepods/memory.min") == str(2 * G)  # BE pods get no protection by default
    assert b.fs[0].read("memory/kubepods/burstable/podls/memory.high") == str((4 * G + 2 * G) // 4096 * 4096)
    assert b.fs[0].read("blkio/kubepods/besteffort/blkio.throttle.read_bps_device") == "8:0 1000000\n"
    b.set_slo(NodeSLO(node="n1"))
    assert b.fs[0].read("memory/kubepods/burstable/podls/memory.min") == "0"
    assert b.fs[0].read("memory/kubepods/burstable/podls/memory.high") == "max"
    assert b.fs[0].read("blkio/kubepods/besteffort/blkio.throttle.read_bps_device") == ""
