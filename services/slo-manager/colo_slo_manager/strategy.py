"""Node QoS strategies: partial strategies (patches), their merge onto a full one, and value checks. Pure.

A node pool states only the strategy fields it changes, as a mapping of the strategy's shape
(``{"threshold_percent": 50}`` for ``cpu_suppress``). :func:`merge_patch` lays it over the
cluster strategy the way Koordinator's ``MergeCfg`` lays a node strategy over the cluster one
(``pkg/slo-controller/nodeslo``: the node strategy, JSON-encoded without its unset fields, is
decoded onto a copy of the cluster strategy): fields the patch names replace the cluster's,
nested mappings merge field by field, lists and scalars replace whole; ``null`` clears an
optional field. Value ranges are those the node agent enforces (docs/node-agent.md).
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

import msgspec

from colo.messages import (
    BlkIOStrategy,
    CPUBurstStrategy,
    CPUEvictStrategy,
    CPUSetStrategy,
    CPUSuppressStrategy,
    MemoryEvictStrategy,
    MemoryQoSClass,
    MemoryQoSStrategy,
    ResctrlStrategy,
    SystemStrategy,
)
from colo.settings import deep_merge

T = TypeVar("T", bound=msgspec.Struct)

Patch = dict[str, Any]
"""A partial strategy: the fields it sets, in the strategy's shape (nested strategies as mappings)."""

STRATEGY_TYPES: dict[str, type[msgspec.Struct]] = {
    "cpu_suppress": CPUSuppressStrategy,
    "memory_evict": MemoryEvictStrategy,
    "cpu_evict": CPUEvictStrategy,
    "cpu_burst": CPUBurstStrategy,
    "memory_qos": MemoryQoSStrategy,
    "cpuset": CPUSetStrategy,
    "resctrl": ResctrlStrategy,
    "blkio": BlkIOStrategy,
    "system": SystemStrategy,
}
"""NodeSLO field → strategy struct, for the strategies a pool may patch field by field."""

WATERMARK_SCALE_RANGE = (10, 400)
"""Accepted ``vm.watermark_scale_factor`` (Koordinator's SystemStrategy validation)."""


def _struct_of(tp: Any) -> type[msgspec.Struct] | None:
    """The Struct type of a field annotation (``X``, ``X | None``), else None."""
    if isinstance(tp, type) and issubclass(tp, msgspec.Struct):
        return tp
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        structs = [a for a in typing.get_args(tp) if isinstance(a, type) and issubclass(a, msgspec.Struct)]
        return structs[0] if len(structs) == 1 else None
    return None


def _hints(tp: type[msgspec.Struct]) -> dict[str, Any]:
    return {f.name: f.type for f in msgspec.structs.fields(tp)}


def full_patch(value: msgspec.Struct) -> Patch:
    """Every field of ``value`` as a patch (nested structs as mappings): it replaces a whole strategy."""
    out: Patch = {}
    for name in value.__struct_fields__:
        v = getattr(value, name)
        if isinstance(v, msgspec.Struct):
            out[name] = full_patch(v)
        elif isinstance(v, list):
            out[name] = [full_patch(x) if isinstance(x, msgspec.Struct) else x for x in v]
        else:
            out[name] = v
    return out


def patch_problems(tp: type[msgspec.Struct], patch: object, where: str) -> list[str]:
    """Every problem of ``patch`` as a partial ``tp``: not a mapping, unknown fields, values of the
    wrong type (each field checked on its own, so all are listed). ``where`` prefixes each message."""
    if not isinstance(patch, Mapping):
        return [f"{where}: expected a mapping of {tp.__name__} fields, got {type(patch).__name__}"]
    hints = _hints(tp)
    out: list[str] = []
    for key, value in patch.items():
        if key not in hints:
            out.append(f"{where}.{key}: unknown field (known: {', '.join(sorted(hints))})")
            continue
        nested = _struct_of(hints[key])
        if nested is not None and isinstance(value, Mapping):
            out += patch_problems(nested, value, f"{where}.{key}")
            continue
        try:
            msgspec.convert(value, hints[key], strict=False)
        except msgspec.ValidationError as exc:
            out.append(f"{where}.{key}: {exc} (got {value!r})")
    return out


def merge_patch(base: T, patch: Mapping[str, Any]) -> T:
    """``base`` with the fields of ``patch`` laid over it (nested mappings merged field by field).

    Raises msgspec.ValidationError when the result does not convert (check :func:`patch_problems`
    first for every problem at once).
    """
    if not patch:
        return base
    return msgspec.convert(deep_merge(full_patch(base), patch), type(base), strict=False)


def _range(out: list[str], name: str, value: int | None, lo: int = 0, hi: int = 100) -> None:
    if value is not None and not lo <= value <= hi:
        out.append(f"{name} must be within {lo}..{hi}, got {value}")


def _memory_qos_problems(m: MemoryQoSStrategy, where: str) -> list[str]:
    out: list[str] = []
    classes: list[tuple[str, MemoryQoSClass | None]] = [
        (where, MemoryQoSClass(min_percent=m.min_percent, low_percent=m.low_percent,
                               throttling_percent=m.throttling_percent)),
        (f"{where}.lsr", m.lsr), (f"{where}.ls", m.ls), (f"{where}.be", m.be)]
    for name, c in classes:
        if c is not None:
            for field in ("min_percent", "low_percent", "throttling_percent"):
                _range(out, f"{name}.{field}", getattr(c, field))
    return out


def strategy_problems(values: Mapping[str, Any], where: str = "node_slo") -> list[str]:
    """Every out-of-range value among the strategies of ``values`` (NodeSLO field → strategy), the
    checks the node agent applies to a NodeSLO, so that a bad policy is refused where it is configured.

    Percents within 0..100; memory eviction ``lower_percent`` ≤ ``threshold_percent``; CPU eviction
    ``lower_percent`` ≤ ``upper_percent``; cool-downs ≥ 0 s and ``cpu_evict.window_s`` > 0 s; CPU burst
    ``burst_percent`` ≥ 0, ``quota_scale_max_percent`` ≥ 100, ``quota_burst_period_s`` ≥ −1; resctrl
    0 ≤ L3 start < end ≤ 100 and MBA 1..100; BE block I/O devices ``MAJOR:MINOR``, once each, limits ≥ 0;
    system (when enabled) ``min_free_kbytes_factor`` > 0 and ``watermark_scale_factor`` within
    :data:`WATERMARK_SCALE_RANGE`.
    """
    out: list[str] = []
    w = where
    cs = values.get("cpu_suppress")
    if isinstance(cs, CPUSuppressStrategy):
        _range(out, f"{w}.cpu_suppress.threshold_percent", cs.threshold_percent)
        _range(out, f"{w}.cpu_suppress.min_percent", cs.min_percent)
    me = values.get("memory_evict")
    if isinstance(me, MemoryEvictStrategy):
        _range(out, f"{w}.memory_evict.threshold_percent", me.threshold_percent)
        _range(out, f"{w}.memory_evict.lower_percent", me.lower_percent)
        if me.lower_percent is not None and me.lower_percent > me.threshold_percent:
            out.append(f"{w}.memory_evict.lower_percent {me.lower_percent} must not exceed "
                       f"threshold_percent {me.threshold_percent}")
        if me.cooldown_s < 0:
            out.append(f"{w}.memory_evict.cooldown_s must be >= 0, got {me.cooldown_s}")
    ce = values.get("cpu_evict")
    if isinstance(ce, CPUEvictStrategy):
        for field in ("upper_percent", "lower_percent", "usage_threshold_percent"):
            _range(out, f"{w}.cpu_evict.{field}", getattr(ce, field))
        if ce.lower_percent > ce.upper_percent:
            out.append(f"{w}.cpu_evict.lower_percent {ce.lower_percent} must not exceed "
                       f"upper_percent {ce.upper_percent}")
        if ce.window_s <= 0:
            out.append(f"{w}.cpu_evict.window_s must be > 0, got {ce.window_s}")
        if ce.cooldown_s < 0:
            out.append(f"{w}.cpu_evict.cooldown_s must be >= 0, got {ce.cooldown_s}")
    cb = values.get("cpu_burst")
    if isinstance(cb, CPUBurstStrategy):
        if cb.burst_percent < 0:
            out.append(f"{w}.cpu_burst.burst_percent must be >= 0, got {cb.burst_percent}")
        if cb.quota_scale_max_percent < 100:
            out.append(f"{w}.cpu_burst.quota_scale_max_percent must be >= 100, got {cb.quota_scale_max_percent}")
        _range(out, f"{w}.cpu_burst.share_pool_threshold_percent", cb.share_pool_threshold_percent)
        if cb.quota_burst_period_s < -1:
            out.append(f"{w}.cpu_burst.quota_burst_period_s must be >= -1 (-1 = no cap), "
                       f"got {cb.quota_burst_period_s}")
    mq = values.get("memory_qos")
    if isinstance(mq, MemoryQoSStrategy):
        out += _memory_qos_problems(mq, f"{w}.memory_qos")
    rc = values.get("resctrl")
    if isinstance(rc, ResctrlStrategy):
        for name, cfg in (("lsr", rc.lsr), ("ls", rc.ls), ("be", rc.be)):
            if not 0 <= cfg.l3_start_percent < cfg.l3_end_percent <= 100:
                out.append(f"{w}.resctrl.{name}: need 0 <= l3_start_percent < l3_end_percent <= 100, "
                           f"got {cfg.l3_start_percent}..{cfg.l3_end_percent}")
            _range(out, f"{w}.resctrl.{name}.mba_percent", cfg.mba_percent, lo=1)
    bio = values.get("blkio")
    if isinstance(bio, BlkIOStrategy):
        seen: set[str] = set()
        for lim in bio.be:
            parts = lim.device.split(":")
            if len(parts) != 2 or not all(p.isdigit() for p in parts):
                out.append(f"{w}.blkio.be device {lim.device!r} must be 'MAJOR:MINOR'")
            if lim.device in seen:
                out.append(f"{w}.blkio.be device {lim.device} listed twice")
            seen.add(lim.device)
            if min(lim.read_bps, lim.write_bps, lim.read_iops, lim.write_iops) < 0:
                out.append(f"{w}.blkio.be device {lim.device}: limits must be >= 0 (0 = none)")
    sy = values.get("system")
    if isinstance(sy, SystemStrategy) and sy.enabled:
        if sy.min_free_kbytes_factor <= 0:
            out.append(f"{w}.system.min_free_kbytes_factor must be > 0, got {sy.min_free_kbytes_factor}")
        _range(out, f"{w}.system.watermark_scale_factor", sy.watermark_scale_factor, *WATERMARK_SCALE_RANGE)
    return out
