"""The utilization ceiling a run's policy allows, the share of it reached, and what binds (docs/scenario.md
"Utilization ceilings").

Per node ``i`` and tick, from the node's last NodeMetric, NodeResource and NodeSLO and the pods bound on it:

* ``room`` — what batch pods may still request there: the batch-cpu/batch-memory slo-manager offers when the
  run translates batch pods to batch resources (``colocation``), else the allocatable left by the non-BE pods'
  native requests (baseline: batch pods keep native requests);
* CPU ceiling_i = min(capacity, system + LS used + min(room_cpu, BE CPU allowed)), BE CPU allowed being the node
  agent's suppress budget (``NodeMetric.be_cpu_allowed``; unlimited when suppress is off);
* memory ceiling_i = min(capacity, system + LS used + room_memory), and at most BE memory eviction's
  threshold × capacity when eviction is on (NodeSLO ``memory_evict``): above it BE pods are evicted.

The cluster ceiling of a tick is Σ ceiling_i / Σ capacity; a run's ceiling is its mean over the ticks, and the
share of the ceiling reached is the run's mean utilization divided by it. "LS used" is every non-BE pod's
reported usage (batch pods are BE). Pure bookkeeping, fed by :mod:`colo.sim.run`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from colo.classes import qos_class_of
from colo.messages import NodeMetric, NodeResource, NodeSLO, NodeSpec, PodBound, PodStatus

CATEGORIES_BINDING: tuple[str, ...] = ("cpu", "memory")
"""The unschedulable-reason categories (:mod:`colo.sim.unschedulable`) that say a resource binds."""


@dataclass
class _Node:
    cpu: float
    memory: float
    alloc_cpu: float
    alloc_memory: float
    metric: NodeMetric | None = None
    offer: NodeResource | None = None
    slo: NodeSLO | None = None
    ls_requests: dict[str, tuple[int, int]] = field(default_factory=dict)
    """uid → (cpu m, memory B) native requests of the non-BE pods bound here."""


@dataclass
class CeilingTracker:
    """The ceilings of one run over ``nodes``; ``colocation`` when its batch pods request batch resources."""

    nodes: list[NodeSpec] = field(default_factory=list)
    colocation: bool = True
    cpu_ceiling: list[float] = field(default_factory=list)
    """Per tick Σ CPU ceiling_i / Σ capacity (fraction)."""
    mem_ceiling: list[float] = field(default_factory=list)
    """Per tick Σ memory ceiling_i / Σ capacity (fraction)."""
    ls_cpu: list[float] = field(default_factory=list)
    """Per tick Σ (system + LS used) CPU / Σ capacity: what the nodes use without batch (fraction)."""
    ls_mem: list[float] = field(default_factory=list)
    """Per tick Σ (system + LS used) memory / Σ capacity (fraction)."""
    budget_threshold: list[float] = field(default_factory=list)
    """Per tick the mean BE budget threshold (percent of capacity) over the nodes that report one."""
    _by_name: dict[str, _Node] = field(default_factory=dict)
    _where: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for n in self.nodes:
            self._by_name[n.name] = _Node(float(n.capacity.cpu), float(n.capacity.memory),
                                          float(n.allocatable.cpu), float(n.allocatable.memory))

    def on_metric(self, msg: NodeMetric) -> None:
        """A node's report (usage, suppress budget, BE budget state)."""
        node = self._by_name.get(msg.node)
        if node is not None:
            node.metric = msg

    def on_resource(self, msg: NodeResource) -> None:
        """A node's batch/mid offer."""
        node = self._by_name.get(msg.node)
        if node is not None:
            node.offer = msg

    def on_slo(self, msg: NodeSLO) -> None:
        """A node's QoS policy (the memory eviction threshold)."""
        node = self._by_name.get(msg.node)
        if node is not None:
            node.slo = msg

    def on_bound(self, msg: PodBound) -> None:
        """A binding: non-BE pods' native requests reduce the baseline's room."""
        spec = msg.spec
        node = self._by_name.get(msg.node)
        if node is None or qos_class_of(spec) == "BE":
            return
        node.ls_requests[spec.uid] = (spec.requests.cpu, spec.requests.memory)
        self._where[spec.uid] = msg.node

    def on_status(self, msg: PodStatus) -> None:
        """A pod that ended no longer holds its requests."""
        if msg.phase in ("Succeeded", "Failed"):
            name = self._where.pop(msg.uid, None)
            if name is not None:
                self._by_name[name].ls_requests.pop(msg.uid, None)

    @staticmethod
    def without_batch(node: _Node) -> tuple[float, float]:
        """(CPU milli-cores, memory bytes) system + LS pods use on the node (0 before its first report)."""
        m = node.metric
        if m is None:
            return 0.0, 0.0
        return (m.system_usage.cpu + sum(p.cpu for p in m.pods if p.qos_class != "BE"),
                m.system_usage.memory + sum(p.memory for p in m.pods if p.qos_class != "BE"))

    def node_ceilings(self, node: _Node) -> tuple[float, float]:
        """(CPU milli-cores, memory bytes) the node may reach under the run's policy (module docstring)."""
        m = node.metric
        if m is None:
            return node.cpu, node.memory
        base_cpu, base_mem = self.without_batch(node)
        if self.colocation:
            offer = node.offer
            room_cpu = float(offer.batch_cpu) if offer is not None else 0.0
            room_mem = float(offer.batch_memory) if offer is not None else 0.0
        else:
            room_cpu = max(node.alloc_cpu - sum(c for c, _ in node.ls_requests.values()), 0.0)
            room_mem = max(node.alloc_memory - sum(b for _, b in node.ls_requests.values()), 0.0)
        be_allowed = float(m.be_cpu_allowed) if m.be_cpu_allowed >= 0 else math.inf
        cpu = min(node.cpu, base_cpu + min(room_cpu, be_allowed))
        mem = min(node.memory, base_mem + room_mem)
        if node.slo is not None and node.slo.memory_evict.enabled:
            mem = min(mem, node.memory * node.slo.memory_evict.threshold_percent / 100)
        return cpu, mem

    def sample(self) -> None:
        """Append the cluster ceilings of the tick just recorded."""
        if not self._by_name:
            return
        cpu = mem = cap_cpu = cap_mem = base_cpu = base_mem = 0.0
        budgets = []
        for node in self._by_name.values():
            c, b = self.node_ceilings(node)
            cpu, mem, cap_cpu, cap_mem = cpu + c, mem + b, cap_cpu + node.cpu, cap_mem + node.memory
            bc, bm = self.without_batch(node)
            base_cpu, base_mem = base_cpu + bc, base_mem + bm
            if node.metric is not None and node.metric.be_budget is not None:
                budgets.append(node.metric.be_budget.threshold_percent)
        self.cpu_ceiling.append(cpu / cap_cpu if cap_cpu else 0.0)
        self.mem_ceiling.append(mem / cap_mem if cap_mem else 0.0)
        self.ls_cpu.append(base_cpu / cap_cpu if cap_cpu else 0.0)
        self.ls_mem.append(base_mem / cap_mem if cap_mem else 0.0)
        self.budget_threshold.append(sum(budgets) / len(budgets) if budgets else -1.0)


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def binding(unschedulable_by_category: dict[str, float]) -> str:
    """``cpu`` or ``memory``: the category with more batch pod-ticks unschedulable (cpu on a tie); ``none``
    when neither has any (the run had room for all its demand)."""
    cpu, mem = (unschedulable_by_category.get(c, 0.0) for c in CATEGORIES_BINDING)
    if not cpu and not mem:
        return "none"
    return "memory" if mem > cpu else "cpu"


def ceiling_summary(tracker: CeilingTracker, cpu_util_avg: float, mem_util_avg: float,
                    unschedulable_by_category: dict[str, float], batch_cpu_per_memory: float = -1.0) -> dict[str, Any]:
    """The run's ceiling figures: ``cpu_ceiling_avg``/``mem_ceiling_avg`` (fractions), ``cpu_ceiling_share``/
    ``mem_ceiling_share`` (mean utilization / ceiling, 0 when the ceiling is 0), ``be_budget_threshold_avg``
    (percent; −1 when no node ran the BE budget), ``unschedulable_pod_ticks`` per category (Σ over ticks of the
    pods unschedulable with that dominant category), ``binds`` (:func:`binding`), ``ls_cpu_avg``/``ls_mem_avg``
    (system + LS use, fractions) and ``cpu_if_memory_full`` = ls_cpu_avg + (mem_ceiling_avg − ls_mem_avg) ×
    ``batch_cpu_per_memory``: the CPU utilization the batch demand's mix (batch CPU-time / memory-time, both as
    fractions of the cluster's) brings the cluster to when it fills memory to its ceiling (−1 without the mix)."""
    cpu, mem = _mean(tracker.cpu_ceiling), _mean(tracker.mem_ceiling)
    ls_cpu, ls_mem = _mean(tracker.ls_cpu), _mean(tracker.ls_mem)
    budgets = [b for b in tracker.budget_threshold if b >= 0]
    return {
        "ls_cpu_avg": ls_cpu, "ls_mem_avg": ls_mem,
        "cpu_if_memory_full": (ls_cpu + max(mem - ls_mem, 0.0) * batch_cpu_per_memory
                               if batch_cpu_per_memory >= 0 else -1.0),
        "cpu_ceiling_avg": cpu, "mem_ceiling_avg": mem,
        "cpu_ceiling_share": cpu_util_avg / cpu if cpu else 0.0,
        "mem_ceiling_share": mem_util_avg / mem if mem else 0.0,
        "be_budget_threshold_avg": _mean(budgets) if budgets else -1.0,
        "unschedulable_pod_ticks": dict(unschedulable_by_category),
        "binds": binding(unschedulable_by_category),
    }
