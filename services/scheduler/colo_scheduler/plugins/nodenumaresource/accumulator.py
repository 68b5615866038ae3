"""The CPU accumulator of NodeNUMAResource: which logical CPUs of a node an LSE/LSR pod gets
(:func:`take_cpus`), after Koordinator's ``nodenumaresource`` ``takeCPUs`` (REFERENCE.md §5 "CPU priority";
docs/topology.md "Choosing the CPUs").

Inputs: the node's :class:`CPUDetails`, the CPUs still free, the CPUs held by other pods with the
exclusivity policy they were taken under, the number of CPUs, the bind policy, the pod's exclusivity policy and
the NUMA allocate strategy.

* **Exclusivity** (``PCPULevel`` / ``NUMANodeLevel``): a pod with one of them never gets a CPU of a physical
  core (resp. NUMA node) where another pod holds CPUs under the same policy. Koordinator tries that first and
  falls back to sharing; we never share, so the exclusivity is a guarantee (the pod is rejected instead).
* **FullPCPUs** (and every request on a node without hyper-threads): whole free physical cores only — from the
  first NUMA node that holds the request in whole cores (when the request fits in a NUMA node's size), else the
  first such socket, else whole sockets' cores by most free cores first, the rest from the sockets with the
  fewest. Node and socket order: ``MostAllocated`` = fewest free CPUs first (best fit, the default),
  ``LeastAllocated`` = most free first; ties by the socket's free CPUs, then the lowest id. A request that is
  not a multiple of the threads per core cannot be met (Kubernetes' SMT alignment error).
* **SpreadByPCPUs**: one CPU per physical core before a second thread of any core, from the first NUMA node
  (then socket) in the same order with enough free CPUs, else over the whole node.

NUMA nodes to choose from may be restricted (``numa``): the NUMA topology policy's choice
(:func:`colo_scheduler.plugins.nodenumaresource.hints.numa_choice`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from colo.messages import NodeTopology

BindPolicy = Literal["FullPCPUs", "SpreadByPCPUs"]
"""Koordinator ``CPUBindPolicy`` values the accumulator knows (``Default`` resolves to one of them)."""

ExclusivePolicy = Literal["None", "PCPULevel", "NUMANodeLevel"]
"""Koordinator ``CPUExclusivePolicy``."""

NUMAStrategy = Literal["MostAllocated", "LeastAllocated"]
"""Koordinator ``NUMAAllocateStrategy``: which NUMA node or socket is filled first."""


@dataclass(frozen=True)
class CPUDetails:
    """A node's topology prepared for the accumulator: per CPU its (numa, socket, core index); per core its
    CPUs; sizes. Built once per topology (:meth:`of`)."""

    numa_of: Mapping[int, int]
    socket_of: Mapping[int, int]
    core_of: Mapping[int, int]
    core_cpus: tuple[tuple[int, ...], ...]
    threads_per_core: int
    cpus_per_numa: int
    cpus_per_socket: int
    numa_ids: tuple[int, ...]

    @staticmethod
    def of(topo: NodeTopology) -> CPUDetails:
        """The details of ``topo`` (cores numbered by their lowest CPU id)."""
        cores = sorted(topo.cores().values(), key=lambda c: c[0])
        core_of = {cpu: k for k, cpus in enumerate(cores) for cpu in cpus}
        numa_sizes = [len(v) for v in topo.numa_nodes().values()]
        socket_sizes = [len(v) for v in topo.sockets().values()]
        return CPUDetails(
            numa_of={c.cpu: c.numa for c in topo.cpus}, socket_of={c.cpu: c.socket for c in topo.cpus},
            core_of=core_of, core_cpus=tuple(tuple(c) for c in cores),
            threads_per_core=max((len(c) for c in cores), default=1),
            cpus_per_numa=max(numa_sizes, default=0), cpus_per_socket=max(socket_sizes, default=0),
            numa_ids=tuple(sorted(set(c.numa for c in topo.cpus))))

    @property
    def cpus(self) -> tuple[int, ...]:
        """Every logical CPU id, ascending."""
        return tuple(sorted(self.numa_of))


def eligible(details: CPUDetails, free: Iterable[int], held: Mapping[int, ExclusivePolicy],
             exclusive: ExclusivePolicy, numa: Iterable[int] | None = None) -> set[int]:
    """The CPUs of ``free`` a pod with ``exclusive`` may get: not on a core (``PCPULevel``) or NUMA node
    (``NUMANodeLevel``) where ``held`` (CPU → the exclusivity of the pod holding it) has a CPU under the same
    policy, and on the NUMA nodes ``numa`` when given."""
    out = {c for c in free if c in details.numa_of}
    if numa is not None:
        keep = set(numa)
        out = {c for c in out if details.numa_of[c] in keep}
    if exclusive == "PCPULevel":
        cores = {details.core_of[c] for c, p in held.items() if p == "PCPULevel" and c in details.core_of}
        out = {c for c in out if details.core_of[c] not in cores}
    elif exclusive == "NUMANodeLevel":
        nodes = {details.numa_of[c] for c, p in held.items() if p == "NUMANodeLevel" and c in details.numa_of}
        out = {c for c in out if details.numa_of[c] not in nodes}
    return out


def whole_core_cpus(details: CPUDetails, cpus: set[int]) -> list[tuple[int, ...]]:
    """The cores all of whose CPUs are in ``cpus`` (each a tuple of CPU ids; cores by lowest CPU id)."""
    return [core for core in details.core_cpus if all(c in cpus for c in core)]


def _groups(details: CPUDetails, cores: list[tuple[int, ...]], by: Mapping[int, int],
            strategy: NUMAStrategy) -> list[list[tuple[int, ...]]]:
    """``cores`` grouped by the NUMA node or socket (``by``) of their first CPU, groups in strategy order:
    fewest (MostAllocated) or most (LeastAllocated) CPUs first, ties by the socket's count, then lowest id."""
    groups: dict[int, list[tuple[int, ...]]] = {}
    socket_free: dict[int, int] = {}
    for core in cores:
        groups.setdefault(by[core[0]], []).append(core)
        s = details.socket_of[core[0]]
        socket_free[s] = socket_free.get(s, 0) + len(core)
    sign = 1 if strategy == "MostAllocated" else -1

    def key(g: int) -> tuple[int, int, int]:
        size = sum(map(len, groups[g]))
        return sign * size, sign * socket_free[details.socket_of[groups[g][0][0]]], g

    return [groups[g] for g in sorted(groups, key=key)]


def spread_order(details: CPUDetails, cpus: set[int]) -> list[int]:
    """``cpus`` one per physical core first (the lowest free CPU of each core, cores by lowest id), then the
    second free CPU of each core, and so on."""
    per_core: dict[int, list[int]] = {}
    for c in sorted(cpus):
        per_core.setdefault(details.core_of[c], []).append(c)
    out: list[int] = []
    rank = 0
    while len(out) < len(cpus):
        out.extend(v[rank] for _, v in sorted(per_core.items()) if rank < len(v))
        rank += 1
    return out


def _full_pcpus(details: CPUDetails, cpus: set[int], n: int, strategy: NUMAStrategy) -> tuple[int, ...] | None:
    cores = whole_core_cpus(details, cpus)
    if n % details.threads_per_core or sum(map(len, cores)) < n:
        return None
    for by, size in ((details.numa_of, details.cpus_per_numa), (details.socket_of, details.cpus_per_socket)):
        if n <= size:
            for group in _groups(details, cores, by, strategy):
                if sum(map(len, group)) >= n:
                    return _first(group, n)
    # more than a socket, or no socket holds it: whole sockets' cores, most free first, then the rest from the
    # sockets with the fewest free cores (they are broken up anyway)
    sockets = sorted(_groups(details, cores, details.socket_of, "LeastAllocated"), key=lambda g: -len(g))
    picked: list[int] = []
    rest: list[list[tuple[int, ...]]] = []
    for group in sockets:
        size = sum(map(len, group))
        if size <= n - len(picked):
            picked.extend(c for core in group for c in core)
        else:
            rest.append(group)
    for group in sorted(rest, key=lambda g: (len(g), details.socket_of[g[0][0]])):
        for core in group:
            if len(picked) + len(core) > n:
                break
            picked.extend(core)
    return tuple(sorted(picked)) if len(picked) == n else None


def _first(cores: list[tuple[int, ...]], n: int) -> tuple[int, ...]:
    """The CPUs of the first cores of ``cores`` up to ``n`` CPUs (whole cores: n is a multiple of their size)."""
    out: list[int] = []
    for core in cores:
        if len(out) >= n:
            break
        out.extend(core)
    return tuple(sorted(out[:n]))


def _spread(details: CPUDetails, cpus: set[int], n: int, strategy: NUMAStrategy) -> tuple[int, ...]:
    for by, size in ((details.numa_of, details.cpus_per_numa), (details.socket_of, details.cpus_per_socket)):
        if n <= size:
            singles: list[tuple[int, ...]] = [(c,) for c in sorted(cpus)]  # single CPUs:: a group's size is its free CPUs
            for group in _groups(details, singles, by, strategy):
                if len(group) >= n:
                    return tuple(sorted(spread_order(details, {c for (c,) in group})[:n]))
    return tuple(sorted(spread_order(details, cpus)[:n]))


def take_cpus(details: CPUDetails, free: Iterable[int], held: Mapping[int, ExclusivePolicy], n: int,
              bind: BindPolicy = "FullPCPUs", exclusive: ExclusivePolicy = "None",
              strategy: NUMAStrategy = "MostAllocated", numa: Iterable[int] | None = None) -> tuple[int, ...] | None:
    """``n`` CPU ids (ascending) for a pod by the module doc's rules, or None when they cannot be found (fewer
    eligible CPUs than ``n``; for FullPCPUs too few whole free cores or ``n`` not a multiple of the threads per
    core). ``free`` are the node's unallocated CPUs, ``held`` CPU → exclusivity policy of the pods holding the
    others, ``numa`` the NUMA nodes allowed (None = all). Raises ValueError when ``n`` < 1."""
    if n < 1:
        raise ValueError(f"a cpuset needs at least 1 CPU, got {n}")
    cpus = eligible(details, free, held, exclusive, numa)
    if len(cpus) < n:
        return None
    if bind == "FullPCPUs" or details.threads_per_core == 1:
        return _full_pcpus(details, cpus, n, strategy)
    return _spread(details, cpus, n, strategy)
