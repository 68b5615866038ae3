"""Node kernel memory settings (REFERENCE.md §5 "System"; Koordinator ``sysreconcile``).

``vm.min_free_kbytes`` = min_free_kbytes_factor × total memory (KiB) / 10000 (factor 100 → 1 % of memory kept
free, so that reclaim starts before LS allocations stall) and ``vm.watermark_scale_factor`` as configured, both
only when the NodeSLO turns ``system`` on. Turning it off writes nothing: the kernel's own values are not known
after a change (Koordinator does not restore them either).
"""

from __future__ import annotations

from colo.messages import SystemStrategy
from colo_node_agent.cgroups.executor import CgroupWrite


def min_free_kbytes(total_memory_bytes: int, factor: int) -> int:
    """factor × total memory in KiB / 10000."""
    return total_memory_bytes // 1024 * factor // 10000


def system_writes(policy: SystemStrategy, total_memory_bytes: int) -> list[CgroupWrite]:
    """The sysctl writes (tree ``sysctl``, i.e. /proc/sys) for ``policy`` on a node of ``total_memory_bytes``."""
    if not policy.enabled:
        return []
    kb = min_free_kbytes(total_memory_bytes, policy.min_free_kbytes_factor)
    return [
        CgroupWrite("", "vm.min_free_kbytes", kb, f"{policy.min_free_kbytes_factor}/10000 of memory"),
        CgroupWrite("", "vm.watermark_scale_factor", policy.watermark_scale_factor, "NodeSLO system"),
    ]
