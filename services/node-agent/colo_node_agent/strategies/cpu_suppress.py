"""CPU suppress: how much CPU BE pods may use, enforced by cpuset or CFS quota (REFERENCE.md §5, oracle O7).

BEAllowed = capacity × threshold/100 − Σ non-BE pod used − non-BE host apps used − SystemUsed', where
SystemUsed' = max(node used − Σ pod used − host apps used, 0) raised to the node reservation; floored at
capacity × min_percent/100 and at 0. Pods with metrics but unknown meta are counted as non-BE by the caller.

Policies: ``cpuset`` gives the BE group n = max(ceil(BEAllowed/1000), 2) CPUs, growing by at most ceil(10 % of
logical CPUs) per round. The candidates never include reserved or LSE CPUs (the caller leaves them out); they
may include LSR CPUs (BE shares LSR cores when idle), which get their proportional share of n, as Koordinator
splits ``lsrCpuNums = n × |LSR| / (|LSR| + |LS|)``. Within each pool CPUs come in
:func:`~colo_node_agent.topology.spread_order` (whole hyper-thread sibling pairs, round-robin over NUMA
nodes/sockets), and n CPUs are the first n of that fixed order, so the set only grows or shrinks at its end.
``cfsQuota`` sets quota = max(BEAllowed × period/1000, 2000 µs), skipping changes under 1 % of capacity × period
(except a move to the 2000 µs floor) and growing by at most 10 % per round. The unused dimension is reset (quota
−1, or cpuset = every candidate CPU) so that switching policy leaves no stale limit. The cpuset goes to the BE
QoS group and to every BE pod group (on v1 a parent cannot shrink under its children; the executor orders the
writes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from colo.messages import CPUSuppressStrategy
from colo_node_agent.cgroups.executor import CgroupWrite
from colo_node_agent.cgroups.layout import BESTEFFORT
from colo_node_agent.cgroups.resources import DEFAULT_PERIOD_US, cpuset_format
from colo_node_agent.topology import CPUTopology, spread_order

I64 = npt.NDArray[np.int64]

MIN_BE_CPUS = 2
MIN_QUOTA_US = 2000
GROWTH_PERCENT = 10
SKIP_PERCENT = 1


@dataclass(frozen=True)
class SuppressInput:
    """One node's CPU picture for suppress; all milli-cores.

    ``non_be_pods_used`` includes pods whose class is unknown; ``host_apps_used`` is non-BE host applications;
    ``node_reserved`` the node reservation (REFERENCE.md §3 NodeReserved).
    """

    capacity: int
    node_used: int
    non_be_pods_used: int
    be_pods_used: int
    host_apps_used: int = 0
    node_reserved: int = 0


@dataclass(frozen=True)
class SuppressState:
    """What the BE group has now and may get.

    ``logical_cpus`` the node's CPU count; ``candidate_cpus`` the CPUs BE may use (no reserved or LSE CPUs);
    ``current_cpus``/``current_quota_us`` the BE group's cpuset and quota now; ``topology`` the CPU topology
    (None: every CPU its own core on one node); ``lsr_cpus`` candidates held by LSR pods; ``be_dir`` the BE QoS
    group and ``be_pods`` the BE pod groups (the cpuset goes to all of them).
    """

    logical_cpus: int
    candidate_cpus: tuple[int, ...]
    current_cpus: tuple[int, ...]
    current_quota_us: int = -1
    period_us: int = DEFAULT_PERIOD_US
    topology: CPUTopology | None = None
    lsr_cpus: tuple[int, ...] = ()
    be_dir: str = BESTEFFORT
    be_pods: tuple[str, ...] = ()


@dataclass(frozen=True)
class SuppressPlan:
    """The BE budget (milli-cores, −1 when suppress is off) and the writes to the BE QoS directory."""

    be_cpu_allowed: int
    writes: list[CgroupWrite] = field(default_factory=list)
    be_cpus: int = 0
    quota_us: int = -1


def be_cpu_allowed(inp: SuppressInput, policy: CPUSuppressStrategy) -> int:
    """BEAllowed in milli-cores (REFERENCE.md §5, O7); never negative."""
    system = max(inp.node_used - inp.non_be_pods_used - inp.be_pods_used - inp.host_apps_used, 0)
    system = max(system, inp.node_reserved)
    allowed = inp.capacity * policy.threshold_percent // 100 - inp.non_be_pods_used - inp.host_apps_used - system
    allowed = max(allowed, inp.capacity * policy.min_percent // 100)
    return max(allowed, 0)


def be_cpu_allowed_many(capacity: I64, node_used: I64, non_be_pods_used: I64, be_pods_used: I64,
                        node_reserved: I64, threshold_percent: I64, min_percent: I64) -> I64:
    """:func:`be_cpu_allowed` for many nodes at once (no host apps): int64 arrays of shape ``(nodes,)`` in
    milli-cores and percents; same integer arithmetic, element by element (REFERENCE.md §5, O7)."""
    system = np.maximum(np.maximum(node_used - non_be_pods_used - be_pods_used, 0), node_reserved)
    allowed = capacity * threshold_percent // 100 - non_be_pods_used - system
    allowed = np.maximum(allowed, capacity * min_percent // 100)
    out: I64 = np.maximum(allowed, 0)
    return out


def cpuset_size_many(allowed: I64, current: I64, growth: I64) -> I64:
    """:func:`cpuset_size` for many nodes; ``growth`` = ceil(10 % of logical CPUs) per node."""
    n = np.maximum(-(-allowed // 1000), MIN_BE_CPUS)
    return np.where((n > current) & (current > 0), np.minimum(n, current + growth), n)


def cpuset_growth(logical_cpus: int) -> int:
    """Most CPUs the BE cpuset may grow by in one round: ceil(10 % of ``logical_cpus``)."""
    return math.ceil(logical_cpus * GROWTH_PERCENT / 100)


def cpuset_size(allowed: int, current: int, logical_cpus: int) -> int:
    """CPUs the BE group gets for budget ``allowed`` milli-cores when it has ``current`` candidate CPUs now:
    max(ceil(allowed/1000), 2), growing by at most ceil(10 % of ``logical_cpus``) (REFERENCE.md §5)."""
    n = max(math.ceil(allowed / 1000), MIN_BE_CPUS)
    if n > current and current:
        n = min(n, current + cpuset_growth(logical_cpus))
    return n


def cpuset_target(allowed: int, state: SuppressState) -> tuple[int, ...]:
    """The BE cpuset for budget ``allowed``: n = max(ceil(allowed/1000), 2) CPUs with the growth limit, split
    between the LSR and LS pools in proportion to their sizes, each pool's CPUs taken in spread order.

    Never more than the candidates; empty only when there are no candidates (the executor then refuses the
    write). Returned ascending.
    """
    candidates = set(state.candidate_cpus)
    cur = [c for c in state.current_cpus if c in candidates]
    n = min(cpuset_size(allowed, len(cur), state.logical_cpus), len(candidates))
    topo = state.topology or CPUTopology.flat(max(candidates, default=-1) + 1)
    lsr = set(state.lsr_cpus) & candidates
    lsr_order = spread_order(sorted(lsr), topo)
    ls_order = spread_order(sorted(candidates - lsr), topo)
    lsr_n = n * len(lsr_order) // len(candidates) if candidates else 0
    ls_n = n - lsr_n
    if ls_n > len(ls_order):
        lsr_n, ls_n = n - len(ls_order), len(ls_order)
    return tuple(sorted(lsr_order[:lsr_n] + ls_order[:ls_n]))


def quota_target(allowed: int, capacity: int, state: SuppressState) -> int | None:
    """The BE cfs quota (µs) for budget ``allowed``, or None when the change is too small to write."""
    total = capacity * state.period_us // 1000
    target = max(allowed * state.period_us // 1000, MIN_QUOTA_US)
    cur = state.current_quota_us
    if cur < 0:
        return target
    if target > cur:
        target = min(target, cur + total * GROWTH_PERCENT // 100)
    if abs(target - cur) < total * SKIP_PERCENT // 100 and target != MIN_QUOTA_US:
        return None
    return target


def _cpuset_writes(state: SuppressState, cpus: str, reason: str) -> list[CgroupWrite]:
    return [CgroupWrite(cg, "cpuset.cpus", cpus, reason) for cg in (state.be_dir, *state.be_pods)]


def suppress(inp: SuppressInput, policy: CPUSuppressStrategy, state: SuppressState) -> SuppressPlan:
    """The suppress plan for one node; disabled policy → budget −1 and both limits reset."""
    all_cpus = cpuset_format(state.candidate_cpus)
    if not policy.enabled:
        return SuppressPlan(-1, [
            CgroupWrite(state.be_dir, "cpu.cfs_quota_us", -1, "suppress disabled"),
            *_cpuset_writes(state, all_cpus, "suppress disabled"),
        ], be_cpus=len(state.candidate_cpus))
    allowed = be_cpu_allowed(inp, policy)
    reason = f"BEAllowed {allowed}m"
    if policy.policy == "cpuset":
        cpus = cpuset_target(allowed, state)
        return SuppressPlan(allowed, [
            *_cpuset_writes(state, cpuset_format(cpus), reason),
            CgroupWrite(state.be_dir, "cpu.cfs_quota_us", -1, "policy cpuset"),
        ], be_cpus=len(cpus))
    writes = _cpuset_writes(state, all_cpus, "policy cfsQuota")
    quota = quota_target(allowed, inp.capacity, state)
    if quota is not None:
        writes.append(CgroupWrite(state.be_dir, "cpu.cfs_quota_us", quota, reason))
    return SuppressPlan(allowed, writes, be_cpus=len(state.candidate_cpus),
                        quota_us=quota if quota is not None else state.current_quota_us)
