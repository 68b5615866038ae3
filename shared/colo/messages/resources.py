"""Resource quantities: the :class:`Resources` vector, its column names and measured :class:`Usage`.

CPU in milli-cores, memory in bytes (REFERENCE.md §1 for the batch/mid extended resources).
"""

from __future__ import annotations

from colo.messages.base import Message


class Resources(Message, frozen=True):
    """A resource vector.

    ``cpu``, ``batch_cpu``, ``mid_cpu`` in milli-cores; ``memory``, ``batch_memory``,
    ``mid_memory`` in bytes; ``pods`` a count (used for capacity/allocatable only,
    every pod implicitly requests one). ``batch_*`` / ``mid_*`` are the extended
    resources ``kubernetes.io/batch-cpu`` etc. of REFERENCE.md §1.
    """

    cpu: int = 0
    memory: int = 0
    batch_cpu: int = 0
    batch_memory: int = 0
    mid_cpu: int = 0
    mid_memory: int = 0
    pods: int = 0


RESOURCE_NAMES: tuple[str, ...] = (
    "cpu",
    "memory",
    "batch_cpu",
    "batch_memory",
    "mid_cpu",
    "mid_memory",
    "pods",
)
"""Field names of :class:`Resources`, in column order for vectorized code."""

KUBERNETES_RESOURCE_NAMES: dict[str, str] = {
    "cpu": "cpu",
    "memory": "memory",
    "kubernetes.io/batch-cpu": "batch_cpu",
    "kubernetes.io/batch-memory": "batch_memory",
    "kubernetes.io/mid-cpu": "mid_cpu",
    "kubernetes.io/mid-memory": "mid_memory",
    "pods": "pods",
}
"""Kubernetes resource name → :class:`Resources` field."""


class Usage(Message, frozen=True):
    """Measured usage: ``cpu`` milli-cores, ``memory`` bytes."""

    cpu: int = 0
    memory: int = 0
