"""Decaying histograms for usage profiling (REFERENCE.md §7, oracle O13).

A :class:`HistogramBank` holds many histograms that share one bucket layout as the
rows of one NumPy array, so that one node report (every pod, every priority class,
the system) is added with a handful of array operations instead of a Python call
per sample. :class:`Histogram` is a single-row view for callers that want one.

Bucket layouts:

* :class:`LinearBuckets` — bucket ``i`` covers ``[i × size, (i + 1) × size)``.
* :class:`ExponentialBuckets` — bucket 0 covers ``[0, first)``; bucket ``n ≥ 1``
  starts at ``first × (ratio^n − 1)/(ratio − 1)`` (REFERENCE.md §7: ratio 1.05).

The last bucket is open-ended: values above the maximum land in it and its
percentile is its start. ``percentile(p)`` walks the buckets until the cumulative
weight reaches ``p × total`` and returns the *end* of that bucket (REFERENCE.md §7).

Decay: a sample added at time ``t`` weighs ``w × 2^((t − ref)/half_life)``: newer
samples weigh exponentially more, which is the same as older ones fading. ``ref``
is re-based (all weights scaled by a power of two) when the exponent would exceed
:data:`MAX_DECAY_EXPONENT` or a sample predates it (by at most :data:`MAX_BACKWARD_HALF_LIVES`;
an older sample weighs ~0), so weights never overflow, however far apart the sample times.
"""

from __future__ import annotations

import math
from typing import Protocol

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]

EPSILON = 1e-4
"""Bucket weights below this count as empty when walking percentiles (as the VPA histogram)."""

MAX_DECAY_EXPONENT = 100
"""Re-base the reference time before 2^exponent grows past 2^100 (float64 stays exact enough)."""
MAX_TIME_S = 1e12
"""Sample times are within ±this (seconds; year ~33,700): beyond, ``t − ref`` loses whole half-lives to float
rounding and the exponents overflow. The profiler's handlers refuse messages dated outside it."""
MAX_BACKWARD_HALF_LIVES = 800
"""Farthest a sample older than the reference moves it back (half-lives): the weights kept grow by 2^800 at
most, which with 2^:data:`MAX_DECAY_EXPONENT` stays under float64's 2^1024."""


class Buckets(Protocol):
    """A bucket layout: ``num_buckets`` buckets with ``starts[i]`` their lower bounds."""

    num_buckets: int
    starts: FloatArray

    def find(self, values: FloatArray) -> IntArray:
        """Bucket index of each value (shape of ``values``), clamped to ``[0, num_buckets)``."""
        ...


def _bucket_ends(starts: FloatArray) -> FloatArray:
    """End of each bucket; the last (open-ended) bucket 'ends' at its start."""
    ends = np.empty_like(starts)
    ends[:-1] = starts[1:]
    ends[-1] = starts[-1]
    return ends


class LinearBuckets:
    """Buckets of equal ``bucket_size`` up to ``max_value`` (plus one open bucket).

    ``num_buckets = ceil(max_value / bucket_size) + 1``. Raises ValueError on a
    non-positive size or maximum. Used by oracle O13 (max 10, size 1).
    """

    def __init__(self, max_value: float, bucket_size: float) -> None:
        if bucket_size <= 0 or max_value <= 0:
            raise ValueError(f"bucket_size and max_value must be > 0, got {bucket_size}, {max_value}")
        self.bucket_size = float(bucket_size)
        self.num_buckets = int(math.ceil(max_value / bucket_size)) + 1
        self.starts: FloatArray = np.arange(self.num_buckets, dtype=np.float64) * self.bucket_size
        self.ends: FloatArray = _bucket_ends(self.starts)

    def find(self, values: FloatArray) -> IntArray:
        """Bucket index of each value: ``floor(value / size)`` clamped to the bucket range."""
        idx = np.floor(np.asarray(values, dtype=np.float64) / self.bucket_size)
        return np.clip(idx, 0, self.num_buckets - 1).astype(np.intp)


class ExponentialBuckets:
    """Buckets growing by ``ratio``: bucket 0 is ``[0, first)``, bucket n starts at
    ``first × (ratio^n − 1)/(ratio − 1)`` (REFERENCE.md §7).

    ``num_buckets = ceil(log(max × (ratio − 1)/first + 1)/log(ratio)) + 1``, e.g. max 500,
    first 40, ratio 1.5 → 6 buckets starting 0, 40, 100, 190, 325, 527.5 (oracle O13).
    Raises ValueError unless ``first > 0``, ``max_value > first`` and ``ratio > 1``.
    """

    def __init__(self, max_value: float, first_bucket_size: float, ratio: float) -> None:
        if first_bucket_size <= 0 or max_value <= first_bucket_size or ratio <= 1:
            raise ValueError(
                f"need first_bucket_size > 0, max_value > first_bucket_size, ratio > 1; "
                f"got {first_bucket_size}, {max_value}, {ratio}"
            )
        self.first = float(first_bucket_size)
        self.ratio = float(ratio)
        n = math.ceil(math.log(max_value * (ratio - 1) / first_bucket_size + 1) / math.log(ratio))
        self.num_buckets = int(n) + 1
        k = np.arange(self.num_buckets, dtype=np.float64)
        self.starts = self.first * (np.power(self.ratio, k) - 1.0) / (self.ratio - 1.0)
        self.ends = _bucket_ends(self.starts)

    def find(self, values: FloatArray) -> IntArray:
        """Bucket index of each value; exact at bucket boundaries (log estimate, then corrected)."""
        v = np.asarray(values, dtype=np.float64)
        est = np.floor(np.log(np.maximum(v, 0.0) * (self.ratio - 1.0) / self.first + 1.0) / math.log(self.ratio))
        idx = np.clip(est, 0, self.num_buckets - 1).astype(np.intp)
        # The logarithm can land a hair off at a boundary: fix by comparing with the true starts.
        idx -= (v < self.starts[idx]) & (idx > 0)
        nxt = np.minimum(idx + 1, self.num_buckets - 1)
        idx += (v >= self.starts[nxt]) & (nxt > idx)
        return idx


class HistogramBank:
    """Many histograms with one bucket layout and one decay clock, stored as rows.

    ``weights`` has shape ``(capacity, num_buckets)``; rows are handed out by
    :meth:`alloc` and returned by :meth:`free`; the bank grows by doubling.
    ``half_life_s`` None means no decay (plain weighted histogram). Weights are
    relative to the reference time ``ref``; percentiles are scale-free.
    """

    def __init__(self, buckets: Buckets, half_life_s: float | None = None, capacity: int = 64) -> None:
        if half_life_s is not None and half_life_s <= 0:
            raise ValueError(f"half_life_s must be > 0, got {half_life_s}")
        self.buckets = buckets
        self.half_life_s = half_life_s
        self.ref: float | None = None
        self.weights: FloatArray = np.zeros((max(capacity, 1), buckets.num_buckets))
        self._ends: FloatArray = _bucket_ends(buckets.starts)
        self._free: list[int] = list(range(self.weights.shape[0] - 1, -1, -1))

    # ------------------------------------------------------------------ rows

    def alloc(self) -> int:
        """A fresh, empty row id."""
        if not self._free:
            old = self.weights.shape[0]
            self.weights = np.vstack([self.weights, np.zeros_like(self.weights)])
            self._free = list(range(2 * old - 1, old - 1, -1))
        return self._free.pop()

    def free(self, row: int) -> None:
        """Return ``row`` to the pool (its weights are cleared)."""
        self.weights[row] = 0.0
        self._free.append(row)

    def restore(self, weights: FloatArray, ref: float | None, in_use: npt.NDArray[np.bool_]) -> None:
        """Replace the whole state (a checkpoint restore): ``weights`` shape ``(capacity, num_buckets)``,
        the reference time ``ref`` (seconds) they are relative to, ``in_use`` shape ``(capacity,)`` the rows
        handed out. Raises ValueError on shape mismatch or weights in rows not in use."""
        if weights.ndim != 2 or weights.shape[1] != self.buckets.num_buckets or in_use.shape != weights.shape[:1]:
            raise ValueError(f"weights {weights.shape} and in_use {in_use.shape} do not fit "
                             f"{self.buckets.num_buckets} buckets")
        if (weights.any(axis=1) & ~in_use).any():
            raise ValueError("weights in rows not in use")
        self.weights = weights
        self.ref = ref
        self._free = np.flatnonzero(~in_use)[::-1].tolist()

    @property
    def rows_in_use(self) -> int:
        """Number of allocated rows."""
        return int(self.weights.shape[0]) - len(self._free)

    # ------------------------------------------------------------------ decay

    def _rebase(self, t_min: float, t_max: float) -> None:
        """Move ``ref`` so that samples in [t_min, t_max] get exponents within (0, MAX_DECAY_EXPONENT].

        Forward (``t_max`` past the window) it moves to ``t_max``: older weights shrink, to 0 when they are
        more than ~1,000 half-lives older. Backward it moves only up to :data:`MAX_BACKWARD_HALF_LIVES` (the
        kept weights grow by 2^that at most, far from float64's 2^1024); a sample older than that keeps a
        negative exponent and weighs (almost) nothing next to the newer ones, as its decay says.
        """
        hl = self.half_life_s
        assert hl is not None
        if self.ref is None:
            self.ref = math.floor(t_min / hl) * hl
        if t_max > self.ref + MAX_DECAY_EXPONENT * hl:
            new_ref = math.floor(t_max / hl) * hl
        elif t_min < self.ref and self.ref - t_min <= MAX_BACKWARD_HALF_LIVES * hl:
            new_ref = math.floor(t_min / hl) * hl
        else:
            return
        # Scale by an exact power of two so the relative weights stay exact (ldexp underflows to 0, never raises
        # for a negative exponent; a positive one is at most MAX_BACKWARD_HALF_LIVES + 1).
        self.weights *= math.ldexp(1.0, max(round((self.ref - new_ref) / hl), -2000))
        self.ref = new_ref

    def _decay_factors(self, t: float | FloatArray) -> float | FloatArray:
        """2^((t − ref)/half_life) per sample, re-basing ``ref`` first when needed (1.0 without decay)."""
        hl = self.half_life_s
        if hl is None:
            return 1.0
        if isinstance(t, np.ndarray):
            self._rebase(float(t.min()), float(t.max()))
            assert self.ref is not None
            return np.exp2((t - self.ref) / hl)
        self._rebase(t, t)
        assert self.ref is not None
        return float(2.0 ** ((t - self.ref) / hl))

    # ------------------------------------------------------------------ add / query

    def add(self, rows: IntArray | list[int], values: FloatArray | list[float], t: float | FloatArray,
            weights: FloatArray | list[float] | float = 1.0) -> None:
        """Add one sample per ``(rows[i], values[i])`` at time ``t`` seconds (a scalar or per sample).

        ``rows``, ``values`` (and ``t``/``weights`` if arrays) have shape ``(n,)``. Raises
        ValueError on shape mismatch, negative weights or non-finite values/times.
        """
        r = np.asarray(rows, dtype=np.intp)
        v = np.asarray(values, dtype=np.float64)
        w = np.asarray(weights, dtype=np.float64)
        times = np.asarray(t, dtype=np.float64) if isinstance(t, (np.ndarray, list)) else float(t)
        if r.shape != v.shape or r.ndim != 1 or (w.ndim and w.shape != v.shape) or (
                isinstance(times, np.ndarray) and times.shape != v.shape):
            raise ValueError(f"rows {r.shape}, values {v.shape}, weights and times must be equal 1-d shapes")
        if r.size == 0:
            return
        if not (np.isfinite(v).all() and np.isfinite(w).all() and (np.abs(times) <= MAX_TIME_S).all()) or (
                w < 0).any():
            raise ValueError("values must be finite, times within ±MAX_TIME_S and weights non-negative")
        self.add_unchecked(r, v, times, w)

    def add_unchecked(self, rows: IntArray, values: FloatArray, t: float | FloatArray,
                      weights: FloatArray | float = 1.0) -> None:
        """:meth:`add` without validation, for callers whose arrays are already clean (hot path)."""
        flat = rows * self.weights.shape[1] + self.buckets.find(values)
        np.add.at(self.weights.reshape(-1), flat, weights * self._decay_factors(t))

    def total_weight(self, rows: IntArray | list[int]) -> FloatArray:
        """Total weight of each row, shape ``(len(rows),)``."""
        return np.asarray(self.weights[np.asarray(rows, dtype=np.intp)].sum(axis=1))

    def percentiles(self, rows: IntArray | list[int], p: float) -> FloatArray:
        """The ``p``-percentile (0 ≤ p ≤ 1) of each row, shape ``(len(rows),)``; 0.0 for empty rows.

        Returns the end of the first bucket (weight ≥ EPSILON) where the cumulative
        weight reaches ``p × total`` (REFERENCE.md §7); the open last bucket returns its start.
        Raises ValueError when p is outside [0, 1].
        """
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"percentile must be within [0, 1], got {p}")
        w = self.weights[np.asarray(rows, dtype=np.intp)]
        if w.shape[0] == 0:
            return np.zeros(0)
        cum = np.cumsum(w, axis=1)
        total = cum[:, -1]
        nonempty = w >= EPSILON
        hit = (cum >= (p * total)[:, None]) & nonempty
        # Rounding can leave the threshold a hair above the final sum: fall back to the last bucket.
        last = w.shape[1] - 1 - np.argmax(nonempty[:, ::-1], axis=1)
        first_hit = np.where(hit.any(axis=1), np.argmax(hit, axis=1), last)
        out = self._ends[first_hit]
        return np.where(nonempty.any(axis=1), out, 0.0)


class Histogram:
    """One histogram (a single-row :class:`HistogramBank`), for tests and small uses.

    ``half_life_s`` None = no decay. Values and weights as in :meth:`HistogramBank.add`.
    """

    def __init__(self, buckets: Buckets, half_life_s: float | None = None) -> None:
        self._bank = HistogramBank(buckets, half_life_s, capacity=1)
        self._row = self._bank.alloc()

    def add_sample(self, value: float, weight: float, t: float) -> None:
        """Add ``value`` with ``weight`` at time ``t`` seconds."""
        self._bank.add([self._row], [value], t, [weight])

    def percentile(self, p: float) -> float:
        """The ``p``-percentile (end of the bucket reaching p × total); 0.0 when empty."""
        return float(self._bank.percentiles([self._row], p)[0])

    @property
    def total_weight(self) -> float:
        """Sum of the (decay-scaled) weights."""
        return float(self._bank.total_weight([self._row])[0])
