"""Read-only cgroup statistics, v1 and v2, in one set of units (REFERENCE.md §2, §5 file table).

========================  ======================================  ==========================================
statistic                 v1 file                                 v2 file
========================  ======================================  ==========================================
CPU time (ns)             ``cpuacct/<cg>/cpuacct.usage``          ``<cg>/cpu.stat`` usage_usec × 1000
throttling                ``cpu/<cg>/cpu.stat`` (times in ns)     ``<cg>/cpu.stat`` (times in µs → ns)
memory usage (bytes)      ``memory/<cg>/memory.usage_in_bytes``   ``<cg>/memory.current``
memory.stat               ``memory/<cg>/memory.stat``             ``<cg>/memory.stat``
effective CPUs            ``cpuset/<cg>/cpuset.effective_cpus``   ``<cg>/cpuset.cpus.effective``
PSI                       ``cpuacct/<cg>/{cpu,memory,io}.pressure``  ``<cg>/{cpu,memory,io}.pressure``
                          (Alibaba kernels), else the hybrid
                          ``unified/<cg>/...`` mount
tasks                     ``cpu/<cg>/cgroup.procs``               ``<cg>/cgroup.procs``
========================  ======================================  ==========================================

Every reader raises OSError when the file is missing (the caller decides whether the kernel lacks it) and
ValueError when its content cannot be parsed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from colo_node_agent.cgroups.fs import CgroupFS
from colo_node_agent.cgroups.resources import CgroupVersion, cpuset_parse

PSIResource = Literal["cpu", "memory", "io"]


@dataclass(frozen=True)
class CPUStat:
    """CFS bandwidth counters of a cgroup (cumulative): periods, throttled periods, throttled time (ns), and
    bursts and burst time (ns) where the kernel counts them (0 otherwise)."""

    nr_periods: int = 0
    nr_throttled: int = 0
    throttled_ns: int = 0
    nr_bursts: int = 0
    burst_ns: int = 0


@dataclass(frozen=True)
class PSILine:
    """One PSI line: share of wall time stalled (percent) over 10/60/300 s, and total stalled µs."""

    avg10: float = 0.0
    avg60: float = 0.0
    avg300: float = 0.0
    total_us: int = 0


@dataclass(frozen=True)
class PSI:
    """Pressure stall information of one resource: ``some`` task stalled, ``full`` all tasks stalled (the
    kernel has no ``full`` line for CPU before 5.13: zeros then)."""

    some: PSILine
    full: PSILine


def _cg(cgroup: str) -> str:
    return cgroup.strip("/")


def _join(*parts: str) -> str:
    return "/".join(p for p in parts if p)


def parse_flat_keyed(text: str) -> dict[str, int]:
    """``"key value"`` lines (cpu.stat, memory.stat) → dict. Raises ValueError on a non-integer value."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            out[parts[0]] = int(parts[1])
    return out


def cpu_usage_ns(fs: CgroupFS, version: CgroupVersion, cgroup: str) -> int:
    """Cumulative CPU time of ``cgroup`` in nanoseconds (Δ / Δt = usage, REFERENCE.md §2)."""
    if version == "v1":
        return int(fs.read(_join("cpuacct", _cg(cgroup), "cpuacct.usage")).strip())
    return parse_flat_keyed(fs.read(_join(_cg(cgroup), "cpu.stat")))["usage_usec"] * 1000


def cpu_stat(fs: CgroupFS, version: CgroupVersion, cgroup: str) -> CPUStat:
    """The CFS throttling counters of ``cgroup`` (v1 times are ns, v2 µs: both returned in ns)."""
    if version == "v1":
        kv = parse_flat_keyed(fs.read(_join("cpu", _cg(cgroup), "cpu.stat")))
        return CPUStat(kv.get("nr_periods", 0), kv.get("nr_throttled", 0), kv.get("throttled_time", 0),
                       kv.get("nr_bursts", 0), kv.get("burst_time", 0))
    kv = parse_flat_keyed(fs.read(_join(_cg(cgroup), "cpu.stat")))
    return CPUStat(kv.get("nr_periods", 0), kv.get("nr_throttled", 0), kv.get("throttled_usec", 0) * 1000,
                   kv.get("nr_bursts", 0), kv.get("burst_usec", 0) * 1000)


def throttled_ratio(before: CPUStat, after: CPUStat) -> float:
    """Share of CFS periods throttled between two readings (0 when no period elapsed)."""
    periods = after.nr_periods - before.nr_periods
    return (after.nr_throttled - before.nr_throttled) / periods if periods > 0 else 0.0


def memory_usage_bytes(fs: CgroupFS, version: CgroupVersion, cgroup: str) -> int:
    """Memory charged to ``cgroup`` (page cache included), bytes."""
    if version == "v1":
        return int(fs.read(_join("memory", _cg(cgroup), "memory.usage_in_bytes")).strip())
    return int(fs.read(_join(_cg(cgroup), "memory.current")).strip())


def memory_stat(fs: CgroupFS, version: CgroupVersion, cgroup: str) -> dict[str, int]:
    """``memory.stat`` of ``cgroup`` as a dict (keys as the kernel names them)."""
    sub = "memory" if version == "v1" else ""
    return parse_flat_keyed(fs.read(_join(sub, _cg(cgroup), "memory.stat")))


def memory_working_set_bytes(stat: dict[str, int], version: CgroupVersion) -> int:
    """Pod/container memory in REFERENCE.md §2 terms: anon (active + inactive) + unevictable, bytes.

    v1 reads the hierarchical ``total_*`` keys (a pod's memory is in its container children); v2's keys are
    hierarchical already.
    """
    p = "total_" if version == "v1" else ""
    return stat.get(f"{p}active_anon", 0) + stat.get(f"{p}inactive_anon", 0) + stat.get(f"{p}unevictable", 0)


def cpuset_effective(fs: CgroupFS, version: CgroupVersion, cgroup: str) -> tuple[int, ...]:
    """The CPUs ``cgroup`` may really run on (its cpuset intersected with its ancestors')."""
    if version == "v1":
        return cpuset_parse(fs.read(_join("cpuset", _cg(cgroup), "cpuset.effective_cpus")))
    return cpuset_parse(fs.read(_join(_cg(cgroup), "cpuset.cpus.effective")))


def parse_psi(text: str) -> PSI:
    """Parse a ``*.pressure`` file. Raises ValueError when the ``some`` line is missing."""
    lines: dict[str, PSILine] = {}
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        kv = {k: v for k, _, v in (p.partition("=") for p in parts[1:])}
        lines[parts[0]] = PSILine(float(kv.get("avg10", 0)), float(kv.get("avg60", 0)),
                                  float(kv.get("avg300", 0)), int(kv.get("total", 0)))
    if "some" not in lines:
        raise ValueError("no 'some' line in pressure file")
    return PSI(lines["some"], lines.get("full", PSILine()))


def psi(fs: CgroupFS, version: CgroupVersion, cgroup: str, resource: PSIResource) -> PSI:
    """PSI of ``resource`` for ``cgroup``; on v1 from ``cpuacct`` (kernels that put it there, as Koordinator
    reads it), else from the hybrid ``unified`` mount. Raises OSError when neither has it."""
    name = f"{resource}.pressure"
    if version == "v2":
        return parse_psi(fs.read(_join(_cg(cgroup), name)))
    try:
        return parse_psi(fs.read(_join("cpuacct", _cg(cgroup), name)))
    except FileNotFoundError:
        return parse_psi(fs.read(_join("unified", _cg(cgroup), name)))


def procs(fs: CgroupFS, version: CgroupVersion, cgroup: str, subsystem: str = "cpu") -> list[int]:
    """Process ids in ``cgroup`` (v1: of ``subsystem``'s hierarchy)."""
    sub = subsystem if version == "v1" else ""
    return [int(x) for x in fs.read(_join(sub, _cg(cgroup), "cgroup.procs")).split()]
