"""Leases of :class:`colo.store.Store`: one holder at a time per name, with a fencing token that grows on every
acquisition (:data:`colo.store_lua.ACQUIRE_LUA`), renewed while held and dropped on a graceful stop (docs/
operations.md, scheduler leader election)."""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis

from colo.keys import Keys
from colo.store_binds import Lease


def _s(v: bytes | str) -> str:
    return v.decode() if isinstance(v, bytes) else v


class LeaseOps:
    """The lease methods of :class:`colo.store.Store` (which provides the client, the keys and the registered
    lease scripts)."""

    redis: aioredis.Redis
    keys: Keys
    _acquire: Any
    _renew: Any
    _drop_lease: Any

    async def acquire_lease(self, name: str, holder: str, duration_ms: int) -> Lease | None:
        """Take the lease ``name`` for ``holder`` for ``duration_ms`` when nobody holds it
        (``SET NX PX`` with the next fencing token, atomically); None when it is held.

        Raises ValueError for ``duration_ms`` < 1 or an empty ``holder``; RedisError on I/O failure.
        """
        if duration_ms < 1 or not holder:
            raise ValueError(f"lease {name!r}: need a holder and duration_ms >= 1, got {holder!r}, {duration_ms}")
        k = self.keys
        token, value = await self._acquire(keys=[k.lease(name), k.lease_fence(name)], args=[holder, duration_ms])
        return Lease(name, int(token), _s(value)) if int(token) > 0 else None

    async def renew_lease(self, lease: Lease, duration_ms: int) -> bool:
        """Extend ``lease`` to ``duration_ms`` from now; False when it expired or another holder has it."""
        return bool(await self._renew(keys=[self.keys.lease(lease.name)], args=[lease.value, duration_ms]))

    async def release_lease(self, lease: Lease) -> bool:
        """Give ``lease`` up at once (a graceful stop); False when it was no longer ours."""
        return bool(await self._drop_lease(keys=[self.keys.lease(lease.name)], args=[lease.value]))

    async def lease_holder(self, name: str) -> str | None:
        """Current value (``"<token>:<holder>"``) of the lease ``name``, or None when free."""
        v = await self.redis.get(self.keys.lease(name))
        return None if v is None else _s(v)
