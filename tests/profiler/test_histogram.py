"""Histograms against oracle O13 (REFERENCE.md §10) and the layout of REFERENCE.md §7."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from colo_profiler.histogram import (
    MAX_DECAY_EXPONENT,
    MAX_TIME_S,
    ExponentialBuckets,
    Histogram,
    HistogramBank,
    LinearBuckets,
)
from colo_profiler.model import CPU_BUCKETS, MEMORY_BUCKETS

HOUR = 3600.0
T0 = 1_700_000_123.0


def _linear_1234() -> Histogram:
    h = Histogram(LinearBuckets(max_value=10, bucket_size=1))
    for v in (1, 2, 3, 4):
        h.add_sample(v, v, T0)
    return h


@pytest.mark.parametrize(
    ("p", "expected"),
    [(0.0, 2), (0.1, 2), (0.2, 3), (0.3, 3), (0.4, 4), (0.5, 4), (0.6, 4),
     (0.7, 5), (0.8, 5), (0.9, 5), (1.0, 5)],
    ids=lambda x: str(x),
)
def test_o13_linear(p: float, expected: float) -> None:
    assert _linear_1234().percentile(p) == expected


def _decaying_1234() -> Histogram:
    # O13: sample i with weight w_i = i, one half-life apart.
    h = Histogram(LinearBuckets(max_value=10, bucket_size=1), half_life_s=HOUR)
    for i, v in enumerate((1, 2, 3, 4)):
        h.add_sample(v, v, T0 + i * HOUR)
    return h


@pytest.mark.parametrize(
    ("p", "expected"),
    [(0.0, 2), (0.02, 2), (0.03, 3), (0.10, 3), (0.11, 4), (0.34, 4), (0.35, 5), (1.0, 5)],
    ids=lambda x: str(x),
)
def test_o13_decaying(p: float, expected: float) -> None:
    assert _decaying_1234().percentile(p) == expected


@pytest.mark.parametrize(("p", "expected"), [(0.999, 2), (1.0, 3)], ids=["p0.999", "p1.0"])
def test_o13_decay_dominance(p: float, expected: float) -> None:
    h = Histogram(LinearBuckets(max_value=10, bucket_size=1), half_life_s=HOUR)
    h.add_sample(2, 1000, T0)
    h.add_sample(1, 1, T0 + 20 * HOUR)
    assert h.percentile(p) == expected


def test_o13_exponential_starts() -> None:
    b = ExponentialBuckets(max_value=500, first_bucket_size=40, ratio=1.5)
    assert b.num_buckets == 6
    np.testing.assert_allclose(b.starts, [0, 40, 100, 190, 325, 527.5])


@pytest.mark.parametrize(
    ("value", "bucket"), [(39.99, 0), (40, 1), (100, 2), (189.999, 2), (190, 3), (900, 5), (-3, 0)],
    ids=["below-first", "first-boundary", "second-boundary", "just-below-190", "190", "above-max", "negative"],
)
def test_o13_exponential_find(value: float, bucket: int) -> None:
    b = ExponentialBuckets(max_value=500, first_bucket_size=40, ratio=1.5)
    assert int(b.find(np.array([value]))[0]) == bucket


def test_o13_cpu_one_core() -> None:
    assert int(CPU_BUCKETS.find(np.array([1.0]))[0]) == 22
    h = Histogram(CPU_BUCKETS, half_life_s=12 * HOUR)
    h.add_sample(1.0, 1.0, T0)
    assert h.percentile(1.0) == pytest.approx(1.0358, abs=1e-4)


@pytest.mark.parametrize(
    ("buckets", "first_end", "max_value"),
    [(CPU_BUCKETS, 0.025, 1024.0), (MEMORY_BUCKETS, 5.0 * 2**20, 2.0 * 2**40)],
    ids=["cpu-cores", "memory-bytes"],
)
def test_layout_covers_range(buckets: ExponentialBuckets, first_end: float, max_value: float) -> None:
    assert buckets.starts[1] == pytest.approx(first_end)
    assert buckets.starts[-2] < max_value <= buckets.starts[-1]
    np.testing.assert_allclose(buckets.starts[2:] - buckets.starts[1:-1],
                               first_end * 1.05 ** np.arange(1, buckets.num_buckets - 1))


def test_rebase_keeps_percentiles() -> None:
    """Far beyond MAX_DECAY_EXPONENT half-lives the weights are rescaled, not overflowed."""
    h = Histogram(LinearBuckets(10, 1), half_life_s=HOUR)
    h.add_sample(7, 1, T0)
    for k in range(1, 4):
        t = T0 + k * (MAX_DECAY_EXPONENT + 30) * HOUR
        h.add_sample(3, 1, t)
        h.add_sample(5, 1, t)
    assert math.isfinite(h.total_weight)
    assert h.percentile(0.5) == 4  # the two newest samples dominate: 3 and 5
    assert h.percentile(1.0) == 6


def test_sample_before_reference() -> None:
    h = Histogram(LinearBuckets(10, 1), half_life_s=HOUR)
    h.add_sample(5, 1, T0)
    h.add_sample(2, 1, T0 - 10 * HOUR)  # out of order: counts 2^-10 as much
    assert h.percentile(0.5) == 6
    assert h.percentile(0.0) == 3


def test_empty_is_zero() -> None:
    assert Histogram(CPU_BUCKETS).percentile(0.95) == 0.0


@pytest.mark.parametrize(
    ("rows", "values", "weights", "p"),
    [([0], [1.0, 2.0], 1.0, 0.5), ([0], [float("nan")], 1.0, 0.5), ([0], [1.0], -1.0, 0.5)],
    ids=["shape-mismatch", "nan-value", "negative-weight"],
)
def test_bad_input_raises(rows: list[int], values: list[float], weights: float, p: float) -> None:
    bank = HistogramBank(LinearBuckets(10, 1))
    with pytest.raises(ValueError):
        bank.add(rows, values, T0, weights)


@pytest.mark.parametrize("p", [-0.1, 1.5], ids=["negative", "above-one"])
def test_bad_percentile_raises(p: float) -> None:
    with pytest.raises(ValueError):
        Histogram(LinearBuckets(10, 1)).percentile(p)


def test_bank_rows_independent_grow_and_free() -> None:
    bank = HistogramBank(LinearBuckets(10, 1), half_life_s=HOUR, capacity=2)
    rows = [bank.alloc() for _ in range(5)]  # grows past capacity
    assert len(set(rows)) == 5 and bank.rows_in_use == 5
    bank.add(rows, [1, 2, 3, 4, 5], T0)
    np.testing.assert_array_equal(bank.percentiles(rows, 1.0), [2, 3, 4, 5, 6])
    bank.free(rows[2])
    assert bank.rows_in_use == 4
    again = bank.alloc()
    assert again == rows[2]
    assert bank.percentiles([again], 1.0)[0] == 0.0
    # vectorized add of several samples into one row accumulates
    bank.add([again, again, again], [1, 1, 9], T0)
    assert bank.percentiles([again], 0.6)[0] == 2


@pytest.mark.parametrize("span_half_lives", [3, 250], ids=["short-span", "span-beyond-rebase"])
def test_per_sample_times_equal_sequential_adds(span_half_lives: int) -> None:
    rng = np.random.default_rng(7)
    n = 400
    times = np.sort(T0 + rng.uniform(0, span_half_lives * HOUR, n))
    values = rng.uniform(0, 9, n)
    rows = rng.integers(0, 3, n)
    batched = HistogramBank(LinearBuckets(10, 1), half_life_s=HOUR, capacity=3)
    one_by_one = HistogramBank(LinearBuckets(10, 1), half_life_s=HOUR, capacity=3)
    for _ in range(3):
        batched.alloc(), one_by_one.alloc()
    batched.add(rows, values, times)
    for r, v, t in zip(rows, values, times):
        one_by_one.add([r], [v], t)
    for p in (0.1, 0.5, 0.9, 0.99):
        np.testing.assert_array_equal(batched.percentiles([0, 1, 2], p), one_by_one.percentiles([0, 1, 2], p))


@pytest.mark.parametrize(("first", "second"), [
    pytest.param(T0, T0 - 5000 * HOUR, id="sample-5000-half-lives-before-the-reference"),
    pytest.param(T0, MAX_TIME_S, id="sample-far-after-the-reference"),
    pytest.param(MAX_TIME_S, T0, id="sample-far-before-the-reference"),
    pytest.param(MAX_TIME_S, -MAX_TIME_S, id="the-widest-span"),
])
def test_samples_far_apart_never_overflow(first: float, second: float) -> None:
    """Found by the fuzz run (tests/fuzz): a NodeMetric at 1e300 s and one at 1000 s made the re-base scale
    the weights by 2^(huge) (``OverflowError: math range error``), or exp2 overflow to inf and NaN weights.
    A sample thousands of half-lives older than the newest weighs 0; the newest keep their weights. (Times
    beyond ±MAX_TIME_S are refused by the profiler's handlers.)"""
    h = Histogram(LinearBuckets(10, 1), half_life_s=HOUR)
    h.add_sample(5, 1, first)
    h.add_sample(2, 1, second)
    assert math.isfinite(h.total_weight) and h.total_weight > 0
    newest = 5 if first > second else 2
    assert h.percentile(0.5) == newest + 1


@pytest.mark.parametrize("times", [
    pytest.param([T0, T0 + 5000 * HOUR], id="5000-half-lives"),
    pytest.param([-MAX_TIME_S, MAX_TIME_S], id="the-widest-span"),
])
def test_one_batch_spanning_thousands_of_half_lives_never_overflows(times: list[float]) -> None:
    bank = HistogramBank(LinearBuckets(10, 1), HOUR, capacity=2)
    row = bank.alloc()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a numpy overflow warning is the inf of a bug
        bank.add([row, row], [2.0, 7.0], np.array(times))
    assert np.isfinite(bank.weights).all()
    assert bank.percentiles([row], 0.5)[0] == 8
