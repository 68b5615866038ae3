"""Quota accounting of :class:`colo.store.Store`: the hard max per quota the bind script checks and the usage
it charges (``{p}:quotamax:{name}``, ``{p}:quotaused:{name}``, ``{p}:quotas``; :mod:`colo.keys`).

The max is the cross-replica cap (REFERENCE.md §8: a quota's ``max``): two scheduler replicas binding at
once can never push a quota's usage over it, since the check and the charge are one script
(:data:`colo.store_lua.BIND_LUA`). The runtime quota (borrowing, lending) is the scheduler's own check.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import redis.asyncio as aioredis
from redis.commands.core import AsyncScript

from colo.keys import Keys
from colo.messages import RESOURCE_NAMES


def _s(v: bytes | str) -> str:
    return v.decode() if isinstance(v, bytes) else v


class QuotaOps:
    """The quota methods of :class:`colo.store.Store` (which provides the client, keys and scripts)."""

    redis: aioredis.Redis
    keys: Keys
    _stems: str
    _delete_quota: AsyncScript

    async def set_quota_max(self, name: str, max: Mapping[str, int]) -> None:
        """Make ``max`` the hard cap of quota ``name`` that binds charged to it are checked against (module
        doc), replacing the previous one: keys are :data:`colo.messages.RESOURCE_NAMES` field names
        (milli-cores, bytes, a pod count), an absent resource is unlimited, an empty ``max`` caps nothing.
        Usage already charged stays (a lowered max refuses new binds; nothing bound is undone).

        Raises ValueError listing every problem: an empty name, an unknown resource, an amount that is
        not an int >= 0."""
        problems = [] if name else ["name: must not be empty"]
        for field, v in max.items():
            if field not in RESOURCE_NAMES:
                problems.append(f"max.{field}: unknown resource (one of {', '.join(RESOURCE_NAMES)})")
            elif not isinstance(v, int) or isinstance(v, bool) or v < 0:
                problems.append(f"max.{field}: must be an int >= 0, got {v!r}")
        if problems:
            raise ValueError(f"quota {name!r}: " + "; ".join(problems))
        k = self.keys
        pipe = self.redis.pipeline(transaction=True)
        pipe.delete(k.quota_max(name))
        if max:
            pipe.hset(k.quota_max(name), mapping={f: str(v) for f, v in max.items()})
        pipe.sadd(k.quotas, name)
        await pipe.execute()

    async def quota_max(self, name: str) -> dict[str, int]:
        """The max of quota ``name`` as set (resources without a max are absent); {} when none."""
        return {_s(f): int(_s(v)) for f, v in (await self.redis.hgetall(self.keys.quota_max(name))).items()}

    async def delete_quota(self, name: str) -> bool:
        """Drop quota ``name``'s max (binds charged to it are no longer capped). Its usage stays while pods
        bound under it still charge it (their release takes it off as usual); True when nothing remains."""
        return bool(await self._delete_quota(args=[self._stems, name]))

    async def quota_used(self, name: str) -> dict[str, int]:
        """Σ requests of the pods bound charged to quota ``name``, every :data:`colo.messages.RESOURCE_NAMES`
        field (``pods`` = their count; 0 when none)."""
        return _used(await self.redis.hgetall(self.keys.quota_used(name)))

    async def quota_used_all(self) -> dict[str, dict[str, int]]:
        """:meth:`quota_used` of every quota that has a max or was charged, by name (one pipeline)."""
        names = sorted(_s(n) for n in await self.redis.smembers(self.keys.quotas))
        pipe = self.redis.pipeline(transaction=False)
        for n in names:
            pipe.hgetall(self.keys.quota_used(n))
        return {n: _used(h) for n, h in zip(names, await pipe.execute())} if names else {}


def _used(h: dict[Any, Any]) -> dict[str, int]:
    vals = {_s(k): int(_s(v) or 0) for k, v in h.items()}
    return {n: vals.get(n, 0) for n in RESOURCE_NAMES}
