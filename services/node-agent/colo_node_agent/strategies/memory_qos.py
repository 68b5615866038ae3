"""Memory QoS: memory.min / memory.low / memory.high from requests and limits (REFERENCE.md §5 "Memory QoS";
Koordinator ``cgreconcile`` ``calculatePodResources``/``calculateContainerResources``).

Per pod (one container per pod here, so container and pod values coincide), with the class's percents (NodeSLO
``lsr`` for LSE/LSR, ``ls`` for LS/SYSTEM, ``be`` for BE, else the node-wide ones; BE pods without a ``be``
override get none):

* memory.min = request × min%/100; memory.low = request × low%/100, raised to memory.min when set below it;
* memory.high = ⌊(request + (limit − request) × throttling%/100) / page⌋ × page, with limit = the node's
  allocatable memory when the pod has none; throttling 0 → ``max``; raised to memory.min when below it.

BE pods use their batch-memory request/limit (the caller passes effective values). QoS groups get the sums of
their pods' min and low (kubepods also the sums of its burstable and besteffort children, since protection is
bounded by the parent's): that is what lets a pod's protection take effect. A node whose kernel lacks the files
(v1 without memory.min: most kernels but Alibaba Cloud Linux) gets no writes. Disabled → every pod and group is
reset to min 0, low 0, high max, so switching it off leaves no stale protection or throttle.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from colo.messages import MemoryQoSClass, MemoryQoSStrategy, QoSClass
from colo_node_agent.cgroups.executor import CgroupWrite
from colo_node_agent.cgroups.layout import CGROUPFS, Layout

PAGE_BYTES = 4096


@dataclass(frozen=True)
class MemoryPod:
    """A pod for memory QoS: class and effective memory request/limit in bytes (limit 0 = none)."""

    uid: str
    qos: QoSClass
    memory_request: int
    memory_limit: int = 0


@dataclass(frozen=True)
class MemoryQoSValues:
    """memory.min, memory.low (bytes) and memory.high (bytes, −1 = max) of one cgroup."""

    min: int
    low: int
    high: int


@dataclass(frozen=True)
class MemoryQoSPlan:
    """Values per pod uid, per QoS group, and the writes."""

    pods: dict[str, MemoryQoSValues] = field(default_factory=dict)
    groups: dict[str, MemoryQoSValues] = field(default_factory=dict)
    writes: list[CgroupWrite] = field(default_factory=list)
    skipped: str = ""


def class_percents(policy: MemoryQoSStrategy, qos: QoSClass) -> MemoryQoSClass:
    """The percents that apply to ``qos``: its class override, else the node-wide percents, except BE pods,
    which get no protection and no throttle unless ``be`` says so (Koordinator's BE class defaults are 0)."""
    override = {"LSE": policy.lsr, "LSR": policy.lsr, "LS": policy.ls, "SYSTEM": policy.ls, "BE": policy.be}[qos]
    if override is not None:
        return override
    if qos == "BE":
        return MemoryQoSClass()
    return MemoryQoSClass(min_percent=policy.min_percent, low_percent=policy.low_percent,
                          throttling_percent=policy.throttling_percent)


def pod_values(pod: MemoryPod, percents: MemoryQoSClass, node_allocatable: int) -> MemoryQoSValues:
    """memory.min/low/high of one pod (module doc formulas)."""
    req = max(pod.memory_request, 0)
    mn = req * percents.min_percent // 100
    low = req * percents.low_percent // 100
    if 0 < low < mn:
        low = mn
    if percents.throttling_percent == 0:
        high = -1
    else:
        limit = pod.memory_limit if pod.memory_limit > 0 else node_allocatable
        high = (req + (limit - req) * percents.throttling_percent // 100) // PAGE_BYTES * PAGE_BYTES
        if high < mn:
            high = mn
    return MemoryQoSValues(mn, low, high)


def memory_qos(pods: list[MemoryPod], policy: MemoryQoSStrategy, node_allocatable: int, supported: bool,
               layout: Layout = CGROUPFS) -> MemoryQoSPlan:
    """The memory QoS plan for the pods of one node (``node_allocatable`` bytes)."""
    if not supported:
        return MemoryQoSPlan(skipped="memory.min/low/high not available on this kernel")
    off = MemoryQoSValues(0, 0, -1)
    plan = MemoryQoSPlan()
    sums: dict[str, list[int]] = {d: [0, 0] for d in layout.qos_dirs}
    for p in pods:
        v = pod_values(p, class_percents(policy, p.qos), node_allocatable) if policy.enabled else off
        plan.pods[p.uid] = v
        d = layout.qos_dir(p.qos)
        sums[d][0] += v.min
        sums[d][1] += v.low
        cg = layout.pod_dir(p.qos, p.uid)
        why = "memory QoS" if policy.enabled else "memory QoS off"
        plan.writes.extend([CgroupWrite(cg, "memory.min", v.min, why), CgroupWrite(cg, "memory.low", v.low, why),
                            CgroupWrite(cg, "memory.high", v.high, why)])
    for child in (layout.burstable, layout.besteffort):
        sums[layout.kubepods][0] += sums[child][0]
        sums[layout.kubepods][1] += sums[child][1]
    for d, (mn, low) in sums.items():
        plan.groups[d] = MemoryQoSValues(mn, low, -1)
        plan.writes.extend([CgroupWrite(d, "memory.min", mn, "sum of pods"),
                            CgroupWrite(d, "memory.low", low, "sum of pods")])
    return plan
