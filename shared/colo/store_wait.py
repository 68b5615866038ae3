"""Acknowledge a bind or release only once replicas hold it: Redis ``WAIT numreplicas timeout``.

``WAIT`` blocks the calling *connection* until every write that connection sent before it has reached
``numreplicas`` replicas, or ``timeout`` milliseconds have passed, and returns the number of replicas that
acknowledged (redis.io/commands/wait). So the bind script and its ``WAIT`` must travel on one connection:
:func:`replicated` holds one connection of the pool for both.

A ``WAIT`` that returns fewer replicas than asked means the write is on the primary (and its AOF) but may be
lost if that primary fails over now, so it is **not** an acknowledgement: :meth:`WaitPolicy.wait` sends
``WAIT`` again on the same connection until the replicas ack or ``redis_failover_window_s`` seconds have passed.

- The connection breaks meanwhile, or its server answers as a replica (a Sentinel switchover demoted it): the
  write's fate is unknown. :class:`BindUnknown` (a ``redis.exceptions.ConnectionError``) is raised, and the
  scheduler treats the bind as failed (releases the pods in its memory and retries them; a retry refused as
  "already bound to X" is adopted, :meth:`colo_scheduler.binding.SchedulerBinding._settle_unsure`), so that a
  ``PodBound`` is published only for binds a failover cannot lose.
- The window passes with the same primary still answering: no failover took the primary within the time one
  needs, so the write is **kept** and reported (warning log, counter ``colo_store_wait_short_total{op}``):
  refusing it would need an undo that is itself unreplicated, and a replica outage would stop every bind.

The trade-off: while no replica is in sync (a replica restarting, resynchronising after a failover), every bind
and release stalls for up to ``redis_failover_window_s`` (20 s by default) instead of being acknowledged at
once; scheduling cycles stall with it. Operators who prefer refusal set Redis' own ``min-replicas-to-write``
(the primary then refuses the script itself; the scheduler requeues the pod).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import redis.asyncio as aioredis
import redis.exceptions as redis_exc

from colo import telemetry

log = logging.getLogger("colo.store")

class BindUnknown(redis_exc.ConnectionError):
    """The writes of a bind/release call reached a primary whose connection broke, or which was demoted, before
    enough replicas acknowledged them: they may or may not survive. Callers treat the call as failed."""


_SHORT = telemetry.counter("colo_store_wait_short_total",
                           "Binds/releases whose WAITs returned fewer replicas than redis_wait_replicas for the whole "
                           "failover window (kept)",
                           ("op",))


@dataclass
class WaitPolicy:
    """``replicas`` to wait for (0 = no WAIT), each ``WAIT`` blocking at most ``timeout_ms`` milliseconds,
    repeated for at most ``window_s`` seconds (``redis_failover_window_s``); ``short`` counts, per op (``bind``,
    ``release``), the calls kept after the window without the replicas, ``repeats`` the extra WAITs sent."""

    replicas: int = 0
    timeout_ms: int = 1000
    short: dict[str, int] = field(default_factory=dict)
    window_s: float = 20.0
    repeats: int = 0

    async def wait(self, conn: aioredis.Redis, op: str, what: str) -> int:
        """``WAIT`` on ``conn`` (the connection that sent the writes) until ``replicas`` acknowledge or
        ``window_s`` passes; returns the replicas that acknowledged. Short after the window: logged and
        counted, kept. Raises :class:`BindUnknown` when the connection breaks or its server was demoted
        meanwhile, RedisError on other I/O failure."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.window_s
        acked = await self._wait_on_same_server(conn, self.timeout_ms)
        while acked < self.replicas:
            left_ms = int((deadline - loop.time()) * 1e3)
            if left_ms <= 0:
                break
            if self.repeats % 20 == 0:
                log.warning("%s %s: WAIT %d returned %d replicas; waiting up to %.0f s more on the same "
                            "connection", op, what, self.replicas, acked, left_ms / 1e3)
            self.repeats += 1
            acked = await self._wait_on_same_server(conn, max(1, min(self.timeout_ms, left_ms)))
        if acked < self.replicas:
            self.short[op] = self.short.get(op, 0) + 1
            _SHORT.labels(op=op).inc()
            log.warning("%s %s: WAIT %d returned %d replicas for %.0f s; kept (no failover took the primary "
                        "within the window)", op, what, self.replicas, acked, self.window_s)
        return acked

    async def _wait_on_same_server(self, conn: aioredis.Redis, timeout_ms: int) -> int:
        """The replicas acknowledging the writes of ``conn``'s one connection, asked on that connection only:
        a WAIT resent after a reconnect would run on whichever server is primary now (behind Sentinel, the new
        one) and count its replicas, not the writes'. Raises :class:`BindUnknown` when that connection broke or
        reached a demoted primary."""
        connection = conn.connection
        if connection is None:  # no command ran on it: nothing to wait for
            return int(await conn.wait(self.replicas, timeout_ms))
        if not connection.is_connected:
            raise BindUnknown("the connection that sent the writes is closed: their replication is unknown")
        try:
            await connection.send_command("WAIT", self.replicas, timeout_ms)
            return int(await connection.read_response())
        except (redis_exc.ConnectionError, redis_exc.TimeoutError) as exc:
            await connection.disconnect()
            raise BindUnknown(f"the primary went away before its replicas acknowledged the writes: {exc}") \
                from exc
        except redis_exc.ResponseError as exc:
            if "replica" not in str(exc):
                raise
            raise BindUnknown(f"the primary was demoted before its replicas acknowledged the writes: {exc}") \
                from exc


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
