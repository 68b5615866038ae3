"""Probes of the high-availability tests: who leads a JetStream stream, when every stream has a leader
again, and when binds happened (wall clock), to state how long a failover stalled the services."""

from __future__ import annotations

import asyncio
import bisect
import time

import nats.errors
import nats.js.errors
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg

from colo import subjects


async def stream_leader(nc: NATS, stream: str) -> str:
    """Server name of the leader of ``stream`` (JetStream stream info ``cluster.leader``); raises
    RuntimeError when the stream reports no cluster or no leader."""
    info = await nc.jetstream().stream_info(stream)
    leader = info.cluster.leader if info.cluster is not None else None
    if not leader:
        raise RuntimeError(f"{stream} has no leader")
    return leader


async def wait_stream_leaders(nc: NATS, exclude: str = "", timeout_s: float = 30.0) -> float:
    """Wait until every stream of :data:`colo.subjects.STREAMS` answers stream info with a leader other
    than ``exclude`` (a server just killed); returns the ``time.monotonic()`` at which they all did.
    Raises TimeoutError after ``timeout_s`` seconds."""
    deadline = time.monotonic() + timeout_s
    pending = [s.name for s in subjects.STREAMS]
    while pending:
        try:
            if await stream_leader(nc, pending[0]) != exclude:
                pending.pop(0)
                continue
        except (RuntimeError, nats.errors.Error, nats.js.errors.Error, TimeoutError):
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"no leader for {pending} within {timeout_s} s")
        await asyncio.sleep(0.05)
    return time.monotonic()


class BindClock:
    """Wall-clock arrival times (``time.monotonic()``) of the PodBound messages of a core NATS
    subscription (``cb=on_msg``)."""

    def __init__(self) -> None:
        self.times: list[float] = []

    async def on_msg(self, msg: Msg) -> None:
        """Record one arrival."""
        self.times.append(time.monotonic())

    def first_after(self, t: float) -> float:
        """The first arrival after ``t``; raises ValueError when none came."""
        i = bisect.bisect_right(self.times, t)
        if i == len(self.times):
            raise ValueError("no bind after the failover")
        return self.times[i]

    def last_before(self, t: float) -> float:
        """The last arrival at or before ``t`` (``t`` itself when none came)."""
        i = bisect.bisect_right(self.times, t)
        return self.times[i - 1] if i else t
