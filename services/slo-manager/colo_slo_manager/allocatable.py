"""Batch and mid allocatable of one node (REFERENCE.md §3). Pure functions over integers.

CPU is in milli-cores, memory in bytes; percentages are integers 0..100. Every result
is floored at 0. Vocabulary of Koordinator's ``batchresource`` / ``midresource`` plugins:
capacity, safety margin, node reserved, system used, high-priority (HP) pods.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from operator import attrgetter, itemgetter

from colo import subjects
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
_ACTIVE: frozenset[str] = frozenset({"Running", "Pending"})
_PROD_NONE: frozenset[str] = frozenset({"prod", "none"})
_NO_USAGE = Usage()
_UID = attrgetter("uid")
_HP_ENTRY = attrgetter("hp_entry")
_PROD_REQUEST = attrgetter("prod_request")
_BE_MEMORY = attrgetter("be_memory_request")
_0, _1, _2 = itemgetter(0), itemgetter(1), itemgetter(2)


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
    hp_entry: tuple[str, int, int, bool] | None = field(init=False, repr=False, compare=False)
    """For a high-priority pod ``(uid, request cpu m, request memory B, is LSE)``, requests native +
    mid-* (REFERENCE.md §3), else None. Worked out once with the view (one per pod event), so that
    :class:`NodePods` only gathers."""
    prod_request: tuple[int, int] | None = field(init=False, repr=False, compare=False)
    """For an active prod/none pod its native ``(cpu m, memory B)`` requests (mid's Unallocated), else None."""
    be_memory_request: int = field(init=False, repr=False, compare=False)
    """For an active batch/free pod its batch-memory request (bytes), else 0 (the eviction headroom cap,
    :func:`colo_slo_manager.memory_pressure.eviction_headroom`)."""

    def __post_init__(self) -> None:
        hp = prod = None
        be_memory = 0
        if self.phase in _ACTIVE and self.priority_class not in _LOW_PRIORITY:
            r = self.requests
            hp = (self.uid, r.cpu + r.mid_cpu, r.memory + r.mid_memory, self.qos_class == "LSE")
            if self.priority_class in _PROD_NONE:
                prod = (r.cpu, r.memory)
        elif self.phase in _ACTIVE:
            be_memory = self.requests.batch_memory
        object.__setattr__(self, "hp_entry", hp)
        object.__setattr__(self, "prod_request", prod)
        object.__setattr__(self, "be_memory_request", be_memory)

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
    """Batch and mid allocatable of a node: ``*_cpu`` milli-cores, ``*_memory`` bytes; ``memory_pressure``
    when the node is under BE memory pressure (batch-memory then 0, :mod:`colo_slo_manager.memory_pressure`)."""

    batch_cpu: int = 0
    batch_memory: int = 0
    mid_cpu: int = 0
    mid_memory: int = 0
    memory_pressure: bool = False


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
    """Every reason the node spec cannot be used for resource calculation or published for (empty when
    usable)."""
    out: list[str] = []
    if not node.name:
        out.append("node name must not be empty")
    elif not subjects.is_token(node.name):  # its NodeSLO and NodeResource go to node.*.<name>
        out.append(f"node name {node.name!r} is not a subject token (letters, digits, _ and - only)")
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


def _reports_by_uid(metric: NodeMetric) -> dict[str, PodMetric]:
    # A metric lists a pod once; should it repeat one, its last report counts (once).
    pods = metric.pods
    return dict(zip(map(_UID, pods), pods))


def _unique_uids(views: Sequence[PodView]) -> frozenset[str]:
    uids = frozenset(p.uid for p in views)
    if len(uids) != len(views):
        dupes = sorted(uid for uid, n in Counter(p.uid for p in views).items() if n > 1)
        raise ValueError(f"pod uid listed more than once on a node: {', '.join(dupes)}")
    return uids


def high_priority_sums(pods: Iterable[PodView], metric: NodeMetric) -> HighPrioritySums:
    """Σ request, Σ used and Σ max(request, used) of the node's HP pods (REFERENCE.md §3).

    The formula as written, pod by pod: an HP pod is Running or Pending and not batch/free; its
    request is native + mid-*; used is its reported usage, or its request without a metric; LSE
    pods count CPU at request. Pods in ``metric`` but not in ``pods`` (just deleted) count as used
    unless reported batch/free (or, without a class, BE). A uid reported twice counts once, with
    its last report. Raises ValueError when ``pods`` lists a uid twice.
    """
    views = list(pods)
    listed = _unique_uids(views)
    reports = _reports_by_uid(metric)
    req_c = req_m = used_c = used_m = max_c = max_m = 0
    for pod in views:
        if not pod.high_priority:
            continue
        req = _hp_request(pod)
        pm = reports.get(pod.uid)
        cpu, mem = (pm.cpu, pm.memory) if pm is not None else (req.cpu, req.memory)
        if pod.qos_class == "LSE":
            cpu = req.cpu
        req_c += req.cpu
        req_m += req.memory
        used_c += cpu
        used_m += mem
        max_c += max(req.cpu, cpu)
        max_m += max(req.memory, mem)
    for uid, pm in reports.items():
        if uid not in listed and _metric_only_counts(pm):
            used_c += pm.cpu
            used_m += pm.memory
            max_c += pm.cpu
            max_m += pm.memory
    return HighPrioritySums(request=Usage(cpu=req_c, memory=req_m), used=Usage(cpu=used_c, memory=used_m),
                            max_request_used=Usage(cpu=max_c, memory=max_m))


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
    :func:`high_priority_sums`), in the order of the views; ``hp_by_uid`` the same keyed by uid;
    ``hp_request`` Σ of those requests; ``prod_requests`` Σ native requests of active prod/none
    pods (as :func:`mid_allocatable`); ``be_memory_request`` Σ batch-memory requests of active batch/free
    pods (bytes).
    """

    known: frozenset[str]
    hp: tuple[tuple[str, int, int, bool], ...]
    prod_requests: Usage
    hp_by_uid: dict[str, tuple[str, int, int, bool]] = field(compare=False, default_factory=dict)
    hp_request: Usage = Usage()
    be_memory_request: int = 0
    """Σ batch-memory requests of the active batch/free pods (bytes)."""

    @classmethod
    def of(cls, pods: Iterable[PodView]) -> NodePods:
        """The summary of ``pods`` (the views of one node). Raises ValueError when a uid is listed twice.

        Gathers the views' :attr:`PodView.hp_entry` and :attr:`PodView.prod_request` with builtins
        (``map``/``filter``/``sum``): no per-pod Python code runs here.
        """
        views = pods if isinstance(pods, (list, tuple)) else list(pods)
        known = _unique_uids(views)
        hp = tuple(filter(None, map(_HP_ENTRY, views)))
        prod = list(filter(None, map(_PROD_REQUEST, views)))
        return cls(known=known, hp=hp, prod_requests=Usage(cpu=sum(map(_0, prod)), memory=sum(map(_1, prod))),
                   hp_by_uid=dict(zip(map(_0, hp), hp)),
                   hp_request=Usage(cpu=sum(map(_1, hp)), memory=sum(map(_2, hp))),
                   be_memory_request=sum(map(_BE_MEMORY, views)))


def _hp_totals(summary: NodePods, metric: NodeMetric) -> tuple[int, int, int, int, int, int]:
    """(Σ request cpu, memory, Σ used cpu, memory, Σ max(request, used) cpu, memory) of the HP pods.

    Starts from every HP pod at its request (what a pod without a report counts) and corrects by
    the reports: used − request, and max(used − request, 0) for the max sum; LSE CPU stays at request.
    The reports that matter are found by set operations on uids (HP pods with a report; reported
    pods not on the node), so the Python loops visit only those.
    """
    req_c, req_m = summary.hp_request.cpu, summary.hp_request.memory
    used_c, used_m, max_c, max_m = req_c, req_m, req_c, req_m
    reports = _reports_by_uid(metric)
    hp = summary.hp_by_uid
    for uid in hp.keys() & reports.keys():
        _, rc, rm, lse = hp[uid]
        pm = reports[uid]
        if not lse:
            d = pm.cpu - rc
            used_c += d
            if d > 0:
                max_c += d
        d = pm.memory - rm
        used_m += d
        if d > 0:
            max_m += d
    for uid in reports.keys() - summary.known:
        pm = reports[uid]
        if _metric_only_counts(pm):
            used_c += pm.cpu
            used_m += pm.memory
            max_c += pm.cpu
            max_m += pm.memory
    return req_c, req_m, used_c, used_m, max_c, max_m


def high_priority_sums_of(summary: NodePods, metric: NodeMetric) -> HighPrioritySums:
    """:func:`high_priority_sums` over a precomputed :class:`NodePods`; same formulas and result."""
    req_c, req_m, used_c, used_m, max_c, max_m = _hp_totals(summary, metric)
    return HighPrioritySums(request=Usage(cpu=req_c, memory=req_m), used=Usage(cpu=used_c, memory=used_m),
                            max_request_used=Usage(cpu=max_c, memory=max_m))


def compute_allocatable_of(node: NodeSpec, reserved: Usage, metric: NodeMetric, summary: NodePods,
                           profile: NodeProfile | None, batch: BatchConfig, mid: MidConfig,
                           cpu_reclaim_percent: int | None = None) -> Allocatable:
    """:func:`compute_allocatable` from precomputed inputs: ``reserved`` = :func:`node_reserved` of
    ``node`` and ``summary`` = :class:`NodePods` of its pods. Same formulas (REFERENCE.md §3) and result;
    only the per-pod work that does not depend on ``metric`` is done once per pod-list change, and the
    per-report work is one pass (see docs/slo-manager.md "Speed"). ``cpu_reclaim_percent`` replaces
    ``batch.cpu_reclaim_threshold_percent`` when given (the node's BE budget, :mod:`colo_slo_manager.be_budget`)."""
    cap = node.capacity
    req_c, req_m, used_c, used_m, max_c, max_m = _hp_totals(summary, metric)
    system = metric.system_usage
    hosts = metric.host_apps_usage
    sys_c, sys_m = system.cpu + hosts.cpu, system.memory + hosts.memory
    reclaim = batch.cpu_reclaim_threshold_percent if cpu_reclaim_percent is None else cpu_reclaim_percent
    batch_cpu = _batch_one(cap.cpu, reclaim, reserved.cpu, sys_c,
                           req_c, used_c, max_c, batch.cpu_policy, batch.cpu_threshold_percent)
    batch_memory = _batch_one(cap.memory, batch.memory_reclaim_threshold_percent, reserved.memory, sys_m,
                              req_m, used_m, max_m, batch.memory_policy, batch.memory_threshold_percent)
    if mid.mode == "static":
        mid_cpu = min(cap.cpu * mid.cpu_static_percent // 100, cap.cpu * mid.cpu_threshold_percent // 100)
        mid_memory = min(cap.memory * mid.memory_static_percent // 100,
                         cap.memory * mid.memory_threshold_percent // 100)
    else:
        reclaimable = profile.prod_reclaimable if profile is not None else _NO_USAGE
        prod = summary.prod_requests
        used = metric.node_usage
        mid_cpu = _mid_one(cap.cpu, used.cpu, reclaimable.cpu, reserved.cpu, sys_c,
                           prod.cpu, mid.cpu_unallocated_percent, mid.cpu_threshold_percent)
        mid_memory = _mid_one(cap.memory, used.memory, reclaimable.memory, reserved.memory,
                              sys_m, prod.memory, mid.memory_unallocated_percent, mid.memory_threshold_percent)
    return Allocatable(batch_cpu=batch_cpu, batch_memory=batch_memory, mid_cpu=mid_cpu, mid_memory=mid_memory)
