"""CPU burst (REFERENCE.md §5): share-pool states, burst-only and quota scaling, the token bucket, and the
burst clamped to the quota when the plan reaches a cgroup v2 tree."""

from __future__ import annotations

import pytest

from colo.messages import CPUBurstStrategy, QoSClass
from colo_node_agent.cgroups import Executor, MemoryFS
from colo_node_agent.cgroups.fs import default_files
from colo_node_agent.strategies.cpu_burst import (
    BurstPod,
    Limiter,
    NodeState,
    SharePoolPod,
    burst_us,
    cpu_burst,
    limiter_allows,
    share_pool_state,
)

C = 1000
POD = "kubepods/burstable/podp"


@pytest.mark.parametrize(("node_used", "want"), [
    (9000, "overload"),   # (9000 - 2000 - 1000) / (16000 - 4000) = 50 % >= 50 %
    (8500, "cooling"),    # 5500 / 12000 = 45.8 % >= 45 %
    (7900, "idle"),       # 4900 / 12000 = 40.8 %
    (None, "unknown"),
], ids=["overload", "cooling", "idle", "no-metric"])
def test_share_pool_state(node_used: int | None, want: NodeState) -> None:
    pods = [SharePoolPod("LSR", 4 * C, 2 * C), SharePoolPod("BE", 0, 1 * C), SharePoolPod("LS", 2 * C, 3 * C)]
    assert share_pool_state(16, node_used, pods, 50) == want


def ls(quota: int, throttled: bool | None, qos: QoSClass = "LS", limit: int = 2 * C, used: int = 1 * C) -> BurstPod:
    return BurstPod("p", POD, qos, limit, quota, throttled, used)


# pod limit 2 cores: base quota 200000 us, ceiling 300 % = 600000 us, burst 1000 % = 2000000 us
@pytest.mark.parametrize(("policy", "pod", "state", "op", "quota", "burst"), [
    ("auto", ls(200_000, True), "idle", "up", 240_000, 2_000_000),
    ("auto", ls(300_000, True), "cooling", "remain", 300_000, 2_000_000),
    ("auto", ls(300_000, True), "unknown", "remain", 300_000, 2_000_000),
    ("auto", ls(300_000, False), "overload", "down", 240_000, 2_000_000),
    ("auto", ls(300_000, None), "idle", "remain", 300_000, 2_000_000),
    ("cfsQuotaBurstOnly", ls(580_000, True), "idle", "up", 600_000, 0),
    ("cfsQuotaBurstOnly", ls(200_000, False), "overload", "down", 200_000, 0),
    ("cfsQuotaBurstOnly", ls(-1, True), "idle", "up", 240_000, 0),
    ("cpuBurstOnly", ls(400_000, True), "idle", "reset", 200_000, 2_000_000),
    ("none", ls(400_000, True), "idle", "reset", 200_000, 0),
], ids=["throttled-idle-scales-up", "cooling-holds", "unknown-holds", "overload-scales-down", "no-stat-holds",
        "capped-at-300pct", "floored-at-base", "unset-quota-from-base", "burst-only-resets-quota", "none-resets"])
def test_burst_plan(policy: str, pod: BurstPod, state: NodeState, op: str, quota: int, burst: int) -> None:
    plan = cpu_burst([pod], state, CPUBurstStrategy(policy=policy), {}, now=0.0)  # type: ignore[arg-type]
    assert plan.operations == {"p": op}
    assert {w.resource: w.value for w in plan.writes} == {"cpu.cfs_quota_us": quota, "cpu.cfs_burst_us": burst}
    assert {w.cgroup for w in plan.writes} == {POD}


@pytest.mark.parametrize("pod", [ls(200_000, True, "BE"), ls(200_000, True, "LSR"), ls(-1, True, limit=0)],
                         ids=["be", "lsr", "no-limit"])
def test_only_ls_pods_with_a_limit_burst(pod: BurstPod) -> None:
    assert cpu_burst([pod], "idle", CPUBurstStrategy(policy="auto"), {}, 0.0).writes == []


@pytest.mark.parametrize(("limit", "percent", "want"), [(2 * C, 1000, 2_000_000), (500, 100, 50_000), (0, 1000, 0)],
                         ids=["default-1000pct", "100pct", "unlimited"])
def test_burst_us(limit: int, percent: int, want: int) -> None:
    assert burst_us(limit, CPUBurstStrategy(policy="cpuBurstOnly", burst_percent=percent)) == want


@pytest.mark.parametrize(("use_pct", "dt", "allowed", "tokens"), [
    (250.0, 5.0, False, 500 - 150 * 5),
    (50.0, 5.0, True, 500 + 50 * 5),
    (80.0, 5.0, True, 500),
    (300.0, 100.0, False, -2000),
], ids=["over-limit-drains", "idle-refills", "between-60-and-100-holds", "floored-at-minus-capacity"])
def test_limiter(use_pct: float, dt: float, allowed: bool, tokens: float) -> None:
    policy = CPUBurstStrategy(policy="auto", quota_burst_period_s=10)  # capacity 10 x (300 - 100) = 2000
    ok, first = limiter_allows(None, policy, 100.0, 0.0)
    assert ok and first == Limiter(2000, 500.0, 0.0)
    ok, lim = limiter_allows(first, policy, use_pct, dt)
    assert (ok, lim.tokens if lim else None) == (allowed, tokens)


def test_empty_bucket_scales_down_even_when_throttled() -> None:
    policy = CPUBurstStrategy(policy="cfsQuotaBurstOnly", quota_burst_period_s=10)
    plan = cpu_burst([ls(400_000, True, used=5 * C)], "idle", policy, {"p": Limiter(2000, 10.0, 0.0)}, now=1.0)
    assert plan.operations == {"p": "down"} and plan.limiters["p"].tokens < 0


def test_planned_burst_lands_clamped_on_v2() -> None:
    fs = MemoryFS(kernel_rules="v2")
    for p, t in default_files("v2", POD, 8).items():
        fs.seed(p, t)
    plan = cpu_burst([ls(-1, True)], "idle", CPUBurstStrategy(policy="auto"), {}, 0.0)
    records = Executor(fs, "v2").apply(plan.writes)
    assert all(r.ok for r in records), records
    assert fs.files[f"{POD}/cpu.max"] == "240000 100000"
    assert fs.files[f"{POD}/cpu.max.burst"] == "240000"  # 2000000 wanted, clamped to the quota
