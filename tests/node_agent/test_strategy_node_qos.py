"""Memory QoS, BE block I/O, resctrl LLC/MBA, system sysctls and SCHED_IDLE (REFERENCE.md §5), table-driven."""

from __future__ import annotations

import pytest

from colo.messages import (
    BlkIOLimit,
    BlkIOStrategy,
    MemoryQoSClass,
    MemoryQoSStrategy,
    PodSpec,
    ResctrlClass,
    ResctrlStrategy,
    Resources,
    SystemStrategy,
)
from colo.slo import strategy_problems
from colo_node_agent.cgroups import Executor, MemoryFS
from colo_node_agent.cgroups.resctrl import ResctrlInfo
from colo_node_agent.strategies.blkio import blkio_writes
from colo_node_agent.strategies.cgroup_settings import be_qos_settings
from colo_node_agent.strategies.memory_qos import MemoryPod, MemoryQoSValues, memory_qos, pod_values
from colo_node_agent.strategies.resctrl_qos import resctrl_plan
from colo_node_agent.strategies.system import min_free_kbytes, system_writes

Gi = 2**30


@pytest.mark.parametrize(("req", "lim", "pct", "node", "want"), [
    (4 * Gi, 8 * Gi, (50, 80, 50), 64 * Gi, MemoryQoSValues(2 * Gi, 3435973836, 6 * Gi)),
    (4 * Gi, 8 * Gi, (80, 50, 0), 64 * Gi, MemoryQoSValues(3435973836, 3435973836, -1)),
    (4 * Gi, 0, (0, 0, 10), 64 * Gi, MemoryQoSValues(0, 0, 10 * Gi)),
    (10_000_000, 20_000_000, (0, 0, 33), 64 * Gi, MemoryQoSValues(0, 0, 13_299_712)),
    (10_000_001, 10_000_001, (100, 0, 50), 64 * Gi, MemoryQoSValues(10_000_001, 0, 10_000_001)),
    (0, 0, (100, 100, 0), 64 * Gi, MemoryQoSValues(0, 0, -1)),
], ids=["min-low-high", "low-raised-to-min-throttling-off", "unlimited-uses-node-allocatable",
        "high-rounded-down-to-page", "high-raised-to-min", "no-request"])
def test_memory_qos_pod_values(req: int, lim: int, pct: tuple[int, int, int], node: int,
                               want: MemoryQoSValues) -> None:
    percents = MemoryQoSClass(min_percent=pct[0], low_percent=pct[1], throttling_percent=pct[2])
    assert pod_values(MemoryPod("p", "LS", req, lim), percents, node) == want


PODS = [MemoryPod("r", "LSR", 2 * Gi, 2 * Gi), MemoryPod("s", "LS", 4 * Gi, 8 * Gi), MemoryPod("b", "BE", 1 * Gi)]


def test_memory_qos_groups_sum_their_pods_and_classes_override() -> None:
    policy = MemoryQoSStrategy(enabled=True, min_percent=50, lsr=MemoryQoSClass(min_percent=100),
                               be=MemoryQoSClass(throttling_percent=100))
    plan = memory_qos(PODS, policy, 64 * Gi, supported=True)
    assert plan.pods == {"r": MemoryQoSValues(2 * Gi, 0, -1), "s": MemoryQoSValues(2 * Gi, 0, -1),
                         "b": MemoryQoSValues(0, 0, 64 * Gi)}
    assert {d: v.min for d, v in plan.groups.items()} == {
        "kubepods": 4 * Gi, "kubepods/burstable": 2 * Gi, "kubepods/besteffort": 0}
    by = {(w.cgroup, w.resource): w.value for w in plan.writes}
    assert by[("kubepods/podr", "memory.min")] == 2 * Gi and by[("kubepods/besteffort/podb", "memory.high")] == 64 * Gi


@pytest.mark.parametrize(("policy", "supported", "writes", "values"), [
    (MemoryQoSStrategy(enabled=False), True, 15, {(0, 0, -1)}),
    (MemoryQoSStrategy(enabled=True, min_percent=100), False, 0, set()),
], ids=["off-resets-everything", "kernel-without-files"])
def test_memory_qos_off_or_unsupported(policy: MemoryQoSStrategy, supported: bool, writes: int,
                                       values: set[tuple[int, int, int]]) -> None:
    plan = memory_qos(PODS, policy, 64 * Gi, supported)
    assert len(plan.writes) == writes
    assert {(v.min, v.low, v.high) for v in plan.pods.values()} == values


BE = "kubepods/besteffort"


@pytest.mark.parametrize(("policy", "current", "want"), [
    (BlkIOStrategy(enabled=True, be=[BlkIOLimit(device="8:0", read_bps=1048576, write_iops=300)]), (),
     {("blkio.throttle.read_bps_device", "8:0 1048576"), ("blkio.throttle.write_bps_device", "8:0 -1"),
      ("blkio.throttle.read_iops_device", "8:0 -1"), ("blkio.throttle.write_iops_device", "8:0 300")}),
    (BlkIOStrategy(enabled=True, be=[BlkIOLimit(device="8:0", read_bps=5)]), ("8:16",),
     {("blkio.throttle.read_bps_device", "8:0 5"), ("blkio.throttle.write_bps_device", "8:0 -1"),
      ("blkio.throttle.read_iops_device", "8:0 -1"), ("blkio.throttle.write_iops_device", "8:0 -1"),
      ("blkio.throttle.read_bps_device", "8:16 -1"), ("blkio.throttle.write_bps_device", "8:16 -1"),
      ("blkio.throttle.read_iops_device", "8:16 -1"), ("blkio.throttle.write_iops_device", "8:16 -1")}),
    (BlkIOStrategy(enabled=False, be=[BlkIOLimit(device="8:0", read_bps=5)]), ("8:0",),
     {("blkio.throttle.read_bps_device", "8:0 -1"), ("blkio.throttle.write_bps_device", "8:0 -1"),
      ("blkio.throttle.read_iops_device", "8:0 -1"), ("blkio.throttle.write_iops_device", "8:0 -1")}),
], ids=["limits", "removed-device-lifted", "off-lifts-all"])
def test_blkio(policy: BlkIOStrategy, current: tuple[str, ...], want: set[tuple[str, str]]) -> None:
    writes = blkio_writes(policy, current)
    assert {(w.resource, w.value) for w in writes} == want
    assert {w.cgroup for w in writes} == {BE}


def test_blkio_problems() -> None:
    bad = BlkIOStrategy(be=[BlkIOLimit(device="sda"), BlkIOLimit(device="8:0", read_bps=-1),
                            BlkIOLimit(device="8:0")])
    assert len(strategy_problems({"blkio": bad})) == 3


def fake_resctrl(cbm: str) -> MemoryFS:
    fs = MemoryFS()
    for g in ("", "LSR/", "LS/", "BE/"):
        fs.seed(f"{g}schemata", f"L3:0={cbm};1={cbm}\nMB:0=100;1=100\n")
        fs.seed(f"{g}tasks", "")
    return fs


@pytest.mark.parametrize(("cbm", "be", "want_l3", "want_mb"), [
    (0x3FF, ResctrlClass(l3_start_percent=10, l3_end_percent=80), "0=fe;1=fe", "0=100;1=100"),
    (0x7FF, ResctrlClass(l3_end_percent=30), "0=f;1=f", "0=100;1=100"),
    (0x7FF, ResctrlClass(l3_end_percent=30, mba_percent=35), "0=f;1=f", "0=40;1=40"),
    (0xFFFFF, ResctrlClass(l3_end_percent=30, mba_percent=60), "0=3f;1=3f", "0=60;1=60"),
], ids=["ref-0x3ff-10-80", "ref-0x7ff-0-30", "mba-rounded-up-to-10", "20-ways"])
def test_resctrl_on_a_fake_tree(cbm: int, be: ResctrlClass, want_l3: str, want_mb: str) -> None:
    rc = fake_resctrl(f"{cbm:x}")
    info = ResctrlInfo(cbm, 1, (0, 1), (0, 1))
    plan = resctrl_plan(ResctrlStrategy(enabled=True, be=be), info, {"BE": [4242], "LSE": [7], "SYSTEM": [1]})
    records = Executor(MemoryFS(), "v1", trees={"resctrl": rc}).apply(plan.writes)
    assert all(r.ok for r in records), records
    assert rc.files["BE/schemata"] == f"L3:{want_l3}\nMB:{want_mb}\n"
    assert rc.files["LS/schemata"] == f"L3:0={cbm:x};1={cbm:x}\nMB:0=100;1=100\n"
    assert (rc.files["BE/tasks"], rc.files["LSR/tasks"], rc.files["tasks"]) == ("4242\n", "7\n", "")
    moved = resctrl_plan(ResctrlStrategy(enabled=True, be=be), info, {"BE": [4242, 4243]},
                         {"BE": frozenset({4242})})
    assert [w.value for w in moved.writes if w.resource == "resctrl.tasks"] == [4243]


def test_resctrl_off_restores_and_absent_does_nothing() -> None:
    info = ResctrlInfo(0x7FF, 1, (0,), ())
    off = resctrl_plan(ResctrlStrategy(enabled=False), info, {"BE": [1]})
    assert {(w.cgroup, w.resource, w.value) for w in off.writes} == {
        (g, "resctrl.l3", "0=7ff") for g in ("LSR", "LS", "BE")}
    assert resctrl_plan(ResctrlStrategy(enabled=True), None).writes == []
    bad = ResctrlStrategy(be=ResctrlClass(l3_start_percent=50, l3_end_percent=50, mba_percent=0))
    assert len(strategy_problems({"resctrl": bad})) == 2


@pytest.mark.parametrize(("total", "factor", "want"), [
    (64 * Gi, 100, 671_088), (256 * Gi, 100, 2_684_354), (64 * Gi, 150, 1_006_632),
], ids=["64Gi-1pct", "256Gi", "factor-150"])
def test_min_free_kbytes(total: int, factor: int, want: int) -> None:
    assert min_free_kbytes(total, factor) == want
    writes = system_writes(SystemStrategy(enabled=True, min_free_kbytes_factor=factor), total)
    assert [(w.resource, w.value) for w in writes] == [("vm.min_free_kbytes", want),
                                                       ("vm.watermark_scale_factor", 150)]


def test_system_off_and_problems() -> None:
    assert system_writes(SystemStrategy(), 64 * Gi) == []
    bad = SystemStrategy(enabled=True, min_free_kbytes_factor=0, watermark_scale_factor=5)
    assert len(strategy_problems({"system": bad})) == 2


@pytest.mark.parametrize(("idle", "supported", "want"), [
    (True, True, 1), (False, True, 0), (True, False, None),
], ids=["sched-idle", "off", "kernel-without-cpu.idle"])
def test_sched_idle(idle: bool, supported: bool, want: int | None) -> None:
    pods = [PodSpec(uid="b", name="b", qos_class="BE", requests=Resources(batch_cpu=500))]
    writes = {w.resource: w.value for w in be_qos_settings(pods, idle, idle_supported=supported)}
    assert writes.get("cpu.idle") == want




@pytest.mark.parametrize("version", ["v1", "v2"])
def test_idle_switches_order_shares_as_the_kernel_accepts(version: str) -> None:
    from colo_node_agent.cgroups.fs import default_files

    fs = MemoryFS(kernel_rules=version)  # type: ignore[arg-type]
    for p, t in default_files(version, BE, 8).items():  # type: ignore[arg-type]
        fs.seed(p, t)
    ex = Executor(fs, version)  # type: ignore[arg-type]
    pods = [PodSpec(uid="b", name="b", qos_class="BE", requests=Resources(batch_cpu=500))]
    for idle in (True, False, True):
        records = ex.apply(be_qos_settings(pods, idle))
        assert [r for r in records if not r.ok] == [], records
    weight = "cpu/kubepods/besteffort/cpu.shares" if version == "v1" else "kubepods/besteffort/cpu.weight"
    idle_file = "cpu/kubepods/besteffort/cpu.idle" if version == "v1" else "kubepods/besteffort/cpu.idle"
    assert [p for p, _ in fs.log if p in (weight, idle_file)] == [idle_file, idle_file, weight, idle_file]
    ex.apply(be_qos_settings(pods, False))  # shares rewritten after idle is cleared, although planned before
    if version == "v1":
        assert fs.files[weight] == "512"
