"""NUMA topology policy of NodeNUMAResource (Kubernetes topology manager policies, as Koordinator's
``nodenumaresource`` applies them in its Filter; docs/topology.md "NUMA topology policy").

:func:`numa_choice` gives the NUMA nodes a pod's CPUs must come from, or None when the policy rejects the node:

* ``None`` — any CPUs of the node (no NUMA constraint).
* ``SingleNUMANode`` — one NUMA node that holds the request (rejected when none does).
* ``Restricted`` — the narrowest possible set: as many NUMA nodes as the request needs by their sizes (the
  kubelet's "preferred" hint width); rejected when no set of that width holds it now.
* ``BestEffort`` — the narrowest set that holds it, else any CPUs of the node.

"Holds" counts the CPUs the bind policy could use: for FullPCPUs the CPUs of whole free cores. Among sets of
the same width the accumulator's strategy decides: ``MostAllocated`` the set with the fewest such CPUs (best
fit), ``LeastAllocated`` the most; ties by the lowest NUMA ids.
"""

from __future__ import annotations

from itertools import combinations
from typing import Literal

from colo_scheduler.plugins.nodenumaresource.accumulator import (
    BindPolicy,
    CPUDetails,
    NUMAStrategy,
    whole_core_cpus,
)

NUMATopologyPolicy = Literal["None", "BestEffort", "Restricted", "SingleNUMANode"]
"""Kubernetes topology manager policies (Koordinator label ``node.koordinator.sh/numa-topology-policy``)."""

NUMA_POLICIES: tuple[NUMATopologyPolicy, ...] = ("None", "BestEffort", "Restricted", "SingleNUMANode")

MAX_NUMA_SETS = 4096
"""Sets of NUMA nodes tried at most per width (machines have at most 16 NUMA nodes in practice: C(16, 8) =
12870 is cut at this; the narrowest widths, tried first, are small)."""


def usable_per_numa(details: CPUDetails, cpus: set[int], bind: BindPolicy) -> dict[int, int]:
    """NUMA id → how many of ``cpus`` the bind policy can use there (FullPCPUs on hyper-threaded nodes: CPUs of
    whole cores only)."""
    out = {m: 0 for m in details.numa_ids}
    if bind == "FullPCPUs" and details.threads_per_core > 1:
        for core in whole_core_cpus(details, cpus):
            out[details.numa_of[core[0]]] += len(core)
    else:
        for c in cpus:
            out[details.numa_of[c]] += 1
    return out


def min_width(details: CPUDetails, n: int) -> int:
    """Fewest NUMA nodes whose sizes add up to ``n`` CPUs (the kubelet's preferred hint width); the number of
    NUMA nodes when even all of them are too small."""
    sizes = sorted((sum(1 for c in details.numa_of.values() if c == m) for m in details.numa_ids), reverse=True)
    total = 0
    for k, s in enumerate(sizes, 1):
        total += s
        if total >= n:
            return k
    return len(sizes)


def narrowest(usable: dict[int, int], n: int, strategy: NUMAStrategy,
              max_width: int | None = None) -> tuple[int, ...] | None:
    """The narrowest set of NUMA nodes whose ``usable`` CPUs add up to ``n`` (strategy order within a width),
    at most ``max_width`` wide; None when none is."""
    ids = sorted(usable)
    top = len(ids) if max_width is None else min(max_width, len(ids))
    sign = 1 if strategy == "MostAllocated" else -1
    largest = sorted(usable.values(), reverse=True)
    for width in range(1, top + 1):
        if sum(largest[:width]) < n:
            continue
        best: tuple[int, tuple[int, ...]] | None = None
        for tried, subset in enumerate(combinations(ids, width)):
            if tried >= MAX_NUMA_SETS:
                break
            total = sum(usable[m] for m in subset)
            if total >= n and (best is None or (sign * total, subset) < best):
                best = (sign * total, subset)
        if best is not None:
            return best[1]
    return None


def numa_choice(details: CPUDetails, cpus: set[int], n: int, bind: BindPolicy, policy: NUMATopologyPolicy,
                strategy: NUMAStrategy = "MostAllocated") -> tuple[tuple[int, ...] | None, str]:
    """(NUMA nodes to take ``n`` CPUs from — None = any —, reason) for eligible ``cpus`` under ``policy``; the
    reason is empty when the node passes and says why otherwise (the first element is then None too)."""
    if policy == "None":
        return None, ""
    usable = usable_per_numa(details, cpus, bind)
    if policy == "SingleNUMANode":
        got = narrowest(usable, n, strategy, 1)
        return (got, "") if got else (None, f"NUMA policy SingleNUMANode: no NUMA node has {n} free CPUs")
    width = min_width(details, n)
    got = narrowest(usable, n, strategy, width)
    if got is not None:
        return got, ""
    if policy == "Restricted":
        return None, f"NUMA policy Restricted: no {width} NUMA node(s) have {n} free CPUs"
    return None, ""
