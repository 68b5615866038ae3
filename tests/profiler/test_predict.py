"""PeakPredictor (colo_profiler.predict): decayed percentile, margin choice, no look-ahead, synthetic series."""

from __future__ import annotations

import math

import numpy as np
import pytest

from colo_profiler.predict import (
    PeakPredictor,
    PeakPredictorConfig,
    choose_margin,
    choose_margins,
    decayed_percentile,
)

DAY = 86_400.0
STEP = 300.0


def _day(d: int) -> np.ndarray:
    return d * DAY + np.arange(0.0, DAY, STEP)


def _run(days: list[np.ndarray], provisioned: float, config: PeakPredictorConfig,
         ) -> tuple[list[float], list[float]]:
    """Feed one array of 288 samples per day; return (forecast peaks, actual peaks) from day 1 on."""
    p = PeakPredictor(config)
    peaks, actual = [], []
    for d, values in enumerate(days):
        f = p.predict(d * DAY, provisioned)
        if d >= 1:
            peaks.append(f.peak)
            actual.append(float(values.max()))
        p.add(_day(d), values)
        p.settle(f, float(values.max()))
    return peaks, actual


# ---------------------------------------------------------------------------- decayed_percentile


@pytest.mark.parametrize("p", [0.05, 0.5, 0.9, 0.95, 0.99, 1.0])
def test_equal_weights_is_the_inverted_cdf(p: float) -> None:
    v = np.random.default_rng(3).gamma(2.0, 1.0, 500)
    t = np.full(500, 1000.0)
    assert decayed_percentile(v, t, 1000.0, 3600.0, p) == np.quantile(v, p, method="inverted_cdf")


def test_newer_sample_weighs_twice_per_half_life() -> None:
    # weights 1 (value 1, one half-life old) and 2 (value 2, now): p ≤ 1/3 → 1, above → 2.
    v, t = np.array([1.0, 2.0]), np.array([0.0, 3600.0])
    assert decayed_percentile(v, t, 3600.0, 3600.0, 0.33) == 1.0
    assert decayed_percentile(v, t, 3600.0, 3600.0, 0.34) == 2.0


def test_decayed_percentile_errors_and_empty() -> None:
    assert math.isnan(decayed_percentile(np.zeros(0), np.zeros(0), 0.0, 1.0, 0.5))
    with pytest.raises(ValueError, match="equal 1-d shapes"):
        decayed_percentile(np.zeros(2), np.zeros(3), 0.0, 1.0, 0.5)
    with pytest.raises(ValueError, match="percentile"):
        decayed_percentile(np.zeros(2), np.zeros(2), 0.0, 1.0, 0.0)


# ---------------------------------------------------------------------------- margin choice


@pytest.mark.parametrize(
    ("price", "expected"),
    [
        (0.01, 0.0),   # a miss is cheap: no margin (cost 0 + 0.01 × 11/11 = 0.01)
        (0.1, 0.01),   # cover the nine small misses: 0.01 + 0.1 × 2/11 = 0.028 < 0.1
        (10.0, 0.5),   # a miss is dear: cover the big one too, 0.5 + 10/11 < 0.01 + 20/11
    ],
    ids=["cheap", "middle", "dear"],
)
def test_choose_margin_minimizes_headroom_plus_priced_misses(price: float, expected: float) -> None:
    residuals = np.array([0.01] * 9 + [0.5])
    assert choose_margin(residuals, price) == pytest.approx(expected)


def test_choose_margins_vectorized_and_min_margin() -> None:
    residuals = np.array([-0.2, 0.01, 0.01, 0.5])
    many = choose_margins(residuals, [0.01, 0.1, 10.0], 0.002)
    assert list(many) == [choose_margin(residuals, p, 0.002) for p in (0.01, 0.1, 10.0)]
    assert many[0] == pytest.approx(0.002)  # the floor is added to the zero margin too
    assert np.isinf(choose_margins(np.zeros(0), [1.0, 2.0])).all()


def test_config_lists_every_problem() -> None:
    with pytest.raises(ValueError) as err:
        PeakPredictorConfig(percentile=0.0, half_life_s=-1, violation_price=-1, residual_window=0)
    text = str(err.value)
    for field in ("percentile", "half_life_s", "violation_price", "residual_window"):
        assert field in text


# ---------------------------------------------------------------------------- the predictor


def _warm(p: PeakPredictor, days: int, level: float) -> None:
    for d in range(days):
        f = p.predict(d * DAY, 4.0)
        p.add(_day(d), np.full(288, level))
        p.settle(f, level)


def test_no_look_ahead_samples_at_or_after_now_are_ignored() -> None:
    a, b = PeakPredictor(), PeakPredictor()
    _warm(a, 3, 1.0)
    _warm(b, 3, 1.0)
    b.add(_day(3), np.full(288, 4.0))  # day 3's spike, added before its forecast
    assert a.predict(3 * DAY, 4.0) == b.predict(3 * DAY, 4.0)
    assert b.predict(4 * DAY, 4.0).peak > a.predict(4 * DAY, 4.0).peak


def test_cold_start_predicts_provisioned() -> None:
    p = PeakPredictor()
    assert p.predict(0.0, 4.0).peak == 4.0  # no sample yet
    p.add(np.array([0.0, 300.0]), np.array([1.0, 1.0]))
    f = p.predict(12 * 3600.0, 4.0)
    assert f.cold and f.peak == 4.0 and f.base == 1.0
    assert not p.predict(DAY + 300.0, 4.0).cold


def test_steady_series_gets_the_floor_margin_and_no_miss() -> None:
    peaks, actual = _run([np.full(288, 1.0)] * 20, 4.0, PeakPredictorConfig())
    after_cold = peaks[1:]
    assert all(pk >= a for pk, a in zip(after_cold, actual[1:]))
    assert after_cold[-1] == pytest.approx(1.0 + 0.002 * 4.0)


def test_noisier_series_gets_a_larger_margin_and_few_misses() -> None:
    rng = np.random.default_rng(7)
    cfg = PeakPredictorConfig(violation_price=0.5)
    quiet = [1.0 + 0.01 * rng.random(288) for _ in range(60)]
    noisy = [1.0 + 0.5 * rng.random(288) * (rng.random() < 0.5) for _ in range(60)]
    pq, aq = _run(quiet, 4.0, cfg)
    pn, an = _run(noisy, 4.0, cfg)
    slack_q = np.mean((np.array(pq) - aq) / 4.0)
    slack_n = np.mean((np.array(pn) - an) / 4.0)
    assert slack_n > slack_q
    miss_n = np.mean(np.array(an[10:]) > np.array(pn[10:]))
    assert miss_n < 0.2  # half the days spike: without the learned margin about half would be missed


def test_on_off_series_price_decides_between_cap_and_base() -> None:
    # A weekly batch day at 2.1 cores of 2 (Bitbrains reports such turbo excess), idle otherwise.
    on = [d % 7 == 6 for d in range(43)]
    days = [np.full(288, 2.1 if o else 0.01) for o in on]
    # Covering the batch day costs ~1.05 provisioned every day; missing it costs the price once a week.
    dear, actual = _run(days, 2.0, PeakPredictorConfig(violation_price=20.0))
    cheap, _ = _run(days, 2.0, PeakPredictorConfig(violation_price=0.05))
    later = slice(10, None)  # forecasts of days 11+, after the first batch day was seen
    assert all(p == pytest.approx(2.1) for p in dear[later])  # the cap, not 2.1 × 1.1
    missed = [a > p for a, p in zip(actual[later], cheap[later])]
    assert missed == on[11:]  # cheap: no margin for a one-in-seven day, so exactly the batch days are missed


def test_peak_never_exceeds_provisioned_or_highest_sample() -> None:
    rng = np.random.default_rng(11)
    days = [rng.gamma(1.0, 0.5, 288) for _ in range(30)]
    p = PeakPredictor(PeakPredictorConfig(violation_price=100.0))
    highest = 0.0
    for d, v in enumerate(days):
        f = p.predict(d * DAY, 1.5)
        assert f.peak <= max(1.5, highest) + 1e-12
        p.add(_day(d), v)
        p.settle(f, float(v.max()))
        highest = max(highest, float(v.max()))


def test_bad_input_is_refused() -> None:
    p = PeakPredictor()
    with pytest.raises(ValueError, match="finite"):
        p.add(np.array([0.0, 1.0]), np.array([1.0, math.nan]))
    with pytest.raises(ValueError, match="provisioned"):
        p.predict(0.0, 0.0)
    with pytest.raises(ValueError, match="actual_peak"):
        p.settle(p.predict(0.0, 1.0), math.inf)
