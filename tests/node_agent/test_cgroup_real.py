"""The executor's ordering rules against this machine's kernel (cgroup v1): the rules MemoryFS emulates are the
kernel's. Groups live under ``colo-cgtest-<pid>`` and are removed afterwards; skipped with the reason where the
v1 cpu/cpuset hierarchies are missing or not writable."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from colo_node_agent.cgroups import CgroupWrite, Executor, HostFS, Layout
from colo_node_agent.cgroups.fs import detect_version
from colo_node_agent.cgroups.resources import cpuset_parse

ROOT = Path("/sys/fs/cgroup")
SUBSYSTEMS = ("cpu", "cpuset")


def _usable() -> str:
    if detect_version(HostFS(ROOT)) != "v1":
        return f"{ROOT} is not a cgroup v1 tree"
    for sub in SUBSYSTEMS:
        if not os.access(ROOT / sub, os.W_OK):
            return f"{ROOT / sub} is missing or not writable"
    if not (ROOT / "cpu" / "cpu.cfs_burst_us").exists():
        return "this kernel has no cpu.cfs_burst_us"
    return ""


REASON = _usable()
pytestmark = pytest.mark.skipif(bool(REASON), reason=REASON or "ok")


@pytest.fixture
def layout() -> Iterator[Layout]:
    lay = Layout("cgroupfs", f"colo-cgtest-{os.getpid()}")
    dirs = [lay.parent, lay.kubepods, lay.besteffort, lay.pod_dir("BE", "x")]
    for sub in SUBSYSTEMS:
        for d in dirs:
            (ROOT / sub / d).mkdir(exist_ok=True)
    try:
        yield lay
    finally:
        for sub in SUBSYSTEMS:
            for d in reversed(dirs):
                if (ROOT / sub / d).exists():
                    os.rmdir(ROOT / sub / d)


def test_cpusets_of_a_new_tree_are_filled_parent_first(layout: Layout) -> None:
    cpus = cpuset_parse((ROOT / "cpuset" / "cpuset.cpus").read_text())
    mems = (ROOT / "cpuset" / "cpuset.mems").read_text().strip()
    tree = [layout.parent, layout.kubepods, layout.besteffort, layout.pod_dir("BE", "x")]
    ex = Executor(HostFS(ROOT), "v1")
    plan = [CgroupWrite(cg, r, v) for cg in reversed(tree)
            for r, v in (("cpuset.cpus", f"{cpus[0]}"), ("cpuset.mems", mems))]
    records = ex.apply(plan)
    assert [r for r in records if not r.ok] == []
    assert [r.cgroup for r in records if r.resource == "cpuset.cpus"] == tree


def test_cpuset_move_goes_through_the_union(layout: Layout) -> None:
    cpus = cpuset_parse((ROOT / "cpuset" / "cpuset.cpus").read_text())
    if len(cpus) < 2:
        pytest.skip("needs two CPUs")
    a, b = str(cpus[0]), str(cpus[1])
    mems = (ROOT / "cpuset" / "cpuset.mems").read_text().strip()
    tree = [layout.parent, layout.kubepods, layout.besteffort, layout.pod_dir("BE", "x")]
    ex = Executor(HostFS(ROOT), "v1")
    setup = [CgroupWrite(cg, "cpuset.mems", mems) for cg in tree] + [CgroupWrite(cg, "cpuset.cpus", a) for cg in tree]
    assert all(r.ok for r in ex.apply(setup))
    move = [CgroupWrite(cg, "cpuset.cpus", b) for cg in (layout.besteffort, layout.pod_dir("BE", "x"))]
    move += [CgroupWrite(cg, "cpuset.cpus", f"{a},{b}") for cg in (layout.parent, layout.kubepods)]
    records = ex.apply(move)
    assert [r for r in records if not r.ok] == []
    assert (ROOT / "cpuset" / layout.pod_dir("BE", "x") / "cpuset.cpus").read_text().strip() == b


@pytest.mark.parametrize(("start", "plan", "want"), [
    ((50_000, 0), {"cpu.cfs_burst_us": 100_000}, (50_000, 50_000)),
    ((-1, 80_000), {"cpu.cfs_quota_us": 50_000}, (50_000, 50_000)),
    ((100_000, 80_000), {"cpu.cfs_quota_us": 30_000, "cpu.cfs_burst_us": 20_000}, (30_000, 20_000)),
], ids=["burst-clamped", "burst-lowered-before-quota", "both-shrink"])
def test_burst_rules_hold_on_the_real_kernel(layout: Layout, start: tuple[int, int], plan: dict[str, int],
                                             want: tuple[int, int]) -> None:
    pod = layout.pod_dir("BE", "x")
    ex = Executor(HostFS(ROOT), "v1")
    first = [CgroupWrite(pod, "cpu.cfs_quota_us", start[0])] if start[0] > 0 else []
    assert all(r.ok for r in ex.apply(first + [CgroupWrite(pod, "cpu.cfs_burst_us", start[1])]))
    records = ex.apply([CgroupWrite(pod, r, v) for r, v in plan.items()])
    assert [r for r in records if not r.ok] == []
    d = ROOT / "cpu" / pod
    assert (int((d / "cpu.cfs_quota_us").read_text()), int((d / "cpu.cfs_burst_us").read_text())) == want


def test_idle_and_shares_order_on_the_real_kernel(layout: Layout) -> None:
    if not (ROOT / "cpu" / "cpu.idle").exists():
        pytest.skip("this kernel has no cpu.idle")
    be = layout.besteffort
    ex = Executor(HostFS(ROOT), "v1")
    assert all(r.ok for r in ex.apply([CgroupWrite(be, "cpu.idle", 1)]))
    records = ex.apply([CgroupWrite(be, "cpu.shares", 512), CgroupWrite(be, "cpu.idle", 0)])
    assert [(r.resource, r.ok) for r in records] == [("cpu.idle", True), ("cpu.shares", True)]
    assert (ROOT / "cpu" / be / "cpu.shares").read_text().strip() == "512"
    records = ex.apply([CgroupWrite(be, "cpu.idle", 1), CgroupWrite(be, "cpu.shares", 256)])
    assert [(r.resource, r.ok) for r in records] == [("cpu.shares", True), ("cpu.idle", True)]
    assert (ROOT / "cpu" / be / "cpu.shares").read_text().strip() == "3"  # an idle group's fixed weight
    records = ex.apply([CgroupWrite(be, "cpu.idle", 0), CgroupWrite(be, "cpu.shares", 256)])
    assert [(r.resource, r.ok, r.skipped) for r in records] == [("cpu.idle", True, False), ("cpu.shares", True, False)]
    assert (ROOT / "cpu" / be / "cpu.shares").read_text().strip() == "256"  # not skipped as "cached 256"
