"""Logical cgroup resources and their cgroup v1 / v2 files, with value converters (REFERENCE.md §5).

A *logical* resource is named after its v1 file (``cpu.shares``, ``cpu.cfs_quota_us``, ``cpuset.cpus``,
``memory.limit_in_bytes`` ...) and carries a v1-style value: an ``int`` (shares, microseconds, bytes; ``-1`` =
unlimited) or, for cpusets, a canonical CPU list string (``"0-3,8"``). On v1 it lives in
``<subsystem>/<cgroup>/<file>``; on v2 in ``<cgroup>/<v2 file>`` with the value converted:

* ``cpu.shares`` ↔ ``cpu.weight``: weight = 1 + (shares − 2) × 9999 // 262142 (the Kubernetes/runc mapping of
  [2, 262144] onto [1, 10000]); shares = 2 + (weight − 1) × 262142 // 9999.
* ``cpu.cfs_quota_us`` + ``cpu.cfs_period_us`` ↔ ``cpu.max`` = ``"<quota|max> <period>"``.
* ``memory.limit_in_bytes`` ↔ ``memory.max`` (``-1`` ↔ ``"max"``); ``memory.high`` likewise.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Literal, Protocol

CgroupVersion = Literal["v1", "v2"]
Value = int | str

SHARES_MIN, SHARES_MAX = 2, 262144
WEIGHT_MIN, WEIGHT_MAX = 1, 10000
PERIOD_MIN_US, PERIOD_MAX_US = 1000, 1_000_000
QUOTA_MIN_US = 1000
DEFAULT_PERIOD_US = 100_000
V1_UNLIMITED_BYTES = 1 << 62
"""v1 reports "no limit" as a huge page-aligned number; anything at or above this reads as -1."""


class Reader(Protocol):
    """What value rendering needs from a filesystem: read one file relative to the root."""

    def read(self, path: str) -> str:
        """The file's content. Raises OSError."""
        ...


@dataclass(frozen=True)
class Resource:
    """One logical cgroup resource.

    ``subsystem``/``v1_file`` locate it on v1, ``v2_file`` on v2; ``kind`` is ``int`` or ``cpuset``;
    ``lo``/``hi`` the valid v1 range (``-1`` additionally allowed when ``unlimited_ok``); ``hierarchical``
    resources need parent-before-child ordering when growing (DESIGN.md §6).
    """

    name: str
    subsystem: str
    v1_file: str
    v2_file: str
    kind: Literal["int", "cpuset"] = "int"
    lo: int = 0
    hi: int = (1 << 63) - 1
    unlimited_ok: bool = False
    hierarchical: bool = False


RESOURCES: dict[str, Resource] = {
    r.name: r
    for r in (
        Resource("cpu.shares", "cpu", "cpu.shares", "cpu.weight", lo=SHARES_MIN, hi=SHARES_MAX),
        Resource("cpu.cfs_quota_us", "cpu", "cpu.cfs_quota_us", "cpu.max", lo=QUOTA_MIN_US,
                 unlimited_ok=True, hierarchical=True),
        Resource("cpu.cfs_period_us", "cpu", "cpu.cfs_period_us", "cpu.max", lo=PERIOD_MIN_US,
                 hi=PERIOD_MAX_US),
        Resource("cpu.cfs_burst_us", "cpu", "cpu.cfs_burst_us", "cpu.max.burst"),
        Resource("cpu.idle", "cpu", "cpu.idle", "cpu.idle", lo=0, hi=1),
        Resource("cpuset.cpus", "cpuset", "cpuset.cpus", "cpuset.cpus", kind="cpuset", hierarchical=True),
        Resource("memory.limit_in_bytes", "memory", "memory.limit_in_bytes", "memory.max", lo=0,
                 unlimited_ok=True, hierarchical=True),
        Resource("memory.min", "memory", "memory.min", "memory.min", hierarchical=True),
        Resource("memory.low", "memory", "memory.low", "memory.low", hierarchical=True),
        Resource("memory.high", "memory", "memory.high", "memory.high", unlimited_ok=True),
    )
}
"""Every logical resource the agent writes, by name."""


def shares_to_weight(shares: int) -> int:
    """cgroup v1 ``cpu.shares`` → v2 ``cpu.weight`` (shares clamped to [2, 262144] first)."""
    s = min(max(shares, SHARES_MIN), SHARES_MAX)
    return WEIGHT_MIN + (s - SHARES_MIN) * (WEIGHT_MAX - WEIGHT_MIN) // (SHARES_MAX - SHARES_MIN)


def weight_to_shares(weight: int) -> int:
    """cgroup v2 ``cpu.weight`` → v1 ``cpu.shares`` (weight clamped to [1, 10000] first)."""
    w = min(max(weight, WEIGHT_MIN), WEIGHT_MAX)
    return SHARES_MIN + (w - WEIGHT_MIN) * (SHARES_MAX - SHARES_MIN) // (WEIGHT_MAX - WEIGHT_MIN)


@lru_cache(maxsize=4096)
def cpuset_parse(text: str) -> tuple[int, ...]:
    """``"0-3,8"`` → ``(0, 1, 2, 3, 8)`` (sorted, unique). Raises ValueError on malformed lists."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            lo_s, hi_s = part.split("-", 1)
            lo, hi = int(lo_s), int(hi_s)
            if lo < 0 or hi < lo:
                raise ValueError(f"bad cpu range {part!r}")
            cpus.update(range(lo, hi + 1))
        else:
            cpu = int(part)
            if cpu < 0:
                raise ValueError(f"bad cpu {part!r}")
            cpus.add(cpu)
    return tuple(sorted(cpus))


def cpuset_format(cpus: tuple[int, ...] | list[int]) -> str:
    """``(0, 1, 2, 3, 8)`` → ``"0-3,8"`` (the kernel's canonical form)."""
    return _format(tuple(cpus))


@lru_cache(maxsize=4096)
def _format(cpus: tuple[int, ...]) -> str:
    out: list[str] = []
    ordered = sorted(set(cpus))
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        out.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(out)


def file_path(resource: Resource, cgroup: str, version: CgroupVersion) -> str:
    """The file of ``resource`` for ``cgroup`` (a relative dir such as ``kubepods/besteffort``)."""
    cg = cgroup.strip("/")
    if version == "v1":
        return "/".join(p for p in (resource.subsystem, cg, resource.v1_file) if p)
    return "/".join(p for p in (cg, resource.v2_file) if p)


def normalize(resource: Resource, value: Value) -> Value:
    """The canonical logical value: cpusets as canonical strings, ints as ints. Raises ValueError."""
    if resource.kind == "cpuset":
        return cpuset_format(cpuset_parse(str(value)))
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{resource.name}: expected an integer, got {value!r}")
    return value


def validate(resource: Resource, value: Value) -> str | None:
    """Why the kernel would refuse ``value`` (its EINVAL), or None when valid."""
    try:
        v = normalize(resource, value)
    except ValueError as exc:
        return str(exc)
    if resource.kind == "cpuset":
        return None
    assert isinstance(v, int)
    if v == -1 and resource.unlimited_ok:
        return None
    if not resource.lo <= v <= resource.hi:
        return f"{resource.name}={v} outside [{resource.lo}, {resource.hi}]"
    return None


def _read_cpu_max(fs: Reader, cgroup: str) -> tuple[int, int]:
    text = fs.read(file_path(RESOURCES["cpu.cfs_quota_us"], cgroup, "v2")).split()
    quota = -1 if not text or text[0] == "max" else int(text[0])
    period = int(text[1]) if len(text) > 1 else DEFAULT_PERIOD_US
    return quota, period


def read_value(fs: Reader, version: CgroupVersion, cgroup: str, name: str) -> Value:
    """Read logical resource ``name`` of ``cgroup`` as a v1-style value.

    Raises KeyError for an unknown resource, OSError from the filesystem, ValueError on unparsable content.
    """
    res = RESOURCES[name]
    if version == "v2" and res.v2_file == "cpu.max":
        quota, period = _read_cpu_max(fs, cgroup)
        return quota if name == "cpu.cfs_quota_us" else period
    text = fs.read(file_path(res, cgroup, version)).strip()
    if res.kind == "cpuset":
        return cpuset_format(cpuset_parse(text))
    if text == "max":
        return -1
    value = int(text)
    if version == "v2" and name == "cpu.shares":
        return weight_to_shares(value)
    if res.unlimited_ok and value >= V1_UNLIMITED_BYTES:
        return -1
    return value


def render(fs: Reader, version: CgroupVersion, cgroup: str, name: str, value: Value) -> tuple[str, str]:
    """The ``(path, text)`` to write for logical ``name`` = ``value`` on ``version``.

    On v2 the quota/period halves of ``cpu.max`` are merged with the other half read from the file (OSError when
    it cannot be read). Raises KeyError for an unknown resource, ValueError for a malformed value.
    """
    res = RESOURCES[name]
    v = normalize(res, value)
    path = file_path(res, cgroup, version)
    if version == "v1":
        return path, str(v)
    if res.v2_file == "cpu.max":
        quota, period = _read_cpu_max(fs, cgroup)
        if name == "cpu.cfs_quota_us":
            quota = int(v)
        else:
            period = int(v)
        return path, f"{'max' if quota < 0 else quota} {period}"
    if name == "cpu.shares":
        return path, str(shares_to_weight(int(v)))
    if isinstance(v, int) and v < 0 and res.unlimited_ok:
        return path, "max"
    return path, str(v)
