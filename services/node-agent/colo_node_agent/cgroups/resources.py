"""Logical cgroup resources and their cgroup v1 / v2 files, with value converters (REFERENCE.md §5).

A *logical* resource is named after its v1 file (``cpu.shares``, ``cpu.cfs_quota_us``, ``cpuset.cpus``,
``memory.limit_in_bytes`` ...) and carries a v1-style value. On v1 it lives in
``<subsystem>/<cgroup>/<file>``; on v2 in ``<cgroup>/<v2 file>`` with the value converted (REFERENCE.md §5 file
table):

==========================  =============================  ===============================================
logical (v1 file)           v2 file                        conversion
==========================  =============================  ===============================================
cpu.shares                  cpu.weight                     1 + (s − 2) × 9999 // 262142 (runc/Kubernetes)
cpu.cfs_quota_us/period_us  cpu.max                        ``"<quota|max> <period>"``
cpu.cfs_burst_us            cpu.max.burst                  µs both sides
cpu.idle                    cpu.idle                       0/1
cpuset.cpus, cpuset.mems    cpuset.cpus, cpuset.mems       canonical CPU list ``"0-3,8"``
memory.limit_in_bytes       memory.max                     ``-1`` ↔ ``"max"``
memory.min/low/high         memory.min/low/high            bytes; high ``-1`` ↔ ``"max"``
blkio.throttle.*_device     io.max                         ``"8:0 N"`` ↔ ``"8:0 rbps=N"`` (``-1`` ↔ max)
==========================  =============================  ===============================================

Value kinds: ``int`` (shares, µs, bytes, ``-1`` = unlimited where allowed); ``cpuset`` (canonical list string);
``device`` (``"MAJ:MIN N"``, one throttle rule of one block device, ``N`` = −1 for no limit); ``schemata`` (one
resctrl schemata line without its prefix: ``"0=ff;1=ff"``); ``pid`` (a task id written to a resctrl group).

Besides cgroup files, two other trees are written through the same executor: ``resctrl`` (``/sys/fs/resctrl``:
``<group>/schemata`` and ``<group>/tasks``) and ``sysctl`` (``/proc/sys``: ``vm/min_free_kbytes``,
``vm/watermark_scale_factor``). Read-only statistics (usage, throttling, PSI) are in :mod:`.stats`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal, Protocol

from colo.slo import WATERMARK_SCALE_RANGE

CgroupVersion = Literal["v1", "v2"]
Value = int | str
Tree = Literal["cgroup", "resctrl", "sysctl"]
Kind = Literal["int", "cpuset", "device", "schemata", "pid"]

SHARES_MIN, SHARES_MAX = 2, 262144
WEIGHT_MIN, WEIGHT_MAX = 1, 10000
PERIOD_MIN_US, PERIOD_MAX_US = 1000, 1_000_000
QUOTA_MIN_US = 1000
DEFAULT_PERIOD_US = 100_000
V1_UNLIMITED_BYTES = 1 << 62
"""v1 reports "no limit" as a huge page-aligned number; anything at or above this reads as -1."""
MIN_FREE_KBYTES_RANGE = (10 * 1024, 10 * 1024 * 1024)
"""Accepted ``vm.min_free_kbytes`` (KiB): Koordinator's system-config validator range."""

_DEVICE = re.compile(r"^(\d+):(\d+)$")


class Reader(Protocol):
    """What value rendering needs from a filesystem: read one file relative to the root."""

    def read(self, path: str) -> str:
        """The file's content. Raises OSError."""
        ...


@dataclass(frozen=True)
class Resource:
    """One logical resource.

    ``subsystem``/``v1_file`` locate it on v1, ``v2_file`` on v2 (for the ``resctrl`` and ``sysctl`` trees
    ``<subsystem>/<dir>/<v1_file>`` on both); ``kind`` the value kind (module doc); ``lo``/``hi`` the valid
    integer range (``-1`` additionally allowed when ``unlimited_ok``); ``hierarchical`` resources need
    parent-before-child ordering when growing (DESIGN.md §6); ``key`` the ``io.max`` key (rbps ...) or the
    schemata line prefix (L3, MB); ``cached`` False for writes that must happen every time (resctrl tasks).
    """

    name: str
    subsystem: str
    v1_file: str
    v2_file: str
    kind: Kind = "int"
    lo: int = 0
    hi: int = (1 << 63) - 1
    unlimited_ok: bool = False
    hierarchical: bool = False
    tree: Tree = "cgroup"
    key: str = ""
    cached: bool = True


def _blkio(name: str, key: str) -> Resource:
    return Resource(f"blkio.throttle.{name}", "blkio", f"blkio.throttle.{name}", "io.max", kind="device", lo=1,
                    unlimited_ok=True, key=key)


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
        Resource("cpuset.mems", "cpuset", "cpuset.mems", "cpuset.mems", kind="cpuset", hierarchical=True),
        Resource("memory.limit_in_bytes", "memory", "memory.limit_in_bytes", "memory.max", lo=0,
                 unlimited_ok=True, hierarchical=True),
        Resource("memory.min", "memory", "memory.min", "memory.min", hierarchical=True),
        Resource("memory.low", "memory", "memory.low", "memory.low", hierarchical=True),
        Resource("memory.high", "memory", "memory.high", "memory.high", unlimited_ok=True),
        _blkio("read_bps_device", "rbps"),
        _blkio("write_bps_device", "wbps"),
        _blkio("read_iops_device", "riops"),
        _blkio("write_iops_device", "wiops"),
        Resource("resctrl.l3", "", "schemata", "schemata", kind="schemata", tree="resctrl", key="L3"),
        Resource("resctrl.mb", "", "schemata", "schemata", kind="schemata", tree="resctrl", key="MB"),
        Resource("resctrl.tasks", "", "tasks", "tasks", kind="pid", lo=1, tree="resctrl", cached=False),
        Resource("vm.min_free_kbytes", "", "vm/min_free_kbytes", "vm/min_free_kbytes", tree="sysctl",
                 lo=MIN_FREE_KBYTES_RANGE[0], hi=MIN_FREE_KBYTES_RANGE[1]),
        Resource("vm.watermark_scale_factor", "", "vm/watermark_scale_factor", "vm/watermark_scale_factor",
                 tree="sysctl", lo=WATERMARK_SCALE_RANGE[0], hi=WATERMARK_SCALE_RANGE[1]),
    )
}
"""Every logical resource the agent writes, by name."""

CGROUP_SUBSYSTEMS: tuple[str, ...] = tuple(sorted({r.subsystem for r in RESOURCES.values() if r.tree == "cgroup"}))
"""The v1 subsystems (hierarchies) holding the agent's cgroup resources."""


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


# --------------------------------------------------------------------------- keyed values


def device_value(device: str, limit: int) -> str:
    """The ``device`` value for block device ``"MAJ:MIN"`` limited to ``limit`` (bytes/s or IO/s; −1 none)."""
    return f"{device} {limit}"


def parse_device_value(value: Value) -> tuple[str, int]:
    """``"8:0 1048576"`` → ``("8:0", 1048576)``. Raises ValueError when malformed."""
    parts = str(value).split()
    if len(parts) != 2 or not _DEVICE.match(parts[0]):
        raise ValueError(f"expected 'MAJ:MIN LIMIT', got {value!r}")
    return parts[0], int(parts[1])


def parse_schemata_domains(text: str, hexadecimal: bool) -> dict[int, int]:
    """``"0=7ff;1=7ff"`` → ``{0: 0x7ff, 1: 0x7ff}`` (hex masks for L3, decimal for MB). Raises ValueError."""
    out: dict[int, int] = {}
    for part in text.strip().split(";"):
        if not part.strip():
            continue
        dom, _, val = part.partition("=")
        if not val:
            raise ValueError(f"bad schemata domain {part!r}")
        out[int(dom)] = int(val, 16) if hexadecimal else int(val)
    if not out:
        raise ValueError("empty schemata")
    return out


def format_schemata_domains(domains: dict[int, int], hexadecimal: bool) -> str:
    """``{0: 0x7ff}`` → ``"0=7ff"`` (domains sorted by id)."""
    return ";".join(f"{d}={v:x}" if hexadecimal else f"{d}={v}" for d, v in sorted(domains.items()))


def identity(name: str, value: Value) -> str:
    """What one write sets inside its directory: the resource name, plus the device or task id for keyed kinds.

    Two writes with the same identity replace each other in a plan and share one cache entry.
    """
    res = RESOURCES.get(name)
    if res is None:
        return name
    if res.kind == "device":
        try:
            return f"{name} {parse_device_value(value)[0]}"
        except ValueError:
            return name
    if res.kind == "pid":
        return f"{name} {value}"
    return name


def key_of(name: str, value: Value) -> str:
    """The device of a ``device`` value (``"8:0"``), else ``""``."""
    ident = identity(name, value)
    return ident[len(name) + 1:] if ident != name else ""


# --------------------------------------------------------------------------- paths, normalize, validate


def file_path(resource: Resource, cgroup: str, version: CgroupVersion) -> str:
    """The file of ``resource`` for ``cgroup`` (a relative dir such as ``kubepods/besteffort``; for resctrl the
    group name, for sysctl ``""``)."""
    cg = cgroup.strip("/")
    if resource.tree != "cgroup" or version == "v1":
        return "/".join(p for p in (resource.subsystem, cg, resource.v1_file) if p)
    return "/".join(p for p in (cg, resource.v2_file) if p)


def normalize(resource: Resource, value: Value) -> Value:
    """The canonical logical value: cpusets as canonical strings, device rules as ``"MAJ:MIN N"``, schemata with
    sorted domains, ints as ints. Raises ValueError."""
    if resource.kind == "cpuset":
        return cpuset_format(cpuset_parse(str(value)))
    if resource.kind == "device":
        dev, n = parse_device_value(value)
        return device_value(dev, n)
    if resource.kind == "schemata":
        hexa = resource.key == "L3"
        return format_schemata_domains(parse_schemata_domains(str(value), hexa), hexa)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{resource.name}: expected an integer, got {value!r}")
    return value


def _contiguous(mask: int) -> bool:
    low = mask & -mask
    return mask > 0 and (mask + low) & mask == 0


def _int_problem(resource: Resource, v: int) -> str | None:
    if v == -1 and resource.unlimited_ok:
        return None
    if not resource.lo <= v <= resource.hi:
        return f"{resource.name}={v} outside [{resource.lo}, {resource.hi}]"
    return None


def validate(resource: Resource, value: Value) -> str | None:
    """Why the kernel would refuse ``value`` (its EINVAL), or None when valid.

    Cache masks (L3) must be non-zero runs of contiguous bits, as the kernel demands (Intel RDT).
    """
    try:
        v = normalize(resource, value)
    except ValueError as exc:
        return str(exc)
    if resource.kind == "cpuset":
        return None
    if resource.kind == "device":
        return _int_problem(resource, parse_device_value(v)[1])
    if resource.kind == "schemata":
        domains = parse_schemata_domains(str(v), resource.key == "L3")
        if resource.key == "L3":
            bad = [f"{d}={m:x}" for d, m in domains.items() if not _contiguous(m)]
            return f"{resource.name}: masks must be contiguous and non-zero: {bad}" if bad else None
        bad = [f"{d}={m}" for d, m in domains.items() if m <= 0]
        return f"{resource.name}: bandwidth must be > 0: {bad}" if bad else None
    assert isinstance(v, int)
    return _int_problem(resource, v)


# --------------------------------------------------------------------------- read and render


def _read_cpu_max(fs: Reader, cgroup: str) -> tuple[int, int]:
    text = fs.read(file_path(RESOURCES["cpu.cfs_quota_us"], cgroup, "v2")).split()
    quota = -1 if not text or text[0] == "max" else int(text[0])
    period = int(text[1]) if len(text) > 1 else DEFAULT_PERIOD_US
    return quota, period


def _read_device(fs: Reader, version: CgroupVersion, cgroup: str, res: Resource, device: str) -> int:
    """The limit of ``device`` in a blkio throttle file (v1 ``"8:0 N"`` lines) or ``io.max`` (v2); −1 none."""
    for line in fs.read(file_path(res, cgroup, version)).splitlines():
        parts = line.split()
        if not parts or parts[0] != device:
            continue
        if version == "v1":
            n = int(parts[1]) if len(parts) > 1 else 0
            return n if n > 0 else -1
        for kv in parts[1:]:
            k, _, v = kv.partition("=")
            if k == res.key:
                return -1 if v == "max" else int(v)
        return -1
    return -1


def _read_schemata(fs: Reader, cgroup: str, res: Resource) -> str:
    hexa = res.key == "L3"
    for line in fs.read(file_path(res, cgroup, "v1")).splitlines():
        prefix, _, rest = line.strip().partition(":")
        if prefix == res.key:
            return format_schemata_domains(parse_schemata_domains(rest, hexa), hexa)
    raise ValueError(f"no {res.key} line in schemata")


def read_value(fs: Reader, version: CgroupVersion, cgroup: str, name: str, key: str = "") -> Value:
    """Read logical resource ``name`` of ``cgroup`` as a v1-style value (``key``: the device of a ``device``
    resource).

    Raises KeyError for an unknown resource, OSError from the filesystem, ValueError on unparsable content or
    for write-only resources (resctrl tasks).
    """
    res = RESOURCES[name]
    if res.kind == "pid":
        raise ValueError(f"{name} is write-only")
    if res.kind == "device":
        return device_value(key, _read_device(fs, version, cgroup, res, key))
    if res.kind == "schemata":
        return _read_schemata(fs, cgroup, res)
    if res.tree == "cgroup" and version == "v2" and res.v2_file == "cpu.max":
        quota, period = _read_cpu_max(fs, cgroup)
        return quota if name == "cpu.cfs_quota_us" else period
    text = fs.read(file_path(res, cgroup, version)).strip()
    if res.kind == "cpuset":
        return cpuset_format(cpuset_parse(text))
    if text == "max":
        return -1
    value = int(text)
    if res.tree == "cgroup" and version == "v2" and name == "cpu.shares":
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
    if res.kind == "device":
        dev, n = parse_device_value(v)
        if version == "v1":
            return path, f"{dev} {max(n, 0)}"  # v1: 0 removes the device's rule
        return path, f"{dev} {res.key}={'max' if n < 0 else n}"
    if res.kind == "schemata":
        return path, f"{res.key}:{v}\n"
    if res.tree != "cgroup":
        return path, str(v)
    if version == "v1":
        # memory.high (v1 only on kernels that have it) parses "max" like v2, not the v1 "-1"
        return path, "max" if name == "memory.high" and v == -1 else str(v)
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
