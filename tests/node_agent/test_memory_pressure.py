"""BE memory pressure condition (strategies/memory_pressure.py): one row per named sequence of samples.

Node of 100 GiB, eviction threshold 70 %, lower 68 %, hold 300 s. Each sample is (t s, used %, evicted);
the row gives whether the node is under pressure after the last one and the condition reported.
"""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from colo.messages import MemoryEvictStrategy, MemoryPressure
from colo_node_agent.strategies.memory_pressure import NO_PRESSURE, PressureState, condition, observe

GI = 1 << 30
CAP = 100 * GI
POLICY = MemoryEvictStrategy()


def run(samples: list[tuple[float, float, bool]], policy: MemoryEvictStrategy = POLICY) -> PressureState:
    state = NO_PRESSURE
    for at, pct, evicted in samples:
        state = observe(state, at, int(CAP * pct / 100), CAP, policy, evicted)
    return state


CASES = [
    ("below-threshold-never", [(0, 60, False), (10, 69.9, False)], None),
    ("at-threshold-starts", [(0, 60, False), (10, 70, False)], 10.0),
    ("eviction-starts-below-threshold", [(0, 65, True)], 0.0),
    ("between-thresholds-holds-forever", [(0, 71, False), (10, 69, False), (2000, 68.5, False)], 0.0),
    ("below-lower-within-hold", [(0, 71, True), (10, 67, False), (309, 67, False)], 0.0),
    ("below-lower-for-hold-clears", [(0, 71, True), (10, 67, False), (310, 67, False)], None),
    ("back-above-lower-restarts-hold", [(0, 71, True), (10, 67, False), (200, 68.5, False), (300, 67, False),
                                        (590, 67, False)], 0.0),
    ("eviction-during-hold-restarts-it", [(0, 71, True), (10, 67, False), (100, 67, True), (310, 67, False)], 0.0),
    ("after-clear-new-episode", [(0, 71, True), (10, 67, False), (310, 67, False), (400, 72, False)], 400.0),
]


@pytest.mark.parametrize(("samples", "since"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_pressure_sequences(samples: list[tuple[float, float, bool]], since: float | None) -> None:
    assert run(samples).since == since


def test_condition_reports_since_until_and_numbers() -> None:
    state = run([(0, 71, True), (10, 67, False)])
    assert condition(state, int(CAP * 0.675), CAP, POLICY) == MemoryPressure(
        since=0.0, until=310.0, last_evict_at=0.0, used_percent=67, threshold_percent=70, lower_percent=68,
        hold_s=300.0)
    assert condition(run([(0, 71, False)]), int(CAP * 0.71), CAP, POLICY) == MemoryPressure(
        since=0.0, until=0.0, used_percent=71, threshold_percent=70, lower_percent=68, hold_s=300.0)
    assert condition(NO_PRESSURE, int(CAP * 0.71), CAP, POLICY) is None


def test_policy_off_or_custom_lower_and_hold() -> None:
    assert run([(0, 90, True)], MemoryEvictStrategy(enabled=False)) == NO_PRESSURE
    custom = MemoryEvictStrategy(threshold_percent=80, lower_percent=60, pressure_hold_s=0)
    assert run([(0, 81, False), (10, 61, False)], custom).since == 0.0  # 61 % is not below 60 %
    assert run([(0, 81, False), (10, 59, False)], custom).since is None  # hold 0: clears at once


samples_st = st.lists(st.tuples(st.integers(1, 120), st.sampled_from((50, 67, 68, 69, 70, 75)),
                                st.sampled_from((False, False, False, False, True))), min_size=1, max_size=40)


def _cleared(history: list[tuple[float, int, bool]], since_k: int, k: int, hold: float) -> bool:
    """Whether, scanning back from sample k to just after sample since_k, the trailing run of samples below
    the lower threshold (68 %) without eviction spans at least ``hold`` seconds."""
    b = None
    for m in range(k, since_k, -1):
        t, pct, evicted = history[m]
        if evicted or pct >= 68:
            break
        b = t
    return b is not None and history[k][0] - b >= hold


@settings(max_examples=400, deadline=None)
@given(samples_st, st.sampled_from((0, 30, 100, 300)))
@example([(1, 75, False), (10, 50, False), (10, 69, False), (5, 50, False), (20, 50, False)], 30)
def test_pressure_is_the_hold_rule(steps: list[tuple[int, int, bool]], hold: int) -> None:
    """Against a brute-force reading of the rule: pressure starts at a sample at or above 70 % or an eviction and
    ends at the first later sample that closes a run below 68 % (no eviction) at least ``hold`` long."""
    policy = MemoryEvictStrategy(pressure_hold_s=float(hold))
    state = NO_PRESSURE
    history: list[tuple[float, int, bool]] = []
    t = 0.0
    since_k: int | None = None
    for dt, pct, evicted in steps:
        t += dt
        history.append((t, pct, evicted))
        k = len(history) - 1
        state = observe(state, t, CAP * pct // 100, CAP, policy, evicted)
        if evicted or pct >= 70:
            since_k = since_k if since_k is not None else k
        elif since_k is not None and _cleared(history, since_k, k, hold):
            since_k = None
        assert state.since == (history[since_k][0] if since_k is not None else None)
