"""Executor rules against trees that refuse what the kernel refuses (MemoryFS kernel_rules, checked on 6.18 v1):
burst clamped to the quota, parent/child cpuset ordering including moves, keyed and uncached writes, trees."""

from __future__ import annotations

import errno

import pytest

from colo_node_agent.cgroups import CgroupWrite, Executor, MemoryFS
from colo_node_agent.cgroups.fs import default_files
from colo_node_agent.cgroups.resources import CgroupVersion, Value

KP, BE, POD = "kubepods", "kubepods/besteffort", "kubepods/besteffort/podx"


def strict_tree(version: CgroupVersion, cpus: int = 8) -> MemoryFS:
    fs = MemoryFS(kernel_rules=version)
    for cg in (KP, BE, POD):
        for p, t in default_files(version, cg, cpus).items():
            fs.seed(p, t)
    return fs


def setup(ex: Executor, values: dict[str, Value], cgroup: str = POD) -> None:
    recs = ex.apply([CgroupWrite(cgroup, r, v) for r, v in values.items()])
    assert all(r.ok for r in recs), recs


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_kernel_rules_refuse_burst_above_quota(version: CgroupVersion) -> None:
    """The fake tree must bite, or the clamp tests below prove nothing."""
    fs = strict_tree(version)
    quota_path = f"cpu/{POD}/cpu.cfs_quota_us" if version == "v1" else f"{POD}/cpu.max"
    burst_path = f"cpu/{POD}/cpu.cfs_burst_us" if version == "v1" else f"{POD}/cpu.max.burst"
    fs.write(quota_path, "50000" if version == "v1" else "50000 100000")
    with pytest.raises(OSError) as exc:
        fs.write(burst_path, "60000")
    assert exc.value.errno == errno.EINVAL


# start (quota, burst) -> plan -> (records: resource, value, message part) in order, final (quota, burst)
BURST_CASES: list[tuple[str, tuple[int, int], dict[str, int], list[tuple[str, int, str]]]] = [
    ("burst-clamped-to-quota", (50_000, 0), {"cpu.cfs_burst_us": 100_000},
     [("cpu.cfs_burst_us", 50_000, "clamped to the quota 50000")]),
    ("burst-clamped-to-planned-quota-written-after-it", (50_000, 0),
     {"cpu.cfs_burst_us": 300_000, "cpu.cfs_quota_us": 200_000},
     [("cpu.cfs_quota_us", 200_000, ""), ("cpu.cfs_burst_us", 200_000, "clamped")]),
    ("current-burst-lowered-before-quota-drops", (-1, 80_000), {"cpu.cfs_quota_us": 50_000},
     [("cpu.cfs_burst_us", 50_000, "clamped"), ("cpu.cfs_quota_us", 50_000, "")]),
    ("both-shrink-burst-first", (100_000, 80_000), {"cpu.cfs_quota_us": 30_000, "cpu.cfs_burst_us": 20_000},
     [("cpu.cfs_burst_us", 20_000, ""), ("cpu.cfs_quota_us", 30_000, "")]),
    ("quota-shrinks-burst-grows-within-it", (100_000, 10_000),
     {"cpu.cfs_quota_us": 60_000, "cpu.cfs_burst_us": 50_000},
     [("cpu.cfs_burst_us", 50_000, ""), ("cpu.cfs_quota_us", 60_000, "")]),
    ("unlimited-quota-no-clamp", (-1, 0), {"cpu.cfs_burst_us": 500_000},
     [("cpu.cfs_burst_us", 500_000, "")]),
]


@pytest.mark.parametrize("version", ["v1", "v2"])
@pytest.mark.parametrize(("name", "start", "plan", "want"), BURST_CASES, ids=[c[0] for c in BURST_CASES])
def test_burst_stays_within_quota(version: CgroupVersion, name: str, start: tuple[int, int],
                                  plan: dict[str, int], want: list[tuple[str, int, str]]) -> None:
    fs = strict_tree(version)
    ex = Executor(fs, version)
    if start[0] >= 0:
        setup(ex, {"cpu.cfs_quota_us": start[0]})
    setup(ex, {"cpu.cfs_burst_us": start[1]} if start[1] else {})
    records = ex.apply([CgroupWrite(POD, r, v) for r, v in plan.items()])
    assert [(r.resource, r.new) for r in records] == [(r, v) for r, v, _ in want]
    assert all(r.ok and not r.error for r in records), records
    for rec, (_, _, msg) in zip(records, want):
        assert msg in rec.message
    fresh = Executor(fs, version)
    quota, burst = fresh.read(POD, "cpu.cfs_quota_us"), fresh.read(POD, "cpu.cfs_burst_us")
    assert isinstance(quota, int) and isinstance(burst, int)
    assert quota < 0 or burst <= quota


def test_burst_already_at_clamped_value_is_unchanged() -> None:
    fs = strict_tree("v2")
    ex = Executor(fs, "v2")
    setup(ex, {"cpu.cfs_quota_us": 50_000, "cpu.cfs_burst_us": 50_000})
    records = ex.apply([CgroupWrite(POD, "cpu.cfs_burst_us", 90_000)])
    assert [(r.ok, r.skipped, r.new) for r in records] == [(True, True, 50_000)]
    assert "clamped" in records[0].message


# (parent old, child old) -> (parent new, child new): the write sequence a v1 kernel accepts
CPUSET_CASES = [
    ("grow", ("0-3", "0-1"), ("0-7", "0-5"), [(BE, "0-7"), (POD, "0-5")]),
    ("shrink", ("0-7", "0-5"), ("0-3", "0-1"), [(POD, "0-1"), (BE, "0-3")]),
    ("move", ("0-3", "0-3"), ("4-7", "4-7"), [(BE, "0-7"), (POD, "0-7"), (POD, "4-7"), (BE, "4-7")]),
    ("partial-move", ("0-3", "0-1"), ("2-5", "2-3"), [(BE, "0-5"), (POD, "0-3"), (POD, "2-3"), (BE, "2-5")]),
]


@pytest.mark.parametrize(("name", "old", "new", "sequence"), CPUSET_CASES, ids=[c[0] for c in CPUSET_CASES])
def test_cpuset_hierarchy_order(name: str, old: tuple[str, str], new: tuple[str, str],
                                sequence: list[tuple[str, str]]) -> None:
    fs = strict_tree("v1")
    ex = Executor(fs, "v1")
    assert all(r.ok for r in ex.apply([CgroupWrite(BE, "cpuset.cpus", old[0]),
                                       CgroupWrite(POD, "cpuset.cpus", old[1])]))
    fs.log.clear()
    records = ex.apply([CgroupWrite(POD, "cpuset.cpus", new[1]), CgroupWrite(BE, "cpuset.cpus", new[0])])
    assert all(r.ok for r in records), records
    assert [(r.cgroup, r.new) for r in records] == sequence
    assert [(p.split("/", 1)[1].rsplit("/", 1)[0], t) for p, t in fs.log] == sequence
    assert sum("transitional" in r.message for r in records) == (len(sequence) - 2)


def test_cpuset_move_without_ordering_is_refused_by_the_fake_kernel() -> None:
    fs = strict_tree("v1")
    ex = Executor(fs, "v1")
    assert all(r.ok for r in ex.apply([CgroupWrite(BE, "cpuset.cpus", "0-3"), CgroupWrite(POD, "cpuset.cpus", "0-3")]))
    with pytest.raises(OSError) as child:
        fs.write(f"cpuset/{POD}/cpuset.cpus", "4-7")
    with pytest.raises(OSError) as parent:
        fs.write(f"cpuset/{BE}/cpuset.cpus", "4-7")
    assert (child.value.errno, parent.value.errno) == (errno.EACCES, errno.EBUSY)


def test_resctrl_and_sysctl_trees() -> None:
    cg, rc, sysctl = MemoryFS(), MemoryFS(), MemoryFS()
    rc.seed("BE/schemata", "L3:0=7ff;1=7ff\nMB:0=100;1=100\n")
    rc.seed("BE/tasks", "")
    sysctl.seed("vm/min_free_kbytes", "67584\n")
    ex = Executor(cg, "v1", trees={"resctrl": rc, "sysctl": sysctl})
    records = ex.apply([
        CgroupWrite("BE", "resctrl.l3", "0=f;1=f"), CgroupWrite("BE", "resctrl.mb", "0=40;1=40"),
        CgroupWrite("BE", "resctrl.tasks", 101), CgroupWrite("BE", "resctrl.tasks", 102),
        CgroupWrite("", "vm.min_free_kbytes", 262_144),
    ])
    assert all(r.ok for r in records) and len(records) == 5
    assert rc.files["BE/schemata"] == "L3:0=f;1=f\nMB:0=40;1=40\n"
    assert rc.files["BE/tasks"] == "101\n102\n"
    assert sysctl.files["vm/min_free_kbytes"] == "262144"
    again = ex.apply([CgroupWrite("BE", "resctrl.l3", "1=f;0=f"), CgroupWrite("BE", "resctrl.tasks", 101)])
    assert [(r.resource, r.skipped) for r in again] == [("resctrl.l3", True), ("resctrl.tasks", False)]


def test_missing_tree_is_reported() -> None:
    ex = Executor(MemoryFS(), "v2")
    records = ex.apply([CgroupWrite("BE", "resctrl.l3", "0=f")])
    assert [(r.ok, r.error, r.message) for r in records] == [(False, "ENOENT", "no resctrl filesystem")]
    assert ex.failed == 1 and list(ex.audit) == records


@pytest.mark.parametrize(("code", "name"), [(errno.EBUSY, "EBUSY"), (errno.ENOSPC, "ENOSPC"),
                                            (errno.EPERM, "EPERM")])
def test_other_errnos_are_reported(code: int, name: str) -> None:
    fs = strict_tree("v1")
    fs.faults[f"cpuset/{BE}/cpuset.cpus"] = code
    records = Executor(fs, "v1").apply([CgroupWrite(BE, "cpuset.cpus", "0-1")])
    assert [(r.ok, r.error) for r in records] == [(False, name)]


def test_every_write_and_failure_reaches_the_sink_unchanged_ones_do_not() -> None:
    fs = strict_tree("v1")
    seen: list[tuple[str, bool, str]] = []
    ex = Executor(fs, "v1", sink=lambda r: seen.append((r.resource, r.ok, r.error)))
    ex.apply([CgroupWrite(POD, "cpu.shares", 512), CgroupWrite(POD, "cpu.idle", 7)])
    ex.apply([CgroupWrite(POD, "cpu.shares", 512)])
    assert seen == [("cpu.idle", False, "EINVAL"), ("cpu.shares", True, "")]
