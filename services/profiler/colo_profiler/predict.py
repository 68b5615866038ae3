"""Next-period peak prediction from a series' recent level and its own past misses.

The reference predictor (REFERENCE.md §7) takes a fixed percentile of a decaying
histogram of the samples and adds a fixed 10 % margin. :class:`PeakPredictor`
keeps the first half and learns the second per series:

* **base** — the exact ``percentile`` of the samples of the last ``window_s``
  seconds, each weighted ``2^((t − now)/half_life_s)`` (the decay of §7, but on the
  samples themselves, so no 5 % bucket rounding and no 0.025-core floor);
* **margin** — a fraction ``c`` of the provisioned capacity chosen, at each
  prediction, from the series' last ``residual_window`` residuals
  ``r = (actual peak − base) / provisioned`` as the ``c`` that minimizes
  ``c + violation_price × (#{r > c} + 1) / (n + 1)`` over ``c ∈ {0} ∪ {r > 0}``,
  plus ``min_margin``. ``violation_price`` is what one missed peak is worth in
  provisioned capacity held for one period; the ``+1`` is the finite-sample
  correction of conformal prediction (a new residual is as likely as any past one
  to be the largest). A steady series gets a margin just above its largest past
  miss; a series whose misses are rare but large (on/off batch jobs) gets either
  a margin up to the cap or none, whichever costs less at that price;
* **cap** — the peak never exceeds ``max(provisioned, highest sample seen)``: a
  VM cannot use more than its size except for the small excess some hypervisors
  report (Bitbrains shows CPU usage up to 106 % of the provisioned MHz).

Cold start as REFERENCE.md §7: until ``cold_start_s`` after its first sample a
series is predicted at its provisioned capacity. Units are the caller's (cores,
bytes, …); times are seconds. Pure (no I/O); measured by ``bench/prediction.py``.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class PeakPredictorConfig:
    """Parameters of :class:`PeakPredictor`; defaults are this project's (see docs/profiler.md).

    Raises ValueError listing every invalid field.
    """

    percentile: float = 0.95
    """Percentile of the decayed samples used as the base, 0 < p ≤ 1."""
    half_life_s: float = 24 * 3600.0
    """Half-life of the sample weights, seconds (24 h, the VPA's; REFERENCE.md §7)."""
    window_s: float = 7 * 24 * 3600.0
    """Samples older than this are dropped, seconds (7 half-lives: weight < 1 %)."""
    violation_price: float = 0.5
    """Cost of one missed peak in provisioned capacity × periods; higher → fewer misses, more headroom."""
    min_margin: float = 0.002
    """Added to every margin, fraction of provisioned (0.2 %: absorbs the noise of idle series)."""
    residual_window: int = 28
    """Past residuals the margin is chosen from (periods)."""
    cold_start_s: float = 24 * 3600.0
    """Series younger than this are predicted at provisioned, seconds (REFERENCE.md §7, 24 h)."""

    def __post_init__(self) -> None:
        problems = []
        if not 0.0 < self.percentile <= 1.0:
            problems.append(f"percentile must be within (0, 1], got {self.percentile}")
        if not self.half_life_s > 0:
            problems.append(f"half_life_s must be > 0, got {self.half_life_s}")
        if not self.window_s > 0:
            problems.append(f"window_s must be > 0, got {self.window_s}")
        if not (self.violation_price >= 0 and math.isfinite(self.violation_price)):
            problems.append(f"violation_price must be finite and ≥ 0, got {self.violation_price}")
        if not (self.min_margin >= 0 and math.isfinite(self.min_margin)):
            problems.append(f"min_margin must be finite and ≥ 0, got {self.min_margin}")
        if self.residual_window < 1:
            problems.append(f"residual_window must be ≥ 1, got {self.residual_window}")
        if not self.cold_start_s >= 0:
            problems.append(f"cold_start_s must be ≥ 0, got {self.cold_start_s}")
        if problems:
            raise ValueError("invalid PeakPredictorConfig: " + "; ".join(problems))


@dataclass(frozen=True)
class PeakForecast:
    """One prediction: ``peak`` = min(cap, base + margin × provisioned), or provisioned when ``cold``.

    ``base``, ``cap``, ``peak`` in the series' unit (``base`` NaN without samples);
    ``margin`` a fraction of provisioned.
    """

    at_s: float
    base: float
    margin: float
    cap: float
    peak: float
    provisioned: float
    cold: bool


def decayed_percentile(values: FloatArray, times_s: FloatArray, now_s: float, half_life_s: float,
                       p: float) -> float:
    """The ``p``-percentile of ``values`` weighted ``2^((t − now)/half_life_s)``.

    Shapes ``(n,)``; returns the smallest value whose cumulative weight reaches
    ``p × total`` (the walk of REFERENCE.md §7 without buckets); NaN when empty.
    Raises ValueError on mismatched shapes or p outside (0, 1].
    """
    v = np.asarray(values, dtype=np.float64)
    t = np.asarray(times_s, dtype=np.float64)
    if v.shape != t.shape or v.ndim != 1:
        raise ValueError(f"values {v.shape} and times {t.shape} must be equal 1-d shapes")
    if not 0.0 < p <= 1.0:
        raise ValueError(f"percentile must be within (0, 1], got {p}")
    if v.size == 0:
        return math.nan
    order = np.argsort(v, kind="stable")
    cum = np.cumsum(np.exp2((t[order] - now_s) / half_life_s))
    idx = int(np.searchsorted(cum, p * cum[-1] * (1.0 - 1e-12)))
    return float(v[order][min(idx, v.size - 1)])


def choose_margins(residuals: FloatArray, violation_prices: Sequence[float], min_margin: float = 0.0,
                   ) -> FloatArray:
    """For each price λ, the margin ``c + min_margin`` minimizing ``c + λ × (#{r > c + min_margin} + 1)/(n + 1)``.

    ``residuals`` shape ``(n,)``, fractions of provisioned; candidates ``c`` are 0
    and every positive residual (the cost only changes there); ties go to the
    smaller margin. Returns shape ``(len(violation_prices),)``; all ``inf`` when there
    is no residual (nothing to learn from).
    """
    r = np.asarray(residuals, dtype=np.float64).reshape(1, -1)
    prices = np.asarray(violation_prices, dtype=np.float64).reshape(1, -1)
    return np.asarray(choose_margins_rows(r, prices, min_margin)[0])


def choose_margins_rows(residuals: FloatArray, violation_prices: FloatArray, min_margin: float = 0.0,
                        ) -> FloatArray:
    """:func:`choose_margins` for many series at once: row ``i`` of ``residuals`` (shape ``(s, w)``, NaN =
    no residual, any order) with the prices of row ``i`` of ``violation_prices`` (shape ``(s, m)``).

    Returns shape ``(s, m)``, each entry equal to ``choose_margins`` of that row's residuals; ``inf`` for a
    row without residual. Raises ValueError on shapes that do not fit.
    """
    r = np.sort(np.asarray(residuals, dtype=np.float64), axis=1)  # NaN last
    prices = np.asarray(violation_prices, dtype=np.float64)
    if r.ndim != 2 or prices.ndim != 2 or prices.shape[0] != r.shape[0]:
        raise ValueError(f"residuals {r.shape} and prices {prices.shape} must be (s, w) and (s, m)")
    count = (~np.isnan(r)).sum(axis=1)
    # candidates 0 and every positive residual, ascending among the finite ones (others cost inf)
    candidates = np.concatenate([np.zeros((r.shape[0], 1)), np.where(r > 0, r, np.inf)], axis=1) + min_margin
    misses = (r[:, None, :] > candidates[:, :, None]).sum(axis=2)
    cost = candidates[:, None, :] + prices[:, :, None] * ((misses + 1) / (count[:, None] + 1))[:, None, :]
    out = np.take_along_axis(candidates, np.argmin(cost, axis=2), axis=1)
    return np.where(count[:, None] > 0, out, math.inf)


def choose_margin(residuals: FloatArray, violation_price: float, min_margin: float = 0.0) -> float:
    """:func:`choose_margins` for one price."""
    return float(choose_margins(residuals, [violation_price], min_margin)[0])


class PeakPredictor:
    """Online peak predictor of one series (one VM or pod, one resource, one target statistic).

    Use: :meth:`add` samples as they come; at the start of a period :meth:`predict`;
    when the period's actual peak is known, :meth:`settle` it with that forecast.
    Only samples strictly before ``now_s`` enter a prediction, so a period's own
    samples can never leak into its forecast.
    """

    def __init__(self, config: PeakPredictorConfig | None = None) -> None:
        self.config = config or PeakPredictorConfig()
        self._times: FloatArray = np.zeros(0)
        self._values: FloatArray = np.zeros(0)
        self._first_s: float | None = None
        self._dropped_highest = -math.inf
        """Highest sample among those dropped from the window (all older than the kept ones)."""
        self._residuals: deque[float] = deque(maxlen=self.config.residual_window)

    def add(self, times_s: FloatArray, values: FloatArray) -> None:
        """Append samples (shapes ``(n,)``, seconds and the series' unit); drops those older than the window.

        Raises ValueError on mismatched shapes or non-finite entries (gaps must be left out, not zeroed).
        """
        t = np.asarray(times_s, dtype=np.float64)
        v = np.asarray(values, dtype=np.float64)
        if t.shape != v.shape or t.ndim != 1:
            raise ValueError(f"times {t.shape} and values {v.shape} must be equal 1-d shapes")
        if t.size == 0:
            return
        if not (np.isfinite(t).all() and np.isfinite(v).all()):
            raise ValueError("times and values must be finite (leave gaps out)")
        self._times = np.concatenate([self._times, t])
        self._values = np.concatenate([self._values, v])
        first = float(t.min())
        self._first_s = first if self._first_s is None else min(self._first_s, first)
        keep = self._times >= float(self._times.max()) - self.config.window_s
        if not keep.all():
            self._dropped_highest = max(self._dropped_highest, float(self._values[~keep].max()))
            self._times, self._values = self._times[keep], self._values[keep]

    def predict(self, now_s: float, provisioned: float) -> PeakForecast:
        """The peak of the period starting at ``now_s`` for a series of capacity ``provisioned`` (> 0).

        Raises ValueError on a non-positive or non-finite ``provisioned``.
        """
        return self.predict_many(now_s, provisioned, [self.config.violation_price])[0]

    def predict_many(self, now_s: float, provisioned: float, violation_prices: Sequence[float],
                     ) -> list[PeakForecast]:
        """:meth:`predict` at several prices (one forecast each, same base and cap), e.g. one per
        priority class willing to risk a different miss rate. Raises ValueError as :meth:`predict`."""
        if not (provisioned > 0 and math.isfinite(provisioned)):
            raise ValueError(f"provisioned must be finite and > 0, got {provisioned}")
        cfg = self.config
        past = (self._times < now_s) & (self._times >= now_s - cfg.window_s)
        base = decayed_percentile(self._values[past], self._times[past], now_s, cfg.half_life_s, cfg.percentile)
        highest = max(self._dropped_highest, float(self._values[self._times < now_s].max(initial=-math.inf)))
        cap = max(provisioned, highest)
        if math.isnan(base):
            return [PeakForecast(now_s, base, math.inf, cap, provisioned, provisioned, True)
                    for _ in violation_prices]
        cold = self._first_s is None or now_s - self._first_s < cfg.cold_start_s
        base = min(base, cap)
        margins = choose_margins(np.fromiter(self._residuals, dtype=np.float64), violation_prices,
                                 cfg.min_margin)
        out = []
        for margin in margins.tolist():
            if math.isinf(margin):  # nothing learned yet: as high as the series can go
                margin = (cap - base) / provisioned
            peak = provisioned if cold else min(cap, base + margin * provisioned)
            out.append(PeakForecast(now_s, base, margin, cap, peak, provisioned, cold))
        return out

    def settle(self, forecast: PeakForecast, actual_peak: float) -> None:
        """Record the miss of ``forecast``'s base against the period's ``actual_peak`` (same unit).

        Forecasts without a base (no samples yet) teach nothing and are ignored.
        Raises ValueError on a non-finite ``actual_peak``.
        """
        if not math.isfinite(actual_peak):
            raise ValueError(f"actual_peak must be finite, got {actual_peak}")
        if math.isnan(forecast.base):
            return
        self._residuals.append((actual_peak - forecast.base) / forecast.provisioned)

    @property
    def residuals(self) -> tuple[float, ...]:
        """The residuals the next margin is chosen from, oldest first (fractions of provisioned)."""
        return tuple(self._residuals)
