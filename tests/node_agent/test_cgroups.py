"""cgroup layer: v1/v2 converters and the executor on a temp-dir tree (REFERENCE.md §5, §11; DESIGN.md §6)."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from colo_node_agent.cgroups import (
    CgroupWrite,
    Executor,
    HostFS,
    MemoryFS,
    cpuset_format,
    cpuset_parse,
    detect_version,
    shares_to_weight,
    weight_to_shares,
)
from colo_node_agent.cgroups.fs import default_files
from colo_node_agent.cgroups.resources import CgroupVersion, read_value

BE = "kubepods/besteffort"
POD = "kubepods/besteffort/podx"


def make_tree(root: Path, version: CgroupVersion, cgroups: tuple[str, ...] = ("kubepods", BE, POD),
              cpus: int = 8) -> HostFS:
    """A directory tree shaped like cgroupfs (files exist, writes never create)."""
    if version == "v2":
        (root / "cgroup.controllers").write_text("cpuset cpu memory\n")
    for cg in cgroups:
        for path, text in default_files(version, cg, cpus).items():
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_text(text)
    return HostFS(root)


class FaultFS(HostFS):
    """A HostFS that fails writes to chosen paths with an errno (tests run as root: chmod cannot deny)."""

    def __init__(self, root: Path, faults: dict[str, int]) -> None:
        super().__init__(root)
        self.faults = faults

    def write(self, path: str, text: str) -> None:
        if path in self.faults:
            raise OSError(self.faults[path], "injected", path)
        super().write(path, text)


@pytest.mark.parametrize(("shares", "weight"), [
    (2, 1), (1024, 39), (262144, 10000), (1, 1), (10**9, 10000), (102, 4),
], ids=["min", "default", "max", "below-min-clamped", "above-max-clamped", "small"])
def test_shares_to_weight(shares: int, weight: int) -> None:
    assert shares_to_weight(shares) == weight


@pytest.mark.parametrize(("weight", "shares"), [
    (1, 2), (100, 2597), (10000, 262144), (0, 2),
], ids=["min", "v2-default", "max", "zero-clamped"])
def test_weight_to_shares(weight: int, shares: int) -> None:
    assert weight_to_shares(weight) == shares


@pytest.mark.parametrize(("text", "cpus", "canonical"), [
    ("0-3,8", (0, 1, 2, 3, 8), "0-3,8"),
    ("3,1,2", (1, 2, 3), "1-3"),
    ("", (), ""),
    ("0-1, 4-5\n", (0, 1, 4, 5), "0-1,4-5"),
], ids=["range-and-single", "unsorted", "empty", "spaces-newline"])
def test_cpuset_parse_format(text: str, cpus: tuple[int, ...], canonical: str) -> None:
    assert cpuset_parse(text) == cpus
    assert cpuset_format(cpus) == canonical


@pytest.mark.parametrize("bad", ["3-1", "a", "-1"], ids=["reversed", "letter", "negative"])
def test_cpuset_parse_rejects(bad: str) -> None:
    with pytest.raises(ValueError):
        cpuset_parse(bad)


@pytest.mark.parametrize(("version", "resource", "value", "path", "text"), [
    ("v1", "cpu.shares", 512, "cpu/kubepods/besteffort/cpu.shares", "512"),
    ("v2", "cpu.shares", 512, "kubepods/besteffort/cpu.weight", "20"),
    ("v1", "cpu.cfs_quota_us", 50000, "cpu/kubepods/besteffort/cpu.cfs_quota_us", "50000"),
    ("v2", "cpu.cfs_quota_us", 50000, "kubepods/besteffort/cpu.max", "50000 100000"),
    ("v2", "cpu.cfs_quota_us", -1, "kubepods/besteffort/cpu.max", "max 100000"),
    ("v2", "cpu.cfs_period_us", 50000, "kubepods/besteffort/cpu.max", "max 50000"),
    ("v1", "memory.limit_in_bytes", 2**30, "memory/kubepods/besteffort/memory.limit_in_bytes", "1073741824"),
    ("v2", "memory.limit_in_bytes", -1, "kubepods/besteffort/memory.max", "max"),
    ("v2", "memory.limit_in_bytes", 2**30, "kubepods/besteffort/memory.max", "1073741824"),
    ("v1", "cpuset.cpus", "2,3,0,1", "cpuset/kubepods/besteffort/cpuset.cpus", "0-3"),
    ("v2", "cpu.idle", 1, "kubepods/besteffort/cpu.idle", "1"),
], ids=["v1-shares", "v2-weight", "v1-quota", "v2-cpu.max-quota", "v2-cpu.max-unlimited", "v2-cpu.max-period",
        "v1-memory-limit", "v2-memory.max-unlimited", "v2-memory.max", "v1-cpuset-canonical", "v2-idle"])
def test_write_lands_in_the_right_file(tmp_path: Path, version: CgroupVersion, resource: str,
                                       value: int | str, path: str, text: str) -> None:
    fs = make_tree(tmp_path, version)
    assert detect_version(fs) == version
    if value == -1:  # the default is already unlimited: limit first so that -1 is a change
        Executor(fs, version).apply([CgroupWrite(BE, resource, 70000)])
    records = Executor(fs, version).apply([CgroupWrite(BE, resource, value)])
    assert [(r.ok, r.path, r.error) for r in records] == [(True, path, "")]
    assert (tmp_path / path).read_text() == text
    assert read_value(fs, version, BE, resource) == Executor(fs, version).read(BE, resource)


def test_v1_unlimited_memory_reads_as_minus_one(tmp_path: Path) -> None:
    fs = make_tree(tmp_path, "v1")
    assert read_value(fs, "v1", BE, "memory.limit_in_bytes") == -1


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_unchanged_values_are_skipped_and_not_written(tmp_path: Path, version: CgroupVersion) -> None:
    fs = MemoryFS()
    for p, t in default_files(version, BE, 8).items():
        fs.seed(p, t)
    ex = Executor(fs, version)
    first = ex.apply([CgroupWrite(BE, "cpu.cfs_quota_us", 200000)])
    again = ex.apply([CgroupWrite(BE, "cpu.cfs_quota_us", 200000), CgroupWrite(BE, "cpuset.cpus", "0-7")])
    assert [r.skipped for r in first] == [False]
    assert [(r.ok, r.skipped) for r in again] == [(True, True), (True, True)]
    assert fs.writes == 1


@pytest.mark.parametrize(("old_parent", "old_child", "new_parent", "new_child", "order"), [
    ("0-3", "0-1", "0-7", "0-5", [BE, POD]),
    ("0-7", "0-5", "0-3", "0-1", [POD, BE]),
], ids=["grow-parent-first", "shrink-child-first"])
def test_cpuset_parent_child_ordering(tmp_path: Path, old_parent: str, old_child: str, new_parent: str,
                                      new_child: str, order: list[str]) -> None:
    fs = make_tree(tmp_path, "v1")
    ex = Executor(fs, "v1")
    ex.apply([CgroupWrite(BE, "cpuset.cpus", old_parent), CgroupWrite(POD, "cpuset.cpus", old_child)])
    records = ex.apply([CgroupWrite(POD, "cpuset.cpus", new_child), CgroupWrite(BE, "cpuset.cpus", new_parent)])
    assert [r.cgroup for r in records] == order
    assert all(r.ok for r in records)


def test_empty_cpuset_is_never_written(tmp_path: Path) -> None:
    fs = make_tree(tmp_path, "v1")
    records = Executor(fs, "v1").apply([CgroupWrite(BE, "cpuset.cpus", "")])
    assert [(r.ok, r.skipped, r.message) for r in records] == [(False, True, "refused: empty cpuset")]
    assert (tmp_path / "cpuset" / BE / "cpuset.cpus").read_text() == "0-7"


@pytest.mark.parametrize(("write", "faults", "error"), [
    (CgroupWrite(BE, "cpu.cfs_quota_us", 500), {}, "EINVAL"),
    (CgroupWrite(BE, "cpu.shares", "lots"), {}, "EINVAL"),
    (CgroupWrite(BE, "cpu.idle", 2), {}, "EINVAL"),
    (CgroupWrite(BE, "cpu.nonsense", 1), {}, "EINVAL"),
    (CgroupWrite("kubepods/gone", "cpu.shares", 512), {}, "ENOENT"),
    (CgroupWrite(BE, "cpu.shares", 512), {"cpu/kubepods/besteffort/cpu.shares": errno.EACCES}, "EACCES"),
    (CgroupWrite(BE, "cpuset.cpus", "0-1"), {"cpuset/kubepods/besteffort/cpuset.cpus": errno.EINVAL}, "EINVAL"),
], ids=["quota-below-1ms", "shares-not-int", "idle-not-bool", "unknown-resource", "missing-cgroup",
        "permission-denied", "kernel-einval"])
def test_errors_are_reported_not_raised(tmp_path: Path, write: CgroupWrite, faults: dict[str, int],
                                        error: str) -> None:
    fs = FaultFS(tmp_path, faults)
    make_tree(tmp_path, "v1")
    ex = Executor(fs, "v1")
    records = ex.apply([write, CgroupWrite(BE, "memory.limit_in_bytes", 2**30)])
    assert [(r.resource, r.ok, r.error) for r in records] == [
        (write.resource, False, error), ("memory.limit_in_bytes", True, "")]
    assert list(ex.audit) == records
