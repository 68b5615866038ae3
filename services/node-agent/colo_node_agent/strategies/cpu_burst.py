"""CPU burst for LS pods (REFERENCE.md §5 "CPU burst"; Koordinator ``qosmanager/plugins/cpuburst``).

Only LS pods with a CPU limit take part (not LSE/LSR/BE). Two mechanisms, chosen by the NodeSLO policy:

* **burst** (``cpuBurstOnly``, ``auto``): ``cpu.cfs_burst_us`` = limit (cores) × burst_percent/100 × period
  (default 1000 % → ten periods of full quota saved up); the executor clamps it to the quota (the kernel's
  rule). Other policies write 0.
* **quota scaling** (``cfsQuotaBurstOnly``, ``auto``): per round the pods to scale ×1.2 up or ×0.8 down are
  chosen one by one within the share pool's headroom, with hysteresis
  (:mod:`~colo_node_agent.strategies.burst_scaling`), and the result stays within [base, base ×
  quota_scale_max_percent/100], base = limit × period/1000. Other policies reset the quota to base.

Share pool: capacity = logical CPUs − Σ LSE/LSR requests (cores), use = node used − Σ LSE/LSR/BE pod use (at
least Σ LS pod use);
Overload when use/pool ≥ threshold (50 %), Cooling when ≥ 90 % of it, Idle below, Unknown without a node metric.

``quota_burst_period_s`` ≥ 0 adds a token bucket per pod (Koordinator's ``burstLimiter``): capacity = period ×
(max% − 100); tokens drain by (use% of limit − 100) per second at use ≥ 100 % and refill by (100 − use%) per
second below 60 %; a pod without tokens scales down. A new bucket starts a quarter full (the reference starts
at a random 0–50 %, to de-synchronize pods; a fixed start keeps the plan a pure function).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from colo.messages import CPUBurstStrategy, QoSClass
from colo_node_agent.cgroups.executor import CgroupWrite
from colo_node_agent.cgroups.resources import DEFAULT_PERIOD_US
from colo_node_agent.strategies.burst_scaling import (
    NodeState,
    Operation,
    ScalingPod,
    SharePool,
    scaling_operations,
    step_down,
    step_up,
)

__all__ = ["BurstPlan", "BurstPod", "Limiter", "NodeState", "Operation", "SharePool", "SharePoolPod", "base_quota",
           "burst_us", "cpu_burst", "limiter_allows", "share_pool", "share_pool_state"]

LIMITER_CONSUME_PERCENT, LIMITER_SAVE_PERCENT = 100, 60


@dataclass(frozen=True)
class BurstPod:
    """One pod for burst planning: ``cpu_limit`` milli-cores (0 = none), ``quota_us`` its current CFS quota,
    ``throttled`` whether it was throttled since the last round (None = unknown), ``cpu_used`` milli-cores,
    ``throttled_ratio`` the throttled share of CFS periods since the last round (0..1; orders throttled pods)."""

    uid: str
    cgroup: str
    qos: QoSClass
    cpu_limit: int
    quota_us: int
    throttled: bool | None = None
    cpu_used: int = 0
    throttled_ratio: float = 0.0


@dataclass(frozen=True)
class Limiter:
    """A pod's token bucket: ``capacity`` and ``tokens`` in percent-seconds over the limit, ``at`` last update."""

    capacity: int
    tokens: float
    at: float


@dataclass(frozen=True)
class SharePoolPod:
    """What the share-pool state needs of a pod: class, CPU request and use (milli-cores)."""

    qos: QoSClass
    cpu_request: int
    cpu_used: int


@dataclass(frozen=True)
class BurstPlan:
    """Writes (pod burst and quota), the operation per pod, the node state, the limiters to keep and, per pod,
    the rounds in a row it was not throttled (to keep for the next round)."""

    writes: list[CgroupWrite] = field(default_factory=list)
    operations: dict[str, Operation] = field(default_factory=dict)
    state: NodeState = "unknown"
    limiters: dict[str, Limiter] = field(default_factory=dict)
    unthrottled_rounds: dict[str, int] = field(default_factory=dict)


def share_pool(logical_cpus: int, node_used: int | None, pods: list[SharePoolPod]) -> SharePool:
    """The LS share pool (module doc): ``node_used`` milli-cores, None = no metric. The use is at least the
    LS pods' own (node and pod figures are sampled apart: a BE figure ahead of the node's made the difference
    small or negative, and the pool looked Idle with room it did not have)."""
    total = logical_cpus * 1000 - sum(p.cpu_request for p in pods if p.qos in ("LSE", "LSR"))
    if node_used is None:
        return SharePool(total, None)
    rest = node_used - sum(p.cpu_used for p in pods if p.qos in ("LSE", "LSR", "BE"))
    return SharePool(total, max(rest, sum(p.cpu_used for p in pods if p.qos == "LS")))


def share_pool_state(logical_cpus: int, node_used: int | None, pods: list[SharePoolPod],
                     threshold_percent: int) -> NodeState:
    """Overload / Cooling / Idle / Unknown of the share pool (module doc); ``node_used`` milli-cores."""
    return share_pool(logical_cpus, node_used, pods).state(threshold_percent)


def base_quota(cpu_limit: int, period_us: int = DEFAULT_PERIOD_US) -> int:
    """The kubelet's quota for a CPU limit: limit × period / 1000 µs."""
    return cpu_limit * period_us // 1000


def burst_us(cpu_limit: int, policy: CPUBurstStrategy, period_us: int = DEFAULT_PERIOD_US) -> int:
    """cfs_burst_us = limit × burst_percent/100 × period/1000 when the policy bursts, else 0."""
    if policy.policy not in ("cpuBurstOnly", "auto") or cpu_limit <= 0:
        return 0
    return cpu_limit * policy.burst_percent * period_us // (1000 * 100)


def limiter_allows(lim: Limiter | None, policy: CPUBurstStrategy, use_percent: float, now: float) -> tuple[
        bool, Limiter | None]:
    """Whether the token bucket lets the pod stay above base, and the updated bucket (None when unlimited)."""
    if policy.quota_burst_period_s < 0:
        return True, None
    capacity = policy.quota_burst_period_s * (policy.quota_scale_max_percent - 100)
    if lim is None or lim.capacity != capacity:
        lim = Limiter(capacity, capacity / 4, now)
    dt = max(now - lim.at, 0.0)
    tokens = lim.tokens
    if use_percent >= LIMITER_CONSUME_PERCENT:
        tokens -= (use_percent - 100) * dt
    elif use_percent < LIMITER_SAVE_PERCENT:
        tokens += (100 - use_percent) * dt
    tokens = min(max(tokens, -capacity), capacity)
    return tokens > 0, Limiter(capacity, tokens, now)


def cpu_burst(pods: list[BurstPod], pool: SharePool, policy: CPUBurstStrategy, limiters: dict[str, Limiter],
              now: float, period_us: int = DEFAULT_PERIOD_US,
              unthrottled_rounds: dict[str, int] | None = None) -> BurstPlan:
    """The burst plan for the LS pods with a CPU limit among ``pods`` (others ignored). ``limiters`` and
    ``unthrottled_rounds`` as returned last round (absent pods start with none)."""
    state = pool.state(policy.share_pool_threshold_percent)
    plan = BurstPlan(state=state)
    calm = unthrottled_rounds or {}
    scaling = policy.policy in ("cfsQuotaBurstOnly", "auto")
    candidates: list[ScalingPod] = []
    ls = [p for p in pods if p.qos == "LS" and p.cpu_limit > 0]
    for p in ls:
        base = base_quota(p.cpu_limit, period_us)
        ceil = base * max(policy.quota_scale_max_percent, 100) // 100
        allowed, lim = limiter_allows(limiters.get(p.uid), policy, p.cpu_used * 100 / p.cpu_limit, now)
        if lim is not None:
            plan.limiters[p.uid] = lim
        rounds = calm.get(p.uid, 0)  # unknown throttling (no statistics) keeps the count
        if p.throttled is not None:
            rounds = 0 if p.throttled else rounds + 1
        plan.unthrottled_rounds[p.uid] = rounds
        cur = p.quota_us if p.quota_us > 0 else base
        candidates.append(ScalingPod(p.uid, cur, base, ceil, p.cpu_used, p.throttled, p.throttled_ratio, allowed,
                                     rounds))
    ops = scaling_operations(candidates, pool, policy, period_us) if scaling else {}
    for p, c in zip(ls, candidates):
        op: Operation = ops.get(p.uid, "reset")
        target = {"up": step_up(c), "down": step_down(c), "remain": c.quota_us, "reset": c.base_us}[op]
        target = min(max(target, c.base_us), c.ceil_us)
        plan.operations[p.uid] = op
        plan.writes.append(CgroupWrite(p.cgroup, "cpu.cfs_quota_us", target, f"cpu burst {op} ({state})"))
        plan.writes.append(CgroupWrite(p.cgroup, "cpu.cfs_burst_us", burst_us(p.cpu_limit, policy, period_us),
                                       f"cpu burst policy {policy.policy}"))
    return plan
