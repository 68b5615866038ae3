"""NodeNUMAResource: cpusets for LSE/LSR pods chosen by the scheduler (docs/topology.md)."""

from colo_scheduler.plugins.nodenumaresource.plugin import NodeNUMAResource, NodeNUMAResourceArgs

__all__ = ["NodeNUMAResource", "NodeNUMAResourceArgs"]
