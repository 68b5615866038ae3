"""Whole cores first when cores have different thread counts (hybrid CPUs, SMT siblings offline).

``take_cores`` (colo_node_agent/cpu_accumulator.py) took a node's fully free cores in CPU order, each while it
fit. On a hybrid CPU (performance cores with 2 threads, efficiency cores with 1) or a machine with some SMT
siblings offline, a 1-thread core taken first left a 2-thread core to split: 2 CPUs out of a free 1-thread core
and a free 2-thread core came as one CPU of each — a half core shared with the next pod — although the 2-thread
core alone was the answer. The rules (fewest half cores, then fewest NUMA nodes) are checked against a brute
force over every choice of CPUs on random small mixed topologies.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from colo_node_agent.cpu_accumulator import take_cores
from colo_node_agent.topology import CPUInfo, CPUTopology


def half_cores(cpus: tuple[int, ...], topo: CPUTopology) -> int:
    """Cores of which ``cpus`` hold some but not all threads."""
    size: dict[tuple[int, int], int] = {}
    for c in topo.cpus:
        size[(c.socket, c.core)] = size.get((c.socket, c.core), 0) + 1
    info = topo.by_id()
    held: dict[tuple[int, int], int] = {}
    for cpu in cpus:
        key = (info[cpu].socket, info[cpu].core)
        held[key] = held.get(key, 0) + 1
    return sum(1 for k, h in held.items() if h < size[k])


def topology(*numa_cores: tuple[int, ...]) -> CPUTopology:
    """NUMA node i (socket i) holds cores with the given thread counts; CPU ids in order, core ids per node."""
    cpus: list[CPUInfo] = []
    for numa, cores in enumerate(numa_cores):
        for core, threads in enumerate(cores):
            cpus += [CPUInfo(len(cpus) + t, core, numa, numa) for t in range(threads)]
    return CPUTopology(tuple(cpus))


@dataclass(frozen=True)
class Case:
    name: str
    topo: CPUTopology
    taken: frozenset[int]
    n: int
    want: tuple[int, ...]


CASES = [
    # CPU 0: a 1-thread core; CPUs 1, 2: a 2-thread core
    Case("e-core-before-p-core", topology((1, 2)), frozenset(), 2, (1, 2)),
    # 1-thread cores 0 and 1, a 2-thread core 2, 3: 3 CPUs = the 2-thread core + one 1-thread core
    Case("p-core-plus-one-e-core", topology((1, 1, 2)), frozenset(), 3, (0, 2, 3)),
    # node 0: a 2-thread core (0, 1); node 1: a 1-thread core 2, a half-taken core (3 taken, 4 free), a
    # 2-thread core (5, 6): 4 CPUs on whole cores exist only across both nodes
    Case("whole-cores-across-nodes-beat-one-node", topology((2,), (1, 2, 2)), frozenset({3}), 4, (0, 1, 5, 6)),
    # node 0: one 1-thread core; node 1: 1-thread core 1, 2-thread core 2, 3: one node does it on whole cores
    Case("one-node-on-whole-cores", topology((1,), (1, 2)), frozenset(), 3, (1, 2, 3)),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_take_cores_mixed_threads(case: Case) -> None:
    free = {c.cpu for c in case.topo.cpus} - case.taken
    got = take_cores(free, case.n, case.topo)
    assert got == case.want
    assert half_cores(got, case.topo) == 0


@st.composite
def mixed(draw: st.DrawFn) -> tuple[CPUTopology, set[int], int]:
    nodes = draw(st.lists(st.lists(st.sampled_from((1, 2)), min_size=1, max_size=3), min_size=1, max_size=3))
    topo = topology(*(tuple(n) for n in nodes))
    ids = [c.cpu for c in topo.cpus]
    taken = set(draw(st.lists(st.sampled_from(ids), max_size=len(ids) // 2)))
    free = set(ids) - taken
    return topo, free, draw(st.integers(1, max(len(free), 1)))


@settings(max_examples=400, deadline=None)
@given(mixed())
def test_take_cores_mixed_threads_against_brute_force(case: tuple[CPUTopology, set[int], int]) -> None:
    topo, free, n = case
    got = take_cores(free, n, topo)
    if n > len(free):
        assert got is None
        return
    assert got is not None and len(set(got)) == n and set(got) <= free
    numa = {c.cpu: c.numa for c in topo.cpus}

    def rank(cpus: tuple[int, ...]) -> tuple[int, int]:
        return half_cores(cpus, topo), len({numa[c] for c in cpus})

    assert rank(got) == min(rank(s) for s in combinations(sorted(free), n))
