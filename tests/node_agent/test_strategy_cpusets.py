"""CPU choice: topology orders, LSE/LSR/LS cpusets, and CPU suppress's BE cpuset in full (REFERENCE.md §5:
growth limit, never LSE or reserved CPUs, hyper-thread sibling pairs spread over NUMA nodes, LSR share)."""

from __future__ import annotations

from pathlib import Path

import pytest

from colo.messages import CPUSetStrategy, CPUSuppressStrategy, QoSClass
from colo_node_agent.strategies.cpu_suppress import SuppressInput, SuppressState, cpuset_target, suppress
from colo_node_agent.strategies.cpusets import CpusetPod, plan_cpusets
from colo_node_agent.topology import CPUInfo, CPUTopology, read_topology, spread_order

# 2 sockets × 4 cores × 2 threads: CPU c and c+8 are siblings; CPUs 0-3,8-11 on socket/NUMA 0, 4-7,12-15 on 1
TOPO = CPUTopology.smt(4, 2, 2)
C = 1000


def test_smt_topology_numbering() -> None:
    by = TOPO.by_id()
    assert (by[0].core, by[8].core, by[0].socket, by[12].socket, by[12].numa) == (0, 0, 0, 1, 1)


@pytest.mark.parametrize(("cpus", "want"), [
    (tuple(range(16)), [0, 8, 4, 12, 1, 9, 5, 13, 2, 10, 6, 14, 3, 11, 7, 15]),
    ((2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 13, 14, 15), [4, 12, 2, 10, 5, 13, 3, 11, 6, 14, 8, 7, 15]),
    ((5, 6, 7), [5, 6, 7]),
], ids=["whole-pairs-alternate-sockets", "bigger-socket-first-lone-sibling-last", "one-thread-each"])
def test_spread_order(cpus: tuple[int, ...], want: list[int]) -> None:
    assert spread_order(cpus, TOPO) == want


def pod(uid: str, qos: QoSClass, cores: float, current: tuple[int, ...] = ()) -> CpusetPod:
    return CpusetPod(uid, qos, int(cores * C), current)


RESERVED = (0, 8)
LSE, LSR, LS, BE = pod("a", "LSE", 2), pod("b", "LSR", 4), pod("c", "LS", 1), pod("d", "BE", 0)


@pytest.mark.parametrize(("pods", "policy", "want_pods", "share", "be", "problems"), [
    ([LSE, LSR, LS, BE], CPUSetStrategy(), {"a": (1, 9), "b": (2, 3, 10, 11), "c": (4, 5, 6, 7, 12, 13, 14, 15)},
     (4, 5, 6, 7, 12, 13, 14, 15), (2, 3, 4, 5, 6, 7, 10, 11, 12, 13, 14, 15), 0),
    ([pod("a", "LSE", 2, (5, 13)), LSR, LS], CPUSetStrategy(),
     {"a": (5, 13), "b": (1, 2, 9, 10), "c": (3, 4, 6, 7, 11, 12, 14, 15)},
     (3, 4, 6, 7, 11, 12, 14, 15), (1, 2, 3, 4, 6, 7, 9, 10, 11, 12, 14, 15), 0),
    ([pod("a", "LSE", 2, (0, 8)), LS], CPUSetStrategy(), {"a": (1, 9), "c": (2, 3, 4, 5, 6, 7, 10, 11, 12, 13, 14, 15)},
     (2, 3, 4, 5, 6, 7, 10, 11, 12, 13, 14, 15), (2, 3, 4, 5, 6, 7, 10, 11, 12, 13, 14, 15), 0),
    ([pod("x", "LSR", 1.5), LS], CPUSetStrategy(), {"x": tuple(range(1, 8)) + tuple(range(9, 16)),
                                                    "c": tuple(range(1, 8)) + tuple(range(9, 16))},
     tuple(range(1, 8)) + tuple(range(9, 16)), tuple(range(1, 8)) + tuple(range(9, 16)), 0),
    ([pod("big", "LSE", 15), LS], CPUSetStrategy(), {"big": tuple(range(1, 8)) + tuple(range(9, 16)),
                                                     "c": tuple(range(1, 8)) + tuple(range(9, 16))},
     tuple(range(1, 8)) + tuple(range(9, 16)), tuple(range(1, 8)) + tuple(range(9, 16)), 1),
    ([LSE, LSR, LS, BE], CPUSetStrategy(enabled=False),
     dict.fromkeys("abc", tuple(range(1, 8)) + tuple(range(9, 16))),
     tuple(range(1, 8)) + tuple(range(9, 16)), tuple(range(1, 8)) + tuple(range(9, 16)), 0),
], ids=["lse-exclusive-lsr-reserved-ls-share", "current-allocation-kept", "reserved-current-moved",
        "fractional-lsr-shares", "no-room-reported", "disabled-all-usable"])
def test_plan_cpusets(pods: list[CpusetPod], policy: CPUSetStrategy, want_pods: dict[str, tuple[int, ...]],
                      share: tuple[int, ...], be: tuple[int, ...], problems: int) -> None:
    plan = plan_cpusets(pods, TOPO, RESERVED, policy)
    assert plan.pods == want_pods
    assert (plan.share_pool, plan.be_candidates, len(plan.problems)) == (share, be, problems)
    written = {w.cgroup: w.value for w in plan.writes}
    assert written["kubepods"] == "1-7,9-15"  # every non-reserved CPU, a superset of every child
    assert written["kubepods/burstable"] == written.get("kubepods/burstable/podc", written["kubepods/burstable"])
    assert not any("besteffort" in cg for cg in written)  # BE cpusets belong to CPU suppress
    if policy.enabled and "b" in want_pods and problems == 0 and want_pods["b"] != share:
        assert set(plan.lsr_cpus) == set(want_pods["b"])
        assert not set(plan.be_candidates) & set(plan.lse_cpus)


def test_plan_cpusets_can_write_be_groups_itself() -> None:
    plan = plan_cpusets([LSE, BE], TOPO, RESERVED, CPUSetStrategy(), be_dir_managed=False)
    written = {w.cgroup: w.value for w in plan.writes}
    assert written["kubepods/besteffort"] == written["kubepods/besteffort/podd"] == "2-7,10-15"


CANDIDATES = (2, 3, 4, 5, 6, 7, 10, 11, 12, 13, 14, 15)  # reserved 0,8 and an LSE pod on 1,9 left out


@pytest.mark.parametrize(("allowed", "current", "lsr", "want"), [
    (4 * C, CANDIDATES, (), (2, 4, 10, 12)),
    (6 * C, CANDIDATES, (2, 3, 10, 11), (2, 4, 5, 10, 12, 13)),
    (12 * C, (4, 12), (), (2, 4, 10, 12)),
    (1 * C, CANDIDATES, (), (4, 12)),
    (30 * C, CANDIDATES, (), CANDIDATES),
    (3 * C, CANDIDATES, (2, 3, 4, 5, 6, 7, 10, 11, 12, 13, 14, 15), (2, 4, 12)),
], ids=["pairs-over-both-nodes", "lsr-proportional-share", "growth-limited", "minimum-two", "capped", "all-lsr"])
def test_be_cpuset_with_topology(allowed: int, current: tuple[int, ...], lsr: tuple[int, ...],
                                 want: tuple[int, ...]) -> None:
    state = SuppressState(16, CANDIDATES, current, topology=TOPO, lsr_cpus=lsr)
    got = cpuset_target(allowed, state)
    assert got == want
    assert not {0, 8, 1, 9} & set(got)


def test_be_cpuset_grows_and_shrinks_at_its_end() -> None:
    state = SuppressState(16, CANDIDATES, CANDIDATES, topology=TOPO)
    sets = [set(cpuset_target(n * C, state)) for n in range(2, 13)]
    assert all(a < b for a, b in zip(sets, sets[1:]))


def test_suppress_writes_the_be_group_and_every_be_pod() -> None:
    pods = ("kubepods/besteffort/poda", "kubepods/besteffort/podb")
    state = SuppressState(16, CANDIDATES, CANDIDATES, topology=TOPO, be_pods=pods)
    inp = SuppressInput(16 * C, 10 * C, 6 * C, 2 * C)  # BEAllowed = 10400 - 6000 - 2000 = 2400 -> 3 CPUs
    for policy, cpus in ((CPUSuppressStrategy(), "2,4,12"), (CPUSuppressStrategy(policy="cfsQuota"),
                                                            "2-7,10-15")):
        plan = suppress(inp, policy, state)
        sets = {w.cgroup: w.value for w in plan.writes if w.resource == "cpuset.cpus"}
        assert sets == dict.fromkeys(("kubepods/besteffort", *pods), cpus)


@pytest.mark.parametrize(("allowed", "current_quota", "want"), [
    (0, 2_500, 2_000), (0, 2_000, 2_000),
], ids=["to-floor-despite-small-change", "at-floor"])
def test_quota_floor_is_always_reached(allowed: int, current_quota: int, want: int) -> None:
    from colo_node_agent.strategies.cpu_suppress import quota_target
    state = SuppressState(20, tuple(range(20)), tuple(range(20)), current_quota_us=current_quota)
    assert quota_target(allowed, 20 * C, state) == want


def test_read_topology(tmp_path: Path) -> None:
    for cpu, core, pkg in ((0, 0, 0), (1, 1, 0), (2, 0, 0), (3, 1, 0), (4, 9, 9)):
        d = tmp_path / "cpu" / f"cpu{cpu}" / "topology"
        d.mkdir(parents=True)
        (d / "core_id").write_text(f"{core}\n")
        (d / "physical_package_id").write_text(f"{pkg}\n")
    (tmp_path / "cpu" / "online").write_text("0-3\n")
    (tmp_path / "node" / "node0").mkdir(parents=True)
    (tmp_path / "node" / "node0" / "cpulist").write_text("0-3\n")
    topo = read_topology(tmp_path)
    assert topo.cpus == (CPUInfo(0, 0), CPUInfo(1, 1), CPUInfo(2, 0), CPUInfo(3, 1))
    assert spread_order(topo.ids(), topo) == [0, 2, 1, 3]


def test_read_this_machines_topology() -> None:
    root = Path("/sys/devices/system")
    if not (root / "cpu").is_dir():
        pytest.skip(f"{root}/cpu not present")
    topo = read_topology(root)
    assert len(topo.cpus) >= 1 and len({c.cpu for c in topo.cpus}) == len(topo.cpus)
