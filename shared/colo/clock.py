"""Clocks: every service takes time from a :class:`Clock`, never from ``time`` directly.

:class:`WallClock` follows real time; :class:`VirtualClock` is moved forward by
simulation ticks (DESIGN.md §8) so that a six-hour scenario runs in minutes and
is reproducible. Both return seconds as ``float``.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """A source of the current time in seconds."""

    def now(self) -> float:
        """Current time in seconds."""
        ...


class WallClock:
    """Real time: seconds since the Unix epoch."""

    def now(self) -> float:
        """Current wall time in seconds."""
        return time.time()


class VirtualClock:
    """Simulated time, advanced explicitly; starts at ``start`` seconds.

    Created without ``start`` it reads 0 and does not know the time (``known`` False) until the first
    :meth:`advance_to`: a service started (or restarted) in simulation learns the time from its first
    tick, and a message dated later than 0 before that is not "in the future" (:func:`knows_time`)."""

    def __init__(self, start: float | None = None) -> None:
        self._now = float(start) if start is not None else 0.0
        self.known = start is not None
        """Whether the clock was given a time (at creation or by :meth:`advance_to`)."""

    def now(self) -> float:
        """Current virtual time in seconds."""
        return self._now

    def advance_to(self, t: float) -> None:
        """Move time forward to ``t``. Raises ValueError if ``t`` is in the past."""
        if t < self._now:
            raise ValueError(f"virtual time cannot go back: {t} < {self._now}")
        self._now = float(t)
        self.known = True


def knows_time(clock: Clock) -> bool:
    """Whether ``clock.now()`` is the actual time: always for a wall clock, for a
    :class:`VirtualClock` once it was given one. Checks that compare a message's time with the
    clock ("dated ahead of the clock") apply only when it does."""
    return not isinstance(clock, VirtualClock) or clock.known
