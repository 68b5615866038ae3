"""Nodes as registered (:class:`NodeSpec`, taints and tolerations) and the batch/mid allocatable
slo-manager computes for them (:class:`NodeResource`, REFERENCE.md §3)."""

from __future__ import annotations

from typing import Literal

from colo.messages.base import Message
from colo.messages.resources import Resources
from colo.messages.topology import GPUInfo, NodeTopology


class Taint(Message, frozen=True):
    """A Kubernetes node taint; ``effect`` is NoSchedule, PreferNoSchedule or NoExecute."""

    key: str
    value: str = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = "NoSchedule"


class Toleration(Message, frozen=True):
    """A Kubernetes toleration; ``operator`` Equal or Exists; empty ``effect`` matches all."""

    key: str = ""
    operator: Literal["Equal", "Exists"] = "Equal"
    value: str = ""
    effect: str = ""


class NodeSpec(Message, frozen=True):
    """A node as registered by its node agent (subject ``node.registered``).

    ``capacity`` is the machine; ``allocatable`` what Kubernetes would offer pods
    (capacity minus node reservations). ``reserved_cpus`` lists CPU ids reserved
    for the system (REFERENCE.md §3 NodeReserved). ``cpus`` is the logical CPU count.
    """

    name: str
    capacity: Resources
    allocatable: Resources
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    taints: list[Taint] = []
    reserved_cpus: str = ""
    reserved: Resources = Resources()
    cpus: int = 0
    registered_at: float = 0.0
    unschedulable: bool = False
    """Cordoned (Kubernetes ``spec.unschedulable``): no new pod is placed here unless it tolerates
    ``node.kubernetes.io/unschedulable:NoSchedule``, and the descheduler never migrates pods onto it; pods
    already running stay."""
    topology: NodeTopology = NodeTopology()
    """Sockets, NUMA nodes, cores and hyper-threads (one entry per logical CPU; docs/topology.md); empty = unknown:
    the scheduler then gives LSE/LSR pods on this node no cpuset and the node agent chooses one itself."""
    gpus: list[GPUInfo] = []
    """The node's GPUs (index, model, memory bytes); empty = none."""


class NodeDeleted(Message, frozen=True):
    """An order to delete node ``node`` (subject ``node.deleted.<node>``; ``colo delete node``,
    ``DELETE /v1/nodes/{name}``, docs/cli.md "Deleting a node"). The scheduler removes it from the store and
    from its node table, so that it is no longer a candidate. Pods still bound to it are refused (nothing
    happens) unless ``force``: then each is ended as a deleted pod is (``Failed`` with reason
    ``Deleted: node <node> deleted by <by>``, an eviction order to its node agent in case it still runs).
    ``at`` clock seconds; ``by`` who asked (``api``, ``colo delete``)."""

    node: str
    at: float
    by: str = ""
    force: bool = False


class NodeResource(Message, frozen=True):
    """Batch and mid allocatable of one node computed by slo-manager (REFERENCE.md §3).

    ``batch_cpu``/``mid_cpu`` milli-cores, ``batch_memory``/``mid_memory`` bytes.
    ``reset`` is true when the node's metric went stale and the node stops offering
    batch/mid resources until fresh data arrives (all four values are then 0).
    """

    node: str
    batch_cpu: int = 0
    batch_memory: int = 0
    mid_cpu: int = 0
    mid_memory: int = 0
    reset: bool = False
    reason: str = ""
    at: float = 0.0
    memory_pressure: bool = False
    """The node is under BE memory pressure (its NodeMetric carries a :class:`MemoryPressure`): ``batch_memory``
    is then 0 and the scheduler's BEMemoryPressure filter rejects BE pods and pods requesting batch-memory."""


HOSTNAME_LABEL = "kubernetes.io/hostname"
"""The well-known node label Kubernetes gives every node (its name), which node selectors and affinity pin pods
to a node by."""


def with_hostname_label(spec: NodeSpec) -> NodeSpec:
    """``spec`` with :data:`HOSTNAME_LABEL` = its name, unless the label is set already (kept as given)."""
    if HOSTNAME_LABEL in spec.labels:
        return spec
    import msgspec

    return msgspec.structs.replace(spec, labels={**spec.labels, HOSTNAME_LABEL: spec.name})
