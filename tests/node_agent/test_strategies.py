"""QoS strategies: oracle tables O7, O10, O11 and the policy rules of REFERENCE.md §5."""

from __future__ import annotations

import pytest

from colo.messages import (
    CPUEvictStrategy,
    CPUSuppressStrategy,
    MemoryEvictStrategy,
    PodSpec,
    Resources,
)
from colo_node_agent.strategies import (
    BECPUSample,
    PodView,
    SuppressInput,
    be_cpu_allowed,
    be_cpu_release,
    be_qos_settings,
    cpu_evict,
    memory_evict,
    memory_release_bytes,
    pod_settings,
    suppress,
)
from colo_node_agent.strategies.cpu_suppress import SuppressState, cpuset_target, quota_target

G = 10**9
C = 1000  # one core in milli-cores


# O7: node 20 CPU, threshold 70 -> 14 CPU budget
@pytest.mark.parametrize(("inp", "min_percent", "want_cpus"), [
    (SuppressInput(20 * C, 11 * C, non_be_pods_used=8 * C, be_pods_used=4 * C), 0, 6),
    (SuppressInput(20 * C, 12 * C, non_be_pods_used=8 * C, be_pods_used=2 * C), 0, 4),
    (SuppressInput(20 * C, 12 * C, non_be_pods_used=8 * C, be_pods_used=2 * C, host_apps_used=1 * C), 0, 4),
    (SuppressInput(20 * C, 12 * C, non_be_pods_used=8 * C, be_pods_used=2 * C), 60, 12),
], ids=["unknown-pod-counts-as-non-be", "system-from-node-minus-pods", "ls-host-app", "min-percent-floor"])
def test_o7_be_cpu_allowed(inp: SuppressInput, min_percent: int, want_cpus: int) -> None:
    policy = CPUSuppressStrategy(threshold_percent=70, min_percent=min_percent)
    assert be_cpu_allowed(inp, policy) == want_cpus * C


def test_be_cpu_allowed_uses_node_reservation_and_floors_at_zero() -> None:
    policy = CPUSuppressStrategy(threshold_percent=70)
    reserved = SuppressInput(20 * C, 12 * C, 8 * C, 2 * C, node_reserved=5 * C)
    assert be_cpu_allowed(reserved, policy) == (14 - 8 - 5) * C
    assert be_cpu_allowed(SuppressInput(20 * C, 19 * C, 18 * C, 0), policy) == 0


STATE = SuppressState(logical_cpus=20, candidate_cpus=tuple(range(2, 20)), current_cpus=tuple(range(2, 6)))


@pytest.mark.parametrize(("allowed", "current", "want"), [
    (10_500, tuple(range(2, 6)), tuple(range(2, 8))),   # wants 11, grows by at most ceil(10% of 20) = 2
    (2_500, tuple(range(2, 12)), (2, 3, 4)),            # shrinks at once, keeping CPUs it had
    (0, tuple(range(2, 6)), (2, 3)),                    # never below 2 CPUs
    (50_000, tuple(range(2, 20)), tuple(range(2, 20))),  # never beyond the candidates (0-1 reserved)
    (3_000, (0, 1, 7), (2, 3, 4)),                      # reserved dropped: first 3 in spread order
], ids=["growth-limited", "shrink", "minimum-two", "capped-by-candidates", "drops-reserved"])
def test_cpuset_target(allowed: int, current: tuple[int, ...], want: tuple[int, ...]) -> None:
    state = SuppressState(STATE.logical_cpus, STATE.candidate_cpus, current)
    assert cpuset_target(allowed, state) == tuple(sorted(want))


@pytest.mark.parametrize(("allowed", "current_quota", "want"), [
    (5_000, -1, 500_000),          # first write from unlimited
    (0, 600_000, 2_000),           # floor 2000 us
    (5_000, 495_000, None),        # change < 1 % of 20 cores x 100 ms = 20000 us: skipped
    (20_000, 500_000, 700_000),    # growth capped at 10 % of capacity x period per round
    (3_000, 500_000, 300_000),     # shrink at once
], ids=["from-unlimited", "floor", "small-change-skipped", "growth-limited", "shrink"])
def test_quota_target(allowed: int, current_quota: int, want: int | None) -> None:
    state = SuppressState(20, tuple(range(20)), tuple(range(20)), current_quota_us=current_quota)
    assert quota_target(allowed, 20 * C, state) == want


@pytest.mark.parametrize(("policy", "writes"), [
    (CPUSuppressStrategy(threshold_percent=70), {"cpuset.cpus": "2-5", "cpu.cfs_quota_us": -1}),
    (CPUSuppressStrategy(threshold_percent=70, policy="cfsQuota"),
     {"cpuset.cpus": "2-19", "cpu.cfs_quota_us": 400_000}),
    (CPUSuppressStrategy(enabled=False), {"cpuset.cpus": "2-19", "cpu.cfs_quota_us": -1}),
], ids=["cpuset-resets-quota", "cfsquota-resets-cpuset", "disabled-resets-both"])
def test_suppress_plan(policy: CPUSuppressStrategy, writes: dict[str, object]) -> None:
    inp = SuppressInput(20 * C, 12 * C, 8 * C, 2 * C)
    plan = suppress(inp, policy, SuppressState(20, tuple(range(2, 20)), tuple(range(2, 6))))
    assert {w.resource: w.value for w in plan.writes} == writes
    assert all(w.cgroup == "kubepods/besteffort" for w in plan.writes)
    assert plan.be_cpu_allowed == (-1 if not policy.enabled else 4 * C)


# O11: node 120G
@pytest.mark.parametrize(("used", "threshold", "lower", "want"), [
    (115 * G, 80, 78, 20_400_000_000),
    (115 * G, 80, 80, 18_000_000_000),
    (80 * G, 80, None, 0),
    (84 * G, 70, None, 0 + 120 * G * (70 - 68) // 100),
], ids=["used-115G-lower-78", "used-115G-lower-80", "used-66pct-below", "default-lower-threshold-minus-2"])
def test_o11_memory_release(used: int, threshold: int, lower: int | None, want: int) -> None:
    policy = MemoryEvictStrategy(threshold_percent=threshold, lower_percent=lower)
    assert memory_release_bytes(120 * G, used, policy) == want


def _be(uid: str, prio: int, mem: int, cpu: int = 0, req: int = 0) -> PodView:
    return PodView(uid, "BE", priority=prio, memory_used=mem, cpu_used=cpu, cpu_request=req)


BE_PODS = [_be("a", 5500, 10 * G), _be("b", 5100, 5 * G), _be("c", 5100, 8 * G), _be("d", 5900, 30 * G),
           PodView("ls", "LS", priority=9500, memory_used=50 * G)]


@pytest.mark.parametrize(("used", "pending", "last", "want"), [
    (87 * G, frozenset(), None, ["c"]),                  # 72 % -> release 4.8G: lowest priority, largest first
    (100 * G, frozenset(), None, ["c", "b", "a"]),       # 83 % -> release 18G
    (94 * G, frozenset({"c"}), None, ["b"]),             # c is already being evicted: its 8G count
    (94 * G, frozenset(), 8.0, []),                      # cool-down 4 s after the last eviction at 8 s
    (80 * G, frozenset(), None, []),                     # 66 %: below threshold
], ids=["one-victim", "several-victims", "pending-counted", "cool-down", "below-threshold"])
def test_memory_evict_victims(used: int, pending: frozenset[str], last: float | None, want: list[str]) -> None:
    plan = memory_evict(120 * G, used, BE_PODS, MemoryEvictStrategy(), pending=pending, last_evict_at=last,
                        now=10.0)
    assert [e.uid for e in plan.evictions] == want
    assert all(e.reason == "Evicted" for e in plan.evictions)


# O10: upper 40 %, lower 30 %
@pytest.mark.parametrize(("window", "current", "threshold", "want"), [
    (BECPUSample(10000, 9500, 50000), BECPUSample(14000, 13000, 50000), 90, 6000),
    (BECPUSample(13000, 12000, 50000), BECPUSample(11000, 10000, 50000), 90, 7000),
    (BECPUSample(20000, 19000, 40000), None, 90, 0),
    (BECPUSample(20000, 10000, 40000), None, 90, 0),
    (BECPUSample(10000, 6000, 50000), BECPUSample(14000, 8000, 50000), 50, 6000),
], ids=["current-smaller", "window-smaller", "satisfied", "usage-low", "usage-threshold-50"])
def test_o10_be_cpu_release(window: BECPUSample, current: BECPUSample | None, threshold: int, want: int) -> None:
    policy = CPUEvictStrategy(enabled=True, upper_percent=40, lower_percent=30,
                              usage_threshold_percent=threshold)
    assert be_cpu_release(window, current, policy) == want


def test_cpu_evict_victims_by_priority_then_usage_ratio() -> None:
    pods = [_be("a", 5500, 0, cpu=1000, req=4000), _be("b", 5100, 0, cpu=1000, req=2000),
            _be("c", 5100, 0, cpu=1900, req=2000), _be("d", 5100, 0, cpu=100, req=10000)]
    policy = CPUEvictStrategy(enabled=True)
    plan = cpu_evict(BECPUSample(10000, 9500, 50000), BECPUSample(14000, 13000, 50000), pods, policy)
    assert plan.release == 6000
    assert [e.uid for e in plan.evictions] == ["c", "b", "d"]
    assert cpu_evict(BECPUSample(10000, 9500, 50000), None, pods, CPUEvictStrategy()).evictions == []


@pytest.mark.parametrize(("requests", "limits", "want"), [
    (Resources(batch_cpu=2000, batch_memory=G), Resources(batch_cpu=4000, batch_memory=2 * G),
     {"cpu.shares": 2048, "cpu.cfs_quota_us": 400_000, "memory.limit_in_bytes": 2 * G}),
    (Resources(), Resources(), {"cpu.shares": 2, "cpu.cfs_quota_us": -1, "memory.limit_in_bytes": -1}),
    (Resources(batch_cpu=500_000), Resources(),
     {"cpu.shares": 262144, "cpu.cfs_quota_us": -1, "memory.limit_in_bytes": -1}),
    (Resources(cpu=1000), Resources(cpu=1500, memory=G),
     {"cpu.shares": 1024, "cpu.cfs_quota_us": 150_000, "memory.limit_in_bytes": G}),
], ids=["batch-resources", "no-requests-min-shares", "shares-capped", "native-fallback"])
def test_be_pod_settings(requests: Resources, limits: Resources, want: dict[str, int]) -> None:
    spec = PodSpec(uid="p", name="p", qos_class="BE", requests=requests, limits=limits)
    writes = pod_settings(spec, "BE")
    assert {w.resource: w.value for w in writes} == want
    assert {w.cgroup for w in writes} == {"kubepods/besteffort/podp"}


@pytest.mark.parametrize(("mem_limits", "idle", "want"), [
    ([G, 2 * G], True, {"memory.limit_in_bytes": 3 * G, "cpu.idle": 1}),  # an idle group takes no shares
    ([G, 0], False, {"cpu.shares": 3072, "memory.limit_in_bytes": -1, "cpu.idle": 0}),
], ids=["sum-of-limits-idle", "one-unlimited"])
def test_be_qos_settings(mem_limits: list[int], idle: bool, want: dict[str, int]) -> None:
    pods = [PodSpec(uid=f"p{i}", name="p", qos_class="BE",
                    requests=Resources(batch_cpu=1000 * (i + 1)), limits=Resources(batch_memory=m))
            for i, m in enumerate(mem_limits)]
    assert {w.resource: w.value for w in be_qos_settings(pods, idle)} == want
