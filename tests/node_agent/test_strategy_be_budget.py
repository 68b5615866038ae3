"""SLO-driven BE budget (strategies/be_budget.py, docs/node-agent.md "BE budget"): grow while the LS signal
stays within the guard band of its BE-free baseline, hold in the band and after a cut, cut fast on a violation,
the static threshold as floor and fallback."""

from __future__ import annotations

import msgspec
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from colo.messages import BEBudgetState, BEBudgetStrategy, InterferenceSignals
from colo_node_agent.strategies.be_budget import BudgetArrays, be_budget, ls_signal, step_many

NOW = 1000.0
CAP = 10_000
FLOOR = 65
ON = BEBudgetStrategy(enabled=True)
LEARNED = BEBudgetState(threshold_percent=71.0, phase="grow", signal=0.5, baseline=0.5, since=900.0,
                        baseline_samples=5)
"""A node that has learned a run-queue wait baseline of 0.5: limit max(0.5 × 1.1, 0.5 + 0.02) = 0.55, guard
band above 0.525, severe above 0.6."""


def state(**kw: object) -> BEBudgetState:
    return msgspec.structs.replace(LEARNED, **kw)


# id, policy, previous state, signal, signal age (s), BE used (m), floor; want threshold, phase, cut_at
CASES = [
    ("grow", ON, LEARNED, 0.51, 0, 5000, FLOOR, 73, "grow", None),
    ("guard band holds", ON, LEARNED, 0.54, 0, 5000, FLOOR, 71, "hold", None),
    ("at the limit holds", ON, LEARNED, 0.55, 0, 5000, FLOOR, 71, "hold", None),
    ("violation halves the excess", ON, LEARNED, 0.56, 0, 5000, FLOOR, 68, "cut", NOW),
    ("severe violation cuts to the floor", ON, LEARNED, 0.61, 0, 5000, FLOOR, 65, "cut", NOW),
    ("violation during the hold cuts again", ON, state(phase="hold", cut_at=NOW - 10), 0.56, 0, 5000, FLOOR,
     68, "cut", NOW),
    ("hold timer after a cut", ON, state(phase="cut", cut_at=NOW - 30), 0.5, 0, 5000, FLOOR, 71, "hold",
     NOW - 30),
    ("hold timer: hold_s of the policy", msgspec.structs.replace(ON, hold_s=20), state(cut_at=NOW - 30), 0.5, 0,
     5000, FLOOR, 73, "grow", NOW - 30),
    ("recover after the hold", ON, state(phase="hold", cut_at=NOW - 61), 0.5, 0, 5000, FLOOR, 73, "grow",
     NOW - 61),
    ("ceiling max_percent", ON, state(threshold_percent=94.0), 0.5, 0, 5000, FLOOR, 95, "grow", None),
    ("at the ceiling holds", ON, state(threshold_percent=95.0), 0.5, 0, 5000, FLOOR, 95, "hold", None),
    ("lower ceiling of a new NodeSLO", msgspec.structs.replace(ON, max_percent=80), state(threshold_percent=90.0),
     0.5, 0, 5000, FLOOR, 80, "hold", None),
    ("ceiling under the floor: the floor", msgspec.structs.replace(ON, max_percent=50), LEARNED, 0.5, 0, 5000,
     FLOOR, 65, "hold", None),
    ("after a cut, growth stops a step below the threshold cut", ON,
     state(threshold_percent=82.0, cut_at=NOW - 100, cut_from_percent=85.0), 0.5, 0, 5000, FLOOR, 83, "grow",
     NOW - 100),
    ("after a cut, at the step below the threshold cut it holds", ON,
     state(threshold_percent=83.0, cut_at=NOW - 100, cut_from_percent=85.0), 0.5, 0, 5000, FLOOR, 83, "hold",
     NOW - 100),
    ("probes higher again after 10 holds", ON,
     state(threshold_percent=83.0, cut_at=NOW - 601, cut_from_percent=85.0), 0.5, 0, 5000, FLOOR, 85, "grow",
     NOW - 601),
    ("a raised floor lifts the threshold", ON, LEARNED, 0.5, 0, 5000, 75, 75, "grow", None),
    ("a cut never goes below the floor", ON, state(threshold_percent=65.0), 0.7, 0, 5000, FLOOR, 65, "cut", NOW),
    ("missing signal falls back to the floor", ON, LEARNED, -1.0, 0, 5000, FLOOR, 65, "fallback", None),
    ("stale signal falls back to the floor", ON, LEARNED, 0.5, 31, 5000, FLOOR, 65, "fallback", None),
    ("no baseline yet", ON, None, 0.5, 0, 0, FLOOR, 65, "fallback", None),
    ("no baseline yet: BE running teaches nothing", ON, state(baseline=-1.0, baseline_samples=0,
                                                               phase="fallback"), 0.5, 0, 5000, FLOOR, 65,
     "fallback", None),
    ("no BE work to judge by holds", ON, LEARNED, 0.5, 0, 400, FLOOR, 71, "hold", None),
    ("a spike without BE work is no violation", ON, LEARNED, 0.7, 0, 400, FLOOR, 71, "hold", None),
    ("a spike without BE work at the floor neither", ON, state(threshold_percent=65.0), 0.7, 0, 0, FLOOR, 65,
     "hold", None),
    ("noise floor: a rise from 0 under 0.02 is no violation", ON, state(baseline=0.0), 0.009, 0, 5000, FLOOR, 73,
     "grow", None),
    ("noise floor: a rise from 0 over 0.02 is", ON, state(baseline=0.0), 0.03, 0, 5000, FLOOR, 68, "cut", NOW),
    ("signal cpi: limit 1.1 for baseline 1.0", msgspec.structs.replace(ON, signal="cpi"), state(baseline=1.0), 1.04,
     0, 5000, FLOOR, 73, "grow", None),
    ("signal cpi: over 1.1 is a violation", msgspec.structs.replace(ON, signal="cpi"), state(baseline=1.0), 1.12,
     0, 5000, FLOOR, 68, "cut", NOW),
    ("signal cpu_pressure: noise floor 2 points", msgspec.structs.replace(ON, signal="cpu_pressure"),
     state(baseline=1.0), 2.9, 0, 5000, FLOOR, 71, "hold", None),
    ("signal cpu_pressure: over 3 % is a violation", msgspec.structs.replace(ON, signal="cpu_pressure"),
     state(baseline=1.0), 3.5, 0, 5000, FLOOR, 68, "cut", NOW),
    ("signal latency_inflation: up to baseline + 10 points", msgspec.structs.replace(ON, signal="latency_inflation"),
     state(baseline=0.0), 4.0, 0, 5000, FLOOR, 73, "grow", None),
    ("signal latency_inflation: over 10 points is a violation", msgspec.structs.replace(ON, signal="latency_inflation"),
     state(baseline=0.0), 12.0, 0, 5000, FLOOR, 68, "cut", NOW),
    ("target_increase_percent 50", msgspec.structs.replace(ON, target_increase_percent=50), LEARNED, 0.6, 0, 5000,
     FLOOR, 73, "grow", None),
    ("step_percent 5", msgspec.structs.replace(ON, step_percent=5), LEARNED, 0.5, 0, 5000, FLOOR, 76, "grow", None),
]


@pytest.mark.parametrize(("policy", "prev", "signal", "age", "be_used", "floor", "threshold", "phase", "cut_at"),
                         [pytest.param(*c[1:], id=c[0]) for c in CASES])
def test_be_budget(policy: BEBudgetStrategy, prev: BEBudgetState | None, signal: float, age: float, be_used: int,
                   floor: int, threshold: int, phase: str, cut_at: float | None) -> None:
    out = be_budget(policy, prev, signal, NOW - age, be_used, CAP, floor, NOW)
    assert (out.threshold_percent, out.phase, out.cut_at) == (threshold, phase, cut_at)
    assert out.signal == signal
    assert out.since == (prev.since if prev is not None and prev.phase == phase else NOW)
    assert out.cut_from_percent == (prev.threshold_percent if phase == "cut" and prev is not None
                                    else prev.cut_from_percent if prev is not None else -1.0)


# id, previous (baseline, samples), signal, BE used; want baseline, samples, phase
LEARNING = [
    ("first BE-free sample is the baseline", (-1.0, 0), 0.4, 0, 0.4, 1, "fallback"),
    ("moving average with weight 0.1", (0.4, 1), 0.6, 499, 0.42, 2, "fallback"),
    ("trusted from the third sample", (0.4, 2), 0.4, 0, 0.4, 3, "hold"),
    ("BE at 5 % of capacity teaches nothing", (0.4, 2), 0.9, 500, 0.4, 2, "fallback"),
    ("a missing signal teaches nothing", (0.4, 5), -1.0, 0, 0.4, 5, "fallback"),
]


@pytest.mark.parametrize(("prev", "signal", "be_used", "baseline", "samples", "phase"),
                         [pytest.param(*c[1:], id=c[0]) for c in LEARNING])
def test_baseline_learning(prev: tuple[float, int], signal: float, be_used: int, baseline: float, samples: int,
                           phase: str) -> None:
    start = BEBudgetState(threshold_percent=65.0, baseline=prev[0], baseline_samples=prev[1])
    out = be_budget(ON, start, signal, NOW, be_used, CAP, FLOOR, NOW)
    assert out.baseline == pytest.approx(baseline)
    assert (out.baseline_samples, out.phase) == (samples, phase)


def sig(runq: float = -1.0, psi: float = -1.0, cpi: float = -1.0) -> InterferenceSignals:
    return InterferenceSignals(runq_wait_ratio=runq, cpu_pressure_some=psi, cpi=cpi)


@pytest.mark.parametrize(("kind", "signals", "want"), [
    pytest.param("runq_wait", [sig(0.1), sig(0.3), sig(0.2)], 0.3, id="worst LS pod"),
    pytest.param("runq_wait", [sig(0.1), None, sig(-1.0)], 0.1, id="pods without the signal are skipped"),
    pytest.param("runq_wait", [None, sig(psi=4.0)], -1.0, id="none known"),
    pytest.param("runq_wait", [], -1.0, id="no LS pods"),
    pytest.param("cpu_pressure", [sig(0.9, 4.0), sig(0.1, 6.0)], 6.0, id="cpu_pressure selects PSI"),
    pytest.param("cpi", [sig(0.9, 4.0, 1.2), sig(0.1, 6.0, 1.5)], 1.5, id="cpi selects CPI"),
    pytest.param("latency_inflation", [InterferenceSignals(latency_inflation_percent=3.0),
                                       InterferenceSignals(latency_inflation_percent=7.5)], 7.5,
                 id="latency_inflation selects the modelled p99 rise"),
])
def test_ls_signal(kind: str, signals: list[InterferenceSignals | None], want: float) -> None:
    assert ls_signal(kind, signals) == want  # type: ignore[arg-type]


def test_a_loop_of_violations_walks_down_to_the_floor_and_holds() -> None:
    st_ = state(threshold_percent=95.0)
    seen = []
    for k in range(6):
        st_ = be_budget(ON, st_, 0.56, NOW + k, 5000, CAP, FLOOR, NOW + k)
        seen.append(st_.threshold_percent)
    assert seen == [80, 72, 68, 66, 65, 65]
    after = be_budget(ON, st_, 0.5, NOW + 30, 5000, CAP, FLOOR, NOW + 30)
    assert (after.phase, after.threshold_percent) == ("hold", 65)


@given(st.lists(st.tuples(st.floats(-1, 3), st.floats(0, 10_000), st.integers(0, 100), st.integers(0, 100),
                          st.floats(0, 100), st.floats(0, 3), st.integers(0, 1_000_000)), min_size=1, max_size=20))
def test_threshold_stays_within_floor_and_ceiling(rows: list[tuple[float, float, int, int, float, float, int]]
                                                 ) -> None:
    sig_, be, floor, ceiling, thr, base, samples = (np.array(c, dtype=np.float64) for c in zip(*rows))
    n = len(rows)
    prev = BudgetArrays(thr, np.zeros(n, dtype=np.int64), np.zeros(n), base, samples.astype(np.int64),
                        np.full(n, -np.inf), np.full(n, -1.0), np.full(n, -1.0))
    out = step_many(prev, sig_, np.full(n, NOW), be, np.full(n, float(CAP)), floor, np.full(n, 10.0), ceiling,
                    np.full(n, 2.0), np.full(n, 60.0), np.full(n, 0.02), NOW)
    assert (out.threshold >= floor).all()
    assert (out.threshold <= np.maximum(floor, ceiling)).all()


# id, signal, BE used (m); want threshold, phase, baseline (a non-finite signal or BE use is unknown, never learned)
NON_FINITE = [
    ("inf signal is missing: fallback", float("inf"), 5000, 65, "fallback", 0.5),
    ("NaN signal is missing: fallback", float("nan"), 5000, 65, "fallback", 0.5),
    ("-inf signal is missing: fallback", float("-inf"), 5000, 65, "fallback", 0.5),
    ("inf signal while BE-free teaches nothing", float("inf"), 0, 65, "fallback", 0.5),
    ("NaN BE use: nothing to judge by, holds", 0.5, float("nan"), 71, "hold", 0.5),
    ("negative BE use: nothing to judge by, holds, teaches nothing", 0.52, -5000, 71, "hold", 0.5),
]


@pytest.mark.parametrize(("signal", "be_used", "threshold", "phase", "baseline"),
                         [pytest.param(*c[1:], id=c[0]) for c in NON_FINITE])
def test_non_finite_inputs_are_unknown(signal: float, be_used: float, threshold: int, phase: str,
                                       baseline: float) -> None:
    out = be_budget(ON, LEARNED, signal, NOW, be_used, CAP, FLOOR, NOW)  # type: ignore[arg-type]
    assert (out.threshold_percent, out.phase, out.baseline) == (threshold, phase, baseline)
    assert out.baseline_samples == LEARNED.baseline_samples
    assert np.isfinite(out.signal), "NodeMetric JSON has no inf/NaN: the state must stay encodable"


def test_an_inf_signal_does_not_poison_the_baseline() -> None:
    """Once a non-finite sample entered the moving average the baseline was NaN for good, no signal compared
    above its limit again and the budget grew to max_percent whatever the LS pods suffered."""
    st_: BEBudgetState | None = None
    for k in range(4):
        st_ = be_budget(ON, st_, 0.4 if k else float("inf"), NOW + k, 0, CAP, FLOOR, NOW + k)
    for k in range(4, 30):
        st_ = be_budget(ON, st_, 5.0, NOW + k, 5000, CAP, FLOOR, NOW + k)
    assert st_ is not None and st_.threshold_percent == FLOOR and st_.phase == "cut"


def test_a_clock_that_went_back_holds_for_hold_s_not_until_it_catches_up() -> None:
    """The wall clock set back an hour after a cut (NTP, a VM restore) left cut_at an hour in the future: the
    budget held, and capped its growth, for an hour plus hold_s instead of hold_s."""
    cut = state(phase="cut", threshold_percent=70.0, cut_at=NOW + 3600, cut_from_percent=80.0)
    first = be_budget(ON, cut, 0.5, NOW, 5000, CAP, FLOOR, NOW)
    assert (first.phase, first.cut_at) == ("hold", NOW)
    later = be_budget(ON, first, 0.5, NOW + 61, 5000, CAP, FLOOR, NOW + 61)
    assert (later.phase, later.threshold_percent) == ("grow", 72)
