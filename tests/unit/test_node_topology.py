"""Node topology messages and their sources in simulation: the cpuset list format, ``smt_topology``, the
documented default topology and GPUs of alibaba-gpu-v2023 nodes, and the example nodes files
(docs/topology.md "Sources")."""

from __future__ import annotations

from pathlib import Path

import pytest

from colo import codec
from colo.messages import CPUInfo, NodeSpec, NodeTopology, cpuset_format, cpuset_parse, smt_topology
from colo.sim.node_topology import GIB, default_topology, trace_gpus

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize(("text", "cpus"), [("", ()), ("0-3,8", (0, 1, 2, 3, 8)), ("5", (5,)), ("1,0,1", (0, 1))])
def test_cpuset_round_trip(text: str, cpus: tuple[int, ...]) -> None:
    assert cpuset_parse(text) == cpus
    assert cpuset_parse(cpuset_format(cpus)) == cpus


@pytest.mark.parametrize("bad", ["a", "3-1", "-1", "1-"])
def test_cpuset_parse_refuses_garbage(bad: str) -> None:
    with pytest.raises(ValueError):
        cpuset_parse(bad)


def test_smt_topology_shapes() -> None:
    t = smt_topology(2, 4, 2, 2)
    assert len(t.cpus) == 16 and t.threads_per_core() == 2
    assert t.sockets() == {0: [0, 1, 2, 3, 8, 9, 10, 11], 1: [4, 5, 6, 7, 12, 13, 14, 15]}
    assert t.numa_nodes()[1] == [2, 3, 10, 11] and t.cores()[(1, 0)] == [4, 12]
    assert not t.problems()
    with pytest.raises(ValueError, match="do not divide"):
        smt_topology(1, 3, 2, 2)


def test_topology_problems_are_listed_with_paths() -> None:
    bad = NodeTopology(cpus=[CPUInfo(cpu=0, core=0), CPUInfo(cpu=0, core=1), CPUInfo(cpu=1, core=0, numa=1)])
    assert bad.problems("node.topology") == ["node.topology.cpus[1]: duplicate cpu 0",
                                             "node.topology.cpus[2]: core 0 of socket 0 is on NUMA nodes 0 and 1"]


@pytest.mark.parametrize(("cpu_milli", "sockets", "threads", "cores"),
                         [(96000, 2, 2, 48), (82000, 1, 2, 41), (8000, 2, 2, 4), (3000, 1, 1, 3), (500, 0, 1, 0)])
def test_default_topology(cpu_milli: int, sockets: int, threads: int, cores: int) -> None:
    t = default_topology(cpu_milli)
    assert len(t.cpus) == cpu_milli // 1000
    assert (len(t.sockets()), t.threads_per_core(), len(t.cores())) == (sockets, threads, cores)
    assert not t.problems()


def test_trace_gpus() -> None:
    assert [g.memory_bytes for g in trace_gpus(2, "V100M32")] == [32 * GIB] * 2
    assert [(g.index, g.model) for g in trace_gpus(2, "T4")] == [(0, "T4"), (1, "T4")]
    assert trace_gpus(1, "G2")[0].memory_bytes == 16 * GIB and trace_gpus(0, "") == []


@pytest.mark.parametrize("name", ["nodes-a.json", "nodes-b.json"])
def test_example_nodes_carry_a_whole_topology(name: str) -> None:
    for spec in codec.decode((EXAMPLES / name).read_bytes(), list[NodeSpec]):
        assert len(spec.topology.cpus) == spec.cpus and not spec.topology.problems(), spec.name
