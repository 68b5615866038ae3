"""The node agent applies the cpuset the scheduler chose (``PodBound.cpuset``, docs/topology.md) instead of
choosing its own, and keeps LS and BE pods off it; the registered topology reaches the sim and host backends."""

from __future__ import annotations

from pathlib import Path

import msgspec

from colo.messages import CPUSetStrategy, NodeSLO, NodeSpec, PodSpec, Resources, SimWorkload, smt_topology
from colo_node_agent.backends.host_qos import node_topology
from colo_node_agent.backends.sim import SimBackend, SimConfig
from colo_node_agent.cgroups.resources import cpuset_parse
from colo_node_agent.strategies.cpusets import CpusetPod, plan_cpusets
from colo_node_agent.topology import CPUTopology

TOPO = CPUTopology.smt(4, 2, 1)  # 8 CPUs: core c = CPUs c, c + 4
G = 10**9


def node(cores: int) -> NodeSpec:
    cap = Resources(cpu=cores * 1000, memory=64 * G, pods=110)
    return NodeSpec(name="n1", capacity=cap, allocatable=cap, cpus=cores)


def sim(slo: NodeSLO, n: NodeSpec) -> SimBackend:
    return SimBackend([n], SimConfig(sub_step_s=10.0), lambda name: msgspec.structs.replace(slo, node=name))


def pod(uid: str, qos: str, cpu: int, limit: int = 0) -> PodSpec:
    return PodSpec(uid=uid, name=uid, qos_class=qos, priority=9500,  # type: ignore[arg-type]
                   requests=Resources(cpu=cpu, memory=G), limits=Resources(cpu=limit, memory=2 * G if limit else 0),
                   sim=SimWorkload(kind="series", step_s=60, cpu_util=[1.0], cpu_scale_milli=cpu,
                                   memory_util=[1.0], memory_scale_bytes=G))


def be(uid: str) -> PodSpec:
    return PodSpec(uid=uid, name=uid, qos_class="BE", priority=5500,
                   requests=Resources(batch_cpu=1000, batch_memory=G // 10),
                   sim=SimWorkload(kind="batch", cpu_milli=4000, duration_s=10_000, memory_bytes=G // 10))


def cpus(b: SimBackend, path: str) -> set[int]:
    return set(cpuset_parse(b.fs[0].read(f"cpuset/{path}/cpuset.cpus")))


def test_the_scheduler_choice_wins_over_the_agent_choice() -> None:
    # the agent alone would pack cores 0 and 1 (0,1,4,5); the scheduler chose cores 2 and 3
    plan = plan_cpusets([CpusetPod("lse", "LSE", 4000, assigned=(2, 3, 6, 7)), CpusetPod("ls", "LS", 1000),
                         CpusetPod("be", "BE")], TOPO, (), CPUSetStrategy())
    assert plan.pods["lse"] == (2, 3, 6, 7)
    assert plan.share_pool == (0, 1, 4, 5) and plan.pods["ls"] == (0, 1, 4, 5)
    assert not set(plan.be_candidates) & {2, 3, 6, 7}
    assert not plan.problems


def test_an_assignment_that_does_not_fit_is_replaced_and_reported() -> None:
    cases = {"reserved CPU": (0, 4), "wrong count": (2, 6, 3), "off the node": (8, 9),
             "another pod's CPUs": (2, 6)}
    for why, assigned in cases.items():
        pods = [CpusetPod("a", "LSE", 2000, assigned=(2, 6)), CpusetPod("b", "LSR", len(assigned) * 1000 if why ==
                                                                        "wrong count" else 2000, assigned=assigned)]
        plan = plan_cpusets(pods, TOPO, (0,), CPUSetStrategy())
        assert plan.pods["a"] == (2, 6), why
        assert set(plan.pods["b"]).isdisjoint({0, 2, 6}) and len(plan.pods["b"]) == len(assigned), why
        assert any("assigned cpuset" in p for p in plan.problems), why


def test_sim_writes_the_assigned_cpuset_and_keeps_ls_and_be_off_it() -> None:
    n = node(8)
    b = sim(NodeSLO(node="n1", be_cpu_idle=False), n)
    assert b.start_pod(pod("lsr", "LSR", 2000, limit=2000), "n1", cpuset=(6, 7))
    assert b.start_pod(pod("ls", "LS", 1000), "n1")
    assert b.start_pod(be("b"), "n1")
    b.advance(60.0)
    assert cpus(b, "kubepods/podlsr") == {6, 7}
    assert cpus(b, "kubepods/burstable/podls") == set(range(6))
    # LSR CPUs are shared with BE when idle (REFERENCE.md §5); an LSE set never is
    assert b.start_pod(pod("lse", "LSE", 2000, limit=2000), "n1", cpuset=(0, 1))
    b.advance(120.0)
    assert cpus(b, "kubepods/podlse") == {0, 1}
    assert not cpus(b, "kubepods/besteffort") & {0, 1}
    assert not cpus(b, "kubepods/besteffort/podb") & {0, 1}
    assert cpus(b, "kubepods/burstable/podls") == set(range(2, 6))


def test_sim_takes_the_registered_topology() -> None:
    n = msgspec.structs.replace(node(8), topology=smt_topology(1, 4, 2, 1))
    b = sim(NodeSLO(node="n1"), n)
    assert b.topology[0] == CPUTopology.smt(4, 2, 1)
    assert sim(NodeSLO(node="n1"), node(8)).topology[0] == CPUTopology.flat(8)


def test_the_host_registers_the_sysfs_topology(tmp_path: Path) -> None:
    for cpu, (core, pkg) in enumerate([(0, 0), (1, 0), (0, 0), (1, 0)]):
        d = tmp_path / "cpu" / f"cpu{cpu}" / "topology"
        d.mkdir(parents=True)
        (d / "core_id").write_text(f"{core}\n")
        (d / "physical_package_id").write_text(f"{pkg}\n")
    (tmp_path / "cpu" / "online").write_text("0-3\n")
    (tmp_path / "node" / "node0").mkdir(parents=True)
    (tmp_path / "node" / "node0" / "cpulist").write_text("0-3\n")
    msg = node_topology((0, 1, 2, 3), tmp_path).message()
    assert msg.cores() == {(0, 0): [0, 2], (0, 1): [1, 3]}
    assert msg.numa_nodes() == {0: [0, 1, 2, 3]} and not msg.problems()
    assert CPUTopology.of(msg) == node_topology((0, 1, 2, 3), tmp_path)


def test_this_machines_topology_is_registered_whole() -> None:
    here = node_topology(tuple(range(len(list(Path("/sys/devices/system/cpu").glob("cpu[0-9]*"))))))
    msg = here.message()
    assert len(msg.cpus) == len(here.cpus) >= 1 and not msg.problems()
