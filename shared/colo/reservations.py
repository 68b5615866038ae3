"""Reservations in the store: room held on a node for the future pods of an owner (REFERENCE.md §9).

A reservation holds resources (milli-cores, bytes, one pod slot) on one node for its **owners**: a pod
uid, a workload (``namespace/app``, :func:`owner_workload`), or any list of
:class:`~colo.messages.ReservationOwner` (uid, workload, controller kind/name, namespace, labels; matched
as :func:`colo.reservation_spec.owner_matches`); a pod matching any of them is an owner. The
held room is added to the node's allocation (``{p}:alloc:{node}``) by the same Lua world as binds
(:mod:`colo.store`): every other placement, by any scheduler or the descheduler, sees it as used,
and the store refuses any bind that would over-commit it.

Lifecycle (``state``): ``Pending`` (submitted, not placed yet: :meth:`ReservationStore.put_pending`;
holds nothing) → ``Available`` → ``Succeeded`` (consumed by a matching bind, allocate-once),
``Expired`` (its TTL passed: :meth:`ReservationStore.sweep`) or ``Aborted``
(:meth:`ReservationStore.release`). Leaving ``Available`` returns the room still held to the node;
the hash stays for ``history_s`` (a reader sees why it ended), then Redis drops it.

Consumption (:meth:`ReservationStore.bind_on`): one script checks the reservation (available, on
that node, not expired, the pod matches its owner) and binds the pod, taking its requests from the
held room first and only the excess from the node's free room; an allocate-once reservation then
ends and returns what the pod did not use, a reusable one keeps the rest for the owner's next pod and
gets the pod's part back when the pod ends (its release, while the reservation is still available).
A refused bind changes nothing: the room stays with the reservation (REFERENCE.md §11, "Reservation
resources leaking after a failed bind"). The pod's binding records its full requests, so its
release (:meth:`colo.store.Store.release`) frees them from the node as for any pod (less, on a reusable
reservation, the part that returns to it). The scripts: :mod:`colo.reservations_lua`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import msgspec
import redis.asyncio as aioredis

from colo.keys import Keys
from colo.messages import PodSpec, ReservationOwner, ReservationSpec, Resources
from colo.reservation_spec import owner_matches, pod_facts, pod_workload
from colo.reservations_lua import (
    BIND_ON_LUA,
    END_PENDING_LUA,
    PENDING_LUA,
    RELEASE_LUA,
    RESERVE_LUA,
    SWEEP_LUA,
)

if TYPE_CHECKING:
    from colo.store import Fence

ReservationState = Literal["Pending", "Available", "Succeeded", "Expired", "Aborted"]

HISTORY_S = 3600
"""Seconds an ended reservation's hash stays readable (Redis ``EXPIRE``, wall clock)."""

REASON_NO_RESERVATION = "reservation not available"
"""Prefix of a consuming bind's refusal when the reservation ended, expired or is unknown."""
REASON_NOT_OWNER = "not the reservation's owner"
REASON_NOT_COVERED = "covers none of the pod's requests"
""":meth:`ReservationStore.bind_on`: the reservation holds room of other resource kinds than the pod requests."""
"""Prefix of a consuming bind's refusal when the pod matches none of its owners."""
PENDING_KNOWN = "known"
""":meth:`ReservationStore.put_pending`: a reservation of that name was submitted at that time already."""
PENDING_EXISTS = "exists"
""":meth:`ReservationStore.put_pending`: another reservation of that name is available (holds room)."""

_json = msgspec.json.Encoder()
_OWNERS = msgspec.json.Decoder(tuple[ReservationOwner, ...])
_SPEC = msgspec.json.Decoder(ReservationSpec)

_RES = ("cpu", "memory", "batch_cpu", "batch_memory", "mid_cpu", "mid_memory")


class Reservation(msgspec.Struct, frozen=True, kw_only=True):
    """A reservation as stored: ``held`` the room still held (milli-cores, bytes; ``pods`` 1 while an
    allocate-once reservation holds its pod slot; for a Pending one the room it asks for), owners
    ``owner_uid`` and/or ``owner_workload`` and/or ``owners``, ``allocate_once`` (ends at its first consuming
    bind) or reusable, ``expires_at`` and ``created_at`` in clock seconds, ``state``, ``reason`` and
    ``consumed_by`` (the last pod bound on it). ``node`` is "" for a Pending reservation the scheduler
    places."""

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
    owners: tuple[ReservationOwner, ...] = ()

    def matches(self, spec: PodSpec) -> bool:
        """Whether ``spec`` is an owner: its uid is ``owner_uid``, its workload (:func:`owner_workload`)
        ``owner_workload``, or it matches one of ``owners`` (:func:`colo.reservation_spec.owner_matches`)."""
        if self.owner_uid and spec.uid == self.owner_uid:
            return True
        if self.owner_workload and owner_workload(spec) == self.owner_workload:
            return True
        return any(owner_matches(o, spec) for o in self.owners)


@dataclass(frozen=True)
class ReserveResult:
    """Outcome of :meth:`ReservationStore.reserve`: ``ok``, else ``reason`` (as a bind's:
    ``"Insufficient cpu"``, ``"unknown node n9"``)."""

    ok: bool
    reason: str = ""


owner_workload = pod_workload
"""``namespace/app`` of the pod's workload ("" for a standalone pod): :func:`colo.reservation_spec.pod_workload`."""


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
    owners = _OWNERS.decode(f["owners"]) if f.get("owners") else ()
    return Reservation(name=f["name"], node=f.get("node", ""), owner_uid=f.get("owner_uid", ""),
                       owner_workload=f.get("owner_workload", ""), held=held,
                       allocate_once=f.get("allocate_once", "1") == "1",
                       expires_at=float(f.get("expires_at") or 0.0), created_at=float(f.get("created_at") or 0.0),
                       state=f.get("state", "Available"),  # type: ignore[arg-type]
                       reason=f.get("reason", ""), consumed_by=f.get("consumed_by", ""), owners=owners)


def _finite(*values: float) -> bool:
    return all(math.isfinite(v) for v in values)


class ReservationStore:
    """Reservations under the store prefix of ``keys``, on the Redis ``client`` of a
    :class:`colo.store.Store` (``ReservationStore(store.redis, store.keys)``). Redis errors propagate."""

    def __init__(self, client: aioredis.Redis, keys: Keys, history_s: int = HISTORY_S) -> None:
        self.redis = client
        self.keys = keys
        self.history_s = history_s
        self._reserve = client.register_script(RESERVE_LUA)
        self._bind_on = client.register_script(BIND_ON_LUA)
        self._release = client.register_script(RELEASE_LUA)
        self._sweep = client.register_script(SWEEP_LUA)
        self._pending = client.register_script(PENDING_LUA)
        self._end_pending = client.register_script(END_PENDING_LUA)
        k = keys
        self._stems = _json.encode({
            "binding": k.binding(""), "node": k.node(""), "limits": k.limits(""), "alloc": k.allocated(""),
            "podstate": k.pod_state(""), "nodepods": k.node_pods(""), "rsv": k.reservation(""),
            "rsvs": k.reservations, "rsvpending": k.reservations_pending, "quotamax": k.quota_max(""),
            "quotaused": k.quota_used(""), "quotas": k.quotas}).decode()

    async def reserve(self, name: str, node: str, held: Resources, *, at: float, ttl_s: float,
                      owner_uid: str = "", owner_workload: str = "", allocate_once: bool = True,
                      reason: str = "", owners: tuple[ReservationOwner, ...] = (),
                      created_at: float | None = None) -> ReserveResult:
        """Hold ``held`` (milli-cores, bytes; negative amounts count as 0) plus one pod slot on ``node``
        for the owners until ``at + ttl_s`` (clock seconds), atomically and checked as a bind is
        (:mod:`colo.store`): refused with a reason when the node is unknown or the room is not free.
        Idempotent for a name already available on that node; replaces a Pending or ended one of that
        name. ``created_at`` (default ``at``) is the submission time recorded.

        Raises ValueError without an owner (``owner_uid``, ``owner_workload`` or ``owners``, each of which
        must select something), with an empty name, or with ``at`` / ``ttl_s`` not finite or ``ttl_s``
        <= 0 (a Redis script is not rolled back: a NaN expiry failed after the room was added to the node,
        leaking it; an infinite one was never swept)."""
        from colo.reservation_spec import owner_problems

        bad_owners = bool(owners) and bool(owner_problems(owners))
        if not name or not (owner_uid or owner_workload or owners) or bad_owners or not (
                _finite(at, ttl_s, at + ttl_s) and ttl_s > 0):
            raise ValueError(f"reservation {name!r}: need a name, an owner (each selecting something), a finite at "
                             f"and a finite ttl_s > 0 (got at={at}, ttl_s={ttl_s}, owners={list(owners)})")
        created = at if created_at is None else created_at
        doc = {"name": name, "node": node, "owner_uid": owner_uid, "owner_workload": owner_workload,
               "owners": _json.encode(list(owners)).decode() if owners else "",
               "held": _requests(held), "allocate_once": "1" if allocate_once else "0",
               "expires_at": repr(float(at + ttl_s)), "at": repr(float(at)), "created_at": repr(float(created)),
               "reason": reason}
        out = _s(await self._reserve(args=[self._stems, _json.encode(doc)]))
        return ReserveResult(not out, out)

    async def bind_on(self, name: str, spec: PodSpec, node: str, at: float,
                      fence: Fence | None = None, quotas: Sequence[str] = ()) -> ReserveResult:
        """Bind pod ``spec`` on ``node`` consuming the reservation ``name`` (module doc), atomically.
        Refused (nothing changed) when the pod is already bound, the node is unknown, the reservation
        is not available on ``node`` or has expired by ``at`` (it is then ended as Expired), the pod
        is not an owner, the reservation holds room (beyond a pod slot) and the pod takes none of it
        (:data:`REASON_NOT_COVERED`), the part of the requests above the held room does not fit the node, or
        ``fence`` is given and its lease is no longer held with that value (``"lease lost"``, as
        :meth:`colo.store.Store.bind`), or a quota of ``quotas`` would pass its max
        (:data:`colo.store.REASON_QUOTA_EXCEEDED`): the pod's full requests are charged to each of them,
        as :attr:`colo.store.BindRequest.quotas` (the room held was not)."""
        doc = {**pod_facts(spec), "name": name, "node": node, "at": repr(float(at)),
               "req": _requests(spec.requests), "quotas": list(quotas)}
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
        """The reservation ``name`` (pending, available or ended within ``history_s``), or None."""
        return _record(await self.redis.hgetall(self.keys.reservation(name)))

    async def available(self) -> list[Reservation]:
        """Every available reservation, soonest expiry first (one pipeline)."""
        raw: list[bytes] = await self.redis.zrange(self.keys.reservations, 0, -1)  # type: ignore[assignment]
        return [r for r, _ in await self._read([_s(n) for n in raw]) if r.state == "Available"]

    async def _read(self, names: Sequence[str]) -> list[tuple[Reservation, bytes]]:
        if not names:
            return []
        pipe = self.redis.pipeline(transaction=False)
        for n in names:
            pipe.hgetall(self.keys.reservation(n))
        out = []
        for h in await pipe.execute():
            rec = _record(h)
            if rec is not None:
                out.append((rec, h.get(b"spec", b"")))
        return out

    # ------------------------------------------------------------------ submitted, not placed yet

    async def put_pending(self, spec: ReservationSpec, at: float, reason: str = "waiting to be placed") -> str:
        """Record a submitted reservation as ``Pending`` (holding nothing) until the scheduler places it:
        ``created_at`` = ``spec.created_at``, else ``at``; expiry ``created_at + ttl_s``. Returns '' when
        recorded, :data:`PENDING_KNOWN` when a reservation of that name has that creation time already
        (a redelivered submission), :data:`PENDING_EXISTS` when another one of that name is available.
        A pending one of that name is replaced. Raises ValueError for a non-finite time or ttl."""
        created = spec.created_at or at
        if not (_finite(created, spec.ttl_s, created + spec.ttl_s) and spec.ttl_s > 0):
            raise ValueError(f"reservation {spec.name!r}: need a finite created_at and ttl_s > 0")
        doc = {"name": spec.name, "node": spec.node, "owners": _json.encode(spec.owners).decode(),
               "held": _requests(spec.requests), "allocate_once": "1" if spec.allocate_once else "0",
               "expires_at": repr(float(created + spec.ttl_s)), "created_at": repr(float(created)),
               "reason": reason}
        return _s(await self._pending(args=[self._stems, _json.encode(doc), _json.encode(spec)]))

    async def pending(self) -> list[tuple[Reservation, ReservationSpec]]:
        """Every pending reservation with its submission, oldest first."""
        names = sorted(_s(n) for n in await self.redis.smembers(self.keys.reservations_pending))
        out = [(r, _SPEC.decode(raw)) for r, raw in await self._read(names) if r.state == "Pending" and raw]
        return sorted(out, key=lambda p: (p[0].created_at, p[0].name))

    async def end_pending(self, name: str, state: ReservationState, reason: str, at: float) -> bool:
        """A pending reservation gets ``reason``; with ``state`` other than ``Pending`` it also ends so (e.g.
        ``Expired`` when its TTL passed before it could be placed). False when it was not pending."""
        return bool(await self._end_pending(args=[self._stems, name, state, reason, repr(float(at)),
                                                  self.history_s]))

    async def all(self) -> list[Reservation]:
        """Every reservation still readable: pending, available and ended within ``history_s`` (a SCAN)."""
        stem = self.keys.reservation("")
        names = [_s(k)[len(stem):] async for k in self.redis.scan_iter(match=stem + "*", count=1000)]
        return sorted((r for r, _ in await self._read(sorted(names))), key=lambda r: (r.created_at, r.name))
