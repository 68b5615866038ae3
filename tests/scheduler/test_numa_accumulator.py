"""Table tests of NodeNUMAResource's CPU accumulator and NUMA topology policy (docs/topology.md; semantics of
REFERENCE.md §5 "CPU priority" and Koordinator's ``nodenumaresource`` ``takeCPUs``; our own cases).

Topologies (Linux numbering: CPU t × cores + c is thread t of core c):

* ``2s4c2t``: 2 sockets × 4 cores × 2 threads, one NUMA node per socket — NUMA 0 = 0-3,8-11, NUMA 1 = 4-7,12-15.
* ``1s8c2t2n``: 1 socket × 8 cores × 2 threads, two NUMA nodes — NUMA 0 = 0-3,8-11, NUMA 1 = 4-7,12-15.
* ``2s4c1t``: 2 sockets × 4 cores, no hyper-threads — NUMA 0 = 0-3, NUMA 1 = 4-7.
"""

from __future__ import annotations

from typing import NamedTuple

import pytest

from colo.messages import cpuset_format, cpuset_parse, smt_topology
from colo_scheduler.plugins.nodenumaresource.accumulator import (
    CPUDetails,
    ExclusivePolicy,
    eligible,
    take_cpus,
)
from colo_scheduler.plugins.nodenumaresource.hints import min_width, numa_choice

TOPOLOGIES = {
    "2s4c2t": CPUDetails.of(smt_topology(2, 4, 2, 1)),
    "1s8c2t2n": CPUDetails.of(smt_topology(1, 8, 2, 2)),
    "2s4c1t": CPUDetails.of(smt_topology(2, 4, 1, 1)),
}


class Case(NamedTuple):
    topology: str
    held: dict[str, ExclusivePolicy]  # cpuset → exclusivity of its holder
    n: int
    bind: str
    exclusive: str
    strategy: str
    numa: tuple[int, ...] | None
    want: str | None  # cpuset, None = cannot be met


ACCUMULATOR_CASES = {
    "full: 2 CPUs = one whole core, lowest NUMA on a tie": Case("2s4c2t", {}, 2, "FullPCPUs", "None",
                                                                "MostAllocated", None, "0,8"),
    "full: 4 CPUs = two whole cores of one NUMA node": Case("2s4c2t", {}, 4, "FullPCPUs", "None",
                                                            "MostAllocated", None, "0-1,8-9"),
    "full: MostAllocated fills the fuller NUMA node": Case("2s4c2t", {"0,8": "None"}, 4, "FullPCPUs", "None",
                                                           "MostAllocated", None, "1-2,9-10"),
    "full: LeastAllocated takes the emptier NUMA node": Case("2s4c2t", {"0,8": "None"}, 4, "FullPCPUs", "None",
                                                             "LeastAllocated", None, "4-5,12-13"),
    "full: a whole NUMA node when it is exactly free": Case("2s4c2t", {"4-5,12-13": "None"}, 8, "FullPCPUs",
                                                            "None", "MostAllocated", None, "0-3,8-11"),
    "full: more than a socket = a whole socket + a core": Case("2s4c2t", {}, 10, "FullPCPUs", "None",
                                                               "MostAllocated", None, "0-4,8-12"),
    "full: no NUMA node holds it: whole sockets, then the rest": Case("2s4c2t", {"0": "None", "4": "None"}, 8,
                                                                      "FullPCPUs", "None", "MostAllocated", None,
                                                                      "1-3,5,9-11,13"),
    "full: half-taken cores are never used": Case("2s4c2t", {"0": "None"}, 2, "FullPCPUs", "None",
                                                  "MostAllocated", None, "1,9"),
    "full: odd count on 2 threads per core = SMT alignment error": Case("2s4c2t", {}, 3, "FullPCPUs", "None",
                                                                        "MostAllocated", None, None),
    "full: too few whole cores left": Case("2s4c2t", {"0-3,4-7": "None"}, 2, "FullPCPUs", "None",
                                           "MostAllocated", None, None),
    "full: restricted to NUMA 1": Case("1s8c2t2n", {}, 2, "FullPCPUs", "None", "MostAllocated", (1,), "4,12"),
    "full: no hyper-threads, any count": Case("2s4c1t", {}, 3, "FullPCPUs", "None", "MostAllocated", None, "0-2"),
    "spread: one CPU per core in one NUMA node": Case("2s4c2t", {}, 3, "SpreadByPCPUs", "None", "MostAllocated",
                                                      None, "0-2"),
    "spread: 6 CPUs = 4 cores' first threads, then 2 siblings": Case("2s4c2t", {}, 6, "SpreadByPCPUs", "None",
                                                                     "MostAllocated", None, "0-3,8-9"),
    "spread: a half-taken core's free thread counts as a core": Case("2s4c2t", {"0": "None"}, 4, "SpreadByPCPUs",
                                                                     "None", "MostAllocated", None, "1-3,8"),
    "spread: no hyper-threads = full cores": Case("2s4c1t", {}, 3, "SpreadByPCPUs", "None", "MostAllocated", None,
                                                  "0-2"),
    "spread: more than a socket, over the node": Case("2s4c2t", {}, 10, "SpreadByPCPUs", "None", "MostAllocated",
                                                      None, "0-9"),
    "pcpu: a PCPULevel holder's sibling is off limits": Case("2s4c2t", {"0": "PCPULevel"}, 4, "SpreadByPCPUs",
                                                             "PCPULevel", "MostAllocated", None, "1-3,9"),
    "pcpu: a non-exclusive holder's sibling may be taken": Case("2s4c2t", {"0": "None"}, 4, "SpreadByPCPUs",
                                                                "PCPULevel", "MostAllocated", None, "1-3,8"),
    "pcpu: the pod without the policy ignores it": Case("2s4c2t", {"0": "PCPULevel"}, 4, "SpreadByPCPUs", "None",
                                                        "MostAllocated", None, "1-3,8"),
    "numa: a NUMANodeLevel holder's NUMA node is off limits": Case("2s4c2t", {"0,8": "NUMANodeLevel"}, 2,
                                                                   "FullPCPUs", "NUMANodeLevel", "MostAllocated",
                                                                   None, "4,12"),
    "numa: only NUMANodeLevel holders block": Case("2s4c2t", {"0,8": "PCPULevel"}, 2, "FullPCPUs", "NUMANodeLevel",
                                                   "MostAllocated", None, "1,9"),
    "numa: both NUMA nodes blocked": Case("2s4c2t", {"0": "NUMANodeLevel", "4": "NUMANodeLevel"}, 2, "FullPCPUs",
                                          "NUMANodeLevel", "MostAllocated", None, None),
}


def _held(case: Case) -> dict[int, ExclusivePolicy]:
    return {c: policy for text, policy in case.held.items() for c in cpuset_parse(text)}


@pytest.mark.parametrize("case", ACCUMULATOR_CASES.values(), ids=ACCUMULATOR_CASES.keys())
def test_take_cpus(case: Case) -> None:
    details = TOPOLOGIES[case.topology]
    held = _held(case)
    free = set(details.cpus) - held.keys()
    got = take_cpus(details, free, held, case.n, case.bind, case.exclusive, case.strategy,  # type: ignore[arg-type]
                    case.numa)
    assert (cpuset_format(got) if got is not None else None) == case.want


class HintCase(NamedTuple):
    topology: str
    held: str
    n: int
    bind: str
    policy: str
    want: tuple[int, ...] | None
    rejected: bool


NUMA_POLICY_CASES = {
    "None: no constraint": HintCase("1s8c2t2n", "", 4, "FullPCPUs", "None", None, False),
    "SingleNUMANode: the fuller NUMA node that holds it": HintCase("1s8c2t2n", "0,8", 4, "FullPCPUs",
                                                                   "SingleNUMANode", (0,), False),
    "SingleNUMANode: counts whole cores for FullPCPUs": HintCase("1s8c2t2n", "0-2,4-6", 4, "FullPCPUs",
                                                                 "SingleNUMANode", None, True),
    "SingleNUMANode: counts single CPUs for SpreadByPCPUs": HintCase("1s8c2t2n", "0-2,4-6", 4, "SpreadByPCPUs",
                                                                     "SingleNUMANode", (0,), False),
    "SingleNUMANode: larger than any NUMA node": HintCase("1s8c2t2n", "", 10, "FullPCPUs", "SingleNUMANode",
                                                          None, True),
    "Restricted: two NUMA nodes when it needs two": HintCase("1s8c2t2n", "", 10, "FullPCPUs", "Restricted",
                                                             (0, 1), False),
    "Restricted: one NUMA node when one would do": HintCase("1s8c2t2n", "0,8,4,12", 8, "FullPCPUs", "Restricted",
                                                            None, True),
    "BestEffort: the narrowest set when there is one": HintCase("1s8c2t2n", "0,8", 4, "FullPCPUs", "BestEffort",
                                                                (0,), False),
    "BestEffort: anywhere when none fits": HintCase("1s8c2t2n", "0,8,4,12", 8, "FullPCPUs", "BestEffort", None,
                                                    False),
}


@pytest.mark.parametrize("case", NUMA_POLICY_CASES.values(), ids=NUMA_POLICY_CASES.keys())
def test_numa_choice(case: HintCase) -> None:
    details = TOPOLOGIES[case.topology]
    cpus = eligible(details, set(details.cpus) - set(cpuset_parse(case.held)), {}, "None")
    got, why = numa_choice(details, cpus, case.n, case.bind, case.policy)  # type: ignore[arg-type]
    assert (got, bool(why)) == (case.want, case.rejected), why


def test_min_width_is_the_kubelet_preferred_width() -> None:
    details = TOPOLOGIES["1s8c2t2n"]
    assert [min_width(details, n) for n in (1, 8, 9, 16, 17)] == [1, 1, 2, 2, 2]


def test_take_cpus_refuses_an_empty_request() -> None:
    with pytest.raises(ValueError, match="at least 1 CPU"):
        take_cpus(TOPOLOGIES["2s4c1t"], set(range(8)), {}, 0)
