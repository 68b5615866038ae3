"""Read-only statistics, v1 and v2, in one set of units (fake trees in tmp_path; this machine's tree read-only)."""

from __future__ import annotations

from pathlib import Path

import pytest

from colo_node_agent.cgroups import HostFS
from colo_node_agent.cgroups.fs import detect_version
from colo_node_agent.cgroups.resources import CgroupVersion
from colo_node_agent.cgroups.stats import (
    PSI,
    CPUStat,
    PSILine,
    cpu_stat,
    cpu_usage_ns,
    cpuset_effective,
    memory_stat,
    memory_usage_bytes,
    memory_working_set_bytes,
    parse_psi,
    procs,
    psi,
    throttled_ratio,
)

POD = "kubepods/burstable/podx"

V1 = {
    f"cpuacct/{POD}/cpuacct.usage": "123456789\n",
    f"cpu/{POD}/cpu.stat": "nr_periods 100\nnr_throttled 7\nthrottled_time 3500000\nnr_bursts 2\nburst_time 40\n",
    f"memory/{POD}/memory.usage_in_bytes": "104857600\n",
    f"memory/{POD}/memory.stat": "cache 5\nrss 10\ntotal_active_anon 1000\ntotal_inactive_anon 200\n"
                                 "total_unevictable 30\nactive_anon 1\n",
    f"cpuset/{POD}/cpuset.effective_cpus": "0-1,4\n",
    f"cpu/{POD}/cgroup.procs": "10\n11\n",
    f"unified/{POD}/cpu.pressure": "some avg10=1.50 avg60=0.50 avg300=0.10 total=1234\n",
}
V2 = {
    "cgroup.controllers": "cpu memory\n",
    f"{POD}/cpu.stat": "usage_usec 123456\nuser_usec 1\nsystem_usec 2\nnr_periods 100\nnr_throttled 7\n"
                       "throttled_usec 3500\nnr_bursts 2\nburst_usec 40\n",
    f"{POD}/memory.current": "104857600\n",
    f"{POD}/memory.stat": "anon 1200\nactive_anon 1000\ninactive_anon 200\nunevictable 30\nfile 99\n",
    f"{POD}/cpuset.cpus.effective": "0-1,4\n",
    f"{POD}/cgroup.procs": "10\n11\n",
    f"{POD}/cpu.pressure": "some avg10=1.50 avg60=0.50 avg300=0.10 total=1234\n"
                           "full avg10=0.25 avg60=0.00 avg300=0.00 total=99\n",
}


def fake(root: Path, files: dict[str, str]) -> HostFS:
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    return HostFS(root)


@pytest.mark.parametrize(("version", "files", "usage_ns", "stat"), [
    ("v1", V1, 123_456_789, CPUStat(100, 7, 3_500_000, 2, 40)),
    ("v2", V2, 123_456_000, CPUStat(100, 7, 3_500_000, 2, 40_000)),
], ids=["v1", "v2"])
def test_cpu(tmp_path: Path, version: CgroupVersion, files: dict[str, str], usage_ns: int, stat: CPUStat) -> None:
    fs = fake(tmp_path, files)
    assert detect_version(fs) == version
    assert cpu_usage_ns(fs, version, POD) == usage_ns
    assert cpu_stat(fs, version, POD) == stat
    assert cpuset_effective(fs, version, POD) == (0, 1, 4)
    assert procs(fs, version, POD) == [10, 11]


@pytest.mark.parametrize(("version", "files"), [("v1", V1), ("v2", V2)], ids=["v1", "v2"])
def test_memory(tmp_path: Path, version: CgroupVersion, files: dict[str, str]) -> None:
    fs = fake(tmp_path, files)
    assert memory_usage_bytes(fs, version, POD) == 104_857_600
    assert memory_working_set_bytes(memory_stat(fs, version, POD), version) == 1230  # anon + unevictable


@pytest.mark.parametrize(("version", "files", "want"), [
    ("v1", V1, PSI(PSILine(1.5, 0.5, 0.1, 1234), PSILine())),
    ("v2", V2, PSI(PSILine(1.5, 0.5, 0.1, 1234), PSILine(0.25, 0.0, 0.0, 99))),
], ids=["v1-hybrid-unified-mount", "v2"])
def test_psi(tmp_path: Path, version: CgroupVersion, files: dict[str, str], want: PSI) -> None:
    assert psi(fake(tmp_path, files), version, POD, "cpu") == want


def test_psi_missing_raises(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        psi(fake(tmp_path, V1), "v1", POD, "memory")
    with pytest.raises(ValueError):
        parse_psi("full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")


@pytest.mark.parametrize(("before", "after", "ratio"), [
    (CPUStat(100, 7), CPUStat(200, 57), 0.5),
    (CPUStat(100, 7), CPUStat(100, 7), 0.0),
], ids=["half-throttled", "no-period"])
def test_throttled_ratio(before: CPUStat, after: CPUStat, ratio: float) -> None:
    assert throttled_ratio(before, after) == ratio


def test_this_machines_root_cgroup_reads() -> None:
    root = Path("/sys/fs/cgroup")
    fs = HostFS(root)
    version = detect_version(fs)
    probe = root / ("cpuacct/cpuacct.usage" if version == "v1" else "cpu.stat")
    if not probe.exists():
        pytest.skip(f"no readable cgroup tree at {root} ({probe} missing)")
    first = cpu_usage_ns(fs, version, "")
    assert first > 0
    assert cpu_usage_ns(fs, version, "") >= first
    assert cpu_stat(fs, version, "").nr_throttled >= 0
