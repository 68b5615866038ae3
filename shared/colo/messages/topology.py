"""Node topology and devices as registered (:class:`NodeTopology`, :class:`GPUInfo` on
:class:`~colo.messages.NodeSpec`) and the devices a binding assigns (:class:`DeviceAllocation` on
:class:`~colo.messages.PodBound`); cpuset lists in the kernel's format (``"0-3,8"``, :func:`cpuset_parse`).

The topology follows Koordinator's ``NodeResourceTopology`` CPU details (``pkg/scheduler/plugins/
nodenumaresource/cpu_topology.go``): one entry per logical CPU with its physical core, socket and NUMA node;
docs/topology.md gives where each node source takes it from.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TypeVar

from colo.messages.base import Message

K = TypeVar("K", bound=Hashable)


class CPUInfo(Message, frozen=True):
    """One logical CPU: ``cpu`` id, physical ``core`` id (unique within its socket), ``socket`` and ``numa``
    node ids (Linux ``topology/core_id``, ``physical_package_id``, ``node*/cpulist``)."""

    cpu: int
    core: int
    socket: int = 0
    numa: int = 0


class NodeTopology(Message, frozen=True):
    """Every logical CPU of a node (ascending ``cpu``). Empty = unknown (the node gets no cpusets from the
    scheduler)."""

    cpus: list[CPUInfo] = []

    def sockets(self) -> dict[int, list[int]]:
        """Socket id → its CPU ids (ascending)."""
        return _group(self.cpus, lambda c: c.socket)

    def numa_nodes(self) -> dict[int, list[int]]:
        """NUMA node id → its CPU ids (ascending)."""
        return _group(self.cpus, lambda c: c.numa)

    def cores(self) -> dict[tuple[int, int], list[int]]:
        """(socket, core) → the CPU ids (hyper-threads) of that physical core (ascending)."""
        return _group(self.cpus, lambda c: (c.socket, c.core))

    def threads_per_core(self) -> int:
        """The largest number of hyper-threads of any core (1 when the topology is empty)."""
        return max((len(v) for v in self.cores().values()), default=1)

    def problems(self, where: str = "topology") -> list[str]:
        """Every inconsistency, each prefixed with ``where``: duplicate or negative CPU ids, negative
        core/socket/NUMA ids, a core split over NUMA nodes."""
        out: list[str] = []
        seen: set[int] = set()
        core_numa: dict[tuple[int, int], int] = {}
        for k, c in enumerate(self.cpus):
            at = f"{where}.cpus[{k}]"
            if c.cpu in seen:
                out.append(f"{at}: duplicate cpu {c.cpu}")
            seen.add(c.cpu)
            for name in ("cpu", "core", "socket", "numa"):
                if getattr(c, name) < 0:
                    out.append(f"{at}.{name}: must be >= 0, got {getattr(c, name)}")
            numa = core_numa.setdefault((c.socket, c.core), c.numa)
            if numa != c.numa:
                out.append(f"{at}: core {c.core} of socket {c.socket} is on NUMA nodes {numa} and {c.numa}")
        return out


def _group(cpus: list[CPUInfo], key: Callable[[CPUInfo], K]) -> dict[K, list[int]]:
    out: dict[K, list[int]] = {}
    for c in sorted(cpus, key=lambda c: c.cpu):
        out.setdefault(key(c), []).append(c.cpu)
    return out


def smt_topology(sockets: int, cores_per_socket: int, threads: int = 2, numa_per_socket: int = 1) -> NodeTopology:
    """A regular topology in Linux numbering: CPU ``t × total_cores + c`` is thread ``t`` of core ``c``
    (so CPUs 0..total_cores−1 are the first threads), ``numa_per_socket`` NUMA nodes of equal core counts per
    socket. Raises ValueError when a count is < 1 or the cores of a socket do not divide into its NUMA nodes."""
    if min(sockets, cores_per_socket, threads, numa_per_socket) < 1:
        raise ValueError(f"topology counts must be >= 1: sockets={sockets} cores_per_socket={cores_per_socket} "
                         f"threads={threads} numa_per_socket={numa_per_socket}")
    if cores_per_socket % numa_per_socket:
        raise ValueError(f"{cores_per_socket} cores per socket do not divide into {numa_per_socket} NUMA nodes")
    total = sockets * cores_per_socket
    per_numa = cores_per_socket // numa_per_socket
    out = []
    for t in range(threads):
        for c in range(total):
            s, local = divmod(c, cores_per_socket)
            out.append(CPUInfo(cpu=t * total + c, core=local, socket=s, numa=s * numa_per_socket + local // per_numa))
    return NodeTopology(cpus=sorted(out, key=lambda x: x.cpu))


class GPUInfo(Message, frozen=True):
    """One GPU of a node: ``index`` (the minor number, ``nvidia-smi`` index), ``model`` (e.g. ``V100M16``,
    the Alibaba GPU trace's ``model`` column) and ``memory_bytes``."""

    index: int
    model: str = ""
    memory_bytes: int = 0


class DeviceAllocation(Message, frozen=True):
    """A device assigned to a pod by the binding (Koordinator ``scheduling.koordinator.sh/device-allocated``):
    ``type`` (``gpu``), ``index`` (minor) and the share of it, ``resources`` (e.g. ``koordinator.sh/gpu-core``:
    percent, ``koordinator.sh/gpu-memory``: bytes); empty = the whole device."""

    type: str = "gpu"
    index: int = 0
    resources: dict[str, int] = {}


class GPURequest(Message, frozen=True):
    """A pod's GPU request (DeviceShare; docs/gpu.md "Pod GPU requests"): ``count`` devices of ``milli``
    milli-GPU each (1000 = a whole device; a GPU-share pod has ``count == 1`` and ``milli < 1000``), on a GPU
    whose model is one of ``models`` (empty = any model; the trace's ``gpu_spec``)."""

    count: int = 1
    milli: int = 1000
    models: list[str] = []


def devices_format(devices: list[tuple[int, int]] | tuple[tuple[int, int], ...]) -> str:
    """``[(0, 1000), (3, 250)]`` (GPU index, milli-GPU) → ``"0:1000,3:250"``, the form the binding hash keeps
    (``devices`` field); ``[]`` → ``""``."""
    return ",".join(f"{i}:{m}" for i, m in devices)


def devices_parse(text: str) -> tuple[tuple[int, int], ...]:
    """``"0:1000,3:250"`` → ``((0, 1000), (3, 250))``; ``""`` → ``()``. Raises ValueError on a malformed list
    (an entry that is not ``index:milli``, a negative index, milli outside 1..1000, an index twice)."""
    out: list[tuple[int, int]] = []
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        idx_s, colon, milli_s = part.partition(":")
        if not colon:
            raise ValueError(f"bad device {part!r} (expected index:milli)")
        idx, milli = int(idx_s), int(milli_s)
        if idx < 0 or not 0 < milli <= 1000:
            raise ValueError(f"bad device {part!r} (index >= 0, milli in 1..1000)")
        if any(i == idx for i, _ in out):
            raise ValueError(f"device {idx} listed twice")
        out.append((idx, milli))
    return tuple(out)


def device_allocations(devices: tuple[tuple[int, int], ...] | list[tuple[int, int]]) -> list[DeviceAllocation]:
    """:class:`DeviceAllocation` per (GPU index, milli-GPU): a whole device has empty ``resources``, a share
    ``koordinator.sh/gpu-core`` (percent, rounded up) and ``colo.io/gpu-milli`` (exact)."""
    return [DeviceAllocation(index=i) if m >= 1000 else
            DeviceAllocation(index=i, resources={"koordinator.sh/gpu-core": -(-m // 10), "colo.io/gpu-milli": m})
            for i, m in devices]


def allocations_devices(allocs: list[DeviceAllocation]) -> tuple[tuple[int, int], ...]:
    """The inverse of :func:`device_allocations` (GPU allocations only): (index, milli-GPU) per device."""
    out = []
    for a in allocs:
        if a.type != "gpu":
            continue
        r = a.resources
        milli = r.get("colo.io/gpu-milli") or (10 * r["koordinator.sh/gpu-core"] if "koordinator.sh/gpu-core" in r
                                                else 1000)
        out.append((a.index, milli))
    return tuple(out)


def cpuset_parse(text: str) -> tuple[int, ...]:
    """``"0-3,8"`` → ``(0, 1, 2, 3, 8)`` (sorted, unique; ``""`` → ``()``). Raises ValueError on malformed
    lists."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        lo_s, dash, hi_s = part.partition("-")
        lo, hi = int(lo_s), int(hi_s if dash else lo_s)
        if lo < 0 or hi < lo:
            raise ValueError(f"bad cpu range {part!r}")
        cpus.update(range(lo, hi + 1))
    return tuple(sorted(cpus))


def cpuset_format(cpus: tuple[int, ...] | list[int] | set[int]) -> str:
    """``(0, 1, 2, 3, 8)`` → ``"0-3,8"`` (the kernel's canonical form; ``()`` → ``""``)."""
    ids = sorted(set(cpus))
    parts: list[str] = []
    k = 0
    while k < len(ids):
        j = k
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        parts.append(str(ids[k]) if j == k else f"{ids[k]}-{ids[j]}")
        k = j + 1
    return ",".join(parts)
