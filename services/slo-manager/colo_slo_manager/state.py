"""slo-manager's view of the cluster: nodes, latest metrics and profiles, pods per node, last publishes.

Built from the store at start and kept fresh from events. Every update is idempotent
and ignores out-of-date messages (redelivery, replay after restart, consumers of
different subjects running in any relative order).
"""

from __future__ import annotations

from dataclasses import dataclass

from colo.messages import (
    NodeMetric,
    NodeProfile,
    NodeResource,
    NodeSLO,
    NodeSpec,
    PodBound,
    PodPhase,
    PodRecord,
    PodStatus,
    PriorityClass,
    QoSClass,
)
from colo_slo_manager.allocatable import NodePods, PodView

_TERMINAL: frozenset[str] = frozenset({"Succeeded", "Failed"})

TERMINAL_RETENTION_S = 3600.0
"""Finished pods are forgotten this many seconds after their last update (they no longer hold resources)."""


@dataclass(slots=True)
class PodEntry:
    """A pod's last known node and view; ``updated_at`` / ``bound_at`` in clock seconds."""

    node: str
    view: PodView
    updated_at: float
    bound_at: float


class ClusterState:
    """In-memory cluster snapshot of the slo-manager (not thread-safe; one event loop)."""

    def __init__(self) -> None:
        self.nodes: dict[str, NodeSpec] = {}
        self.metrics: dict[str, NodeMetric] = {}
        self.profiles: dict[str, NodeProfile] = {}
        self.pods: dict[str, PodEntry] = {}
        self.published: dict[str, NodeResource] = {}
        self.slos: dict[str, NodeSLO] = {}
        self._by_node: dict[str, set[str]] = {}
        self._summaries: dict[str, NodePods] = {}
        """Cached :class:`NodePods` per node; dropped whenever a pod on that node changes."""
        self._finished: dict[str, float] = {}
        """uid → ``updated_at`` of every pod whose phase is Succeeded or Failed: what
        :meth:`forget_finished` looks at, rather than every pod of the cluster each tick."""

    # ------------------------------------------------------------------ nodes, metrics, profiles

    def put_node(self, node: NodeSpec) -> None:
        """Record (or replace) a node registration."""
        self.nodes[node.name] = node

    def put_metric(self, metric: NodeMetric) -> bool:
        """Keep ``metric`` if it is the newest seen for its node; returns whether it was kept."""
        old = self.metrics.get(metric.node)
        if old is not None and old.at > metric.at:
            return False
        self.metrics[metric.node] = metric
        return True

    def put_profile(self, profile: NodeProfile) -> bool:
        """Keep ``profile`` if it is the newest seen for its node; returns whether it was kept."""
        old = self.profiles.get(profile.node)
        if old is not None and old.at > profile.at:
            return False
        self.profiles[profile.node] = profile
        return True

    # ------------------------------------------------------------------ pods

    def _place(self, uid: str, entry: PodEntry) -> None:
        old = self.pods.get(uid)
        if old is not None and old.node != entry.node:
            self._by_node.get(old.node, set()).discard(uid)
            self._summaries.pop(old.node, None)
        self.pods[uid] = entry
        if entry.view.active:
            self._finished.pop(uid, None)
        else:
            self._finished[uid] = entry.updated_at
        if entry.node:
            self._by_node.setdefault(entry.node, set()).add(uid)
            self._summaries.pop(entry.node, None)

    def put_record(self, record: PodRecord) -> None:
        """Load a pod from the store at start (bound pods only)."""
        if not record.node:
            return
        view = PodView.of_spec(record.spec, record.phase)
        self._place(record.spec.uid, PodEntry(node=record.node, view=view, updated_at=record.updated_at,
                                              bound_at=record.bound_at))

    def on_bound(self, msg: PodBound) -> None:
        """A binding: the pod now holds resources on ``msg.node`` (Pending until a status says otherwise).

        A status for the same node already newer than the binding keeps its phase.
        """
        old = self.pods.get(msg.spec.uid)
        if old is not None and old.bound_at > msg.at:
            return  # a later binding is already known
        phase: PodPhase = "Pending"
        updated = msg.at
        if old is not None and old.node == msg.node and old.updated_at >= msg.at:
            phase, updated = old.view.phase, old.updated_at
        view = PodView.of_spec(msg.spec, phase)
        self._place(msg.spec.uid, PodEntry(node=msg.node, view=view, updated_at=updated, bound_at=msg.at))

    def on_status(self, msg: PodStatus) -> None:
        """A phase change reported by a node agent; stale reports (older than the last binding
        on another node, or than the last update) are ignored.

        The end of a binding (Succeeded, Failed) is final, as a Kubernetes pod's phase: a later
        non-final status for the pod on the same node is ignored (only a new binding starts it again), and
        an end stamped at or after the binding counts even when an earlier-consumed status carries a later
        stamp. The pod's BE requests thus leave the node's sums whatever order the status consumer sees
        and however the agent's stamps compare (docs/slo-manager.md "BE memory")."""
        old = self.pods.get(msg.uid)
        if old is not None:
            if old.node != msg.node and old.bound_at > msg.at:
                return
            if old.node == msg.node:
                was_done, done = old.view.phase in _TERMINAL, msg.phase in _TERMINAL
                if was_done and not done:
                    return
                ends_binding = done and not was_done and msg.at >= old.bound_at
                if old.updated_at > msg.at and not ends_binding:
                    return
            view = PodView(uid=msg.uid, phase=msg.phase, priority_class=old.view.priority_class,
                           qos_class=old.view.qos_class, requests=old.view.requests)
            self._place(msg.uid, PodEntry(node=msg.node, view=view, updated_at=msg.at, bound_at=old.bound_at))
            return
        qos: QoSClass = msg.qos_class or "LS"
        prio: PriorityClass = msg.priority_class or ("batch" if qos == "BE" else "prod")
        view = PodView(uid=msg.uid, phase=msg.phase, priority_class=prio, qos_class=qos, requests=msg.requests)
        self._place(msg.uid, PodEntry(node=msg.node, view=view, updated_at=msg.at, bound_at=0.0))

    def pods_on(self, node: str) -> list[PodView]:
        """Views of every pod known on ``node`` (all phases; the calculators filter)."""
        return [self.pods[uid].view for uid in sorted(self._by_node.get(node, ()))]

    def pod_summary(self, node: str) -> NodePods:
        """:class:`NodePods` of :meth:`pods_on` ``node``, rebuilt only after a pod on the node changed."""
        summary = self._summaries.get(node)
        if summary is None:
            summary = self._summaries[node] = NodePods.of(self.pods_on(node))
        return summary

    def forget_finished(self, now: float, retention_s: float = TERMINAL_RETENTION_S) -> int:
        """Drop finished pods last updated more than ``retention_s`` seconds before ``now``; returns the count."""
        gone = [uid for uid, at in self._finished.items() if now - at > retention_s]
        for uid in gone:
            del self._finished[uid]
            entry = self.pods.pop(uid)
            self._by_node.get(entry.node, set()).discard(uid)
            self._summaries.pop(entry.node, None)
        return len(gone)
