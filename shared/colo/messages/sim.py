"""Virtual-time simulation control: the coordinator's :class:`Tick` and each service's :class:`TickAck`."""

from __future__ import annotations

from colo.messages.base import Message


class Tick(Message, frozen=True):
    """Virtual-time tick: the service processes everything due up to ``now`` then acks."""

    seq: int
    now: float
    step_s: float
    settle_only: bool = False
    """Only drain the service's consumers at the current time (``now`` must equal it) and ack, without a
    tick: the coordinator sends it to every service after the step's ticks so that what the last ones
    published (evictions, the statuses they lead to) is handled within the step, at its time."""


class TickAck(Message, frozen=True):
    """A service's answer to a :class:`Tick`; ``stats`` are counters for the report."""

    service: str
    seq: int
    stats: dict[str, float] = {}
    error: str = ""
