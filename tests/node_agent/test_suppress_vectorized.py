"""Vectorized BEAllowed and cpuset size agree with the per-node functions (REFERENCE.md §5, O7)."""

from __future__ import annotations

import numpy as np
import pytest

from colo.messages import CPUSuppressStrategy
from colo_node_agent.strategies.cpu_suppress import (
    SuppressInput,
    be_cpu_allowed,
    be_cpu_allowed_many,
    cpuset_growth,
    cpuset_size,
    cpuset_size_many,
)

CASES = [
    # capacity, node used, non-BE used, BE used, reserved, threshold %, min %
    (8000, 5000, 3000, 1500, 0, 65, 0),
    (8000, 7900, 6000, 1800, 0, 65, 0),
    (8000, 7900, 6000, 1800, 0, 65, 20),
    (16000, 2000, 1000, 500, 2000, 65, 0),
    (32000, 100, 0, 0, 0, 100, 0),
    (4000, 4000, 4000, 0, 500, 50, 0),
    (64000, 64000, 10, 63000, 0, 65, 0),
]


@pytest.mark.parametrize("case", CASES, ids=["typical", "ls-busy", "min-floor", "reserved-raises-system",
                                             "idle-full-threshold", "negative-floored", "be-heavy"])
def test_be_cpu_allowed_many_matches_scalar(case: tuple[int, ...]) -> None:
    cap, used, non_be, be, reserved, thr, minp = case
    want = be_cpu_allowed(SuppressInput(cap, used, non_be, be, node_reserved=reserved),
                          CPUSuppressStrategy(threshold_percent=thr, min_percent=minp))
    cols = [np.array([v], dtype=np.int64) for v in case]
    assert be_cpu_allowed_many(*cols).tolist() == [want]


@pytest.mark.parametrize(("allowed", "current", "logical"), [
    (0, 2, 8), (1000, 2, 8), (2001, 2, 8), (30000, 2, 32), (30000, 0, 32), (5000, 8, 8), (999, 4, 96),
    (96000, 10, 96),
], ids=["zero", "at-min", "just-over-2", "growth-capped", "empty-current", "shrink", "shrink-to-min",
        "big-growth"])
def test_cpuset_size_many_matches_scalar(allowed: int, current: int, logical: int) -> None:
    got = cpuset_size_many(np.array([allowed]), np.array([current]), np.array([cpuset_growth(logical)]))
    assert got.tolist() == [cpuset_size(allowed, current, logical)]


def test_many_nodes_at_once_match_scalar() -> None:
    rng = np.random.default_rng(7)
    n = 500
    cap = rng.integers(1000, 96000, n)
    used = rng.integers(0, cap + 1)
    non_be = rng.integers(0, used + 1)
    be = rng.integers(0, used - non_be + 1)
    reserved = rng.integers(0, 4000, n)
    thr, minp = rng.integers(0, 101, n), rng.integers(0, 30, n)
    got = be_cpu_allowed_many(cap, used, non_be, be, reserved, thr, minp).tolist()
    want = [be_cpu_allowed(SuppressInput(int(c), int(u), int(x), int(b), node_reserved=int(r)),
                           CPUSuppressStrategy(threshold_percent=int(t), min_percent=int(m)))
            for c, u, x, b, r, t, m in zip(cap, used, non_be, be, reserved, thr, minp)]
    assert got == want
