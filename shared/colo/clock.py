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
    """Simulated time, advanced explicitly; starts at ``start`` seconds."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = float(start)

    def now(self) -> float:
        """Current virtual time in seconds."""
        return self._now

    def advance_to(self, t: float) -> None:
        """Move time forward to ``t``. Raises ValueError if ``t`` is in the past."""
        if t < self._now:
            raise ValueError(f"virtual time cannot go back: {t} < {self._now}")
        self._now = float(t)
