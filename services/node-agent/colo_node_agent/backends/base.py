"""What the node agent service needs from a backend (``sim`` or ``host``), as a Protocol.

Both backends own the pods of their nodes and one cgroup tree + :class:`~colo_node_agent.cgroups.Executor` per
node; the service drives them through these methods and publishes what they return. ``PodEnd`` and
``AdvanceResult`` are the sim backend's types, shared by both.
"""

from __future__ import annotations

from collections import deque
from typing import Protocol

from colo.messages import NodeMetric, NodeSLO, PodSpec
from colo_node_agent.backends.sim import AdvanceResult, PodEnd
from colo_node_agent.cgroups.executor import WriteRecord


class NodeBackend(Protocol):
    """The seam between :class:`~colo_node_agent.service.NodeAgentService` and a backend."""

    names: list[str]
    """Node names, in the backend's order."""
    index: dict[str, int]
    """Node name → position in ``names``."""
    cgroup_failures: deque[tuple[str, WriteRecord]]
    """Failed cgroup writes (node, record) not yet published; the service pops them."""

    def has_pod(self, uid: str) -> bool:
        """Whether pod ``uid`` is known (running, or on the host still terminating)."""
        ...

    def running(self, node: str) -> list[PodSpec]:
        """Specs of the pods running on ``node`` (the node's truth the reconciler compares with the store)."""
        ...

    def start_pod(self, spec: PodSpec, node: str, cpuset: tuple[int, ...] = (),
                  devices: tuple[tuple[int, int], ...] = ()) -> bool:
        """Start ``spec`` on ``node`` with the ``cpuset`` the scheduler chose (LSE/LSR pods; () = none) and the
        ``devices`` it assigned ((GPU index, milli-GPU), ...; docs/gpu.md); False when the node is not hosted
        or the pod is known already."""
        ...

    def evict_pod(self, uid: str, reason: str, message: str, at: float) -> PodEnd | None:
        """Stop pod ``uid`` as Failed with ``reason``; None when it does not run here."""
        ...

    def set_slo(self, slo: NodeSLO) -> bool:
        """Adopt a NodeSLO; False when its node is not hosted."""
        ...

    def advance(self, now: float) -> AdvanceResult:
        """Run up to clock ``now`` (seconds): ended pods, QoS events, stats."""
        ...

    def node_metrics(self, at: float) -> list[NodeMetric]:
        """One NodeMetric per node at clock ``at``."""
        ...

    def debug(self) -> dict[str, object]:
        """A per-node summary for /debug/state."""
        ...


__all__ = ["AdvanceResult", "NodeBackend", "PodEnd"]
