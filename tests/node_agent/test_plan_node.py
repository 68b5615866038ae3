"""plan_node: every strategy for one node, applied by the executor to trees that refuse what the kernel refuses
(v1 and v2), and each strategy switched by its NodeSLO field."""

from __future__ import annotations

from collections import deque
from dataclasses import replace

import msgspec
import pytest

from colo.messages import (
    BEBudgetState,
    BEBudgetStrategy,
    BlkIOLimit,
    BlkIOStrategy,
    CPUBurstStrategy,
    CPUEvictStrategy,
    CPUSetStrategy,
    CPUSuppressStrategy,
    InterferenceSignals,
    MemoryEvictStrategy,
    MemoryQoSStrategy,
    NodeSLO,
    PodSpec,
    ResctrlStrategy,
    Resources,
    SystemStrategy,
)
from colo_node_agent.cgroups import CgroupWrite, Executor, MemoryFS
from colo_node_agent.cgroups.fs import default_files
from colo_node_agent.cgroups.layout import CGROUPFS
from colo_node_agent.cgroups.resctrl import ResctrlInfo
from colo_node_agent.cgroups.resources import CgroupVersion
from colo_node_agent.strategies.cpu_evict import BECPUSample
from colo_node_agent.strategies.node import NodeFeatures, NodeSnapshot, PodState, StrategyMemory, plan_node
from colo_node_agent.topology import CPUTopology

Gi = 2**30
C = 1000
TOPO = CPUTopology.smt(4, 2, 2)


def spec(uid: str, qos: str, req: Resources, lim: Resources, prio: int) -> PodSpec:
    return PodSpec(uid=uid, name=uid, qos_class=qos, priority=prio, requests=req, limits=lim)  # type: ignore[arg-type]


PODS = (
    PodState(spec("e", "LSE", Resources(cpu=2 * C, memory=Gi), Resources(cpu=2 * C, memory=Gi), 9500), "LSE",
             cpu_used=1500, memory_used=Gi // 2),
    PodState(spec("r", "LSR", Resources(cpu=4 * C, memory=2 * Gi), Resources(cpu=4 * C, memory=2 * Gi), 9500),
             "LSR", cpu_used=1000, memory_used=Gi),
    PodState(spec("s", "LS", Resources(cpu=2 * C, memory=4 * Gi), Resources(cpu=4 * C, memory=8 * Gi), 9000),
             "LS", cpu_used=3000, memory_used=3 * Gi, quota_us=400_000, throttled=True),
    PodState(spec("b1", "BE", Resources(batch_cpu=10 * C, batch_memory=Gi), Resources(batch_memory=4 * Gi), 5500),
             "BE", cpu_used=2000, memory_used=3 * Gi),
    PodState(spec("b2", "BE", Resources(batch_cpu=8 * C, batch_memory=Gi), Resources(batch_memory=2 * Gi), 5100),
             "BE", cpu_used=1000, memory_used=Gi),
)
# node used 9000 m: non-BE 5500, BE 3000, system 500; BEAllowed = 16000 x 65 % - 5500 - 500 = 4400 -> 5 BE CPUs;
# share pool (16 - 6 LSE/LSR cores) used (9000 - 1500 - 1000 - 3000) / 10000 = 35 %: idle


def snapshot(pods: tuple[PodState, ...] = PODS, features: NodeFeatures = NodeFeatures(), mem_used: int = 20 * Gi,
             **kw: object) -> NodeSnapshot:
    return NodeSnapshot("n", 16 * C, 64 * Gi, 9 * C, mem_used, pods, TOPO, reserved_cpus=(0, 8),
                        features=features, **kw)  # type: ignore[arg-type]


def tree(version: CgroupVersion, pods: tuple[PodState, ...] = PODS) -> MemoryFS:
    fs = MemoryFS(kernel_rules=version)
    for cg in (*CGROUPFS.qos_dirs, *(CGROUPFS.pod_dir(p.qos, p.spec.uid) for p in pods)):
        for path, text in default_files(version, cg, 16).items():
            fs.seed(path, text)
    return fs


def values(writes: list[CgroupWrite]) -> dict[tuple[str, str], object]:
    return {(w.cgroup, w.resource): w.value for w in writes}


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_full_plan_applies_cleanly_and_settles(version: CgroupVersion) -> None:
    slo = NodeSLO(node="n", cpu_burst=CPUBurstStrategy(policy="auto"),
                  memory_qos=MemoryQoSStrategy(enabled=True, min_percent=100, throttling_percent=50),
                  blkio=BlkIOStrategy(enabled=True, be=[BlkIOLimit(device="8:0", write_bps=10**7)]))
    fs = tree(version)
    ex = Executor(fs, version)
    plan = plan_node(snapshot(), slo, StrategyMemory(), now=1.0)
    records = ex.apply(plan.writes)
    assert [r for r in records if not r.ok] == []
    got = {(r.cgroup, r.resource): r.new for r in records}
    assert got[("kubepods/pode", "cpuset.cpus")] == "1,9"             # LSE: a whole core of its own
    assert got[("kubepods/podr", "cpuset.cpus")] == "2-3,10-11"       # LSR: reserved cores, same NUMA node
    assert got[("kubepods/burstable/pods", "cpuset.cpus")] == "4-7,12-15"
    be_cpus = got[("kubepods/besteffort", "cpuset.cpus")]
    assert be_cpus == got[("kubepods/besteffort/podb1", "cpuset.cpus")]
    assert not {0, 1, 8, 9} & set(int(c) for c in str(be_cpus).replace("-", ",").split(","))
    assert got[("kubepods/besteffort", "cpu.idle")] == 1
    assert got[("kubepods/burstable/pods", "cpu.cfs_quota_us")] == 480_000   # throttled, idle pool: x1.2
    assert got[("kubepods/burstable/pods", "cpu.cfs_burst_us")] == 480_000   # 4 cores x 1000 % clamped to quota
    assert got[("kubepods/burstable/pods", "memory.min")] == 4 * Gi
    assert got[("kubepods", "memory.min")] == 7 * Gi  # LSE 1 + LSR 2 + LS 4 GiB; BE pods: no protection
    assert got[("kubepods/besteffort", "blkio.throttle.write_bps_device")] == "8:0 10000000"
    again = ex.apply(plan_node(snapshot(), slo, StrategyMemory(), now=2.0).writes)
    assert [(r.cgroup, r.resource) for r in again if not r.skipped] == []


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_lse_pod_leaving_gives_its_cpus_back(version: CgroupVersion) -> None:
    fs = tree(version)
    ex = Executor(fs, version)
    slo = NodeSLO(node="n")
    assert all(r.ok for r in ex.apply(plan_node(snapshot(), slo, StrategyMemory(), 1.0).writes))
    rest = tuple(p for p in PODS if p.spec.uid != "e")
    kept = tuple(replace(p, cpus=(2, 3, 10, 11)) if p.spec.uid == "r" else p for p in rest)
    records = ex.apply(plan_node(snapshot(kept), slo, StrategyMemory(), 2.0).writes)
    assert [r for r in records if not r.ok] == []
    got = {(r.cgroup, r.resource): r.new for r in records if not r.skipped}
    assert got[("kubepods/burstable", "cpuset.cpus")] == "1,4-7,9,12-15"


def rows(slo: NodeSLO, features: NodeFeatures = NodeFeatures(), mem_used: int = 20 * Gi,
         memory: StrategyMemory | None = None) -> tuple[dict[tuple[str, str], object], list[str], int]:
    plan = plan_node(snapshot(features=features, mem_used=mem_used), slo, memory or StrategyMemory(), now=100.0)
    return values(plan.writes), [f"{e.kind}:{e.eviction.uid}" for e in plan.evictions], plan.be_cpu_allowed


BASE = NodeSLO(node="n")
RC = ResctrlInfo(0x7FF, 1, (0,), (0,))


def switch(field: str, value: object) -> NodeSLO:
    return msgspec.structs.replace(BASE, **{field: value})


# (NodeSLO field, value, features, key written, value when on, value at the default)
SWITCHES = [
    ("cpu_suppress", CPUSuppressStrategy(enabled=False), NodeFeatures(), ("kubepods/besteffort", "cpuset.cpus"),
     "2-7,10-15", "2,4-5,12-13"),
    ("be_cpu_idle", False, NodeFeatures(), ("kubepods/besteffort", "cpu.idle"), 0, 1),
    ("cpuset", CPUSetStrategy(enabled=False), NodeFeatures(), ("kubepods/pode", "cpuset.cpus"), "1-7,9-15", "1,9"),
    ("cpu_burst", CPUBurstStrategy(policy="cpuBurstOnly"), NodeFeatures(),
     ("kubepods/burstable/pods", "cpu.cfs_burst_us"), 4_000_000, 0),
    ("memory_qos", MemoryQoSStrategy(enabled=True, low_percent=100), NodeFeatures(),
     ("kubepods/burstable/pods", "memory.low"), 4 * Gi, 0),
    ("blkio", BlkIOStrategy(enabled=True, be=[BlkIOLimit(device="8:0", read_iops=100)]), NodeFeatures(),
     ("kubepods/besteffort", "blkio.throttle.read_iops_device"), "8:0 100", None),
    ("resctrl", ResctrlStrategy(enabled=True), NodeFeatures(resctrl=RC), ("BE", "resctrl.l3"), "0=f", "0=7ff"),
    ("system", SystemStrategy(enabled=True), NodeFeatures(sysctl=True), ("", "vm.min_free_kbytes"), 671_088, None),
]


@pytest.mark.parametrize(("field", "value", "features", "key", "on", "default"), SWITCHES,
                         ids=[s[0] for s in SWITCHES])
def test_each_strategy_is_switched_by_its_nodeslo_field(field: str, value: object, features: NodeFeatures,
                                                        key: tuple[str, str], on: object, default: object) -> None:
    assert rows(BASE, features)[0].get(key) == default
    assert rows(switch(field, value), features)[0].get(key) == on


@pytest.mark.parametrize(("features", "absent"), [
    (NodeFeatures(cpu_idle=False), ("kubepods/besteffort", "cpu.idle")),
    (NodeFeatures(cpu_burst=False), ("kubepods/burstable/pods", "cpu.cfs_burst_us")),
    (NodeFeatures(memory_qos=False), ("kubepods/burstable/pods", "memory.min")),
], ids=["no-cpu.idle", "no-burst-file", "no-memory.min"])
def test_missing_kernel_files_are_not_written(features: NodeFeatures, absent: tuple[str, str]) -> None:
    assert absent in rows(switch("memory_qos", MemoryQoSStrategy(enabled=True)))[0]
    assert absent not in rows(switch("memory_qos", MemoryQoSStrategy(enabled=True)), features)[0]


@pytest.mark.parametrize(("slo", "want"), [
    (NodeSLO(node="n", be_cpu_idle=False), 18_432),  # Σ batch-cpu 18000 m x 1024/1000
    (NodeSLO(node="n", be_cpu_idle=False, be_cpu_shares="min"), 2),  # the kubelet's besteffort MinShares
    (NodeSLO(node="n", be_cpu_shares="min"), None),  # an idle group's weight cannot be written
], ids=["requests", "min", "idle"])
def test_be_group_shares_follow_be_cpu_shares(slo: NodeSLO, want: int | None) -> None:
    assert rows(slo)[0].get(("kubepods/besteffort", "cpu.shares")) == want


def test_suppress_budget_and_memory_eviction() -> None:
    _, evictions, allowed = rows(BASE, mem_used=60 * Gi)  # 93 % >= 70 %: release (93 - 68) % of 64 GiB
    assert allowed == 4400
    assert evictions == ["memory:b2", "memory:b1"]
    assert rows(switch("memory_evict", MemoryEvictStrategy(enabled=False)), mem_used=60 * Gi)[1] == []


def test_cpu_eviction_by_satisfaction() -> None:
    slo = switch("cpu_evict", CPUEvictStrategy(enabled=True, window_s=9.0))
    starved = StrategyMemory(be_samples=deque([BECPUSample(2000, 1950, 30_000)] * 5))
    # the current sample (BE cpuset of 5 CPUs = 5000 limit, 3000 used = 60 % < 90 %) releases nothing: min = 0
    assert rows(slo, memory=starved)[1] == []
    pods = (*PODS[:3], replace(PODS[3], cpu_used=3800), PODS[4])
    plan = plan_node(snapshot(pods), slo, starved, now=100.0)
    # current: 4800/5000 used (96 %), satisfaction 5000/18000 = 28 % -> release 18000 x 40 % - 5000 = 2200;
    # window (6 samples): limit 2500, request 28000 -> 8700; min 2200: the lowest priority BE pod covers it
    assert plan.be_sample == BECPUSample(5000, 4800, 18_000)
    assert [(e.eviction.uid, e.release) for e in plan.evictions] == [("b2", 2200)]


def test_memory_eviction_puts_the_node_under_pressure_until_the_hold_ends() -> None:
    slo = NodeSLO(node="n")
    memory = StrategyMemory()
    plan = plan_node(snapshot(mem_used=60 * Gi), slo, memory, 100.0)  # 93 %: evicts b2, b1
    assert [e.eviction.uid for e in plan.evictions] == ["b2", "b1"]
    assert plan.memory_pressure.since == 100.0 and plan.memory_pressure.last_evict_at == 100.0
    memory.absorb(plan, 100.0, {"memory": 2})
    calm = snapshot(pods=PODS[:3], mem_used=40 * Gi)  # 62 %: below the lower threshold 68 %
    for now, since in ((110.0, 100.0), (409.0, 100.0), (410.0, None)):  # hold 300 s from 110 s
        plan = plan_node(calm, slo, memory, now)
        memory.absorb(plan, now)
        assert memory.memory_pressure.since == since, now


def test_be_budget_raises_the_suppress_threshold_while_signals_allow() -> None:
    slo = msgspec.structs.replace(NodeSLO(node="n"), be_budget=BEBudgetStrategy(enabled=True))
    learned = BEBudgetState(threshold_percent=71.0, phase="grow", baseline=0.5, baseline_samples=5)
    calm = InterferenceSignals(runq_wait_ratio=0.51)
    pods = tuple(replace(p, interference=calm, interference_at=100.0) if p.qos != "BE" else p for p in PODS)
    memory = StrategyMemory(be_budget=learned)
    plan = plan_node(snapshot(pods), slo, memory, now=100.0)
    # threshold 71 -> 73: BEAllowed = 16000 x 73 % - 5500 - 500 = 5680 (static 65 %: 4400)
    assert plan.be_budget is not None and (plan.be_budget.threshold_percent, plan.be_budget.phase) == (73, "grow")
    assert plan.be_cpu_allowed == 5680
    memory.absorb(plan, 100.0)
    assert memory.be_budget == plan.be_budget
    # one LS pod over the limit (0.5 x 1.1 = 0.55): half the excess over the floor, 65 + 4
    hot = tuple(replace(p, interference=InterferenceSignals(runq_wait_ratio=0.57)) if p.spec.uid == "s" else p
                for p in pods)
    cut = plan_node(snapshot(hot), slo, memory, now=101.0).be_budget
    assert cut is not None and (cut.threshold_percent, cut.phase) == (69, "cut")
    # no LS pod reports the signal: the static threshold
    plan = plan_node(snapshot(PODS), slo, memory, now=101.0)
    assert plan.be_budget is not None and plan.be_budget.phase == "fallback" and plan.be_cpu_allowed == 4400
    # switched off: no state, the static threshold
    plan = plan_node(snapshot(pods), NodeSLO(node="n"), memory, now=101.0)
    assert plan.be_budget is None and plan.be_cpu_allowed == 4400
