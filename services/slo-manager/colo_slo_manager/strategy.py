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
    BEBudgetStrategy,
    BlkIOStrategy,
    CPUBurstStrategy,
    CPUEvictStrategy,
    CPUSetStrategy,
    CPUSuppressStrategy,
    MemoryEvictStrategy,
    MemoryQoSStrategy,
    NetQoSStrategy,
    OOMStrategy,
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
    "be_budget": BEBudgetStrategy,
    "oom": OOMStrategy,
    "net_qos": NetQoSStrategy,
}
"""NodeSLO field → strategy struct, for the strategies a pool may patch field by field."""


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


