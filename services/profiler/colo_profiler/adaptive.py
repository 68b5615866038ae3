"""Per-pod learned peak margins for ``peak_method = "adaptive"`` (docs/profiler.md "Prediction accuracy").

The reference peak (REFERENCE.md §7) is the histogram percentile × (1 + ``margin_percent``/100). The
adaptive peak keeps the percentile (the *base*) and replaces the fixed factor by a margin learned per pod
and resource from the pod's own past misses, with the rule of PeakPredictor
(:func:`colo_profiler.predict.choose_margins_rows`, one call per roll-over for all pods):

* time is cut into windows of ``margin_window_s`` seconds, aligned on multiples of it (one clock for all
  pods, so every pod rolls over at once, at the first sample of a new window);
* at the start of a window, before any of its samples is added, each pod's base is recorded — it is computed
  from earlier samples only, so no window's samples can enter its own prediction (no look-ahead);
* while the window runs, the pod's highest sample is tracked (one vectorized ``maximum.at`` per flush);
* at its end the residual ``(window max − base) / request`` joins the pod's last ``residual_window``
  residuals and the margin is re-chosen from them: the fraction ``c`` of the request minimizing
  ``c + violation_price × (#{r > c} + 1)/(n + 1)``, plus ``min_margin``;
* peak = ``min(cap, current base + margin × request)``, ``cap = max(request, highest sample seen)``
  (PeakPredictor's cap). A pod with no residual yet, or without a request for the resource, gets the
  reference peak.

State lives in arrays indexed by histogram row (column 0 CPU in cores, 1 memory in bytes), so it follows a
pod's row, grows with the banks and is cleared when a row is freed. Pure (no I/O).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from colo_profiler.predict import choose_margins_rows

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]

RESOURCES = ("cpu", "memory")
"""Column order of every per-row array: CPU (cores), memory (bytes)."""


@dataclass(frozen=True)
class PodPeakState:
    """The adaptive state of one pod, per resource ``(cpu cores, memory bytes)``; NaN/−inf = none yet."""

    base: tuple[float, float]
    """Base recorded at the start of the current window."""
    window_max: tuple[float, float]
    """Highest sample of the current window so far."""
    highest: tuple[float, float]
    """Highest sample of the finished windows."""
    residuals: tuple[tuple[float, ...], tuple[float, ...]]
    """Past residuals, oldest first, fractions of the request."""
    margins: tuple[float, float]
    """Margin chosen from ``residuals``, fraction of the request (NaN: none learned)."""


class AdaptivePeaks:
    """Window bases, window maxima, residual histories and margins of every row.

    ``residual_window`` ≥ 1 residuals are kept per row and resource; prices and ``min_margin`` are
    fractions of the request (see the module docstring). Raises ValueError on a bad window or count.
    """

    def __init__(self, window_s: float, residual_window: int, violation_prices: tuple[float, float],
                 min_margin: float, capacity: int = 64) -> None:
        if not (window_s > 0 and math.isfinite(window_s)) or residual_window < 1:
            raise ValueError(f"window_s must be finite and > 0 and residual_window ≥ 1, got {window_s}, "
                             f"{residual_window}")
        self.window_s = float(window_s)
        self.residual_window = int(residual_window)
        self.prices = violation_prices
        self.min_margin = float(min_margin)
        self.window: int | None = None
        """Index of the current window (``floor(t / window_s)``); None before the first sample."""
        self.base = np.full((0, 2), math.nan)
        self.window_max = np.full((0, 2), -math.inf)
        self.highest = np.full((0, 2), -math.inf)
        self.margin = np.full((0, 2), math.nan)
        self.residuals = np.full((2, 0, self.residual_window), math.nan)
        """Per resource and row the last residuals, oldest first, right-aligned (NaN = none)."""
        self.grow(capacity)

    # ------------------------------------------------------------------ rows

    def grow(self, capacity: int) -> None:
        """Make room for rows ``[0, capacity)`` (new rows empty)."""
        old = self.base.shape[0]
        if capacity <= old:
            return
        extra = capacity - old
        self.base = np.vstack([self.base, np.full((extra, 2), math.nan)])
        self.window_max = np.vstack([self.window_max, np.full((extra, 2), -math.inf)])
        self.highest = np.vstack([self.highest, np.full((extra, 2), -math.inf)])
        self.margin = np.vstack([self.margin, np.full((extra, 2), math.nan)])
        self.residuals = np.concatenate([self.residuals, np.full((2, extra, self.residual_window), math.nan)],
                                        axis=1)

    def clear(self, row: int) -> None:
        """Forget everything of ``row`` (freed, or given to another model)."""
        if row < self.base.shape[0]:
            self.base[row] = math.nan
            self.window_max[row] = -math.inf
            self.highest[row] = -math.inf
            self.margin[row] = math.nan
            self.residuals[:, row] = math.nan

    # ------------------------------------------------------------------ samples

    def window_of(self, t: float) -> int:
        """Index of the window holding time ``t`` seconds."""
        return math.floor(t / self.window_s)

    def observe(self, rows: IntArray, cpu: FloatArray, memory: FloatArray, times: float | FloatArray) -> None:
        """Raise the window maxima of ``rows`` (shape ``(n,)``) with samples in cores and bytes at ``times``;
        samples before the current window (late reports) do not count."""
        if self.window is None:
            return
        start = self.window * self.window_s
        if isinstance(times, np.ndarray):
            if float(times.min()) < start:
                keep = times >= start
                rows, cpu, memory = rows[keep], cpu[keep], memory[keep]
        elif times < start:
            return
        np.maximum.at(self.window_max[:, 0], rows, cpu)
        np.maximum.at(self.window_max[:, 1], rows, memory)

    def start(self, window: int) -> None:
        """Open ``window`` without settling anything (the first sample, or a restore with another window)."""
        self.window = window
        self.base[:] = math.nan
        self.window_max[:] = -math.inf

    def roll(self, window: int, rows: IntArray, bases: FloatArray, requests: FloatArray) -> None:
        """Close the current window and open ``window``.

        ``rows`` shape ``(n,)`` are the pods' rows; ``bases`` shape ``(n, 2)`` their percentiles now (cores,
        bytes; from samples before ``window`` only); ``requests`` shape ``(n, 2)`` (cores, bytes; ≤ 0 = none).
        Each row whose closing window had a base, samples and a request gets a residual and a new margin.
        """
        old_base = self.base[rows]
        actual = self.window_max[rows]
        self.highest[rows] = np.maximum(self.highest[rows], actual)
        ok = np.isfinite(old_base) & np.isfinite(actual) & (requests > 0)
        for k in (0, 1):
            idx = np.flatnonzero(ok[:, k])
            if idx.size == 0:
                continue
            settled = rows[idx]
            res = self.residuals[k]
            past = res[settled]
            past[:, :-1] = past[:, 1:]
            past[:, -1] = (actual[idx, k] - old_base[idx, k]) / requests[idx, k]
            res[settled] = past
            self._margins(k, settled)
        self.start(window)
        self.base[rows] = bases

    def _margins(self, k: int, rows: IntArray) -> None:
        """Re-choose the margins of ``rows`` for resource ``k`` from their residuals (one vectorized call)."""
        prices = np.full((rows.size, 1), self.prices[k])
        margin = choose_margins_rows(self.residuals[k, rows], prices, self.min_margin)[:, 0]
        self.margin[rows, k] = np.where(np.isinf(margin), math.nan, margin)

    def set_residuals(self, rows: IntArray, k: int, residuals: FloatArray) -> None:
        """Restore the residuals of ``rows`` for resource ``k`` — shape ``(len(rows), w)``, oldest first,
        right-aligned, NaN = none; the newest ``residual_window`` kept — and re-choose their margins."""
        w = min(self.residual_window, residuals.shape[1])
        self.residuals[k, rows] = math.nan
        if w:
            self.residuals[k, rows, self.residual_window - w:] = residuals[:, residuals.shape[1] - w:]
        if rows.size:
            self._margins(k, rows)

    # ------------------------------------------------------------------ peaks

    def peaks(self, rows: IntArray, bases: FloatArray, requests: FloatArray) -> tuple[FloatArray, npt.NDArray[np.bool_]]:
        """Adaptive peaks of ``rows`` (shape ``(n,)``) from their current ``bases`` and ``requests`` (both
        ``(n, 2)``, cores and bytes): ``min(cap, base + margin × request)``, and where that applies (a
        margin learned and a request); elsewhere the caller keeps the reference peak."""
        margin = self.margin[rows]
        cap = np.maximum(requests, np.maximum(self.highest[rows], self.window_max[rows]))
        use = np.isfinite(margin) & (requests > 0)
        peak = np.minimum(cap, bases + np.where(use, margin, 0.0) * requests)
        return peak, use

    def state(self, row: int) -> PodPeakState:
        """The state of ``row`` (see :class:`PodPeakState`)."""
        def pair(a: FloatArray) -> tuple[float, float]:
            return float(a[row, 0]), float(a[row, 1])
        def past(k: int) -> tuple[float, ...]:
            r = self.residuals[k, row]
            return tuple(r[~np.isnan(r)].tolist())
        return PodPeakState(pair(self.base), pair(self.window_max), pair(self.highest), (past(0), past(1)),
                            pair(self.margin))
