"""A token bucket on the service clock (eviction rate limit, REFERENCE.md §6: 10/s)."""

from __future__ import annotations


class TokenBucket:
    """``rate`` tokens per second up to ``burst``; starts full.

    Time comes from the caller (service clock seconds), so virtual time works.
    Raises ValueError for a non-positive rate or burst.
    """

    def __init__(self, rate_per_s: float, burst: int) -> None:
        if rate_per_s <= 0 or burst < 1:
            raise ValueError(f"rate must be > 0 and burst >= 1, got {rate_per_s}, {burst}")
        self.rate = float(rate_per_s)
        self.burst = float(burst)
        self.tokens = float(burst)
        self.last: float | None = None

    def _refill(self, now: float) -> None:
        if self.last is not None and now > self.last:
            self.tokens = min(self.burst, self.tokens + (now - self.last) * self.rate)
        if self.last is None or now > self.last:
            self.last = now

    def try_take(self, now: float) -> bool:
        """Take one token at time ``now`` if available; True when taken."""
        self._refill(now)
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False
