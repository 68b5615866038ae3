"""Noticing a store that lost writes while the scheduler ran: a Redis failover or restart (docs/operations.md
"Recovery").

A Sentinel failover promotes a replica that may lack the primary's last writes, and a primary restarted on its
AOF (cut back by ``appendfsync everysec``) or on none lacks them too. Either way Redis draws a new replication
ID (``INFO replication`` ``master_replid``; :meth:`colo.store.Store.data_epoch`). :class:`EpochWatch` reads it
every ``store_epoch_check_s`` clock seconds from the scheduling cycle (one cheap command); a changed value makes
the scheduler run the same rebuild pass as at a start on a lost store (:mod:`colo_scheduler.rebuild`), which is
idempotent: a restart that lost nothing rebuilds nothing.
"""

from __future__ import annotations

import math
from typing import Any


class EpochWatch:
    """The store's data epoch as last seen, re-read at most every ``interval_s`` clock seconds."""

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self.epoch: str | None = None
        """The replication ID last read; None before the first read."""
        self.changes = 0
        """Changes seen since the start (a statistic for tests and logs)."""
        self._next = -math.inf

    async def seen(self, store: Any, now: float) -> None:
        """Record the store's current epoch (at a load, which rebuilds by itself). Raises RedisError."""
        self.epoch = await store.data_epoch()
        self._next = now + self.interval_s

    async def changed(self, store: Any, now: float) -> bool:
        """True once when the store's epoch differs from the last one read (a failover or restart since),
        False when unchanged, not due yet (clock ``now``, seconds) or never read. Raises RedisError on I/O
        failure (the epoch is then read again at the next call)."""
        if now < self._next:
            return False
        epoch = await store.data_epoch()
        self._next = now + self.interval_s
        old, self.epoch = self.epoch, epoch
        if old is None or old == epoch:
            return False
        self.changes += 1
        return True

    def retry(self) -> None:
        """The rebuild after a change failed (the store went away again): report a change at the next call."""
        self.epoch = ""
        self._next = -math.inf
