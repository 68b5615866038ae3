"""Pod-level and BE QoS-level cgroup settings (REFERENCE.md §5 "BE cgroup settings", "CPU priority").

Pod level is what the kubelet writes for every pod (shares from the CPU request, CFS quota from the CPU limit,
memory limit); for BE pods the requests/limits are their ``batch-cpu``/``batch-memory`` (falling back to native
``cpu``/``memory`` for BE pods that were not translated by a colocation profile). The BE QoS directory gets
cpu.shares = max(2, Σ batch-cpu requests × 1024/1000) (cap 262144), the memory limit Σ batch-memory limits
(unlimited if any BE pod is unlimited) and ``cpu.idle`` = 1 when the NodeSLO asks for it (SCHED_IDLE for the
whole BE group: BE tasks never delay an LS wake-up; written only where the kernel has ``cpu.idle``, 5.15+ on
cgroup v2, or a v1 kernel that carries it).
"""

from __future__ import annotations

from colo.messages import PodSpec, QoSClass, Resources
from colo_node_agent.cgroups.executor import CgroupWrite
from colo_node_agent.cgroups.layout import CGROUPFS, Layout
from colo_node_agent.cgroups.resources import DEFAULT_PERIOD_US, SHARES_MAX, SHARES_MIN


def shares_of(cpu_request_milli: int) -> int:
    """cpu.shares for a CPU request: max(2, request × 1024 / 1000), capped at 262144 (REFERENCE.md §5)."""
    return min(max(SHARES_MIN, cpu_request_milli * 1024 // 1000), SHARES_MAX)


def quota_of(cpu_limit_milli: int, period_us: int = DEFAULT_PERIOD_US) -> int:
    """cfs_quota_us for a CPU limit: limit × period / 1000, −1 when unlimited (0); floor 1000 µs."""
    if cpu_limit_milli <= 0:
        return -1
    return max(cpu_limit_milli * period_us // 1000, 1000)


def effective_resources(spec: PodSpec, qos: QoSClass) -> tuple[Resources, Resources]:
    """(requests, limits) in native terms: BE pods read batch-*, falling back to cpu/memory when unset."""
    req, lim = spec.requests, spec.limits
    if qos != "BE":
        return req, lim
    return (
        Resources(cpu=req.batch_cpu or req.cpu, memory=req.batch_memory or req.memory),
        Resources(cpu=lim.batch_cpu or lim.cpu, memory=lim.batch_memory or lim.memory),
    )


def pod_settings(spec: PodSpec, qos: QoSClass, period_us: int = DEFAULT_PERIOD_US,
                 layout: Layout = CGROUPFS) -> list[CgroupWrite]:
    """The pod-level writes for a pod of class ``qos`` (shares, quota, memory limit)."""
    req, lim = effective_resources(spec, qos)
    cg = layout.pod_dir(qos, spec.uid)
    return [
        CgroupWrite(cg, "cpu.shares", shares_of(req.cpu), "pod cpu request"),
        CgroupWrite(cg, "cpu.cfs_quota_us", quota_of(lim.cpu, period_us), "pod cpu limit"),
        CgroupWrite(cg, "memory.limit_in_bytes", lim.memory if lim.memory > 0 else -1, "pod memory limit"),
    ]


def be_qos_settings(be_pods: list[PodSpec], be_cpu_idle: bool, *, idle_supported: bool = True,
                    layout: Layout = CGROUPFS, min_shares: bool = False) -> list[CgroupWrite]:
    """The BE QoS-level writes for the BE pods on a node: memory limit; ``cpu.idle`` when ``idle_supported``;
    shares unless the group is idle (the kernel refuses ``cpu.shares``/``cpu.weight`` on an idle group: its weight
    is fixed at the minimum; the executor writes ``cpu.idle`` = 0 before the shares when switching back).

    The shares are Σ batch-cpu requests × 1024/1000, or 2 with ``min_shares`` (NodeSLO ``be_cpu_shares="min"``:
    the kubelet's ``MinShares``, what it gives ``kubepods/besteffort``)."""
    total_req = 0
    total_mem_limit = 0
    unlimited = False
    for spec in be_pods:
        req, lim = effective_resources(spec, "BE")
        total_req += req.cpu
        if lim.memory > 0:
            total_mem_limit += lim.memory
        else:
            unlimited = True
    mem = -1 if unlimited or not be_pods else total_mem_limit
    be = layout.besteffort
    writes = [CgroupWrite(be, "memory.limit_in_bytes", mem, "sum of BE batch-memory limits")]
    idle = be_cpu_idle and idle_supported
    if not idle:  # an idle group's weight is fixed at the minimum: the kernel refuses cpu.shares (EINVAL)
        writes.append(CgroupWrite(be, "cpu.shares", SHARES_MIN, "NodeSLO be_cpu_shares min") if min_shares
                      else CgroupWrite(be, "cpu.shares", shares_of(total_req), "sum of BE batch-cpu requests"))
    if idle_supported:
        writes.append(CgroupWrite(be, "cpu.idle", 1 if idle else 0, "NodeSLO be_cpu_idle"))
    return writes
