"""Single-active scheduling: a Redis lease with a fencing token decides which replica schedules.

Same protocol as Kubernetes leader election (client-go ``leaderelection``, Lease object), on
Redis: the lease is one key set with ``SET NX PX`` (:meth:`colo.store.Store.acquire_lease`),
whose value carries a fencing token that grows with every acquisition.

* A candidate tries to take the lease every ``retry_period_s``.
* The holder renews it every ``retry_period_s`` to ``duration_s`` from now, and counts itself
  leader only until ``renew_deadline_s`` after the start of its last successful renewal: a
  holder that cannot reach Redis stops scheduling before the key can expire, so two replicas
  never both believe they lead (with clocks that run at the same rate).
* Every bind of the leader is fenced with the lease value (:class:`colo.store.Fence`), so a
  leader that was paused past its lease (GC, SIGSTOP, a slow network) and has not noticed yet
  still cannot bind: Redis refuses.
* A graceful stop releases the lease, so a follower takes over at its next retry.

Failover after a leader dies without releasing: at most ``duration_s + retry_period_s``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from colo.store import Fence, Lease, Store

log = logging.getLogger("colo.scheduler.lease")


class LeaderElector:
    """Acquires and renews the lease ``name`` for ``holder``; run :meth:`run` as a task.

    ``on_change(leader)`` is called on every transition (True when elected, False when the
    lease is lost or given up). Times are seconds; raises ValueError unless
    ``duration_s > renew_deadline_s > retry_period_s > 0`` (client-go's validation).
    """

    def __init__(self, store: Store, name: str, holder: str, duration_s: float, renew_deadline_s: float,
                 retry_period_s: float, on_change: Callable[[bool], None] | None = None) -> None:
        if not duration_s > renew_deadline_s > retry_period_s > 0:
            raise ValueError("lease timing needs duration_s > renew_deadline_s > retry_period_s > 0, got "
                             f"{duration_s}, {renew_deadline_s}, {retry_period_s}")
        self.store = store
        self.name = name
        self.holder = holder
        self.duration_s = duration_s
        self.renew_deadline_s = renew_deadline_s
        self.retry_period_s = retry_period_s
        self.on_change = on_change
        self.lease: Lease | None = None
        self._valid_until = 0.0
        self.transitions = 0
        self.elected_at = 0.0
        """Wall time (seconds since the epoch) of the last election, 0 when never elected."""

    def is_leader(self) -> bool:
        """True while this process holds the lease and its last renewal is recent enough."""
        if self.lease is None:
            return False
        if time.monotonic() >= self._valid_until:
            self._step_down("renew deadline passed")
            return False
        return True

    def fence(self) -> Fence | None:
        """The fence binds must carry while leader, else None."""
        return Fence(self.name, self.lease.value) if self.is_leader() and self.lease is not None else None

    def lost(self, why: str) -> None:
        """Give up leadership at once (e.g. Redis refused a fenced bind)."""
        if self.lease is not None:
            self._step_down(why)

    async def try_once(self) -> bool:
        """One acquire-or-renew attempt; returns whether this process leads afterwards.

        Redis errors are logged: a holder keeps leading until its renew deadline passes.
        """
        started = time.monotonic()
        duration_ms = max(1, int(self.duration_s * 1000))
        try:
            if self.lease is None:
                lease = await self.store.acquire_lease(self.name, self.holder, duration_ms)
                if lease is not None:
                    self.lease = lease
                    self._valid_until = started + self.renew_deadline_s
                    self.transitions += 1
                    self.elected_at = time.time()
                    log.info("%s: elected leader of %s (token %d)", self.holder, self.name, lease.token)
                    if self.on_change is not None:
                        self.on_change(True)
            elif await self.store.renew_lease(self.lease, duration_ms):
                self._valid_until = started + self.renew_deadline_s
            else:
                self._step_down("lease taken or expired")
        except Exception as exc:  # Redis unreachable: retry; is_leader() enforces the deadline
            log.warning("%s: lease %s: %r", self.holder, self.name, exc)
        return self.is_leader()

    async def run(self) -> None:
        """Acquire or renew every ``retry_period_s`` until cancelled."""
        while True:
            await self.try_once()
            await asyncio.sleep(self.retry_period_s)

    async def release(self) -> None:
        """Give the lease up in Redis (graceful stop) so that a follower takes over at once."""
        lease = self.lease
        if lease is None:
            return
        self._step_down("stopping")
        try:
            await self.store.release_lease(lease)
        except Exception as exc:
            log.warning("%s: could not release lease %s: %r", self.holder, self.name, exc)

    def _step_down(self, why: str) -> None:
        lease, self.lease = self.lease, None
        if lease is None:
            return
        self.transitions += 1
        log.warning("%s: no longer leader of %s (token %d): %s", self.holder, self.name, lease.token, why)
        if self.on_change is not None:
            self.on_change(False)

    def status(self) -> dict[str, Any]:
        """For /debug/state: ``leader``, ``lease``, ``holder``, ``token``, ``transitions``, ``elected_at``."""
        leader = self.is_leader()
        return {"leader": leader, "lease": self.name, "holder": self.holder,
                "token": self.lease.token if leader and self.lease is not None else None,
                "transitions": self.transitions, "elected_at": self.elected_at}
