"""What a bind of :mod:`colo.store` is: the request (with its quotas and gang group), the result, the
refusal reasons, the fencing lease, how a call's binds are encoded and packed into script calls
(:data:`colo.store_lua.BIND_LUA`) without splitting a gang group, and how a bind waits for replicas."""

from __future__ import annotations

import logging
import operator
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from colo.messages import Resources

log = logging.getLogger("colo.store")

_REQUESTED = ("cpu", "memory", "batch_cpu", "batch_memory", "mid_cpu", "mid_memory")
_requested = operator.attrgetter(*_REQUESTED)
"""Resources the bind script checks and reserves, in its order."""

REASON_ALREADY_BOUND = "already bound to"
"""Prefix of the reason when the pod already has a binding (``"already bound to n1"``)."""
REASON_NODE_UNKNOWN = "unknown node"
"""Prefix of the reason when the node was never registered (``"unknown node n9"``)."""
REASON_TOO_MANY_PODS = "Too many pods"
"""Kubernetes reason when ``allocatable.pods`` is reached."""
REASON_LEASE_LOST = "lease lost"
"""Reason of a fenced bind whose lease is no longer held with that token."""
REASON_QUOTA_EXCEEDED = "quota"
"""Prefix of the reason when a quota's max would be passed (``"quota team-a exceeded: cpu, pods"``; the
resources are :data:`colo.messages.RESOURCE_NAMES` field names)."""
REASON_GANG_MEMBER_REFUSED = "gang member"
"""Prefix of the reason of a gang member that fits when another member of its group does not
(``"gang member p7 refused: Insufficient cpu"``): none of the group is bound."""

BIND_CHUNK = 500
"""Binds per script call: one call costs Redis ~10 µs per bind, so a chunk blocks it a few ms at most. A gang
group is never split: a group larger than this goes in one call of its own."""


@dataclass(frozen=True)
class Fence:
    """A lease a bind must hold: the bind is refused (:data:`REASON_LEASE_LOST`) unless the lease
    ``name`` still has exactly ``value`` (``"<token>:<holder>"`` from :meth:`Store.acquire_lease`)."""

    name: str
    value: str


@dataclass(frozen=True)
class Lease:
    """A lease held: fencing ``token`` (grows with every acquisition) and the stored ``value``."""

    name: str
    token: int
    value: str


@dataclass(frozen=True)
class BindResult:
    """Outcome of one bind: ``ok``, else ``reason`` (e.g. ``"Insufficient cpu, Too many pods"``,
    ``"already bound to n1"``, ``"unknown node n9"``)."""

    ok: bool
    reason: str = ""


@dataclass(frozen=True)
class BindRequest:
    """One bind of :meth:`Store.bind_many`: pod ``uid`` on ``node`` with ``requests`` (milli-cores, bytes)
    at time ``at`` (clock seconds); charged to every quota of ``quotas`` (the pod's leaf quota and each
    ancestor, excluding the root); all-or-nothing with the other binds of the call with the same
    non-empty ``group`` (a gang, or a gang group)."""

    uid: str
    node: str
    requests: Resources
    at: float
    quotas: tuple[str, ...] = ()
    group: str = ""
    cpuset: str = ""
    """The cpuset chosen at Reserve (kernel list format), kept in the binding hash (``cpuset`` field) so a
    restarted scheduler reloads it with the binding and it goes when the binding is released."""
    devices: str = ""
    """The GPUs chosen at Reserve (``"index:milli,..."``, :func:`colo.messages.devices_format`), kept in the
    binding hash (``devices`` field) like ``cpuset``."""


def bind_arg(item: BindRequest | tuple[str, str, Resources, float]) -> tuple[Any, ...]:
    """One bind as the bind script reads it (:data:`colo.store_lua.BIND_LUA`)."""
    if isinstance(item, BindRequest):
        req = [str(int(v)) if v > 0 else "0" for v in _requested(item.requests)]
        if item.devices:
            return (item.uid, item.node, repr(float(item.at)), req, list(item.quotas), item.group, item.cpuset,
                    item.devices)
        if item.cpuset:
            return item.uid, item.node, repr(float(item.at)), req, list(item.quotas), item.group, item.cpuset
        if item.quotas or item.group:
            return item.uid, item.node, repr(float(item.at)), req, list(item.quotas), item.group
        return item.uid, item.node, repr(float(item.at)), req
    uid, node, r, at = item
    return uid, node, repr(float(at)), [str(int(v)) if v > 0 else "0" for v in _requested(r)]


def bind_units(requests: Sequence[BindRequest] | Sequence[tuple[str, str, Resources, float]]) -> list[list[int]]:
    """Indices of ``requests`` in execution order, as atomic units: a lone bind, or every member of a
    group at the place of its first member."""
    groups: dict[str, list[int]] = {}
    units: list[list[int]] = []
    for i, item in enumerate(requests):
        group = item.group if isinstance(item, BindRequest) else ""
        if not group:
            units.append([i])
        elif group in groups:
            groups[group].append(i)
        else:
            groups[group] = [i]
            units.append(groups[group])
    return units


def bind_chunks(units: list[list[int]], size: int) -> Iterable[list[int]]:
    """Units packed into script calls of at most ``size`` binds, never splitting a unit (a unit larger
    than ``size`` is a call of its own)."""
    chunk: list[int] = []
    for unit in units:
        if chunk and len(chunk) + len(unit) > size:
            yield chunk
            chunk = []
        chunk += unit
    if chunk:
        yield chunk
