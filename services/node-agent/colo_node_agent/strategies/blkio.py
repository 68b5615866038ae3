"""Block I/O throttling of the BE QoS group (REFERENCE.md §5 file table: blkio.throttle.* on v1, io.max on v2;
Koordinator ``BlkIOQOS`` for the BE class).

Each :class:`~colo.messages.BlkIOLimit` of the NodeSLO becomes four device rules on the BE group (read/write
bytes/s and IO/s; 0 in the NodeSLO = no limit, written as −1 so that an earlier limit is lifted). Devices that
hold a rule now but are no longer in the policy (or the policy is off) get all four rules lifted. The kernel
applies a QoS group's throttle to all BE pods together, like the BE CPU quota.
"""

from __future__ import annotations

from colo.messages import BlkIOLimit, BlkIOStrategy
from colo_node_agent.cgroups.executor import CgroupWrite
from colo_node_agent.cgroups.layout import BESTEFFORT
from colo_node_agent.cgroups.resources import device_value

FIELDS: tuple[tuple[str, str], ...] = (
    ("read_bps", "blkio.throttle.read_bps_device"),
    ("write_bps", "blkio.throttle.write_bps_device"),
    ("read_iops", "blkio.throttle.read_iops_device"),
    ("write_iops", "blkio.throttle.write_iops_device"),
)
"""NodeSLO field → logical resource."""


def limit_writes(cgroup: str, limit: BlkIOLimit, reason: str) -> list[CgroupWrite]:
    """The four rules of one device on ``cgroup`` (0 → −1, no limit)."""
    out = []
    for attr, resource in FIELDS:
        v = int(getattr(limit, attr))
        out.append(CgroupWrite(cgroup, resource, device_value(limit.device, v if v > 0 else -1), reason))
    return out


def blkio_writes(policy: BlkIOStrategy, current_devices: tuple[str, ...] = (), be_dir: str = BESTEFFORT) -> list[
        CgroupWrite]:
    """The BE group's device rules; ``current_devices`` ("MAJ:MIN") that hold rules now."""
    wanted = policy.be if policy.enabled else []
    writes: list[CgroupWrite] = []
    for lim in wanted:
        writes += limit_writes(be_dir, lim, "NodeSLO blkio")
    keep = {lim.device for lim in wanted}
    for dev in current_devices:
        if dev not in keep:
            writes += limit_writes(be_dir, BlkIOLimit(device=dev), "blkio limit lifted")
    return writes
