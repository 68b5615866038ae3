"""The host backend's side of the strategies: what this kernel offers, the node snapshot each round, and
applying a plan in an order the kernel accepts.

Every round the backend builds a :class:`~colo_node_agent.strategies.node.NodeSnapshot` from its samples and
runs :func:`~colo_node_agent.strategies.node.plan_node` (the strategies of REFERENCE.md §5, each switched by
the NodeSLO); :func:`apply_plan_writes` hands the writes to the executor.
"""

from __future__ import annotations

from pathlib import Path

from colo_node_agent.backends.host_cgroups import CgroupTree
from colo_node_agent.cgroups.executor import CgroupWrite, Executor, WriteRecord
from colo_node_agent.cgroups.layout import BESTEFFORT
from colo_node_agent.strategies.node import NodeFeatures
from colo_node_agent.topology import CPUInfo, CPUTopology, read_topology


def kernel_features(tree: CgroupTree) -> NodeFeatures:
    """What the kernel offers, from the files of the BE group (made before this is called): ``cpu.idle``,
    CFS burst, memory.min/low/high (v2), block I/O throttles. resctrl and sysctls are never touched by the
    host backend (a shared machine's kernel settings and LLC are not the agent's to change)."""
    v1 = tree.version == "v1"
    cpu, mem = tree.path("cpu", BESTEFFORT), tree.path("memory", BESTEFFORT)
    io = tree.path("blkio", BESTEFFORT) / "blkio.throttle.read_bps_device" if v1 else cpu / "io.max"
    return NodeFeatures(cpu_idle=(cpu / "cpu.idle").exists(),
                        cpu_burst=(cpu / ("cpu.cfs_burst_us" if v1 else "cpu.max.burst")).exists(),
                        memory_qos=(mem / "memory.min").exists(), blkio=io.exists(), resctrl=None, sysctl=False)


def node_topology(cpus: tuple[int, ...], root: str | Path = "/sys/devices/system") -> CPUTopology:
    """The CPU topology of ``cpus`` (the node's CPUs): from sysfs, else every CPU its own core."""
    flat = CPUTopology(tuple(CPUInfo(c, c) for c in cpus))
    try:
        topo = read_topology(root)
    except OSError:
        return flat
    mine = tuple(c for c in topo.cpus if c.cpu in set(cpus))
    return CPUTopology(mine) if len(mine) == len(cpus) else flat


def apply_plan_writes(ex: Executor, writes: list[CgroupWrite], at: float) -> list[WriteRecord]:
    """Apply ``writes`` with the BE group's ``cpu.shares`` and ``cpu.idle`` in an order the kernel accepts.

    The kernel refuses ``cpu.shares`` on a group whose ``cpu.idle`` is 1 (EINVAL: an idle group's weight is
    fixed at the minimum, seen on this machine's 6.18 kernel): the shares are written before idle is switched
    on, after it is switched off, and not at all while the group stays idle.
    """
    shares = [w for w in writes if w.cgroup == BESTEFFORT and w.resource == "cpu.shares"]
    idle = [w for w in writes if w.cgroup == BESTEFFORT and w.resource == "cpu.idle"]
    rest = [w for w in writes if w not in shares and w not in idle]
    want_idle = bool(idle) and idle[-1].value == 1
    idle_now = ex.read(BESTEFFORT, "cpu.idle") == 1
    if want_idle and idle_now:
        return ex.apply(rest + idle, at=at)
    if want_idle:
        return ex.apply(rest + shares, at=at) + ex.apply(idle, at=at)
    return ex.apply(idle, at=at) + ex.apply(rest + shares, at=at)
