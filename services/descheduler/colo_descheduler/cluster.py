"""The descheduler's view of the cluster, kept fresh from events (no I/O).

Holds node allocatable (NodeSpec), the latest NodeMetric per node, bound pods and
the migrations in flight. Turns them into LowNodeLoad inputs. A migration counts
from the eviction until the pod's PodStatus reports it ended (Succeeded/Failed,
or running on another node), or until the job TTL passes; only these running
migrations count against the per-node cap (REFERENCE.md §11).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from colo.classes import priority_class_of, qos_class_of
from colo.messages import NodeMetric, NodeSpec, PodBound, PodSpec, PodStatus, PriorityClass, QoSClass
from colo_descheduler.lownodeload import Candidate, Eviction, NodeLoad

SYSTEM_CRITICAL_PRIORITY = 2_000_000_000
"""Kubernetes system-critical priority: such pods are never evicted."""


@dataclass
class PodEntry:
    """A bound pod: its spec, node, phase and the time it was bound (seconds).

    ``candidate`` caches what a round needs of the spec (``evictable`` and the
    :class:`Candidate` ordering fields), derived once per binding since a bound spec
    does not change; ``workload`` is :func:`workload_of` the spec.
    """

    spec: PodSpec
    node: str
    phase: str
    bound_at: float
    workload: str = field(init=False)
    evictable: bool = field(init=False)
    priority_class: PriorityClass = field(init=False)
    qos_class: QoSClass = field(init=False)

    def __post_init__(self) -> None:
        self.workload = workload_of(self.spec)
        self.evictable = evictable(self.spec)
        self.priority_class = priority_class_of(self.spec)
        self.qos_class = qos_class_of(self.spec)


@dataclass(frozen=True)
class Migration:
    """A pod evicted from ``source`` towards ``target``, started at ``started_at`` seconds."""

    uid: str
    source: str
    target: str
    workload: str
    started_at: float
    usage: tuple[int, int] = (0, 0)


def workload_of(spec: PodSpec) -> str:
    """``namespace/app`` of the owning workload ("" for a standalone pod)."""
    app = spec.app or spec.labels.get("app", "")
    return f"{spec.namespace}/{app}" if app else ""


def evictable(spec: PodSpec) -> bool:
    """Not a DaemonSet pod, not SYSTEM QoS, not system-critical priority."""
    if spec.daemonset or qos_class_of(spec) == "SYSTEM":
        return False
    return (spec.priority or 0) < SYSTEM_CRITICAL_PRIORITY


class LazyCandidates(Mapping[str, list[Candidate]]):
    """node → evictable candidates (see :meth:`ClusterView.candidates`), each built when first read."""

    def __init__(self, view: ClusterView, nodes: list[str]) -> None:
        self._view = view
        self._nodes = nodes
        self._known = set(nodes)
        self._built: dict[str, list[Candidate]] = {}

    def __getitem__(self, node: str) -> list[Candidate]:
        if node not in self._known:
            raise KeyError(node)
        built = self._built.get(node)
        if built is None:
            built = self._built[node] = self._view.candidates_on(node)
        return built

    def __iter__(self) -> Iterator[str]:
        return iter(self._nodes)

    def __len__(self) -> int:
        return len(self._nodes)


class ClusterView:
    """Nodes, fresh metrics, pods and migrations as the descheduler sees them."""

    def __init__(self) -> None:
        self.allocatable: dict[str, tuple[int, int]] = {}
        self.metrics: dict[str, NodeMetric] = {}
        self.pods: dict[str, PodEntry] = {}
        self.migrations: dict[str, Migration] = {}

    # ------------------------------------------------------------------ events

    def on_node(self, spec: NodeSpec) -> None:
        """A node registration: remember its allocatable (cpu m, memory B)."""
        self.allocatable[spec.name] = (spec.allocatable.cpu, spec.allocatable.memory)

    def on_metric(self, metric: NodeMetric) -> None:
        """Keep the newest metric per node (older, replayed reports are ignored)."""
        old = self.metrics.get(metric.node)
        if old is None or metric.at >= old.at:
            self.metrics[metric.node] = metric

    def on_bound(self, msg: PodBound) -> None:
        """A binding; a pod bound elsewhere than its migration source ends that migration."""
        self.pods[msg.spec.uid] = PodEntry(msg.spec, msg.node, "Pending", msg.at)
        mig = self.migrations.get(msg.spec.uid)
        if mig is not None and mig.source != msg.node:
            del self.migrations[msg.spec.uid]

    def on_status(self, status: PodStatus) -> None:
        """Pod lifecycle: Running updates the phase; Succeeded/Failed forget the pod and end its migration."""
        if status.phase in ("Succeeded", "Failed"):
            entry = self.pods.get(status.uid)
            if entry is not None and entry.node == status.node:
                del self.pods[status.uid]
            mig = self.migrations.get(status.uid)
            if mig is not None and mig.source == status.node:
                del self.migrations[status.uid]
            return
        entry = self.pods.get(status.uid)
        if entry is not None and entry.node == status.node:
            entry.phase = status.phase

    def start_migration(self, ev: Eviction, now: float) -> None:
        """Record an eviction just sent."""
        self.migrations[ev.uid] = Migration(ev.uid, ev.source, ev.target, ev.workload, now, ev.usage)

    def expire(self, now: float, migration_ttl_s: float) -> int:
        """Drop migrations older than the TTL; returns how many."""
        old = [u for u, m in self.migrations.items() if now - m.started_at > migration_ttl_s]
        for uid in old:
            del self.migrations[uid]
        return len(old)

    # ------------------------------------------------------------------ round inputs

    def fresh_loads(self, now: float, expiry_s: float) -> list[NodeLoad]:
        """Registered nodes with a metric at most ``expiry_s`` old: usage = system + Σ pods (§6).

        Migrations in flight are accounted for until they end: a leaving pod's usage is taken
        off its source (still in the source's metric until it stops) and booked on its target;
        without this the next rounds would see the source as hot as before and evict again.
        """
        loads: list[NodeLoad] = []
        fresh = {n: m for n, m in self.metrics.items()
                 if n in self.allocatable and now - m.at <= expiry_s}
        adjust: dict[str, list[int]] = {}
        for mig in self.migrations.values():
            for node, sign in ((mig.source, -1), (mig.target, 1)):
                a = adjust.setdefault(node, [0, 0])
                a[0] += sign * mig.usage[0]
                a[1] += sign * mig.usage[1]
        for name, metric in fresh.items():
            delta: Sequence[int] = adjust.get(name, (0, 0))
            cpu = metric.system_usage.cpu + sum(p.cpu for p in metric.pods) + delta[0]
            mem = metric.system_usage.memory + sum(p.memory for p in metric.pods) + delta[1]
            loads.append(NodeLoad(name, self.allocatable[name], (max(cpu, 0), max(mem, 0))))
        return loads

    def candidates(self, loads: list[NodeLoad]) -> dict[str, list[Candidate]]:
        """Evictable pods per node: known, bound there, in its metric, not already migrating."""
        return {load.name: self.candidates_on(load.name) for load in loads}

    def candidates_on(self, node: str) -> list[Candidate]:
        """:meth:`candidates` of one node that has a metric (KeyError otherwise)."""
        pods: list[Candidate] = []
        for pm in self.metrics[node].pods:
            entry = self.pods.get(pm.uid)
            if entry is None or entry.node != node or pm.uid in self.migrations:
                continue
            if not entry.evictable:
                continue
            pods.append(Candidate(pm.uid, node, (max(pm.cpu, 0), max(pm.memory, 0)),
                                  entry.priority_class, entry.spec.priority or 0, entry.qos_class,
                                  entry.workload))
        return pods

    def lazy_candidates(self, loads: list[NodeLoad]) -> LazyCandidates:
        """:meth:`candidates` as a mapping that builds a node's list on first access only.

        A round reads the candidates of its source nodes alone (usually none), so the lists of
        the other nodes are never built. Read it before the view changes (within the round).
        """
        return LazyCandidates(self, [load.name for load in loads])

    def migrating_per_node(self) -> dict[str, int]:
        """Running migrations per source node."""
        out: dict[str, int] = {}
        for m in self.migrations.values():
            out[m.source] = out.get(m.source, 0) + 1
        return out

    def workload_counts(self) -> tuple[dict[str, int], dict[str, int]]:
        """(migrating pods, known replicas) per workload."""
        unavailable: dict[str, int] = {}
        for m in self.migrations.values():
            if m.workload:
                unavailable[m.workload] = unavailable.get(m.workload, 0) + 1
        replicas: dict[str, int] = {}
        for e in self.pods.values():
            w = e.workload
            if w:
                replicas[w] = replicas.get(w, 0) + 1
        return unavailable, replicas
