"""Exclusive CPUs on whole cores across the node: :func:`take_cores` for LSE (exclusive) and LSR (reserved)
cpusets (REFERENCE.md §5 "CPU priority": LSE/LSR get exclusive or reserved cpusets).

The rules are the ``FullPCPUs`` bind policy of Koordinator's CPU accumulator (``nodenumaresource``
``takeCPUs``) and the Kubernetes CPU manager's static policy, applied to the whole node rather than one NUMA
node at a time. In order of importance:

1. **Whole physical cores first, anywhere on the node.** ``n`` CPUs use as few half cores (cores of which the
   pod gets some threads but not all) as the free CPUs allow: with t threads per core and W fully free cores,
   min(W, ⌊n/t⌋) whole cores, and the rest from as few other cores as possible.
2. **Compact.** Among the choices that are equal on (1): the fewest NUMA nodes, then the fewest sockets.
3. **Keep cores whole for others.** The odd CPUs come from cores that are already half taken before a fully
   free core is split.
4. **Best fit.** Then the NUMA nodes with the fewest free CPUs (that still hold the request), filled tightest
   first, so the larger free blocks stay whole for later requests; last, the lowest NUMA ids and CPU ids.

The NUMA nodes to use are found by trying every set of them of increasing size (a set of the N NUMA nodes is
examined at most once: 2^N sets, 16 on a 2-socket machine with 2 NUMA nodes per socket), so the result is the
best by the rules above, not a greedy approximation.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from itertools import combinations

from colo_node_agent.topology import CPUInfo, CPUTopology

NumaKey = tuple[int, int]
"""(NUMA node, socket) of a group of CPUs."""


@dataclass(frozen=True)
class NumaFree:
    """The free CPUs of one NUMA node: fully free cores and the free CPUs of half-taken cores (each a list of
    CPU ids, ascending; cores ordered by their lowest CPU)."""

    key: NumaKey
    whole: tuple[tuple[int, ...], ...]
    partial: tuple[tuple[int, ...], ...]

    @property
    def free(self) -> int:
        """Free CPUs in this NUMA node."""
        return sum(map(len, self.whole)) + sum(map(len, self.partial))


@dataclass(frozen=True)
class Selection:
    """CPUs chosen out of a set of NUMA nodes: ``half`` cores of which only some threads were taken, ``splits``
    fully free cores among them (broken up by this choice)."""

    cpus: tuple[int, ...]
    half: int
    splits: int


def numa_free(free: set[int], topo: CPUTopology) -> list[NumaFree]:
    """``free`` grouped by NUMA node (ascending keys). A core is whole when every thread the topology lists for
    it is free; CPUs missing from the topology count as cores of their own on NUMA node 0, socket 0."""
    info = topo.by_id()
    threads: dict[tuple[int, int], int] = defaultdict(int)
    for c in topo.cpus:
        threads[(c.socket, c.core)] += 1
    cores: dict[NumaKey, dict[tuple[int, int], list[int]]] = defaultdict(lambda: defaultdict(list))
    for cpu in sorted(free):
        i = info.get(cpu, CPUInfo(cpu, -1 - cpu))
        cores[(i.numa, i.socket)][(i.socket, i.core)].append(cpu)
    out = []
    for key in sorted(cores):
        groups = sorted(cores[key].items(), key=lambda kv: kv[1][0])
        whole = tuple(tuple(g) for core, g in groups if len(g) >= threads.get(core, 1))
        partial = tuple(tuple(g) for core, g in groups if len(g) < threads.get(core, 1))
        out.append(NumaFree(key, whole, partial))
    return out


def select(nodes: tuple[NumaFree, ...], n: int) -> Selection | None:
    """``n`` CPUs out of ``nodes`` by rules 1, 3 and 4 of the module doc, or None when they hold fewer.

    Nodes are filled tightest first (fewest free CPUs, then lowest key). Whole cores are taken while they fit in
    what is still needed; the rest comes from as few cores as possible: a half-taken core that covers it,
    else a fully free core split, else the half-taken core with the most free CPUs, repeated.
    """
    order = sorted(nodes, key=lambda m: (m.free, m.key))
    picked: list[int] = []
    need = n
    spare: list[tuple[int, ...]] = []
    for m in order:
        for core in m.whole:
            if len(core) <= need:
                picked.extend(core)
                need -= len(core)
            else:
                spare.append(core)
    rank = {m.key: r for r, m in enumerate(order)}
    pieces = sorted(((-len(p), rank[m.key], p[0], p) for m in order for p in m.partial))
    partial = [p for *_, p in pieces]
    half = splits = 0
    while need > 0:
        cover = [p for p in partial if len(p) >= need]
        if cover:
            piece = min(cover, key=len)
        elif spare:
            piece, splits = spare.pop(0), splits + 1
        elif partial:
            piece = partial[0]
        else:
            return None
        if piece in partial:
            partial.remove(piece)
        picked.extend(piece[:need])
        need -= min(len(piece), need)
        half += 1
    return Selection(tuple(sorted(picked)), half, splits)


def take_cores(free: set[int], n: int, topo: CPUTopology) -> tuple[int, ...] | None:
    """``n`` CPUs (ascending ids) out of ``free`` for an exclusive/reserved cpuset, chosen by the module doc's
    rules; None when ``n`` ≤ 0 or ``free`` has fewer than ``n`` CPUs (the caller reports the pod as not
    placed: it runs in the share pool)."""
    if n <= 0 or len(free) < n:
        return None
    nodes = numa_free(free, topo)
    everything = select(tuple(nodes), n)
    if everything is None:
        return None
    sizes = sorted((m.free for m in nodes), reverse=True)
    for count in range(1, len(nodes)):  # all of them is the fallback below
        if sum(sizes[:count]) < n:
            continue
        best: tuple[tuple[int, int, int, tuple[NumaKey, ...]], Selection] | None = None
        for subset in combinations(nodes, count):
            got = select(subset, n) if sum(m.free for m in subset) >= n else None
            if got is None or got.half > everything.half:
                continue
            key = (len({m.key[1] for m in subset}), got.splits, sum(m.free for m in subset),
                   tuple(m.key for m in subset))
            if best is None or key < best[0]:
                best = (key, got)
        if best is not None:
            return best[1].cpus
    return everything.cpus
