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

The NUMA nodes to use are found by trying the sets of them by increasing size (at most 2^N sets of N NUMA
nodes: 16 on a 2-socket machine with 2 NUMA nodes per socket), so the result is the best by the rules above, not
a greedy approximation; sets that cannot hold the request or span more sockets than the best so far are skipped
before CPUs are chosen in them (the answer is the same: ``test_take_cores_prunes_without_changing_the_answer``).
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


def _threads_per_core(topo: CPUTopology) -> dict[tuple[int, int], list[int]]:
    out: dict[tuple[int, int], list[int]] = defaultdict(list)
    for c in topo.cpus:
        out[(c.socket, c.core)].append(c.cpu)
    return out


def numa_free(free: set[int], topo: CPUTopology) -> list[NumaFree]:
    """``free`` grouped by NUMA node (ascending keys). A core is whole when every thread the topology lists for
    it is free; CPUs missing from the topology count as cores of their own on NUMA node 0, socket 0."""
    info = topo.by_id()
    threads = {core: len(cpus) for core, cpus in _threads_per_core(topo).items()}
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


def select(nodes: tuple[NumaFree, ...], n: int) -> Selection:
    """``n`` CPUs out of ``nodes`` by rules 1, 3 and 4 of the module doc. Raises ValueError when ``nodes`` hold
    fewer than ``n`` free CPUs.

    Nodes are filled tightest first (fewest free CPUs, then lowest key). Whole cores are taken while they fit in
    what is still needed, those with the most threads first (cores of unequal thread counts: hybrid CPUs, SMT
    siblings offline), then node by node; the rest comes from as few cores as possible: a half-taken core that covers it,
    else a fully free core split, else the half-taken core with the most free CPUs, repeated.
    """
    if sum(m.free for m in nodes) < n:
        raise ValueError(f"{n} CPUs wanted, {sum(m.free for m in nodes)} free in NUMA nodes "
                         f"{[m.key for m in nodes]}")
    order = sorted(nodes, key=lambda m: (m.free, m.key))
    rank = {m.key: r for r, m in enumerate(order)}
    picked: list[int] = []
    need = n
    spare: list[tuple[int, ...]] = []
    # the cores with the most threads first (cores of 2 threads before those of 1 on a hybrid CPU or with
    # SMT siblings offline: small cores taken first leave a 2-thread core to split), then node by node
    for *_, core in sorted((-len(c), rank[m.key], c[0], c) for m in order for c in m.whole):
        if len(core) <= need:
            picked.extend(core)
            need -= len(core)
        else:
            spare.append(core)
    rest = [p for *_, p in sorted((-len(p), rank[m.key], p[0], p) for m in order for p in m.partial)]
    half = splits = 0
    while need > 0:
        cover = [p for p in rest if len(p) >= need]
        if cover:
            piece = min(cover, key=len)
            rest.remove(piece)
        elif spare:
            piece = spare.pop(0)
            splits += 1
        else:
            piece = rest.pop(0)
        picked.extend(piece[:need])
        need -= min(len(piece), need)
        half += 1
    return Selection(tuple(sorted(picked)), half, splits)


def whole_cores_needed(nodes: list[NumaFree], n: int, topo: CPUTopology) -> int:
    """How many fully free cores any choice with the fewest half cores must hold: min(W, ⌊n/t⌋) when every core
    of ``topo`` has the same t ≤ 2 threads (each CPU beyond them then costs a half core of its own), else 0 (no
    bound: with more threads a half-taken core may hold several of the missing CPUs)."""
    threads = {len(g) for g in _threads_per_core(topo).values()}
    if len(threads) != 1 or max(threads) > 2:
        return 0
    t = threads.pop()
    return min(sum(len(m.whole) for m in nodes), n // t)


def take_cores(free: set[int], n: int, topo: CPUTopology) -> tuple[int, ...] | None:
    """``n`` CPUs (ascending ids) out of ``free`` for an exclusive/reserved cpuset, chosen by the module doc's
    rules; None when ``n`` ≤ 0 or ``free`` has fewer than ``n`` CPUs (the caller reports the pod as not
    placed: it runs in the share pool).

    Sets of NUMA nodes that cannot hold the free CPUs or the whole cores needed
    (:func:`whole_cores_needed`), or that span more sockets than the best set found so far, are skipped before
    CPUs are chosen in them.
    """
    if n <= 0 or len(free) < n:
        return None
    nodes = numa_free(free, topo)
    everything = select(tuple(nodes), n)
    need_whole = whole_cores_needed(nodes, n, topo)
    sizes = sorted((m.free for m in nodes), reverse=True)
    wholes = sorted((len(m.whole) for m in nodes), reverse=True)
    for count in range(1, len(nodes)):  # all of them is the fallback below
        if sum(sizes[:count]) < n or sum(wholes[:count]) < need_whole:
            continue
        best: tuple[tuple[int, int, int, tuple[NumaKey, ...]], Selection] | None = None
        for subset in combinations(nodes, count):
            sockets = len({m.key[1] for m in subset})
            if (best is not None and sockets > best[0][0]) or sum(m.free for m in subset) < n \
                    or sum(len(m.whole) for m in subset) < need_whole:
                continue
            got = select(subset, n)
            if got.half > everything.half:
                continue
            key = (sockets, got.splits, sum(m.free for m in subset), tuple(m.key for m in subset))
            if best is None or key < best[0]:
                best = (key, got)
        if best is not None:
            return best[1].cpus
    return everything.cpus
