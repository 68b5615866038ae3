"""Acknowledge a bind or release only once replicas hold it: Redis ``WAIT numreplicas timeout``.

``WAIT`` blocks the calling *connection* until every write that connection sent before it has reached
``numreplicas`` replicas, or ``timeout`` milliseconds have passed, and returns the number of replicas that
acknowledged (redis.io/commands/wait). So the bind script and its ``WAIT`` must travel on one connection:
:func:`replicated` holds one connection of the pool for both.

A ``WAIT`` that returns fewer replicas than asked means the write is on the primary (and its AOF) but may be
lost if that primary fails over now. The write is **kept** and reported (warning log, counter
``colo_store_wait_short_total{op}``): refusing it would need an undo that is itself unreplicated, and a
replica outage would then stop every bind. Operators who prefer refusal set Redis' own
``min-replicas-to-write`` (the primary then refuses the script itself; the scheduler requeues the pod).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import redis.asyncio as aioredis
import redis.exceptions as redis_exc

from colo import telemetry

log = logging.getLogger("colo.store")

_SHORT = telemetry.counter("colo_store_wait_short_total",
                           "Binds/releases whose WAIT returned fewer replicas than redis_wait_replicas (kept)",
                           ("op",))


@dataclass
class WaitPolicy:
    """``replicas`` to wait for (0 = no WAIT) for at most ``timeout_ms`` milliseconds; ``short`` counts the
    waits that returned fewer replicas, per op (``bind``, ``release``)."""

    replicas: int = 0
    timeout_ms: int = 1000
    short: dict[str, int] = field(default_factory=dict)

    async def wait(self, conn: aioredis.Redis, op: str, what: str) -> int:
        """``WAIT`` on ``conn`` (the connection that sent the writes); returns the replicas that acknowledged.
        A short count is logged and counted, never raised. Raises RedisError on I/O failure."""
        acked = await self._wait_on_same_server(conn)
        if acked < self.replicas:
            self.short[op] = self.short.get(op, 0) + 1
            _SHORT.labels(op=op).inc()
            log.warning("%s %s: WAIT %d %d ms returned %d replicas; kept (it is lost if the primary fails "
                        "over before it replicates)", op, what, self.replicas, self.timeout_ms, acked)
        return acked


    async def _wait_on_same_server(self, conn: aioredis.Redis) -> int:
        """The replicas acknowledging the writes of ``conn``'s one connection, asked on that connection only:
        a WAIT resent after a reconnect would run on whichever server is primary now (behind Sentinel, the new
        one) and count its replicas, not the writes'. A connection that broke or reached a demoted primary
        gives 0 (kept, unknown)."""
        connection = conn.connection
        if connection is None:  # no command ran on it: nothing to wait for
            return int(await conn.wait(self.replicas, self.timeout_ms))
        if not connection.is_connected:
            return 0
        try:
            await connection.send_command("WAIT", self.replicas, self.timeout_ms)
            return int(await connection.read_response())
        except (redis_exc.ConnectionError, redis_exc.TimeoutError):
            await connection.disconnect()
            return 0  # the primary went away after the writes (a failover): kept, unknown
        except redis_exc.ResponseError as exc:
            if "replica" not in str(exc):
                raise
            return 0  # the server was demoted to a replica after the writes (a Sentinel switchover): kept, unknown


@asynccontextmanager
async def replicated(client: aioredis.Redis, policy: WaitPolicy, op: str,
                     what: str) -> AsyncIterator[aioredis.Redis]:
    """A client for the writes of one bind/release call: with ``policy.replicas`` = 0 the pooled client
    itself; else one connection, and ``WAIT`` on it after the block's writes succeeded."""
    if policy.replicas <= 0:
        yield client
        return
    async with client.client() as conn:
        yield conn
        await policy.wait(conn, op, what)
