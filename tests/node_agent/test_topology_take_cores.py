"""Exclusive CPUs on whole cores across the node (FullPCPUs semantics, docs/node-agent.md "LSE/LSR cpusets").

``take_cores`` prefers fully free physical cores anywhere on the node, then the NUMA nodes / sockets that keep
the allocation most compact (fewest NUMA nodes, then fewest sockets, then the tightest fit), and only then
half-free cores. The table rows are written from those rules on several topologies; the property checks every
answer on random topologies and taken sets.
"""

from __future__ import annotations

from itertools import combinations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from colo_node_agent.cpu_accumulator import numa_free, select, take_cores
from colo_node_agent.topology import CPUInfo, CPUTopology


def grid(sockets: int, numa_per_socket: int, cores_per_numa: int, threads: int, *,
         siblings_adjacent: bool = True) -> CPUTopology:
    """``sockets`` × ``numa_per_socket`` NUMA nodes × ``cores_per_numa`` cores × ``threads`` threads.

    ``siblings_adjacent``: CPU ``core × threads + t`` is thread ``t`` of the ``core``-th core of the node (as
    many AMD and Arm machines number them); else Linux's Intel numbering, CPU ``t × total_cores + core``.
    Core ids are unique within their socket; NUMA ids are global.
    """
    total = sockets * numa_per_socket * cores_per_numa
    out = []
    for g in range(total):
        numa = g // cores_per_numa
        socket = numa // numa_per_socket
        core = g % (numa_per_socket * cores_per_numa)
        for t in range(threads):
            cpu = g * threads + t if siblings_adjacent else t * total + g
            out.append(CPUInfo(cpu, core, socket, numa))
    return CPUTopology(tuple(sorted(out, key=lambda c: c.cpu)))


# 2 sockets × 2 NUMA × 2 cores × 2 threads, siblings adjacent: NUMA m holds CPUs 4m..4m+3, cores (4m, 4m+1)
# and (4m+2, 4m+3); NUMA 0-1 on socket 0, NUMA 2-3 on socket 1
G2 = grid(2, 2, 2, 2)
# 1 socket, 4 cores × 2 threads, Linux numbering: CPU c and c + 4 are siblings
HT1 = grid(1, 1, 4, 2, siblings_adjacent=False)
# 2 sockets × 4 cores, no hyper-threads: CPUs 0-3 on socket/NUMA 0, 4-7 on 1
NOHT = grid(2, 1, 4, 1)
# 2 sockets × 4 cores × 2 threads, Linux numbering: c and c + 8 siblings; 0-3, 8-11 on socket/NUMA 0
SMT2 = CPUTopology.smt(4, 2, 2)


def free_of(topo: CPUTopology, taken: set[int]) -> set[int]:
    return set(topo.ids()) - taken


@pytest.mark.parametrize(("topo", "taken", "n", "want"), [
    (G2, {0, 2, 4, 8, 12}, 4, (10, 11, 14, 15)),
    (G2, set(), 4, (0, 1, 2, 3)),
    (G2, {0}, 2, (2, 3)),
    (G2, {0}, 4, (4, 5, 6, 7)),
    (G2, set(), 8, (0, 1, 2, 3, 4, 5, 6, 7)),
    (G2, {4, 8}, 6, (0, 1, 2, 3, 6, 7)),
    (G2, {0, 1, 4, 5, 9, 13}, 4, (2, 3, 6, 7)),
    (G2, {0, 2, 4, 6, 8, 10, 12, 14}, 3, (1, 3, 5)),
    (HT1, set(), 1, (0,)),
    (HT1, {0}, 1, (4,)),
    (HT1, {0}, 2, (1, 5)),
    (HT1, {0}, 3, (1, 4, 5)),
    (HT1, {0, 1, 2}, 4, (3, 4, 5, 7)),
    (HT1, set(), 8, tuple(range(8))),
    (NOHT, {0}, 3, (1, 2, 3)),
    (NOHT, {0}, 4, (4, 5, 6, 7)),
    (NOHT, {0, 4}, 5, (1, 2, 3, 5, 6)),
    (SMT2, set(range(16)), 4, (0, 1, 8, 9)),
    (SMT2, set(range(16)), 3, (0, 1, 8)),
    (SMT2, {2, 3, 10} | set(range(4, 8)) | set(range(12, 16)), 2, (2, 10)),
    (SMT2, set(range(16)), 10, (0, 1, 2, 3, 4, 8, 9, 10, 11, 12)),
    (SMT2, set(range(16)) - {0, 1, 2, 3}, 4, (4, 5, 12, 13)),
], ids=["observed-whole-cores-on-one-socket-not-half-cores", "whole-numa-node", "best-fit-numa-node",
        "best-fit-skips-a-numa-node-too-small", "whole-socket", "fewest-numa-then-fewest-sockets",
        "whole-cores-in-two-numa-of-one-socket", "only-half-cores-left",
        "one-cpu-empty-node", "one-cpu-fills-a-half-free-core", "two-cpus-one-whole-core", "odd-whole-core-plus-sibling",
        "whole-cores-run-out-then-half-cores", "whole-node",
        "no-ht-best-fit", "no-ht-whole-numa", "no-ht-spills-to-a-second-node",
        "smt-whole-cores-one-node", "smt-odd-leaves-a-sibling", "smt-best-fit-node", "smt-spills-to-second-node",
        "smt-best-fit-never-at-the-cost-of-half-cores"])
def test_take_cores(topo: CPUTopology, taken: set[int], n: int, want: tuple[int, ...]) -> None:
    if topo is SMT2:  # these rows list the free CPUs, not the taken ones
        taken = set(topo.ids()) - taken
    assert take_cores(free_of(topo, taken), n, topo) == tuple(sorted(want))


@pytest.mark.parametrize(("topo", "taken", "n"), [
    (SMT2, set(range(16)) - {1, 2}, 3), (G2, set(), 17), (HT1, {0}, 8), (NOHT, set(), 0)],
    ids=["more-than-free", "more-than-the-node", "one-short", "nothing-asked"])
def test_take_cores_refuses(topo: CPUTopology, taken: set[int], n: int) -> None:
    assert take_cores(free_of(topo, taken), n, topo) is None


def half_cores(cpus: tuple[int, ...], topo: CPUTopology) -> int:
    """Cores of which ``cpus`` hold some but not all threads."""
    info = topo.by_id()
    size: dict[tuple[int, int], int] = {}
    for c in topo.cpus:
        size[(c.socket, c.core)] = size.get((c.socket, c.core), 0) + 1
    held: dict[tuple[int, int], int] = {}
    for cpu in cpus:
        key = (info[cpu].socket, info[cpu].core)
        held[key] = held.get(key, 0) + 1
    return sum(1 for k, h in held.items() if h < size[k])


@st.composite
def cases(draw: st.DrawFn) -> tuple[CPUTopology, set[int], int]:
    topo = grid(draw(st.integers(1, 2)), draw(st.integers(1, 2)), draw(st.integers(1, 3)), draw(st.integers(1, 2)),
                siblings_adjacent=draw(st.booleans()))
    ids = topo.ids()
    taken = set(draw(st.lists(st.sampled_from(ids), max_size=len(ids))))
    return topo, taken, draw(st.integers(1, len(ids)))


@settings(max_examples=300, deadline=None)
@given(cases())
def test_take_cores_property(case: tuple[CPUTopology, set[int], int]) -> None:
    """Size n, only free CPUs, no duplicates, and no more half cores than necessary: with t threads per core
    and W fully free cores, min(W, n // t) whole cores can be taken and every other CPU needs a core of its own
    when t = 2 (when t = 1 no core is ever half taken)."""
    topo, taken, n = case
    free = free_of(topo, taken)
    got = take_cores(free, n, topo)
    if n > len(free):
        assert got is None
        return
    assert got is not None
    assert len(got) == len(set(got)) == n
    assert set(got) <= free
    threads = len(topo.cpus) // len({(c.socket, c.core) for c in topo.cpus})
    info = topo.by_id()
    whole = {(c.socket, c.core) for c in topo.cpus} - {(info[c].socket, info[c].core) for c in taken}
    assert half_cores(got, topo) == n - threads * min(len(whole), n // threads)


def test_select_refuses_nodes_without_enough_cpus() -> None:
    with pytest.raises(ValueError, match="3 CPUs wanted, 2 free"):
        select(tuple(numa_free({1, 2}, SMT2)), 3)


def unpruned(free: set[int], n: int, topo: CPUTopology) -> tuple[int, ...]:
    """The rules by brute force: every set of NUMA nodes, keyed by (half cores, NUMA nodes, sockets, split cores,
    free CPUs, NUMA keys); the CPUs chosen within a set by :func:`select`."""
    nodes = numa_free(free, topo)
    best = None
    for count in range(1, len(nodes) + 1):
        for subset in combinations(nodes, count):
            if sum(m.free for m in subset) < n:
                continue
            got = select(subset, n)
            key = (got.half, count, len({m.key[1] for m in subset}), got.splits, sum(m.free for m in subset),
                   tuple(m.key for m in subset))
            if best is None or key < best[0]:
                best = (key, got.cpus)
    assert best is not None
    return best[1]


@st.composite
def bigger_cases(draw: st.DrawFn) -> tuple[CPUTopology, set[int], int]:
    topo = grid(draw(st.integers(1, 4)), draw(st.integers(1, 2)), draw(st.integers(1, 4)), draw(st.integers(1, 2)),
                siblings_adjacent=draw(st.booleans()))
    ids = topo.ids()
    taken = set(draw(st.lists(st.sampled_from(ids), max_size=len(ids))))
    free = set(ids) - taken
    return topo, taken, draw(st.integers(1, max(len(free), 1)))


@settings(max_examples=200, deadline=None)
@given(bigger_cases())
def test_take_cores_prunes_without_changing_the_answer(case: tuple[CPUTopology, set[int], int]) -> None:
    topo, taken, n = case
    free = free_of(topo, taken)
    if n > len(free):
        assert take_cores(free, n, topo) is None
    else:
        assert take_cores(free, n, topo) == unpruned(free, n, topo)
