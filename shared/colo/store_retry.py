"""How a Store command is sent again after a connection error (:meth:`colo.store.Store.connect`).

Two policies (redis-py ``Retry`` objects, one copy per pooled connection):

- a single server: a fixed number of resends (``colo.store.RECONNECT_RETRIES``, 8) with exponential backoff and
  jitter from 0.05 s capped at 1 s (:data:`RECONNECT_BACKOFF_S`), about 4 s at most, longer than a Redis restart on
  its data takes;
- behind Sentinel (:class:`FailoverRetry`): the same backoff, resent until ``redis_failover_window_s`` seconds have
  passed since the first failure (default 20 s, ``COLO_REDIS_FAILOVER_WINDOW_S``). A failover takes Sentinel's
  ``down-after-milliseconds`` (1 s in docs/operations.md) plus the vote and the promotion (1–2 s); a graceful
  switchover (``SENTINEL FAILOVER``) leaves the old primary answering ``READONLY`` as a replica for several seconds
  before the Sentinels name the new one, which a 4 s window did not cover. After each failure the idle connections
  of the pool are dropped, so that every one of them asks the Sentinels for the primary again at its next use
  instead of meeting ``READONLY`` once each (redis-py's ``SentinelManagedConnection`` turns ``READONLY`` into a
  ``ConnectionError`` and reconnects through ``SentinelConnectionPool.get_master_address``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from redis.asyncio.connection import ConnectionPool
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff

from colo.settings import RuntimeSettings

__all__ = ["RECONNECT_BACKOFF_S", "FailoverRetry", "store_retry"]

T = TypeVar("T")

RECONNECT_BACKOFF_S = (0.05, 1.0)
"""(base, cap) seconds of the exponential backoff with jitter between resends (redis-py
``ExponentialWithJitterBackoff``)."""


class FailoverRetry(Retry):
    """Resend a command that failed with a connection error (incl. ``READONLY`` from a demoted primary) until
    ``window_s`` seconds (wall time) have passed since its first failure, with :data:`RECONNECT_BACKOFF_S`
    between attempts; then the last error is raised. Every copy (redis-py deep-copies the retry into each
    connection) shares the pools registered with :meth:`follow`, whose idle connections it drops after a
    failure."""

    def __init__(self, window_s: float, pools: list[ConnectionPool] | None = None) -> None:
        base, cap = RECONNECT_BACKOFF_S
        # the count is only reported by redis-py's metrics; the window ends the resends
        super().__init__(ExponentialWithJitterBackoff(base=base, cap=cap), retries=1_000_000)
        self.window_s = window_s
        self._pools: list[ConnectionPool] = pools if pools is not None else []

    def __deepcopy__(self, memo: dict[int, Any]) -> FailoverRetry:
        copy = FailoverRetry(self.window_s, self._pools)
        copy.update_supported_errors(self._supported_errors)
        return copy

    def follow(self, pool: ConnectionPool) -> None:
        """Drop ``pool``'s idle connections after each failure (the client's Sentinel-backed pool)."""
        self._pools.append(pool)

    async def call_with_retry(self, do: Callable[[], Awaitable[T]], fail: Callable[..., Any],
                              is_retryable: Callable[[Exception], bool] | None = None,
                              with_failure_count: bool = False) -> T:
        """``await do()``; on a supported error ``await fail(error[, failures])``, drop the idle pooled
        connections, wait the backoff and try again while inside the window. Raises the last error after it."""
        self._backoff.reset()  # type: ignore[no-untyped-call]
        failures = 0
        deadline = time.monotonic() + self.window_s
        while True:
            try:
                return await do()
            except self._supported_errors as error:
                if is_retryable is not None and not is_retryable(error):
                    raise
                failures += 1
                await (fail(error, failures) if with_failure_count else fail(error))
                for pool in self._pools:
                    await pool.disconnect(inuse_connections=False)
                backoff = self._backoff.compute(failures)
                if time.monotonic() + backoff > deadline:
                    raise error
                await asyncio.sleep(backoff)


def store_retry(settings: RuntimeSettings | None, retries: int) -> Retry:
    """The resend policy of a Store client: :class:`FailoverRetry` over ``settings.redis_failover_window_s``
    when Sentinels are configured, else ``retries`` resends with :data:`RECONNECT_BACKOFF_S`."""
    if settings is not None and settings.redis_sentinels:
        return FailoverRetry(settings.redis_failover_window_s)
    base, cap = RECONNECT_BACKOFF_S
    return Retry(ExponentialWithJitterBackoff(base=base, cap=cap), retries=retries)
