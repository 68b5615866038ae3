"""resctrl (Intel RDT / AMD PQoS) arithmetic and discovery: L3 cache masks and memory-bandwidth percents.

The filesystem is ``/sys/fs/resctrl``: ``info/L3/cbm_mask`` (all cache ways as a hex mask), ``info/L3/min_cbm_bits``,
``info/MB/min_bandwidth`` and ``info/MB/bandwidth_gran`` (percent), the root ``schemata`` (one ``L3:`` and one
``MB:`` line listing every cache domain id), and one directory per group with its own ``schemata`` and ``tasks``.
Formulas are REFERENCE.md §5 (Koordinator ``CalculateCatL3MaskValue`` and ``calculateIntel``).
"""

from __future__ import annotations

from dataclasses import dataclass

from colo_node_agent.cgroups.fs import CgroupFS
from colo_node_agent.cgroups.resources import format_schemata_domains, parse_schemata_domains


@dataclass(frozen=True)
class ResctrlInfo:
    """What the node's resctrl offers: ``cbm_mask`` (all L3 ways), ``min_cbm_bits``, the L3 and MB domain ids,
    and MBA ``min_bandwidth``/``bandwidth_gran`` percents (0 when the node has no MBA)."""

    cbm_mask: int
    min_cbm_bits: int = 1
    l3_domains: tuple[int, ...] = (0,)
    mb_domains: tuple[int, ...] = ()
    min_bandwidth: int = 10
    bandwidth_gran: int = 10


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def l3_mask(cbm_mask: int, start_percent: int, end_percent: int, min_cbm_bits: int = 1) -> int:
    """The cache-way mask for ``start_percent``..``end_percent`` of the ways in ``cbm_mask`` (width w):
    start = ceil(w × start%), end = ceil(w × end%), mask = 2^end − 2^start (REFERENCE.md §5: cbm 0x3ff, 10–80 %
    → 0xfe; 0x7ff, 0–30 % → 0xf). A range narrower than ``min_cbm_bits`` ways is widened upwards (then
    downwards at the top) to that many, as the kernel refuses smaller masks.

    Raises ValueError when the percents are out of order or outside 0..100, or the mask is empty.
    """
    if not 0 <= start_percent < end_percent <= 100:
        raise ValueError(f"L3 range {start_percent}..{end_percent} % must satisfy 0 <= start < end <= 100")
    width = cbm_mask.bit_length()
    start = _ceil_div(width * start_percent, 100)
    end = _ceil_div(width * end_percent, 100)
    if end - start < min_cbm_bits:
        end = min(start + min_cbm_bits, width)
        start = max(end - min_cbm_bits, 0)
    if end <= start:
        raise ValueError(f"L3 range {start_percent}..{end_percent} % of {width} ways is empty")
    return (1 << end) - (1 << start)


def mba_percent(percent: int, gran: int = 10, min_bandwidth: int = 10) -> int:
    """Memory bandwidth percent as the hardware takes it: rounded up to a multiple of ``gran`` (Intel MBA steps
    of 10 %, as Koordinator's ``calculateIntel`` does), within [``min_bandwidth``, 100].

    Raises ValueError outside 1..100.
    """
    if not 0 < percent <= 100:
        raise ValueError(f"MBA percent must be within 1..100, got {percent}")
    g = max(gran, 1)
    return min(max(_ceil_div(percent, g) * g, min_bandwidth), 100)


def schemata_value(domains: tuple[int, ...], value: int, hexadecimal: bool) -> str:
    """One schemata line body giving every domain ``value``: ``"0=f;1=f"``."""
    return format_schemata_domains(dict.fromkeys(domains, value), hexadecimal)


def _read_int(fs: CgroupFS, path: str, default: int, base: int = 10) -> int:
    try:
        return int(fs.read(path).strip(), base)
    except (OSError, ValueError):
        return default


def read_info(fs: CgroupFS) -> ResctrlInfo:
    """Discover resctrl on ``fs`` (rooted at ``/sys/fs/resctrl``). Raises OSError when L3 allocation is absent."""
    cbm = int(fs.read("info/L3/cbm_mask").strip(), 16)
    l3: tuple[int, ...] = (0,)
    mb: tuple[int, ...] = ()
    try:
        for line in fs.read("schemata").splitlines():
            prefix, _, rest = line.strip().partition(":")
            if prefix == "L3":
                l3 = tuple(sorted(parse_schemata_domains(rest, True)))
            elif prefix == "MB":
                mb = tuple(sorted(parse_schemata_domains(rest, False)))
    except (OSError, ValueError):
        pass
    return ResctrlInfo(cbm, _read_int(fs, "info/L3/min_cbm_bits", 1), l3, mb,
                       _read_int(fs, "info/MB/min_bandwidth", 10), _read_int(fs, "info/MB/bandwidth_gran", 10))


def ensure_groups(fs: CgroupFS, groups: tuple[str, ...]) -> list[str]:
    """Make the resctrl group directories ``groups`` that do not exist; returns one problem per failure.

    ``fs`` must have a ``mkdir`` (HostFS, MemoryFS).
    """
    problems: list[str] = []
    mkdir = getattr(fs, "mkdir", None)
    for g in groups:
        if fs.exists(g):
            continue
        if mkdir is None:
            problems.append(f"cannot create resctrl group {g}: filesystem has no mkdir")
            continue
        try:
            mkdir(g)
        except OSError as exc:
            problems.append(f"cannot create resctrl group {g}: {exc.strerror or exc}")
    return problems
