"""A node-agent model that reports as the backends do, to drive the real descheduler round in virtual time.

What it reproduces (docs/node-agent.md, REFERENCE.md §2):

- usage is sampled every second: node = system + Σ running pods; a pod uses a constant (cpu m, memory B);
- every ``report_interval_s`` (60 s) each node publishes a NodeMetric whose ``node_usage`` is the mean of the
  last ``window_s`` (300 s) seconds, whose pods are the pods running at ``at`` with the mean of their own
  samples in the window, and whose ``system_usage`` = max(node − Σ pods, 0); nodes report at staggered offsets;
- an evicted pod stops at once and is reported ``Failed`` (reason ``Evicted``) at once;
- its replacement (same uid, as the scheduler requeues an evicted pod) is bound on the eviction's target
  ``rebind_delay_s`` later and reported ``Running`` there; ``place`` (eviction → node), when given, stands
  for a scheduler that places it by its own rules instead.

:func:`drive` runs :meth:`DeschedulerService.run_round` every ``round_s`` seconds over it and records every
eviction and the real (per-second) CPU of each node.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from colo.messages import NodeMetric, NodeSpec, PodBound, PodMetric, PodSpec, PodStatus, Resources, Usage
from colo_descheduler.lownodeload import Eviction
from colo_descheduler.service import DeschedulerService

Vec = tuple[int, int]
GI = 1 << 30


@dataclass
class ModelPod:
    """A pod of the model: constant usage (cpu m, memory B), the node it runs on and since when (s)."""

    spec: PodSpec
    usage: Vec
    node: str
    started_at: float
    samples: deque[tuple[float, Vec]] = field(default_factory=deque)


@dataclass
class ModelNode:
    """A node: allocatable (cpu m, memory B), constant system usage, report offset within the interval (s)."""

    name: str
    allocatable: Vec
    system: Vec
    report_offset_s: float = 0.0
    samples: deque[tuple[float, Vec]] = field(default_factory=deque)


@dataclass
class EvictionRecord:
    """One eviction the descheduler decided: when, which pod and workload, from and to which node."""

    at: float
    uid: str
    workload: str
    source: str
    target: str


class NodeAgentModel:
    """Nodes and pods sampled every second; see the module docstring for what it reports."""

    def __init__(self, nodes: list[ModelNode], report_interval_s: float = 60.0, window_s: float = 300.0,
                 rebind_delay_s: float = 5.0, place: Callable[[Eviction], str] | None = None) -> None:
        self.place = place
        self.nodes = {n.name: n for n in nodes}
        self.pods: dict[str, ModelPod] = {}
        self.report_interval_s = report_interval_s
        self.window_s = window_s
        self.rebind_delay_s = rebind_delay_s
        self.pending_binds: list[tuple[float, str, str]] = []  # (at, uid, node)

    def node_specs(self) -> list[NodeSpec]:
        """The NodeSpec of every node (pods allocatable 110, the Kubernetes default)."""
        return [NodeSpec(name=n.name, capacity=Resources(cpu=n.allocatable[0], memory=n.allocatable[1], pods=110),
                         allocatable=Resources(cpu=n.allocatable[0], memory=n.allocatable[1], pods=110))
                for n in self.nodes.values()]

    def add_pod(self, spec: PodSpec, node: str, usage: Vec, at: float) -> PodBound:
        """Start ``spec`` on ``node`` at ``at``; returns its binding."""
        self.pods[spec.uid] = ModelPod(spec, usage, node, at)
        return PodBound(spec=spec, node=node, at=at)

    def sample(self, t: float) -> None:
        """Take the samples of second ``t`` and drop those older than the window."""
        totals = {name: [n.system[0], n.system[1]] for name, n in self.nodes.items()}
        for p in self.pods.values():
            if not p.node:  # evicted, replacement not bound yet: runs nowhere
                continue
            p.samples.append((t, p.usage))
            while p.samples and p.samples[0][0] <= t - self.window_s:
                p.samples.popleft()
            totals[p.node][0] += p.usage[0]
            totals[p.node][1] += p.usage[1]
        for name, n in self.nodes.items():
            n.samples.append((t, (totals[name][0], totals[name][1])))
            while n.samples and n.samples[0][0] <= t - self.window_s:
                n.samples.popleft()

    def cpu_percent(self, node: str) -> float:
        """The node's real CPU use of the last sampled second, percent of allocatable."""
        n = self.nodes[node]
        return 100.0 * n.samples[-1][1][0] / n.allocatable[0]

    def due(self, t: float) -> list[str]:
        """Nodes whose report falls on second ``t``."""
        return [name for name, n in self.nodes.items()
                if (t - n.report_offset_s) % self.report_interval_s == 0]

    def metric(self, node: str, at: float) -> NodeMetric:
        """The node's NodeMetric at ``at``: window means of the node and of each pod running there."""
        n = self.nodes[node]
        k = len(n.samples)
        node_cpu = sum(s[1][0] for s in n.samples) // k
        node_mem = sum(s[1][1] for s in n.samples) // k
        pods = []
        for p in self.pods.values():
            if p.node != node:
                continue
            own = p.samples
            pods.append(PodMetric(uid=p.spec.uid, cpu=sum(s[1][0] for s in own) // len(own),
                                  memory=sum(s[1][1] for s in own) // len(own)))
        system = Usage(cpu=max(node_cpu - sum(p.cpu for p in pods), 0),
                       memory=max(node_mem - sum(p.memory for p in pods), 0))
        return NodeMetric(node=node, at=at, window_s=self.window_s, node_usage=Usage(cpu=node_cpu, memory=node_mem),
                          system_usage=system, pods=pods)

    def evict(self, ev: Eviction, at: float) -> PodStatus:
        """Stop the pod at once; its replacement is bound on ``ev.target`` (``place(ev)`` when given) after the
        rebind delay."""
        self.pods[ev.uid].node = ""
        self.pending_binds.append((at + self.rebind_delay_s, ev.uid, self.place(ev) if self.place else ev.target))
        return PodStatus(uid=ev.uid, node=ev.source, phase="Failed", at=at, reason="Evicted")

    def binds_due(self, t: float) -> list[tuple[PodBound, PodStatus]]:
        """Replacements bound at second ``t``: (binding, Running status) each."""
        out = []
        for item in [b for b in self.pending_binds if b[0] <= t]:
            self.pending_binds.remove(item)
            _, uid, node = item
            p = self.pods[uid]
            p.node, p.started_at = node, t
            p.samples.clear()
            out.append((PodBound(spec=p.spec, node=node, at=t), PodStatus(uid=uid, node=node, phase="Running", at=t)))
        return out


@dataclass
class DriveResult:
    """What a run recorded: every eviction, and the peak real CPU percent per node."""

    evictions: list[EvictionRecord]
    peak_cpu_percent: dict[str, float]

    def from_node(self, node: str) -> int:
        """Evictions off ``node``."""
        return sum(1 for e in self.evictions if e.source == node)

    def max_moved_within(self, workload: str, window_s: float) -> int:
        """Most evictions of ``workload`` within any ``window_s`` seconds."""
        times = [e.at for e in self.evictions if e.workload == workload]
        return max((sum(1 for u in times if t <= u < t + window_s) for t in times), default=0)


def drive(service: DeschedulerService, model: NodeAgentModel, duration_s: float, round_s: float = 10.0,
          warmup_s: float = 600.0, on_metric: Callable[[NodeMetric], None] | None = None) -> DriveResult:
    """Run the model and a descheduler round every ``round_s`` for ``duration_s`` virtual seconds.

    The model first runs ``warmup_s`` seconds with no round, so windows are full; node specs and bindings
    are delivered to the service's view before. ``on_metric`` sees every NodeMetric from second 0 (e.g. to
    audit the run). Returns the recorded evictions and peak CPU.
    """
    cluster = service.cluster
    for spec in model.node_specs():
        cluster.on_node(spec)
    for p in model.pods.values():
        cluster.on_bound(PodBound(spec=p.spec, node=p.node, at=p.started_at))
        cluster.on_status(PodStatus(uid=p.spec.uid, node=p.node, phase="Running", at=p.started_at))
    evictions: list[EvictionRecord] = []
    peak: dict[str, float] = {}
    t = -warmup_s
    while t <= duration_s:
        for bound, status in model.binds_due(t):
            cluster.on_bound(bound)
            cluster.on_status(status)
        model.sample(t)
        if t >= 0:
            for name in model.nodes:
                peak[name] = max(peak.get(name, 0.0), model.cpu_percent(name))
        for name in model.due(t):
            metric = model.metric(name, t)
            cluster.on_metric(metric)
            if on_metric is not None and t >= 0:
                on_metric(metric)
        if t >= 0 and t % round_s == 0:
            for ev in service.run_round(t).evictions:
                evictions.append(EvictionRecord(t, ev.uid, ev.workload, ev.source, ev.target))
                cluster.on_status(model.evict(ev, t))
        t += 1
    return DriveResult(evictions, peak)
