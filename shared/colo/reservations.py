"""Reservations in the store: room held on a node for the future pods of an owner (REFERENCE.md §9).

A reservation holds resources (milli-cores, bytes, one pod slot) on one node for an **owner**: a pod
uid, a workload (``namespace/app``, :func:`owner_workload`), or both (a pod of either matches). The
held room is added to the node's allocation (``{p}:alloc:{node}``) by the same Lua world as binds
(:mod:`colo.store`): every other placement, by any scheduler or the descheduler, sees it as used,
and the store refuses any bind that would over-commit it.

Lifecycle (``state``): ``Available`` → ``Succeeded`` (consumed by a matching bind, allocate-once),
``Expired`` (its TTL passed: :meth:`ReservationStore.sweep`) or ``Aborted``
(:meth:`ReservationStore.release`). Leaving ``Available`` returns the room still held to the node;
the hash stays for ``history_s`` (a reader sees why it ended), then Redis drops it.

Consumption (:meth:`ReservationStore.bind_on`): one script checks the reservation (available, on
that node, not expired, the pod matches its owner) and binds the pod, taking its requests from the
held room first and only the excess from the node's free room; an allocate-once reservation then
ends and returns what the pod did not use, a reusable one keeps the rest for the owner's next pod.
A refused bind changes nothing: the room stays with the reservation (REFERENCE.md §11, "Reservation
resources leaking after a failed bind"). The pod's binding records its full requests, so its
release (:meth:`colo.store.Store.release`) frees them from the node as for any pod.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import msgspec
import redis.asyncio as aioredis

from colo.keys import Keys
from colo.messages import PodSpec, Resources
from colo.store_lua import QUOTA_FN

if TYPE_CHECKING:
    from colo.store import Fence

ReservationState = Literal["Available", "Succeeded", "Expired", "Aborted"]

HISTORY_S = 3600
"""Seconds an ended reservation's hash stays readable (Redis ``EXPIRE``, wall clock)."""

REASON_NO_RESERVATION = "reservation not available"
"""Prefix of a consuming bind's refusal when the reservation ended, expired or is unknown."""
REASON_NOT_OWNER = "not the reservation's owner"
"""Prefix of a consuming bind's refusal when the pod matches neither owner."""

_json = msgspec.json.Encoder()

_RES = ("cpu", "memory", "batch_cpu", "batch_memory", "mid_cpu", "mid_memory")

# Shared Lua: end an available reservation (return its held room to the node) with a state and reason.
_END_FN = """
local function finish(stem, name, state, reason, at, history)
  local key = stem.rsv .. name
  local f = redis.call('HMGET', key, 'state', 'node', 'cpu', 'memory', 'batch_cpu', 'batch_memory',
                       'mid_cpu', 'mid_memory', 'pods')
  if f[1] ~= 'Available' then return 0 end
  local names = {'cpu', 'memory', 'batch_cpu', 'batch_memory', 'mid_cpu', 'mid_memory', 'pods'}
  local alloc = stem.alloc .. f[2]
  for r = 1, 7 do
    local v = tonumber(f[r + 2] or '0')
    if v > 0 then redis.call('HINCRBY', alloc, names[r], -v) end
    redis.call('HSET', key, names[r], 0)
  end
  redis.call('HSET', key, 'state', state, 'reason', reason, 'ended_at', at)
  redis.call('ZREM', stem.rsvs, name)
  redis.call('EXPIRE', key, history)
  return 1
end
"""

_RESERVE_LUA = """#!lua flags=no-cluster
local stem = cjson.decode(ARGV[1])
local r = cjson.decode(ARGV[2])
local key = stem.rsv .. r.name
local state = redis.call('HGET', key, 'state')
if state == 'Available' then
  if redis.call('HGET', key, 'node') == r.node then return '' end
  return 'reservation ' .. r.name .. ' exists on another node'
end
if redis.call('EXISTS', stem.node .. r.node) == 0 then return 'unknown node ' .. r.node end
local names = {'cpu', 'memory', 'batch_cpu', 'batch_memory', 'mid_cpu', 'mid_memory', 'pods'}
local labels = {'cpu', 'memory', 'kubernetes.io/batch-cpu', 'kubernetes.io/batch-memory',
                'kubernetes.io/mid-cpu', 'kubernetes.io/mid-memory'}
local alloc = stem.alloc .. r.node
local lim = redis.call('HMGET', stem.limits .. r.node, unpack(names))
local al = redis.call('HMGET', alloc, unpack(names))
local bad = {}
for i = 1, 6 do
  local q = tonumber(r.held[i])
  if q > 0 and tonumber(al[i] or '0') + q > tonumber(lim[i] or '0') then
    table.insert(bad, 'Insufficient ' .. labels[i])
  end
end
local maxpods = tonumber(lim[7] or '0')
if maxpods > 0 and tonumber(al[7] or '0') + 1 > maxpods then table.insert(bad, 'Too many pods') end
if #bad > 0 then return table.concat(bad, ', ') end
redis.call('ZADD', stem.rsvs, r.expires_at, r.name)  -- first: a failing write must not follow the room's
redis.call('DEL', key)
for i = 1, 6 do
  local q = tonumber(r.held[i])
  if q > 0 then redis.call('HINCRBY', alloc, names[i], r.held[i]) end
  redis.call('HSET', key, names[i], r.held[i])
end
redis.call('HINCRBY', alloc, 'pods', 1)
redis.call('HSET', key, 'pods', 1, 'name', r.name, 'node', r.node, 'owner_uid', r.owner_uid,
           'owner_workload', r.owner_workload, 'allocate_once', r.allocate_once, 'expires_at', r.expires_at,
           'created_at', r.at, 'state', 'Available', 'reason', r.reason, 'consumed_by', '')
return ''
"""
"""Creates reservation ``r`` (JSON: name, node, owner_uid, owner_workload, held [six decimal strings],
allocate_once '1'/'0', expires_at, at, reason) when its room fits the node as a bind would; '' when
held (also when it already is, on that node), else the reason."""

_BIND_ON_LUA = """#!lua flags=no-cluster
""" + _END_FN + QUOTA_FN + """
local stem = cjson.decode(ARGV[1])
local b = cjson.decode(ARGV[2])
local key = stem.rsv .. b.name
if ARGV[5] ~= '' and redis.call('GET', ARGV[4]) ~= ARGV[5] then return 'lease lost' end
local bound = redis.call('HGET', stem.binding .. b.uid, 'node')
if bound then return 'already bound to ' .. bound end
if redis.call('EXISTS', stem.node .. b.node) == 0 then return 'unknown node ' .. b.node end
local f = redis.call('HMGET', key, 'state', 'node', 'owner_uid', 'owner_workload', 'expires_at', 'allocate_once')
if f[1] ~= 'Available' or f[2] ~= b.node then
  return 'reservation not available: ' .. b.name .. ' (' .. tostring(f[1] or 'unknown') .. ')'
end
if tonumber(f[5]) <= tonumber(b.at) then
  finish(stem, b.name, 'Expired', 'ttl passed', b.at, tonumber(ARGV[3]))
  return 'reservation not available: ' .. b.name .. ' (Expired)'
end
if not (f[3] == b.uid or (f[4] ~= '' and f[4] == b.workload)) then
  return "not the reservation's owner: " .. b.name
end
local names = {'cpu', 'memory', 'batch_cpu', 'batch_memory', 'mid_cpu', 'mid_memory', 'pods'}
local labels = {'cpu', 'memory', 'kubernetes.io/batch-cpu', 'kubernetes.io/batch-memory',
                'kubernetes.io/mid-cpu', 'kubernetes.io/mid-memory'}
local alloc = stem.alloc .. b.node
local lim = redis.call('HMGET', stem.limits .. b.node, unpack(names))
local al = redis.call('HMGET', alloc, unpack(names))
local held = redis.call('HMGET', key, unpack(names))
local once = f[6] == '1'
local use, extra, bad = {}, {}, {}
for i = 1, 6 do
  local q, h = tonumber(b.req[i]), tonumber(held[i] or '0')
  use[i] = math.min(q, h)
  extra[i] = q - use[i]
  if extra[i] > 0 and tonumber(al[i] or '0') + extra[i] > tonumber(lim[i] or '0') then
    table.insert(bad, 'Insufficient ' .. labels[i])
  end
end
local slot = once and tonumber(held[7] or '0') > 0
local maxpods = tonumber(lim[7] or '0')
if not slot and maxpods > 0 and tonumber(al[7] or '0') + 1 > maxpods then table.insert(bad, 'Too many pods') end
if #bad > 0 then return table.concat(bad, ', ') end
local refused = quota_refusal(stem, b.quotas, b.req, quota_read)
if refused then return refused end
for i = 1, 6 do
  if extra[i] > 0 then redis.call('HINCRBY', alloc, names[i], extra[i]) end
  if use[i] > 0 then redis.call('HINCRBY', key, names[i], -use[i]) end
end
if slot then
  redis.call('HSET', key, 'pods', 0)
else
  redis.call('HINCRBY', alloc, 'pods', 1)
end
redis.call('HSET', stem.binding .. b.uid, 'node', b.node, 'at', b.at, 'cpu', b.req[1], 'memory', b.req[2],
           'batch_cpu', b.req[3], 'batch_memory', b.req[4], 'mid_cpu', b.req[5], 'mid_memory', b.req[6],
           'reservation', b.name)
quota_charge(stem, b.quotas, b.req, stem.binding .. b.uid)
redis.call('HSET', stem.podstate .. b.uid, 'node', b.node, 'bound_at', b.at, 'updated_at', b.at)
redis.call('SADD', stem.nodepods .. b.node, b.uid)
redis.call('HSET', key, 'consumed_by', b.uid)
if once then finish(stem, b.name, 'Succeeded', 'consumed by ' .. b.uid, b.at, tonumber(ARGV[3])) end
return ''
"""
"""Binds pod ``b.uid`` on ``b.node`` on the reservation ``b.name`` (JSON: name, uid, workload, node, at,
req [six decimal strings], quotas [names charged the full requests]); ARGV[3] the history seconds; ARGV[4], ARGV[5] the fencing lease's key and
value ('' = unfenced). '' when bound, else the reason (nothing changed)."""

_RELEASE_LUA = """#!lua flags=no-cluster
""" + _END_FN + """
local stem = cjson.decode(ARGV[1])
return finish(stem, ARGV[2], ARGV[3], ARGV[4], ARGV[5], tonumber(ARGV[6]))
"""
"""Ends reservation ARGV[2] with state ARGV[3], reason ARGV[4] at ARGV[5]; 1 when it was available."""

_SWEEP_LUA = """#!lua flags=no-cluster
""" + _END_FN + """
local stem = cjson.decode(ARGV[1])
local due = redis.call('ZRANGEBYSCORE', stem.rsvs, '-inf', ARGV[2])
for _, name in ipairs(due) do
  if finish(stem, name, 'Expired', 'ttl passed', ARGV[2], tonumber(ARGV[3])) == 0 then
    redis.call('ZREM', stem.rsvs, name)
  end
end
return due
"""
"""Ends every available reservation whose expiry is at or before ARGV[2]; returns their names."""


class Reservation(msgspec.Struct, frozen=True, kw_only=True):
    """A reservation as stored: ``held`` the room still held (milli-cores, bytes; ``pods`` 1 while an
    allocate-once reservation holds its pod slot), owner ``owner_uid`` and/or ``owner_workload``,
    ``allocate_once`` (ends at its first consuming bind) or reusable, ``expires_at`` and
    ``created_at`` in clock seconds, ``state``, ``reason`` and ``consumed_by`` (the last pod bound on it)."""

    name: str
    node: str
    owner_uid: str = ""
    owner_workload: str = ""
    held: Resources = Resources()
    allocate_once: bool = True
    expires_at: float = 0.0
    created_at: float = 0.0
    state: ReservationState = "Available"
    reason: str = ""
    consumed_by: str = ""

    def matches(self, spec: PodSpec) -> bool:
        """Whether ``spec`` belongs to the owner: its uid, or its workload (:func:`owner_workload`)."""
        if self.owner_uid and spec.uid == self.owner_uid:
            return True
        return bool(self.owner_workload) and owner_workload(spec) == self.owner_workload


@dataclass(frozen=True)
class ReserveResult:
    """Outcome of :meth:`ReservationStore.reserve`: ``ok``, else ``reason`` (as a bind's:
    ``"Insufficient cpu"``, ``"unknown node n9"``)."""

    ok: bool
    reason: str = ""


def owner_workload(spec: PodSpec) -> str:
    """``namespace/app`` of the pod's workload ("" for a standalone pod): ``spec.app``, else the
    ``app`` label (the descheduler's workload, docs/descheduler.md)."""
    app = spec.app or spec.labels.get("app", "")
    return f"{spec.namespace}/{app}" if app else ""


def _s(v: bytes | str | None) -> str:
    if v is None:
        return ""
    return v.decode() if isinstance(v, bytes) else v


def _requests(r: Resources) -> list[str]:
    return [str(max(int(getattr(r, n)), 0)) for n in _RES]


def _record(h: dict[Any, Any]) -> Reservation | None:
    f = {_s(k): _s(v) for k, v in h.items()}
    if "name" not in f:
        return None
    held = Resources(**{n: int(f.get(n) or 0) for n in (*_RES, "pods")})
    return Reservation(name=f["name"], node=f.get("node", ""), owner_uid=f.get("owner_uid", ""),
                       owner_workload=f.get("owner_workload", ""), held=held,
                       allocate_once=f.get("allocate_once", "1") == "1",
                       expires_at=float(f.get("expires_at") or 0.0), created_at=float(f.get("created_at") or 0.0),
                       state=f.get("state", "Available"),  # type: ignore[arg-type]
                       reason=f.get("reason", ""), consumed_by=f.get("consumed_by", ""))


class ReservationStore:
    """Reservations under the store prefix of ``keys``, on the Redis ``client`` of a
    :class:`colo.store.Store` (``ReservationStore(store.redis, store.keys)``). Redis errors propagate."""

    def __init__(self, client: aioredis.Redis, keys: Keys, history_s: int = HISTORY_S) -> None:
        self.redis = client
        self.keys = keys
        self.history_s = history_s
        self._reserve = client.register_script(_RESERVE_LUA)
        self._bind_on = client.register_script(_BIND_ON_LUA)
        self._release = client.register_script(_RELEASE_LUA)
        self._sweep = client.register_script(_SWEEP_LUA)
        k = keys
        self._stems = _json.encode({
            "binding": k.binding(""), "node": k.node(""), "limits": k.limits(""), "alloc": k.allocated(""),
            "podstate": k.pod_state(""), "nodepods": k.node_pods(""), "rsv": k.reservation(""),
            "rsvs": k.reservations, "quotamax": k.quota_max(""), "quotaused": k.quota_used(""),
            "quotas": k.quotas}).decode()

    async def reserve(self, name: str, node: str, held: Resources, *, at: float, ttl_s: float,
                      owner_uid: str = "", owner_workload: str = "", allocate_once: bool = True,
                      reason: str = "") -> ReserveResult:
        """Hold ``held`` (milli-cores, bytes; negative amounts count as 0) plus one pod slot on ``node``
        for the owner until ``at + ttl_s`` (clock seconds), atomically and checked as a bind is
        (:mod:`colo.store`): refused with a reason when the node is unknown or the room is not free.
        Idempotent for a name already available on that node.

        Raises ValueError without an owner, with an empty name, or with ``at`` / ``ttl_s`` not finite or
        ``ttl_s`` <= 0 (a Redis script is not rolled back: a NaN expiry failed after the room was
        added to the node, leaking it; an infinite one was never swept)."""
        if not name or not (owner_uid or owner_workload) or not (math.isfinite(at) and math.isfinite(ttl_s)
                                                                  and ttl_s > 0 and math.isfinite(at + ttl_s)):
            raise ValueError(f"reservation {name!r}: need a name, an owner, a finite at and a finite ttl_s > 0 "
                             f"(got at={at}, ttl_s={ttl_s})")
        doc = {"name": name, "node": node, "owner_uid": owner_uid, "owner_workload": owner_workload,
               "held": _requests(held), "allocate_once": "1" if allocate_once else "0",
               "expires_at": repr(float(at + ttl_s)), "at": repr(float(at)), "reason": reason}
        out = _s(await self._reserve(args=[self._stems, _json.encode(doc)]))
        return ReserveResult(not out, out)

    async def bind_on(self, name: str, spec: PodSpec, node: str, at: float,
                      fence: Fence | None = None, quotas: Sequence[str] = ()) -> ReserveResult:
        """Bind pod ``spec`` on ``node`` consuming the reservation ``name`` (module doc), atomically.
        Refused (nothing changed) when the pod is already bound, the node is unknown, the reservation
        is not available on ``node`` or has expired by ``at`` (it is then ended as Expired), the pod
        is not its owner, the part of the requests above the held room does not fit the node, or
        ``fence`` is given and its lease is no longer held with that value (``"lease lost"``, as
        :meth:`colo.store.Store.bind`), or a quota of ``quotas`` would pass its max
        (:data:`colo.store.REASON_QUOTA_EXCEEDED`): the pod's full requests are charged to each of them,
        as :attr:`colo.store.BindRequest.quotas` (the room held was not)."""
        doc = {"name": name, "uid": spec.uid, "workload": owner_workload(spec), "node": node,
               "at": repr(float(at)), "req": _requests(spec.requests), "quotas": list(quotas)}
        lease = (self.keys.lease(fence.name), fence.value) if fence is not None else ("", "")
        out = _s(await self._bind_on(args=[self._stems, _json.encode(doc), self.history_s, *lease]))
        return ReserveResult(not out, out)

    async def release(self, name: str, at: float, reason: str, state: ReservationState = "Aborted") -> bool:
        """End an available reservation (its held room returns to the node) as ``state`` with
        ``reason``; False when it was not available (consumed, expired, released or unknown)."""
        return bool(await self._release(args=[self._stems, name, state, reason, repr(float(at)),
                                              self.history_s]))

    async def sweep(self, now: float) -> list[str]:
        """End every reservation whose expiry is at or before ``now`` (clock seconds) as Expired,
        returning their room to the nodes; the names ended."""
        return [_s(n) for n in await self._sweep(args=[self._stems, repr(float(now)), self.history_s])]

    async def get(self, name: str) -> Reservation | None:
        """The reservation ``name`` (available or ended within ``history_s``), or None."""
        return _record(await self.redis.hgetall(self.keys.reservation(name)))

    async def available(self) -> list[Reservation]:
        """Every available reservation, soonest expiry first (one pipeline)."""
        raw: list[bytes] = await self.redis.zrange(self.keys.reservations, 0, -1)  # type: ignore[assignment]
        names = [_s(n) for n in raw]
        if not names:
            return []
        pipe = self.redis.pipeline(transaction=False)
        for n in names:
            pipe.hgetall(self.keys.reservation(n))
        out = []
        for h in await pipe.execute():
            rec = _record(h)
            if rec is not None and rec.state == "Available":
                out.append(rec)
        return out
