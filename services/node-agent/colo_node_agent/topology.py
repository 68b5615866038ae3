"""CPU topology of a node (logical CPU → core, socket, NUMA node) and the order the BE cpuset takes CPUs in.

* :func:`spread_order` — for the BE cpuset of CPU suppress (REFERENCE.md §5): whole hyper-thread sibling pairs
  first, one core at a time round-robin over NUMA nodes/sockets, so that n CPUs are n/2 whole cores spread
  evenly. The order is fixed for a given candidate set, so the first n CPUs of it only grow or shrink at the
  end when n changes (no churn), where Koordinator's ``calculateBESuppressCPUSetPolicy`` recomputes a set.
* exclusive (LSE) and reserved (LSR) cpusets take whole cores across the node, packed as compactly as the
  free CPUs allow: :func:`colo_node_agent.cpu_accumulator.take_cores`.

:func:`read_topology` reads ``/sys/devices/system`` (core_id, physical_package_id, node*/cpulist).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from colo.messages import CPUInfo as MessageCPU
from colo.messages import NodeTopology
from colo_node_agent.cgroups.resources import cpuset_parse


@dataclass(frozen=True)
class CPUInfo:
    """One logical CPU: its id, physical core id (unique within the socket), socket and NUMA node."""

    cpu: int
    core: int
    socket: int = 0
    numa: int = 0


@dataclass(frozen=True)
class CPUTopology:
    """All logical CPUs of a node."""

    cpus: tuple[CPUInfo, ...]

    @staticmethod
    def flat(n: int) -> CPUTopology:
        """``n`` CPUs, each its own core, one socket and NUMA node (no topology known)."""
        return CPUTopology(tuple(CPUInfo(i, i) for i in range(n)))

    @staticmethod
    def smt(cores_per_socket: int, threads: int = 2, sockets: int = 1) -> CPUTopology:
        """Linux numbering: CPU ``t × total_cores + c`` is thread ``t`` of core ``c``; one NUMA node per socket."""
        total = cores_per_socket * sockets
        out = []
        for t in range(threads):
            for c in range(total):
                s = c // cores_per_socket
                out.append(CPUInfo(t * total + c, c % cores_per_socket, s, s))
        return CPUTopology(tuple(sorted(out, key=lambda x: x.cpu)))

    @staticmethod
    def of(message: NodeTopology) -> CPUTopology:
        """The topology a node registered (``NodeSpec.topology``)."""
        return CPUTopology(tuple(sorted((CPUInfo(c.cpu, c.core, c.socket, c.numa) for c in message.cpus),
                                        key=lambda c: c.cpu)))

    def message(self) -> NodeTopology:
        """As registered on ``NodeSpec.topology``."""
        return NodeTopology(cpus=[MessageCPU(cpu=c.cpu, core=c.core, socket=c.socket, numa=c.numa)
                                  for c in self.cpus])

    def ids(self) -> tuple[int, ...]:
        """Every logical CPU id, ascending."""
        return tuple(sorted(c.cpu for c in self.cpus))

    def by_id(self) -> dict[int, CPUInfo]:
        """CPU id → its info."""
        return {c.cpu: c for c in self.cpus}


def _cores(cpus: set[int], topo: CPUTopology) -> dict[tuple[int, int], dict[tuple[int, int], list[int]]]:
    """(numa, socket) bucket → (socket, core) → the bucket's CPUs of that core in ``cpus`` (ascending)."""
    info = topo.by_id()
    out: dict[tuple[int, int], dict[tuple[int, int], list[int]]] = defaultdict(lambda: defaultdict(list))
    for cpu in sorted(cpus):
        i = info.get(cpu, CPUInfo(cpu, cpu))
        out[(i.numa, i.socket)][(i.socket, i.core)].append(cpu)
    return out


def _bucket_order(cores: dict[tuple[int, int], list[int]]) -> list[list[int]]:
    """A bucket's cores: fuller cores first (whole sibling pairs before lone siblings), then by lowest CPU."""
    groups = list(cores.values())
    return sorted(groups, key=lambda g: (-len(g), g[0]))


def spread_order(cpus: tuple[int, ...] | list[int], topo: CPUTopology) -> list[int]:
    """``cpus`` in the order the BE cpuset takes them: one whole core per turn, round-robin over NUMA/socket
    buckets (biggest bucket first, ties by lowest CPU), fuller cores first within a bucket."""
    buckets = [_bucket_order(cores) for cores in _cores(set(cpus), topo).values()]
    buckets.sort(key=lambda b: (-sum(len(g) for g in b), b[0][0] if b else 0))
    out: list[int] = []
    turn = 0
    while any(turn < len(b) for b in buckets):
        for b in buckets:
            if turn < len(b):
                out.extend(b[turn])
        turn += 1
    return out


def read_topology(root: str | Path = "/sys/devices/system") -> CPUTopology:
    """The topology under ``root`` (``cpu/cpuN/topology/{core_id,physical_package_id}``, ``node/nodeM/cpulist``).

    Only online CPUs (``cpu/online``) count. CPUs without topology files count as their own core on socket 0;
    without NUMA files every CPU is on node 0. Raises OSError when ``root/cpu`` cannot be listed.
    """
    base = Path(root)
    numa: dict[int, int] = {}
    node_dir = base / "node"
    if node_dir.is_dir():
        for d in node_dir.glob("node[0-9]*"):
            try:
                for cpu in cpuset_parse((d / "cpulist").read_text()):
                    numa[cpu] = int(d.name[4:])
            except (OSError, ValueError):
                continue
    try:
        online: set[int] | None = set(cpuset_parse((base / "cpu" / "online").read_text()))
    except (OSError, ValueError):
        online = None
    out: list[CPUInfo] = []
    for d in (base / "cpu").iterdir():
        if not (d.name.startswith("cpu") and d.name[3:].isdigit()):
            continue
        cpu = int(d.name[3:])
        if online is not None and cpu not in online:
            continue
        try:
            core = int((d / "topology" / "core_id").read_text())
            socket = int((d / "topology" / "physical_package_id").read_text())
        except (OSError, ValueError):
            core, socket = cpu, 0
        out.append(CPUInfo(cpu, core, socket, numa.get(cpu, 0)))
    return CPUTopology(tuple(sorted(out, key=lambda c: c.cpu)))
