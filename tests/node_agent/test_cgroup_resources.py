"""Every dimension of REFERENCE.md §5's cgroup file table, v1 and v2, on temp-dir trees (HostFS on tmp_path).

One row per (version, logical resource, value): the file it lands in, the text written, and the value read back.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from colo_node_agent.cgroups import CgroupWrite, Executor, HostFS, MemoryFS
from colo_node_agent.cgroups.fs import default_files, detect_version
from colo_node_agent.cgroups.layout import CGROUPFS, Layout
from colo_node_agent.cgroups.resources import (
    RESOURCES,
    CgroupVersion,
    Value,
    identity,
    read_value,
    render,
    validate,
)

BE = "kubepods/besteffort"


def tree(root: Path, version: CgroupVersion, cgroups: tuple[str, ...] = ("kubepods", BE)) -> HostFS:
    if version == "v2":
        (root / "cgroup.controllers").write_text("cpuset cpu io memory\n")
    for cg in cgroups:
        for path, text in default_files(version, cg, 8).items():
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_text(text)
    return HostFS(root)


# (version, resource, value, path, text written, value read back)
ROWS: list[tuple[CgroupVersion, str, Value, str, str, Value]] = [
    ("v1", "cpu.shares", 2048, "cpu/kubepods/besteffort/cpu.shares", "2048", 2048),
    # weight 79 maps back to 2046 shares: v2 has 10,000 weight steps for v1's 262,143 shares
    ("v2", "cpu.shares", 2048, "kubepods/besteffort/cpu.weight", "79", 2046),
    ("v1", "cpu.cfs_quota_us", 250_000, "cpu/kubepods/besteffort/cpu.cfs_quota_us", "250000", 250_000),
    ("v2", "cpu.cfs_quota_us", 250_000, "kubepods/besteffort/cpu.max", "250000 100000", 250_000),
    ("v1", "cpu.cfs_period_us", 50_000, "cpu/kubepods/besteffort/cpu.cfs_period_us", "50000", 50_000),
    ("v2", "cpu.cfs_period_us", 50_000, "kubepods/besteffort/cpu.max", "max 50000", 50_000),
    ("v1", "cpu.cfs_burst_us", 30_000, "cpu/kubepods/besteffort/cpu.cfs_burst_us", "30000", 30_000),
    ("v2", "cpu.cfs_burst_us", 30_000, "kubepods/besteffort/cpu.max.burst", "30000", 30_000),
    ("v1", "cpu.idle", 1, "cpu/kubepods/besteffort/cpu.idle", "1", 1),
    ("v2", "cpu.idle", 1, "kubepods/besteffort/cpu.idle", "1", 1),
    ("v1", "cpuset.cpus", "4,5,2,3", "cpuset/kubepods/besteffort/cpuset.cpus", "2-5", "2-5"),
    ("v2", "cpuset.cpus", "4,5,2,3", "kubepods/besteffort/cpuset.cpus", "2-5", "2-5"),
    ("v1", "cpuset.mems", "0-1", "cpuset/kubepods/besteffort/cpuset.mems", "0-1", "0-1"),
    ("v2", "cpuset.mems", "0-1", "kubepods/besteffort/cpuset.mems", "0-1", "0-1"),
    ("v1", "memory.limit_in_bytes", 2**30, "memory/kubepods/besteffort/memory.limit_in_bytes", "1073741824",
     2**30),
    ("v2", "memory.limit_in_bytes", 2**30, "kubepods/besteffort/memory.max", "1073741824", 2**30),
    ("v1", "memory.min", 2**29, "memory/kubepods/besteffort/memory.min", "536870912", 2**29),
    ("v2", "memory.min", 2**29, "kubepods/besteffort/memory.min", "536870912", 2**29),
    ("v1", "memory.low", 2**29, "memory/kubepods/besteffort/memory.low", "536870912", 2**29),
    ("v2", "memory.low", 2**29, "kubepods/besteffort/memory.low", "536870912", 2**29),
    ("v1", "memory.high", 2**30, "memory/kubepods/besteffort/memory.high", "1073741824", 2**30),
    ("v2", "memory.high", 2**30, "kubepods/besteffort/memory.high", "1073741824", 2**30),
    ("v1", "blkio.throttle.read_bps_device", "8:0 1048576", "blkio/kubepods/besteffort/blkio.throttle.read_bps_device",
     "8:0 1048576", "8:0 1048576"),
    ("v2", "blkio.throttle.read_bps_device", "8:0 1048576", "kubepods/besteffort/io.max", "8:0 rbps=1048576",
     "8:0 1048576"),
    ("v1", "blkio.throttle.write_bps_device", "8:16 2000000",
     "blkio/kubepods/besteffort/blkio.throttle.write_bps_device", "8:16 2000000", "8:16 2000000"),
    ("v2", "blkio.throttle.write_bps_device", "8:16 2000000", "kubepods/besteffort/io.max", "8:16 wbps=2000000",
     "8:16 2000000"),
    ("v1", "blkio.throttle.read_iops_device", "8:0 300", "blkio/kubepods/besteffort/blkio.throttle.read_iops_device",
     "8:0 300", "8:0 300"),
    ("v2", "blkio.throttle.read_iops_device", "8:0 300", "kubepods/besteffort/io.max", "8:0 riops=300", "8:0 300"),
    ("v1", "blkio.throttle.write_iops_device", "8:0 200",
     "blkio/kubepods/besteffort/blkio.throttle.write_iops_device", "8:0 200", "8:0 200"),
    ("v2", "blkio.throttle.write_iops_device", "8:0 200", "kubepods/besteffort/io.max", "8:0 wiops=200", "8:0 200"),
]


@pytest.mark.parametrize(("version", "resource", "value", "path", "text", "back"), ROWS,
                         ids=[f"{r[0]}-{r[1]}" for r in ROWS])
def test_dimension_lands_in_its_file(tmp_path: Path, version: CgroupVersion, resource: str, value: Value,
                                     path: str, text: str, back: Value) -> None:
    fs = tree(tmp_path, version)
    assert detect_version(fs) == version
    records = Executor(fs, version).apply([CgroupWrite(BE, resource, value)])
    assert [(r.ok, r.path, r.error) for r in records] == [(True, path, "")]
    assert (tmp_path / path).read_text() == text
    key = str(value).split()[0] if RESOURCES[resource].kind == "device" else ""
    assert read_value(fs, version, BE, resource, key) == back


@pytest.mark.parametrize(("version", "resource", "unlimited_text"), [
    ("v1", "cpu.cfs_quota_us", "-1"), ("v2", "cpu.cfs_quota_us", "max 100000"),
    ("v1", "memory.limit_in_bytes", "-1"), ("v2", "memory.limit_in_bytes", "max"),
    ("v1", "memory.high", "max"), ("v2", "memory.high", "max"),
    ("v1", "blkio.throttle.read_bps_device", "8:0 0"), ("v2", "blkio.throttle.read_bps_device", "8:0 rbps=max"),
], ids=lambda v: str(v))
def test_unlimited_is_rendered_as_each_kernel_spells_it(version: CgroupVersion, resource: str,
                                                        unlimited_text: str) -> None:
    fs = MemoryFS()
    for p, t in default_files(version, BE, 8).items():
        fs.seed(p, t)
    value: Value = "8:0 -1" if RESOURCES[resource].kind == "device" else -1
    assert render(fs, version, BE, resource, value)[1] == unlimited_text


@pytest.mark.parametrize(("content", "version", "device", "want"), [
    ("8:0 1048576\n8:16 500\n", "v1", "8:16", 500),
    ("8:0 1048576\n", "v1", "8:16", -1),
    ("8:0 rbps=max wbps=4096 riops=max wiops=max\n", "v2", "8:0", -1),
    ("8:0 rbps=100 wbps=4096 riops=max wiops=max\n", "v2", "8:0", 100),
    ("", "v2", "8:0", -1),
], ids=["v1-second-device", "v1-no-rule", "v2-max", "v2-limit", "v2-empty"])
def test_device_rules_read_per_device(content: str, version: CgroupVersion, device: str, want: int) -> None:
    fs = MemoryFS()
    path = "blkio/kubepods/besteffort/blkio.throttle.read_bps_device" if version == "v1" else \
        "kubepods/besteffort/io.max"
    fs.seed(path, content)
    assert read_value(fs, version, BE, "blkio.throttle.read_bps_device", device) == f"{device} {want}"


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_several_devices_and_keys_keep_their_own_rules(version: CgroupVersion) -> None:
    fs = MemoryFS()
    for p, t in default_files(version, BE, 8).items():
        fs.seed(p, t)
    ex = Executor(fs, version)
    records = ex.apply([
        CgroupWrite(BE, "blkio.throttle.read_bps_device", "8:0 1000"),
        CgroupWrite(BE, "blkio.throttle.read_bps_device", "8:16 2000"),
        CgroupWrite(BE, "blkio.throttle.write_iops_device", "8:0 30"),
    ])
    assert all(r.ok for r in records) and len(records) == 3
    fresh = Executor(fs, version)
    assert fresh.read(BE, "blkio.throttle.read_bps_device", "8:0") == "8:0 1000"
    assert fresh.read(BE, "blkio.throttle.read_bps_device", "8:16") == "8:16 2000"
    assert fresh.read(BE, "blkio.throttle.write_iops_device", "8:0") == "8:0 30"
    again = ex.apply([CgroupWrite(BE, "blkio.throttle.read_bps_device", "8:16 2000")])
    assert [r.skipped for r in again] == [True]
    ex.apply([CgroupWrite(BE, "blkio.throttle.read_bps_device", "8:0 -1")])
    assert Executor(fs, version).read(BE, "blkio.throttle.read_bps_device", "8:0") == "8:0 -1"


@pytest.mark.parametrize(("resource", "value", "problem"), [
    ("cpu.shares", 1, "outside"),
    ("cpu.cfs_quota_us", 999, "outside"),
    ("cpu.cfs_quota_us", -1, None),
    ("cpu.cfs_period_us", 2_000_000, "outside"),
    ("cpu.idle", 2, "outside"),
    ("memory.limit_in_bytes", -1, None),
    ("memory.min", -1, "outside"),
    ("cpuset.cpus", "3-1", "bad cpu range"),
    ("blkio.throttle.read_bps_device", "8:0 0", "outside"),
    ("blkio.throttle.read_bps_device", "sda 100", "MAJ:MIN"),
    ("resctrl.l3", "0=f0;1=ff", None),
    ("resctrl.l3", "0=f0f", "contiguous"),
    ("resctrl.l3", "0=0", "contiguous"),
    ("resctrl.mb", "0=40;1=100", None),
    ("resctrl.tasks", 0, "outside"),
    ("vm.min_free_kbytes", 1024, "outside"),
    ("vm.watermark_scale_factor", 150, None),
], ids=lambda v: str(v))
def test_validate_like_the_kernel(resource: str, value: Value, problem: str | None) -> None:
    got = validate(RESOURCES[resource], value)
    assert (got is None) if problem is None else (got is not None and problem in got)


@pytest.mark.parametrize(("resource", "value", "want"), [
    ("cpu.shares", 2, "cpu.shares"),
    ("blkio.throttle.read_bps_device", "8:0 5", "blkio.throttle.read_bps_device 8:0"),
    ("resctrl.tasks", 4242, "resctrl.tasks 4242"),
], ids=["plain", "device", "task"])
def test_identity(resource: str, value: Value, want: str) -> None:
    assert identity(resource, value) == want


@pytest.mark.parametrize(("layout", "qos", "uid", "qos_dir", "pod_dir"), [
    (CGROUPFS, "BE", "1a-2b", "kubepods/besteffort", "kubepods/besteffort/pod1a-2b"),
    (CGROUPFS, "LS", "u", "kubepods/burstable", "kubepods/burstable/podu"),
    (CGROUPFS, "LSR", "u", "kubepods", "kubepods/podu"),
    (Layout("systemd"), "BE", "1a-2b", "kubepods.slice/kubepods-besteffort.slice",
     "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1a_2b.slice"),
    (Layout("systemd"), "LS", "1a-2b", "kubepods.slice/kubepods-burstable.slice",
     "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1a_2b.slice"),
    (Layout("systemd"), "LSE", "1a-2b", "kubepods.slice", "kubepods.slice/kubepods-pod1a_2b.slice"),
    (Layout("cgroupfs", "colo-test"), "BE", "u", "colo-test/kubepods/besteffort",
     "colo-test/kubepods/besteffort/podu"),
    (Layout("systemd", "colo.slice/"), "LS", "u", "colo.slice/kubepods.slice/kubepods-burstable.slice",
     "colo.slice/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podu.slice"),
], ids=["cgroupfs-be", "cgroupfs-ls", "cgroupfs-lsr", "systemd-be", "systemd-ls", "systemd-lse",
        "cgroupfs-parent", "systemd-parent"])
def test_layouts(layout: Layout, qos: str, uid: str, qos_dir: str, pod_dir: str) -> None:
    assert layout.qos_dir(qos) == qos_dir  # type: ignore[arg-type]
    assert layout.pod_dir(qos, uid) == pod_dir  # type: ignore[arg-type]
    assert layout.qos_dirs[2] == layout.besteffort


@pytest.mark.parametrize("layout", [CGROUPFS, Layout("systemd", "colo")], ids=["cgroupfs", "systemd"])
def test_executor_writes_through_a_systemd_tree(tmp_path: Path, layout: Layout) -> None:
    fs = tree(tmp_path, "v2", layout.qos_dirs)
    records = Executor(fs, "v2").apply([CgroupWrite(layout.besteffort, "cpu.idle", 1)])
    assert [(r.ok, r.path) for r in records] == [(True, f"{layout.besteffort}/cpu.idle")]
