"""CPU burst (REFERENCE.md §5): share-pool states, burst-only and quota scaling, the token bucket, the pods
chosen one by one within the share pool's headroom (with hysteresis), and the burst clamped to the quota when the
plan reaches a cgroup v2 tree."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from colo.messages import CPUBurstStrategy, QoSClass
from colo_node_agent.cgroups import Executor, MemoryFS
from colo_node_agent.cgroups.fs import default_files
from colo_node_agent.strategies.burst_scaling import (
    Operation,
    ScalingPod,
    SharePool,
    scaling_operations,
    step_down,
    step_up,
)
from colo_node_agent.strategies.cpu_burst import (
    BurstPod,
    Limiter,
    NodeState,
    SharePoolPod,
    burst_us,
    cpu_burst,
    limiter_allows,
    share_pool,
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
    assert share_pool(16, node_used, pods) == SharePool(12 * C, None if node_used is None else node_used - 3 * C)


def ls(quota: int, throttled: bool | None, qos: QoSClass = "LS", limit: int = 2 * C, used: int = 1 * C) -> BurstPod:
    return BurstPod("p", POD, qos, limit, quota, throttled, used)


# a 16-CPU share pool: Overload at 8000 m, Cooling at 7200 m
IDLE, COOLING, OVERLOAD, UNKNOWN = (SharePool(16 * C, 4 * C), SharePool(16 * C, 7500), SharePool(16 * C, 9 * C),
                                    SharePool(16 * C, None))


# pod limit 2 cores: base quota 200000 us, ceiling 300 % = 600000 us, burst 1000 % = 2000000 us
@pytest.mark.parametrize(("policy", "pod", "pool", "op", "quota", "burst"), [
    ("auto", ls(200_000, True), IDLE, "up", 240_000, 2_000_000),
    ("auto", ls(300_000, True), COOLING, "remain", 300_000, 2_000_000),
    ("auto", ls(300_000, True), UNKNOWN, "remain", 300_000, 2_000_000),
    ("auto", ls(300_000, False), OVERLOAD, "down", 240_000, 2_000_000),
    ("auto", ls(300_000, None), IDLE, "remain", 300_000, 2_000_000),
    ("cfsQuotaBurstOnly", ls(580_000, True), IDLE, "up", 600_000, 0),
    ("cfsQuotaBurstOnly", ls(200_000, False), OVERLOAD, "remain", 200_000, 0),
    ("cfsQuotaBurstOnly", ls(-1, True), IDLE, "up", 240_000, 0),
    ("cpuBurstOnly", ls(400_000, True), IDLE, "reset", 200_000, 2_000_000),
    ("none", ls(400_000, True), IDLE, "reset", 200_000, 0),
], ids=["throttled-idle-scales-up", "cooling-holds", "unknown-holds", "overload-scales-down", "no-stat-holds",
        "capped-at-300pct", "at-base-nothing-to-give", "unset-quota-from-base", "burst-only-resets-quota",
        "none-resets"])
def test_burst_plan(policy: str, pod: BurstPod, pool: SharePool, op: str, quota: int, burst: int) -> None:
    plan = cpu_burst([pod], pool, CPUBurstStrategy(policy=policy), {}, now=0.0)  # type: ignore[arg-type]
    assert plan.operations == {"p": op}
    assert plan.state == pool.state(50)
    assert {w.resource: w.value for w in plan.writes} == {"cpu.cfs_quota_us": quota, "cpu.cfs_burst_us": burst}
    assert {w.cgroup for w in plan.writes} == {POD}


@pytest.mark.parametrize("pod", [ls(200_000, True, "BE"), ls(200_000, True, "LSR"), ls(-1, True, limit=0)],
                         ids=["be", "lsr", "no-limit"])
def test_only_ls_pods_with_a_limit_burst(pod: BurstPod) -> None:
    assert cpu_burst([pod], IDLE, CPUBurstStrategy(policy="auto"), {}, 0.0).writes == []


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
    plan = cpu_burst([ls(400_000, True, used=5 * C)], IDLE, policy, {"p": Limiter(2000, 10.0, 0.0)}, now=1.0)
    assert plan.operations == {"p": "down"} and plan.limiters["p"].tokens < 0


def test_planned_burst_lands_clamped_on_v2() -> None:
    fs = MemoryFS(kernel_rules="v2")
    for p, t in default_files("v2", POD, 8).items():
        fs.seed(p, t)
    plan = cpu_burst([ls(-1, True)], IDLE, CPUBurstStrategy(policy="auto"), {}, 0.0)
    records = Executor(fs, "v2").apply(plan.writes)
    assert all(r.ok for r in records), records
    assert fs.files[f"{POD}/cpu.max"] == "240000 100000"
    assert fs.files[f"{POD}/cpu.max.burst"] == "240000"  # 2000000 wanted, clamped to the quota


@pytest.mark.parametrize(("throttled", "before", "after"), [(False, 2, 3), (True, 4, 0), (None, 4, 4), (False, None, 1)],
                         ids=["unthrottled-counts", "throttled-resets", "unknown-keeps", "new-pod-starts-at-one"])
def test_unthrottled_rounds_are_counted(throttled: bool | None, before: int | None, after: int) -> None:
    calm = {} if before is None else {"p": before}
    plan = cpu_burst([ls(200_000, throttled)], IDLE, CPUBurstStrategy(policy="auto"), {}, 0.0,
                     unthrottled_rounds=calm)
    assert plan.unthrottled_rounds == {"p": after}


def sp(uid: str, quota: int, used: int, throttled: bool | None, ratio: float = 0.0, *, allowed: bool = True,
       calm: int = 0, base: int = 100_000, ceil: int = 300_000) -> ScalingPod:
    """A pod for :func:`scaling_operations`: quotas in µs per 100 ms period, ``used`` milli-cores."""
    return ScalingPod(uid, quota, base, ceil, used, throttled, ratio, allowed, calm)


POLICY = CPUBurstStrategy(policy="cfsQuotaBurstOnly")  # Overload 50 %, Cooling 45 %, give back after 5 rounds


def pool(used: int | None, cores: int = 10) -> SharePool:
    return SharePool(cores * C, used)  # 10 cores: Overload at 5000 m, Cooling at 4500 m


# (pods, share pool, policy, operations other than "remain"); every pool's use holds its pods' use
@pytest.mark.parametrize(("pods", "share", "policy", "want"), [
    ([sp("a", 100_000, 1000, True, 0.9), sp("b", 100_000, 1000, True, 0.5), sp("c", 100_000, 1000, True, 0.2)],
     pool(4400), POLICY, {"a": "up", "b": "up"}),
    ([sp("a", 100_000, 1000, True, 0.1), sp("b", 100_000, 1000, True, 0.9), sp("c", 100_000, 1000, True, 0.5)],
     pool(4400), POLICY, {"b": "up", "c": "up"}),
    ([sp("a", 300_000, 3000, True, base=300_000, ceil=900_000)], pool(4400), POLICY, {}),
    ([sp("a", 200_000, 1800, True, base=200_000, ceil=600_000),
      sp("b", 200_000, 2000, True, base=200_000, ceil=600_000)], pool(4400), POLICY, {"b": "up"}),
    ([sp("a", 500_000, 2000, True, 0.9, base=500_000, ceil=1_500_000), sp("b", 100_000, 1000, True, 0.1)],
     pool(4000), POLICY, {"b": "up"}),
    ([sp("a", 300_000, 3000, True, 0.9)], pool(3000), POLICY, {}),
    ([sp("a", 200_000, 2000, True, 0.9, allowed=False)], pool(3000), POLICY, {"a": "down"}),
    ([sp("a", 100_000, 1000, True, 0.9), sp("b", 200_000, 2000, True, 0.9), sp("c", 200_000, 1000, False, calm=1)],
     pool(4700), POLICY, {}),
    ([sp("a", 100_000, 1000, True, 0.9), sp("b", 200_000, 1000, False, calm=1)], pool(None), POLICY, {}),
    ([sp("a", 300_000, 3000, True, 0.9), sp("b", 300_000, 3000, True, 0.2), sp("c", 200_000, 1500, False)],
     pool(10_300, cores=20), POLICY, {"c": "down", "b": "down"}),
    ([sp("a", 100_000, 1000, True, 0.9), sp("b", 100_000, 1000, False)], pool(5300), POLICY, {}),
    ([sp("a", 200_000, 2000, False, allowed=False), sp("b", 200_000, 2000, True, 0.5)], pool(5100), POLICY,
     {"a": "down"}),
    ([sp("a", 200_000, 1000, False, calm=5)], pool(3000), POLICY, {"a": "down"}),
    ([sp("a", 200_000, 1000, False, calm=4)], pool(3000), POLICY, {}),
    ([sp("a", 200_000, 1700, False, calm=5)], pool(3000), POLICY, {}),
    ([sp("a", 200_000, 1000, False, calm=99)], pool(3000), CPUBurstStrategy(scale_down_unthrottled_rounds=0), {}),
    ([sp("a", 200_000, 1000, None, calm=5)], pool(3000), POLICY, {"a": "down"}),
], ids=["idle-ups-within-headroom", "most-throttled-first", "reaching-the-threshold-is-no-headroom",
        "ties-by-use-over-quota", "too-big-skipped-smaller-taken", "at-ceiling-holds", "empty-bucket-scales-down",
        "cooling-changes-nothing", "unknown-changes-nothing", "overload-least-throttled-first-only-as-needed",
        "overload-at-base-nothing-to-give", "overload-counts-give-backs-first", "unthrottled-k-rounds-gives-back",
        "unthrottled-fewer-rounds-holds", "unthrottled-using-the-lower-quota-holds", "never-gives-back-with-k-0",
        "unknown-throttling-keeps-the-count"])
def test_scaling_operations(pods: list[ScalingPod], share: SharePool, policy: CPUBurstStrategy,
                            want: dict[str, Operation]) -> None:
    ops = scaling_operations(pods, share, policy)
    assert {u: op for u, op in ops.items() if op != "remain"} == want
    assert set(ops) == {p.uid for p in pods}


@st.composite
def rounds(draw: st.DrawFn) -> tuple[list[ScalingPod], SharePool]:
    pods = []
    for i in range(draw(st.integers(0, 12))):
        base = draw(st.sampled_from([50_000, 100_000, 200_000, 400_000]))
        ceil = base * 3
        quota = draw(st.integers(base, ceil))
        used = draw(st.integers(0, quota * 1000 // 100_000))
        pods.append(sp(f"p{i}", quota, used, draw(st.sampled_from([True, False, None])), draw(st.floats(0, 1)),
                       allowed=draw(st.booleans()), calm=draw(st.integers(0, 8)), base=base, ceil=ceil))
    in_pods = sum(p.cpu_used for p in pods)  # the pool's use holds its pods' use
    return pods, SharePool(draw(st.integers(1, 64)) * C,
                           draw(st.one_of(st.none(), st.integers(in_pods, in_pods + 64 * C))))


def milli(quota_us: int) -> int:
    return quota_us * 1000 // 100_000


@settings(max_examples=300, deadline=None)
@given(rounds())
def test_scaling_never_plans_the_pool_into_overload(case: tuple[list[ScalingPod], SharePool]) -> None:
    """Ups only in an Idle pool and only while the pool's use plus every up's extra stays below the threshold;
    downs only for pods above their base; nothing moves a pod in a Cooling or Unknown pool but its own bucket or
    its unthrottled rounds."""
    pods, share = case
    ops = scaling_operations(pods, share, POLICY)
    state = share.state(POLICY.share_pool_threshold_percent)
    ups = [p for p in pods if ops[p.uid] == "up"]
    if ups:
        assert state == "idle" and share.used is not None
        extra = sum(max(min(milli(step_up(p)) - milli(p.quota_us), milli(step_up(p)) - p.cpu_used), 0) for p in ups)
        freed = sum(max(p.cpu_used - milli(step_down(p)), 0) for p in pods if ops[p.uid] == "down")
        assert share.used - freed + extra < share.capacity * POLICY.share_pool_threshold_percent / 100
        assert all(p.throttled and p.allowed and p.quota_us < p.ceil_us for p in ups)
    for p in pods:
        if ops[p.uid] == "down":
            assert p.quota_us > p.base_us
            if state != "overload":
                assert not p.allowed or p.unthrottled_rounds >= POLICY.scale_down_unthrottled_rounds
