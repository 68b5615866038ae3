"""PodGroups and workload records of :class:`colo.store.Store`, kept by admission (the slo-manager,
docs/slo-manager.md "Workloads"): ``{p}:podgroups`` (``namespace/name`` → PodGroupSpec JSON) and
``{p}:workloads`` (uid → :class:`colo.workloads.WorkloadRecord` JSON, opaque here); :mod:`colo.keys`.
"""

from __future__ import annotations

import redis.asyncio as aioredis

from colo import codec
from colo.keys import Keys
from colo.messages import PodGroupSpec


def _s(v: bytes | str) -> str:
    return v.decode() if isinstance(v, bytes) else v


def _b(v: bytes | str) -> bytes:
    return v.encode() if isinstance(v, str) else v


class WorkloadOps:
    """The PodGroup and workload-record methods of :class:`colo.store.Store` (which provides client and keys)."""

    redis: aioredis.Redis
    keys: Keys

    async def put_pod_group(self, group: PodGroupSpec) -> None:
        """Store (or replace) an admitted PodGroup under ``namespace/name``."""
        await self.redis.hset(self.keys.pod_groups, f"{group.namespace}/{group.name}", codec.encode(group))

    async def get_pod_group(self, key: str) -> PodGroupSpec | None:
        """The PodGroup ``namespace/name`` or None."""
        raw = await self.redis.hget(self.keys.pod_groups, key)
        return None if raw is None else codec.decode(raw, PodGroupSpec)

    async def list_pod_groups(self) -> dict[str, PodGroupSpec]:
        """Every stored PodGroup by ``namespace/name``."""
        raw = await self.redis.hgetall(self.keys.pod_groups)
        return {_s(k): codec.decode(v, PodGroupSpec) for k, v in raw.items()}

    async def put_workload_record(self, uid: str, blob: bytes) -> None:
        """Replace admission's record of the workload ``uid`` (an opaque JSON blob) in one HSET."""
        await self.redis.hset(self.keys.workloads, uid, blob)

    async def get_workload_record(self, uid: str) -> bytes | None:
        """Admission's record of the workload ``uid`` or None."""
        raw = await self.redis.hget(self.keys.workloads, uid)
        return None if raw is None else _b(raw)

    async def list_workload_records(self) -> dict[str, bytes]:
        """Every workload record by uid."""
        raw = await self.redis.hgetall(self.keys.workloads)
        return {_s(k): _b(v) for k, v in raw.items()}
