"""Service checkpoints in the store (:class:`colo.store.Store`): one blob per name, replaced in one SET (the
profiler's models, docs/profiler.md)."""

from __future__ import annotations

import redis.asyncio as aioredis

from colo.keys import Keys


class CheckpointOps:
    """The checkpoint methods of :class:`colo.store.Store` (which provides client and keys)."""

    redis: aioredis.Redis
    keys: Keys

    def checkpoint_key(self, name: str) -> str:
        """Key of the checkpoint blob of ``name`` (``{prefix}:checkpoint:{name}``, a string).
        Raises ValueError unless ``name`` is letters, digits, '.', '_', '-'."""
        return self.keys.checkpoint(name)

    async def put_checkpoint(self, name: str, blob: bytes) -> None:
        """Replace the checkpoint ``name`` by ``blob`` in one SET: a reader gets the old or the new blob whole,
        never a mix. Raises ValueError for a bad name."""
        await self.redis.set(self.checkpoint_key(name), blob)

    async def get_checkpoint(self, name: str) -> bytes | None:
        """The checkpoint blob ``name``, or None when there is none. Raises ValueError for a bad name."""
        raw = await self.redis.get(self.checkpoint_key(name))
        if isinstance(raw, str):  # Store.connect never decodes responses; a client that does would corrupt blobs
            raise TypeError("the Redis client decodes responses: checkpoints need bytes")
        return raw
