"""Batch and mid allocatable of one node (REFERENCE.md §3). Pure functions over integers.

CPU is in milli-cores, memory in bytes; percentages are integers 0..100. Every result
is floored at 0. Vocabulary of Koordinator's ``batchresource`` / ``midresource`` plugins:
capacity, safety margin, node reserved, system used, high-priority (HP) pods.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from colo.classes import priority_class_of, qos_class_of
from colo.messages import (
    NodeMetric,
    NodeProfile,
    NodeSpec,
    PodMetric,
    PodPhase,
    PodSpec,
    PriorityClass,
    QoSClass,
    Resources,
    Usage,
)
from colo_slo_manager.settings import BatchConfig, MidConfig

_CPU_LIST = re.compile(r"^\d+(-\d+)?$")
_LOW_PRIORITY: frozenset[str] = frozenset({"batch", "free"})


@dataclass(frozen=True, slots=True)
class PodView:
    """What slo-manager knows of a pod on a node.

    ``requests`` in milli-cores / bytes as admitted (native, batch-* or mid-*);
    classes resolved per REFERENCE.md §1.
    """

    uid: str
    phase: PodPhase
    priority_class: PriorityClass
    qos_class: QoSClass
    requests: Resources

    @classmethod
    def of_spec(cls, spec: PodSpec, phase: PodPhase = "Pending") -> PodView:
        """The view of an admitted/bound pod spec in ``phase``."""
        return cls(uid=spec.uid, phase=phase, priority_class=priority_class_of(spec),
                   qos_class=qos_class_of(spec), requests=spec.requests)

    @property
    def active(self) -> bool:
        """True for Running or Pending pods (the ones that hold resources)."""
        return self.phase in ("Running", "Pending")

    @property
    def high_priority(self) -> bool:
        """True for an active pod whose priority class is not batch/free (REFERENCE.md §3 HP pods)."""
        return self.active and self.priority_class not in _LOW_PRIORITY


@dataclass(frozen=True, slots=True)
class Allocatable:
    """Batch and mid allocatable of a node: ``*_cpu`` milli-cores, ``*_memory`` bytes."""

    batch_cpu: int = 0
    batch_memory: int = 0
    mid_cpu: int = 0
    mid_memory: int = 0


def count_cpu_list(cpus: str) -> int:
    """Number of CPUs in a Linux CPU list such as ``"0-19"`` or ``"0-3,8,10-11"`` (empty → 0).

    Raises ValueError on a malformed list or a descending range.
    """
    total = 0
    for part in (p.strip() for p in cpus.split(",") if p.strip()):
        if not _CPU_LIST.match(part):
            raise ValueError(f"malformed CPU list {cpus!r}: {part!r}")
        lo, _, hi = part.partition("-")
        first, last = int(lo), int(hi or lo)
        if last < first:
            raise ValueError(f"malformed CPU list {cpus!r}: descending range {part!r}")
        total += last - first + 1
    return total


def node_problems(node: NodeSpec) -> list[str]:
    """Every reason the node spec cannot be used for resource calculation (empty when usable)."""
    out: list[str] = []
    if not node.name:
        out.append("node name must not be empty")
    if node.capacity.cpu <= 0 or node.capacity.memory <= 0:
        out.append(f"node capacity cpu/memory must be > 0, got {node.capacity.cpu}/{node.capacity.memory}")
    try:
        count_cpu_list(node.reserved_cpus)
    except ValueError as exc:
        out.append(str(exc))
    return out


def node_reserved(node: NodeSpec) -> Usage:
    """NodeReserved = max(capacity − allocatable, reservation declared on the node), per resource.

    A reservation listing specific CPUs (``reserved_cpus``) counts as that many cores
    (REFERENCE.md §3). Raises ValueError on a malformed CPU list.
    """
    reserved_cpu = node.reserved.cpu
    if node.reserved_cpus:
        reserved_cpu = count_cpu_list(node.reserved_cpus) * 1000
    return Usage(
        cpu=max(node.capacity.cpu - node.allocatable.cpu, reserved_cpu, 0),
        memory=max(node.capacity.memory - node.allocatable.memory, node.reserved.memory, 0),
    )


def _hp_request(pod: PodView) -> Usage:
    # A mid pod reserves mid-* rather than native resources; both hold the node.
    r = pod.requests
    return Usage(cpu=r.cpu + r.mid_cpu, memory=r.memory + r.mid_memory)


def _metric_only_counts(pm: PodMetric) -> bool:
    """A pod in the metric but not in the pod list counts unless it is batch/free (or BE)."""
    if pm.priority_class is not None:
        return pm.priority_class not in _LOW_PRIORITY
    return pm.qos_class != "BE"


@dataclass(frozen=True, slots=True)
class HighPrioritySums:
    """Sums over high-priority pods: requests, used, and Σ max(request, used); milli-cores / bytes."""

    request: Usage
    used: Usage
    max_request_used: Usage


def high_priority_sums(pods: Iterable[PodView], metric: NodeMetric) -> HighPrioritySums:
    """Σ request, Σ used and Σ max(request, used) of the node's HP pods (REFERENCE.md §3).

    Used is the pod's reported usage, or its request without a metric; LSE pods count
    CPU at request. Pods in ``metric`` but not in ``pods`` count as used unless batch/free.
    """
    return high_priority_sums_of(NodePods.of(pods), metric)


def _batch_one(capacity: int, reclaim_percent: int, reserved: int, system_used: int,
               hp_request: int, hp_used: int, hp_max: int, policy: str, cap_percent: int | None) -> int:
    margin = capacity * (100 - reclaim_percent) // 100
    if policy == "request":
        value = capacity - margin - reserved - hp_request
    elif policy == "maxUsageRequest":
        value = capacity - margin - max(system_used, reserved) - hp_max
    else:
        value = capacity - margin - max(system_used, reserved) - hp_used
    if cap_percent is not None:
        value = min(value, capacity * cap_percent // 100)
    return max(value, 0)


def batch_allocatable(node: NodeSpec, metric: NodeMetric, pods: Sequence[PodView],
                      cfg: BatchConfig) -> tuple[int, int]:
    """(batch-cpu milli-cores, batch-memory bytes) of ``node`` (REFERENCE.md §3, oracle O1).

    Per resource: SafetyMargin = capacity × (100 − reclaim%)/100; SystemUsed' =
    max(system usage + host-application usage, NodeReserved); then by policy
    ``usage``: capacity − margin − SystemUsed' − Σ HP used; ``request``: capacity − margin
    − NodeReserved − Σ HP request; ``maxUsageRequest``: capacity − margin − SystemUsed' −
    Σ max(HP request, HP used); optionally capped at capacity × threshold%/100; floored at 0.
    Host applications are all counted as above batch (we do not classify them).
    Raises ValueError on a malformed ``node.reserved_cpus``.
    """
    reserved = node_reserved(node)
    hp = high_priority_sums(pods, metric)
    system = metric.system_usage
    hosts = metric.host_apps_usage
    cpu = _batch_one(node.capacity.cpu, cfg.cpu_reclaim_threshold_percent, reserved.cpu,
                     system.cpu + hosts.cpu, hp.request.cpu, hp.used.cpu, hp.max_request_used.cpu,
                     cfg.cpu_policy, cfg.cpu_threshold_percent)
    memory = _batch_one(node.capacity.memory, cfg.memory_reclaim_threshold_percent, reserved.memory,
                        system.memory + hosts.memory, hp.request.memory, hp.used.memory,
                        hp.max_request_used.memory, cfg.memory_policy, cfg.memory_threshold_percent)
    return cpu, memory


def _prod_none_requests(pods: Iterable[PodView]) -> Usage:
    cpu = mem = 0
    for pod in pods:
        if pod.active and pod.priority_class in ("prod", "none"):
            cpu += pod.requests.cpu
            mem += pod.requests.memory
    return Usage(cpu=cpu, memory=mem)


def _mid_one(capacity: int, used: int, reclaimable: int, reserved: int, system_used: int,
             prod_requests: int, unallocated_percent: int, threshold_percent: int) -> int:
    unused = capacity - used
    unallocated = max(capacity - max(reserved, system_used) - prod_requests, 0)
    value = max(min(reclaimable, unused), 0) + unallocated * unallocated_percent // 100
    return max(min(value, capacity * threshold_percent // 100), 0)


def mid_allocatable(node: NodeSpec, metric: NodeMetric, pods: Sequence[PodView],
                    profile: NodeProfile | None, cfg: MidConfig) -> tuple[int, int]:
    """(mid-cpu milli-cores, mid-memory bytes) of ``node`` (REFERENCE.md §3).

    Dynamic mode: ``min(max(min(ProdReclaimable, NodeUnused), 0) + Unallocated ×
    unallocated%/100, capacity × threshold%/100)`` with ProdReclaimable from the
    profiler (0 without a profile), NodeUnused = capacity − node used, Unallocated =
    max(capacity − max(NodeReserved, system used) − Σ prod/none requests, 0).
    Static mode: ``min(capacity × static%/100, capacity × threshold%/100)``. Floored at 0.
    Raises ValueError on a malformed ``node.reserved_cpus``.
    """
    cap = node.capacity
    if cfg.mode == "static":
        return (min(cap.cpu * cfg.cpu_static_percent // 100, cap.cpu * cfg.cpu_threshold_percent // 100),
                min(cap.memory * cfg.memory_static_percent // 100,
                    cap.memory * cfg.memory_threshold_percent // 100))
    reserved = node_reserved(node)
    reclaimable = profile.prod_reclaimable if profile is not None else Usage()
    prod = _prod_none_requests(pods)
    system = metric.system_usage
    hosts = metric.host_apps_usage
    cpu = _mid_one(cap.cpu, metric.node_usage.cpu, reclaimable.cpu, reserved.cpu, system.cpu + hosts.cpu,
                   prod.cpu, cfg.cpu_unallocated_percent, cfg.cpu_threshold_percent)
    memory = _mid_one(cap.memory, metric.node_usage.memory, reclaimable.memory, reserved.memory,
                      system.memory + hosts.memory, prod.memory, cfg.memory_unallocated_percent,
                      cfg.memory_threshold_percent)
    return cpu, memory


def compute_allocatable(node: NodeSpec, metric: NodeMetric, pods: Sequence[PodView],
                        profile: NodeProfile | None, batch: BatchConfig, mid: MidConfig) -> Allocatable:
    """Batch and mid allocatable of one node together; see :func:`batch_allocatable`, :func:`mid_allocatable`."""
    batch_cpu, batch_memory = batch_allocatable(node, metric, pods, batch)
    mid_cpu, mid_memory = mid_allocatable(node, metric, pods, profile, mid)
    return Allocatable(batch_cpu=batch_cpu, batch_memory=batch_memory, mid_cpu=mid_cpu, mid_memory=mid_memory)


@dataclass(frozen=True, slots=True)
class NodePods:
    """The metric-independent part of a node's pod list, computed once per change of that list.

    ``known`` every pod uid on the node (any phase); ``hp`` per high-priority pod
    ``(uid, request cpu m, request memory B, is LSE)`` with mid-* requests included (as
    :func:`high_priority_sums`); ``prod_requests`` Σ native requests of active prod/none pods
    (as :func:`mid_allocatable`).
    """

    known: frozenset[str]
    hp: tuple[tuple[str, int, int, bool], ...]
    prod_requests: Usage

    @classmethod
    def of(cls, pods: Iterable[PodView]) -> NodePods:
        """The summary of ``pods`` (the views of one node)."""
        views = list(pods)
        hp = []
        for pod in views:
            if pod.high_priority:
                req = _hp_request(pod)
                hp.append((pod.uid, req.cpu, req.memory, pod.qos_class == "LSE"))
        return cls(known=frozenset(p.uid for p in views), hp=tuple(hp), prod_requests=_prod_none_requests(views))


def high_priority_sums_of(summary: NodePods, metric: NodeMetric) -> HighPrioritySums:
    """:func:`high_priority_sums` over a precomputed :class:`NodePods`; same formulas and result."""
    usage = {pm.uid: pm for pm in metric.pods}
    req_c = req_m = used_c = used_m = max_c = max_m = 0
    for uid, rc, rm, lse in summary.hp:
        pm = usage.get(uid)
        cpu, mem = (pm.cpu, pm.memory) if pm is not None else (rc, rm)
        if lse:
            cpu = rc
        req_c += rc
        req_m += rm
        used_c += cpu
        used_m += mem
        max_c += max(rc, cpu)
        max_m += max(rm, mem)
    known = summary.known
    for pm in metric.pods:
        if pm.uid not in known and _metric_only_counts(pm):
            used_c += pm.cpu
            used_m += pm.memory
            max_c += pm.cpu
            max_m += pm.memory
    return HighPrioritySums(request=Usage(cpu=req_c, memory=req_m), used=Usage(cpu=used_c, memory=used_m),
                            max_request_used=Usage(cpu=max_c, memory=max_m))


def compute_allocatable_of(node: NodeSpec, reserved: Usage, metric: NodeMetric, summary: NodePods,
                           profile: NodeProfile | None, batch: BatchConfig, mid: MidConfig) -> Allocatable:
    """:func:`compute_allocatable` from precomputed inputs: ``reserved`` = :func:`node_reserved` of
    ``node`` and ``summary`` = :class:`NodePods` of its pods. Same formulas (REFERENCE.md §3) and result;
    only the per-pod work that does not depend on ``metric`` is done once per pod-list change."""
    cap = node.capacity
    hp = high_priority_sums_of(summary, metric)
    system = metric.system_usage
    hosts = metric.host_apps_usage
    batch_cpu = _batch_one(cap.cpu, batch.cpu_reclaim_threshold_percent, reserved.cpu, system.cpu + hosts.cpu,
                           hp.request.cpu, hp.used.cpu, hp.max_request_used.cpu, batch.cpu_policy,
                           batch.cpu_threshold_percent)
    batch_memory = _batch_one(cap.memory, batch.memory_reclaim_threshold_percent, reserved.memory,
                              system.memory + hosts.memory, hp.request.memory, hp.used.memory,
                              hp.max_request_used.memory, batch.memory_policy, batch.memory_threshold_percent)
    if mid.mode == "static":
        mid_cpu = min(cap.cpu * mid.cpu_static_percent // 100, cap.cpu * mid.cpu_threshold_percent // 100)
        mid_memory = min(cap.memory * mid.memory_static_percent // 100,
                         cap.memory * mid.memory_threshold_percent // 100)
    else:
        reclaimable = profile.prod_reclaimable if profile is not None else Usage()
        prod = summary.prod_requests
        mid_cpu = _mid_one(cap.cpu, metric.node_usage.cpu, reclaimable.cpu, reserved.cpu, system.cpu + hosts.cpu,
                           prod.cpu, mid.cpu_unallocated_percent, mid.cpu_threshold_percent)
        mid_memory = _mid_one(cap.memory, metric.node_usage.memory, reclaimable.memory, reserved.memory,
                              system.memory + hosts.memory, prod.memory, mid.memory_unallocated_percent,
                              mid.memory_threshold_percent)
    return Allocatable(batch_cpu=batch_cpu, batch_memory=batch_memory, mid_cpu=mid_cpu, mid_memory=mid_memory)
