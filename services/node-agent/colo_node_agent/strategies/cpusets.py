"""Exclusive (LSE) and reserved (LSR) cpusets, the LS share pool and the BE candidates (REFERENCE.md §5 "CPU
priority": LSE/LSR get exclusive or reserved cpusets; §1 classes).

* LSE and LSR pods that request a whole, non-zero number of cores get that many CPUs of their own: the cpuset
  the scheduler chose (``PodBound.cpuset``, NodeNUMAResource; docs/topology.md) when it is valid (that many
  CPUs, all on the node, not reserved, not another pod's); else the CPUs the pod has while they stay valid, so
  allocations never move; else the agent's own choice
  (:func:`~colo_node_agent.cpu_accumulator.take_cores`: whole cores across the node, on as few NUMA nodes and
  sockets as the free CPUs allow, best fit), for pods bound without a cpuset (a node with no topology
  registered, a scheduler without the plugin).
* LS (and SYSTEM) pods share the pool = all CPUs − reserved − LSE − LSR.
* BE may use all CPUs − reserved − LSE (LSR cores are shared with BE when idle); CPU suppress picks the BE
  cpuset out of these, giving LSR CPUs their proportional share.

When the NodeSLO switches cpusets off, every pod and QoS group gets all non-reserved CPUs. A pod whose CPUs
cannot be found (not enough free whole cores) runs in the share pool and the plan says why.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from colo.messages import CPUSetStrategy, QoSClass
from colo_node_agent.cgroups.executor import CgroupWrite
from colo_node_agent.cgroups.layout import CGROUPFS, Layout
from colo_node_agent.cgroups.resources import cpuset_format
from colo_node_agent.cpu_accumulator import take_cores
from colo_node_agent.topology import CPUTopology


@dataclass(frozen=True)
class CpusetPod:
    """A pod for cpuset planning: class, CPU request (milli-cores), the CPUs it holds now and the CPUs the
    scheduler assigned it (() = none)."""

    uid: str
    qos: QoSClass
    cpu_request: int = 0
    current: tuple[int, ...] = ()
    assigned: tuple[int, ...] = ()


@dataclass(frozen=True)
class CpusetPlan:
    """Per pod its CPUs; the share pool (LS); the BE candidates; LSR CPUs (BE shares them); the writes; and
    one problem per pod that could not get its own CPUs."""

    pods: dict[str, tuple[int, ...]]
    share_pool: tuple[int, ...]
    be_candidates: tuple[int, ...]
    lsr_cpus: tuple[int, ...] = ()
    lse_cpus: tuple[int, ...] = ()
    writes: list[CgroupWrite] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def wants_own_cpus(pod: CpusetPod) -> bool:
    """LSE/LSR pods with a whole, non-zero number of cores (REFERENCE.md §1 valid combinations)."""
    return pod.qos in ("LSE", "LSR") and pod.cpu_request > 0 and pod.cpu_request % 1000 == 0


def plan_cpusets(pods: list[CpusetPod], topology: CPUTopology, reserved: tuple[int, ...],
                 policy: CPUSetStrategy, layout: Layout = CGROUPFS, *,
                 be_dir_managed: bool = True) -> CpusetPlan:
    """The cpuset of every pod and QoS group. ``be_dir_managed`` leaves the BE group and BE pods to CPU suppress
    (it writes them); else they get the BE candidates here.

    Writes: the kubepods group (every non-reserved CPU, a superset of all children), the burstable group (the
    share pool), LSE/LSR pods (their CPUs), LS pods (the share pool); the executor orders them parent/child.
    """
    usable = tuple(c for c in topology.ids() if c not in set(reserved))
    if not policy.enabled:
        return _flat(pods, usable, layout, be_dir_managed)
    free = set(usable)
    out: dict[str, tuple[int, ...]] = {}
    problems: list[str] = []
    own = sorted((p for p in pods if wants_own_cpus(p)), key=lambda p: (p.qos != "LSE", p.uid))
    for p in own:  # the scheduler's choice first: it booked these CPUs for the pod
        if len(set(p.assigned)) == p.cpu_request // 1000 and set(p.assigned) <= free:
            out[p.uid] = tuple(sorted(set(p.assigned)))
            free -= set(p.assigned)
        elif p.assigned:
            problems.append(f"pod {p.uid} ({p.qos}): assigned cpuset {cpuset_format(p.assigned)} is not "
                            f"{p.cpu_request // 1000} free CPUs of this node: the agent chooses")
    for p in own:  # keep valid current allocations next, so they never move
        if p.uid in out:
            continue
        n = p.cpu_request // 1000
        if len(p.current) == n and set(p.current) <= free:
            out[p.uid] = tuple(sorted(p.current))
            free -= set(p.current)
    for p in own:
        if p.uid in out:
            continue
        got = take_cores(free, p.cpu_request // 1000, topology)
        if got is None:
            problems.append(f"pod {p.uid} ({p.qos}) wants {p.cpu_request // 1000} CPUs of its own, "
                            f"{len(free)} free: runs in the share pool")
            continue
        out[p.uid] = got
        free -= set(got)
    allocated = set(out)
    lse = {c for p in own if p.qos == "LSE" and p.uid in allocated for c in out[p.uid]}
    lsr = {c for p in own if p.qos == "LSR" and p.uid in allocated for c in out[p.uid]}
    share = tuple(sorted(free))
    if not share:
        problems.append("LSE/LSR pods hold every CPU: the share pool falls back to the LSR CPUs")
        share = tuple(sorted(set(usable) - lse)) or usable
    be = tuple(c for c in usable if c not in lse) or share
    for p in pods:
        if p.uid not in out and p.qos != "BE":
            out[p.uid] = share
    writes = [CgroupWrite(layout.kubepods, "cpuset.cpus", cpuset_format(usable), "every non-reserved CPU"),
              CgroupWrite(layout.burstable, "cpuset.cpus", cpuset_format(share), "share pool")]
    for p in pods:
        if p.qos == "BE":
            continue
        why = f"{p.qos} own CPUs" if p.uid in allocated else "share pool"
        writes.append(CgroupWrite(layout.pod_dir(p.qos, p.uid), "cpuset.cpus", cpuset_format(out[p.uid]), why))
    if not be_dir_managed:
        writes += _be_writes(pods, be, layout)
    return CpusetPlan(out, share, be, tuple(sorted(lsr)), tuple(sorted(lse)), writes, problems)


def _be_writes(pods: list[CpusetPod], cpus: tuple[int, ...], layout: Layout) -> list[CgroupWrite]:
    text = cpuset_format(cpus)
    return [CgroupWrite(layout.besteffort, "cpuset.cpus", text, "BE candidates"),
            *(CgroupWrite(layout.pod_dir("BE", p.uid), "cpuset.cpus", text, "BE candidates")
              for p in pods if p.qos == "BE")]


def _flat(pods: list[CpusetPod], usable: tuple[int, ...], layout: Layout, be_dir_managed: bool) -> CpusetPlan:
    """Cpusets off: every pod and group on every non-reserved CPU."""
    text = cpuset_format(usable)
    writes = [CgroupWrite(cg, "cpuset.cpus", text, "cpusets off") for cg in (layout.kubepods, layout.burstable)]
    writes += [CgroupWrite(layout.pod_dir(p.qos, p.uid), "cpuset.cpus", text, "cpusets off")
               for p in pods if p.qos != "BE"]
    if not be_dir_managed:
        writes += _be_writes(pods, usable, layout)
    return CpusetPlan({p.uid: usable for p in pods if p.qos != "BE"}, usable, usable, writes=writes)
