"""The cgroup layer: logical resources mapped to v1/v2 files, a filesystem seam and one executor.

Strategies name *logical* resources (``cpu.shares``, ``cpuset.cpus``, ``memory.limit_in_bytes`` ...) with
v1-style values; :mod:`.resources` maps them to the files of the detected hierarchy and converts values;
:mod:`.fs` roots every path at an injectable directory (or an in-memory tree for the ``sim`` backend);
:mod:`.layout` places QoS and pod groups (cgroupfs or systemd driver, under an optional parent);
:mod:`.executor` applies plans: skip unchanged, order parent/child writes, keep the burst within the quota,
refuse empty cpusets, audit; :mod:`.stats` reads usage, throttling and PSI; :mod:`.resctrl` does the
LLC/MBA arithmetic.
"""

from colo_node_agent.cgroups.executor import CgroupWrite, Executor, WriteRecord
from colo_node_agent.cgroups.fs import CgroupFS, HostFS, MemoryFS, detect_version
from colo_node_agent.cgroups.layout import CGROUPFS, Layout
from colo_node_agent.cgroups.resources import (
    RESOURCES,
    CgroupVersion,
    Resource,
    cpuset_format,
    cpuset_parse,
    shares_to_weight,
    weight_to_shares,
)

__all__ = [
    "CGROUPFS",
    "RESOURCES",
    "CgroupFS",
    "CgroupVersion",
    "CgroupWrite",
    "Executor",
    "HostFS",
    "Layout",
    "MemoryFS",
    "Resource",
    "WriteRecord",
    "cpuset_format",
    "cpuset_parse",
    "detect_version",
    "shares_to_weight",
    "weight_to_shares",
]
