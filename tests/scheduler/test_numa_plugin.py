"""NodeNUMAResource in the scheduler core: cpusets chosen at Reserve, knobs read from pods and nodes, and the
cpuset invariants (hypothesis): exclusive sets disjoint and never empty, exclusivity and NUMA policy honoured,
released with the pod; an adopted pod books exactly its stored cpuset (docs/topology.md)."""

from __future__ import annotations

import json

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st
from sched_helpers import GI

from colo.messages import (
    NodeSpec,
    NodeTopology,
    PodSpec,
    Resources,
    cpuset_format,
    cpuset_parse,
    smt_topology,
)
from colo_scheduler.core import Scheduler
from colo_scheduler.framework.interface import CycleState
from colo_scheduler.plugins.nodenumaresource import NodeNUMAResource
from colo_scheduler.plugins.nodenumaresource.knobs import NODE_NUMA_TOPOLOGY_POLICY, RESOURCE_SPEC
from colo_scheduler.podinfo import ASSIGNED_CPUSET
from colo_scheduler.settings import SchedulerSettings


def numa_node(name: str, topo: NodeTopology, labels: dict[str, str] | None = None) -> NodeSpec:
    r = Resources(cpu=len(topo.cpus) * 1000, memory=256 * GI, pods=110)
    return NodeSpec(name=name, capacity=r, allocatable=r, topology=topo, labels=labels or {})


def lse(uid: str, cores: int, qos: str = "LSE", spec: dict[str, str] | None = None) -> PodSpec:
    r = Resources(cpu=cores * 1000, memory=GI)
    return PodSpec(uid=uid, name=uid, qos_class=qos, priority_class="prod", requests=r, limits=r,  # type: ignore[arg-type]
                   annotations={RESOURCE_SPEC: json.dumps(spec)} if spec else {})


def plugin(core: Scheduler) -> NodeNUMAResource:
    p = core.framework.profile.plugins["NodeNUMAResource"]
    assert isinstance(p, NodeNUMAResource)
    return p


def place(core: Scheduler, *pods: PodSpec, now: float = 1.0) -> dict[str, str]:
    for p in pods:
        core.add_pod(p, now)
    out = core.schedule_cycle(now)
    return {p.pod.uid: f"{p.node}:{p.pod.extra.get(ASSIGNED_CPUSET, '')}" for p in out.placements}


def test_lse_pods_get_disjoint_whole_cores_and_ls_pods_none() -> None:
    core = Scheduler(SchedulerSettings(seed=1))
    core.on_node(numa_node("n1", smt_topology(2, 4, 2, 1)), 0.0)
    ls = PodSpec(uid="ls", name="ls", requests=Resources(cpu=2000, memory=GI))
    got = place(core, lse("a", 2), lse("b", 4, "LSR"), ls)
    assert got == {"a": "n1:0,8", "b": "n1:1-2,9-10", "ls": "n1:"}


def test_pod_and_node_knobs() -> None:
    core = Scheduler(SchedulerSettings(seed=1))
    core.on_node(numa_node("n1", smt_topology(2, 4, 2, 1)), 0.0)
    assert place(core, lse("s", 3, spec={"preferredCPUBindPolicy": "SpreadByPCPUs"})) == {"s": "n1:0-2"}
    failures = [f for f in (core.add_pod(lse("odd", 3), 2.0), core.schedule_cycle(2.0))[1].failures]
    assert failures and "SMT alignment" in failures[0].result.message


def test_malformed_resource_spec_is_refused_with_every_problem() -> None:
    core = Scheduler(SchedulerSettings(seed=1))
    core.on_node(numa_node("n1", smt_topology(1, 4, 2, 1)), 0.0)
    core.add_pod(lse("bad", 2, spec={"preferredCPUBindPolicy": "Tight", "preferredCPUExclusivePolicy": "Core"}), 1.0)
    out = core.schedule_cycle(1.0)
    msg = out.failures[0].result.message
    assert "preferredCPUBindPolicy: 'Tight'" in msg and "preferredCPUExclusivePolicy: 'Core'" in msg


def test_single_numa_node_policy_filters_and_score_prefers_a_numa_fit() -> None:
    core = Scheduler(SchedulerSettings(seed=1))
    single = {NODE_NUMA_TOPOLOGY_POLICY: "SingleNUMANode"}
    spread = {"preferredCPUBindPolicy": "SpreadByPCPUs"}
    core.on_node(numa_node("strict", smt_topology(1, 8, 2, 2), single), 0.0)  # NUMA nodes of 8 CPUs
    out = (core.add_pod(lse("big", 9, "LSR", spread), 1.0), core.schedule_cycle(1.0))[1]
    assert not out.placements and "SingleNUMANode" in out.failures[0].result.message
    core.on_node(numa_node("loose", smt_topology(1, 8, 2, 2)), 1.0)
    assert place(core, now=2.0) == {"big": "loose:0-8"}
    # "loose" has 3 + 4 CPUs left in its NUMA nodes: 6 CPUs span both there, one NUMA node on "strict"
    state = CycleState(3.0, core.table)
    six = core.pod_info(lse("six", 6, spec=spread), 3.0)
    scores = dict(zip(core.table.names, plugin(core).score(state, six).tolist()))
    assert scores == {"strict": 100, "loose": 50}
    assert plugin(core).score(state, core.pod_info(lse("ls", 0), 3.0)).tolist() == [0, 0]


def test_release_gives_the_cpus_back() -> None:
    core = Scheduler(SchedulerSettings(seed=1))
    core.on_node(numa_node("n1", smt_topology(1, 2, 2, 1)), 0.0)
    assert place(core, lse("a", 4)) == {"a": "n1:0-3"}
    core.release("a", 2.0)
    assert plugin(core).nodes["n1"].held == {}
    assert place(core, lse("b", 4), now=3.0) == {"b": "n1:0-3"}


def test_an_adopted_pod_books_its_stored_cpuset() -> None:
    core = Scheduler(SchedulerSettings(seed=1))
    core.on_node(numa_node("n1", smt_topology(2, 4, 2, 1)), 0.0)
    assert core.adopt(lse("old", 2), "n1", 0.5, "5,13")
    assert plugin(core).nodes["n1"].pods["old"][0] == (5, 13)
    got = place(core, lse("new", 2, spec={"preferredCPUBindPolicy": "FullPCPUs"}), lse("n2", 8))
    assert got["new"] == "n1:4,12"  # the fuller NUMA node (NUMA 1 holds "old") first: MostAllocated
    assert got["n2"] == "n1:0-3,8-11"


POLICIES = st.sampled_from(["None", "BestEffort", "Restricted", "SingleNUMANode"])
REQUESTS = st.lists(st.tuples(st.integers(1, 6), st.sampled_from(["FullPCPUs", "SpreadByPCPUs"]),
                              st.sampled_from(["None", "PCPULevel", "NUMANodeLevel"]), st.booleans()),
                    min_size=1, max_size=14)


@settings(max_examples=60, deadline=None)
@given(sockets=st.integers(1, 2), cores=st.sampled_from([2, 4]), threads=st.integers(1, 2),
       numa=st.integers(1, 2), policy=POLICIES, requests=REQUESTS)
def test_cpuset_invariants(sockets: int, cores: int, threads: int, numa: int, policy: str,
                           requests: list[tuple[int, str, str, bool]]) -> None:
    topo = smt_topology(sockets, cores, threads, numa)
    core = Scheduler(SchedulerSettings(seed=1))
    core.on_node(numa_node("n1", topo, {NODE_NUMA_TOPOLOGY_POLICY: policy}), 0.0)
    numa_of = {c.cpu: c.numa for c in topo.cpus}
    core_of = {c.cpu: (c.socket, c.core) for c in topo.cpus}
    live: dict[str, tuple[tuple[int, ...], str]] = {}
    now = 1.0
    for k, (n, bind, exclusive, release_one) in enumerate(requests):
        now += 1.0
        if release_one and live:
            uid = sorted(live)[0]
            core.release(uid, now)
            del live[uid]
        uid = f"p{k}"
        got = place(core, lse(uid, n, spec={"preferredCPUBindPolicy": bind, "preferredCPUExclusivePolicy":
                                            exclusive}), now=now)
        if uid not in got:
            core.queue.remove(uid)
            continue
        cpus = cpuset_parse(got[uid].split(":")[1])
        assert len(cpus) == n, "never empty, never short"
        for other, (theirs, their_excl) in live.items():
            assert not set(cpus) & set(theirs), f"{uid} and {other} share CPUs"
            if exclusive == their_excl == "PCPULevel":
                assert not {core_of[c] for c in cpus} & {core_of[c] for c in theirs}, "PCPULevel core shared"
            if exclusive == their_excl == "NUMANodeLevel":
                assert not {numa_of[c] for c in cpus} & {numa_of[c] for c in theirs}, "NUMANodeLevel shared"
        if policy == "SingleNUMANode":
            assert len({numa_of[c] for c in cpus}) == 1
        if bind == "FullPCPUs" and threads == 2:
            assert all(all(x in cpus for x in topo.cores()[core_of[c]]) for c in cpus), "FullPCPUs whole cores"
        live[uid] = (cpus, exclusive)
    held = plugin(core).nodes.get("n1")
    assert (held.pods if held else {}) == {u: v for u, v in live.items()}


def test_a_node_without_topology_places_lse_pods_without_a_cpuset() -> None:
    core = Scheduler(SchedulerSettings(seed=1))
    core.on_node(msgspec.structs.replace(numa_node("n1", smt_topology(1, 2, 2, 1)), topology=NodeTopology()), 0.0)
    assert place(core, lse("a", 2)) == {"a": "n1:"}
    assert cpuset_format(()) == ""
