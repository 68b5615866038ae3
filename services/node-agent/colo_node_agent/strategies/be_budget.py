"""SLO-driven BE budget: the CPU suppress threshold BE work may fill grows while the LS pods' measured interference
stays near its BE-free baseline, and is cut fast when it does not (NodeSLO ``be_budget``, docs/node-agent.md
"BE budget"; after Heracles, Lo et al., "Heracles: improving resource efficiency at scale", ISCA 2015, §4: grow
BE slowly while there is slack, cut on a violation, wait before growing again).

Each agent loop, per node, with s = the worst LS pod's value of the chosen signal (:func:`ls_signal`; −1 unknown)
measured at ``signal_at``, the floor F = ``cpu_suppress.threshold_percent`` (the static threshold) and the
ceiling M = max(``max_percent``, F):

* **Baseline** b (the BE-free signal), learned on the node: from every loop with a fresh signal whose BE pods
  use less than :data:`BE_FREE_PERCENT` (5 %) of capacity — the first sample, then an exponential moving average
  with weight :data:`BASELINE_WEIGHT` (0.1: about the last ten BE-free loops). Trusted once it has
  :data:`MIN_BASELINE_SAMPLES` (3) samples.
* **Limit** L = max(b × (1 + ``target_increase_percent``/100), b + :data:`NOISE_FLOOR` of the signal): a rise
  smaller than the noise floor is never a violation (a BE-free run-queue wait of 0 would otherwise make every
  wait one).
* **fallback** — the signal is missing (negative, NaN or infinite: −1, no LS pod reports it), stale (older than ``stale_after_s``,
  :data:`STALE_AFTER_S` 30 s) or the baseline not yet trusted: threshold = F.
* **cut** — s > L while BE pods use at least :data:`BE_FREE_PERCENT` of capacity (in a BE-free loop a rise is
  noise BE cannot have caused: it teaches the baseline and holds, it neither cuts nor starts a hold): threshold
  = F + ⌊(threshold − F)/2⌋ (half the excess over the floor, Heracles' fast decrease without disabling BE
  outright), straight to F when the rise s − b is over :data:`SEVERE_FACTOR` (2) × the allowed rise L − b; the
  hold starts (``cut_at`` = now). A violation cuts again in every loop.
* **hold** — within ``hold_s`` of the last cut; or in the guard band, s − b > :data:`GUARD_FRACTION` (½) ×
  (L − b): close to the limit, keep what works; or no BE work to judge by (BE used < 5 % of capacity, or
  unknown: NaN or negative): threshold unchanged.
* **grow** — otherwise: threshold + ``step_percent``, but for :data:`PROBE_HOLDS` (10) × ``hold_s`` after a cut
  no higher than the threshold that was cut minus one step (``cut_from``: where the violation began), so that a
  node whose actuator moves in coarse steps (a BE cpuset of whole CPUs) does not climb back into the same
  violation after every hold; at that cap the phase is ``hold``. A later violation lowers the cap; after the
  period the budget probes higher again.

A ``cut_at`` later than now (the clock was set back) counts as now. The threshold always ends within [F, M] (a NodeSLO with a new floor or ceiling moves it at once). ``since`` is
when the phase began. The rule is written once, for arrays of nodes (:func:`step_many`, the sim backend runs it
for all its nodes at once); :func:`be_budget` is one node's step on the message types.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

import msgspec
import numpy as np
import numpy.typing as npt

from colo.messages import BEBudgetState, BEBudgetStrategy, InterferenceSignals

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

Phase = Literal["grow", "hold", "cut", "fallback"]
Signal = Literal["runq_wait", "cpu_pressure", "cpi", "latency_inflation"]

PHASES: tuple[Phase, ...] = ("fallback", "grow", "hold", "cut")
"""Phase names by code (the arrays of :class:`BudgetArrays` hold the codes)."""
FALLBACK, GROW, HOLD, CUT = range(4)

BE_FREE_PERCENT = 5.0
"""A loop whose BE pods use less than this percent of capacity is BE-free: it teaches the baseline."""
BASELINE_WEIGHT = 0.1
"""Weight of a new BE-free sample in the baseline's moving average."""
MIN_BASELINE_SAMPLES = 3
"""BE-free samples before the baseline is trusted (fallback until then)."""
GUARD_FRACTION = 0.5
"""Grow only while the rise over the baseline is at most this fraction of the allowed rise (guard band)."""
SEVERE_FACTOR = 2.0
"""A rise over this many times the allowed rise cuts straight to the floor."""
PROBE_HOLDS = 10.0
"""For this many ``hold_s`` after a cut, growth stops one step below the threshold that was cut."""
STALE_AFTER_S = 30.0
"""A signal measured longer ago than this (seconds) counts as missing."""
NOISE_FLOOR: dict[Signal, float] = {"runq_wait": 0.02, "cpu_pressure": 2.0, "cpi": 0.05, "latency_inflation": 0.0}
"""Smallest rise over the baseline that can be a violation, per signal: run-queue wait 0.02 s per CPU second
run, PSI ``cpu.some`` 2 percentage points, CPI 0.05 cycles per instruction. Chosen to be above one sample's
noise on an idle machine, not measured on a calibration run. ``latency_inflation`` uses :func:`allowed_rise`."""
_FIELD: dict[Signal, str] = {"runq_wait": "runq_wait_ratio", "cpu_pressure": "cpu_pressure_some", "cpi": "cpi",
                             "latency_inflation": "latency_inflation_percent"}


def allowed_rise(policy: BEBudgetStrategy) -> float:
    """The ``noise`` of :func:`step_many` for ``policy``: the signal's :data:`NOISE_FLOOR`; for
    ``latency_inflation``, already the p99 rise over running alone in percent, ``target_increase_percent``
    percentage points (its limit is b + target, not b × (1 + target/100): from a BE-free 0 that would allow no
    rise at all)."""
    if policy.signal == "latency_inflation":
        return float(policy.target_increase_percent)
    return NOISE_FLOOR[policy.signal]


def ls_signal(kind: Signal, signals: Iterable[InterferenceSignals | None]) -> float:
    """The worst (largest) known value of signal ``kind`` among the LS pods' ``signals`` (None or −1 = not
    measured for that pod, skipped); −1 when no pod has one. Units of the signal (see InterferenceSignals)."""
    field = _FIELD[kind]
    values = [getattr(s, field) for s in signals if s is not None]
    return max((v for v in values if v >= 0), default=-1.0)


def ls_signal_at(kind: Signal, pods: Iterable[tuple[InterferenceSignals | None, float]]) -> tuple[float, float]:
    """(:func:`ls_signal` of the LS pods' ``(signals, measured at)``, when the oldest value taken was measured in
    seconds); (−1, −inf) when no pod has the signal. The oldest time decides freshness: one pod whose
    measurement stopped makes the whole node fall back rather than be judged without it."""
    field = _FIELD[kind]
    known = [(getattr(s, field), at) for s, at in pods if s is not None and getattr(s, field) >= 0]
    if not known:
        return -1.0, -math.inf
    return max(v for v, _ in known), min(at for _, at in known)


@dataclass(frozen=True)
class BudgetArrays:
    """The budget state of ``n`` nodes, arrays of shape ``(n,)``: ``threshold`` percent of capacity, ``phase``
    codes of :data:`PHASES`, ``since`` and ``cut_at`` seconds (−inf = never cut), ``baseline`` (−1 = none) and
    ``signal`` in the signal's units, ``samples`` BE-free samples in the baseline, ``cut_from`` the threshold
    (percent) in force at the last cut (−1 = never cut)."""

    threshold: F64
    phase: I64
    since: F64
    baseline: F64
    samples: I64
    cut_at: F64
    signal: F64
    cut_from: F64

    @classmethod
    def initial(cls, floor_percent: F64, now: float) -> BudgetArrays:
        """Nodes that have just switched the budget on: at the floor, in fallback, nothing learned."""
        n = len(floor_percent)
        return cls(np.asarray(floor_percent, dtype=np.float64).copy(), np.full(n, FALLBACK, dtype=np.int64),
                   np.full(n, now), np.full(n, -1.0), np.zeros(n, dtype=np.int64), np.full(n, -np.inf),
                   np.full(n, -1.0), np.full(n, -1.0))

    def state(self, i: int) -> BEBudgetState:
        """Node ``i`` as the message published in ``NodeMetric.be_budget``."""
        cut = float(self.cut_at[i])
        return BEBudgetState(threshold_percent=float(self.threshold[i]), phase=PHASES[int(self.phase[i])],
                             signal=float(self.signal[i]), baseline=float(self.baseline[i]),
                             since=float(self.since[i]), baseline_samples=int(self.samples[i]),
                             cut_at=cut if math.isfinite(cut) else None, cut_from_percent=float(self.cut_from[i]))


def step_many(prev: BudgetArrays, signal: F64, signal_at: F64, be_used: F64, capacity: F64, floor_percent: F64,
              target_percent: F64, max_percent: F64, step_percent: F64, hold_s: F64, noise: F64, now: float,
              stale_after_s: float = STALE_AFTER_S) -> BudgetArrays:
    """One loop of the rule (module doc) for ``n`` nodes; every argument an array of shape ``(n,)``: ``signal``
    the worst LS value (−1 unknown) measured at ``signal_at`` seconds, ``be_used``/``capacity`` milli-cores,
    percents of capacity, ``hold_s`` seconds, ``noise`` the signal's :data:`NOISE_FLOOR`. Pure."""
    signal = np.where(np.isfinite(signal) & (signal >= 0), signal, -1.0)  # NaN/inf: unknown, never learned
    cut_at = np.minimum(prev.cut_at, now)  # a clock set back: the hold runs hold_s from now, not until it catches up
    fresh = (signal >= 0) & (now - signal_at <= stale_after_s)
    be_known = np.isfinite(be_used) & (be_used >= 0)
    be_free = be_known & (be_used * 100 < BE_FREE_PERCENT * capacity)
    learn = fresh & be_free
    first = learn & (prev.samples == 0)
    baseline = np.where(first, signal,
                        np.where(learn, prev.baseline + BASELINE_WEIGHT * (signal - prev.baseline), prev.baseline))
    samples = prev.samples + learn
    known = fresh & (samples >= MIN_BASELINE_SAMPLES)
    limit = np.maximum(baseline * (1 + target_percent / 100), baseline + noise)
    allowed, rise = limit - baseline, signal - baseline
    ceiling = np.maximum(max_percent, floor_percent)
    excess = np.maximum(prev.threshold - floor_percent, 0.0)
    violated = known & ~be_free & (signal > limit)  # without BE work a spike is noise, not BE's harm
    cap = np.where((prev.cut_from >= 0) & (now - cut_at < PROBE_HOLDS * hold_s),
                   np.minimum(ceiling, prev.cut_from - step_percent), ceiling)
    held = known & ~violated & ((now - cut_at < hold_s) | (rise > GUARD_FRACTION * allowed) | be_free
                                | ~be_known | (prev.threshold >= cap))
    growing = known & ~violated & ~held
    threshold = np.select(
        [~known, violated & (rise > SEVERE_FACTOR * allowed), violated, growing],
        [floor_percent, floor_percent, floor_percent + np.floor(excess / 2),
         np.minimum(prev.threshold + step_percent, cap)],
        prev.threshold)
    phase = np.select([~known, violated, held], [FALLBACK, CUT, HOLD], GROW).astype(np.int64)
    return BudgetArrays(threshold=np.clip(threshold, floor_percent, ceiling), phase=phase,
                        since=np.where(phase == prev.phase, prev.since, now), baseline=baseline, samples=samples,
                        cut_at=np.where(violated, now, cut_at), signal=np.asarray(signal, dtype=np.float64),
                        cut_from=np.where(violated, prev.threshold, prev.cut_from))


def budget_detail(state: BEBudgetState | None) -> dict[str, float | int | str]:
    """What a ``suppress`` QoSEvent adds about the budget: ``be_budget_threshold_percent``, ``be_budget_phase``,
    ``be_budget_signal``, ``be_budget_baseline`` (nothing while the budget is off)."""
    if state is None:
        return {}
    return {"be_budget_threshold_percent": state.threshold_percent, "be_budget_phase": state.phase,
            "be_budget_signal": state.signal, "be_budget_baseline": state.baseline}


def budget_debug(state: BEBudgetState | None) -> dict[str, object] | None:
    """``state`` for ``/debug/state``: every field of :class:`BEBudgetState` (``threshold_percent`` percent of
    capacity, ``phase``, ``signal``/``baseline`` in the signal's units, times in seconds, ...), those at their
    default too — the wire encoding leaves them out, so a node in ``fallback`` would show no phase at all; None
    while the budget is off."""
    return None if state is None else msgspec.structs.asdict(state)


def _arrays(state: BEBudgetState) -> BudgetArrays:
    cut = state.cut_at if state.cut_at is not None else -np.inf
    return BudgetArrays(np.array([state.threshold_percent]), np.array([PHASES.index(state.phase)]),
                        np.array([state.since]), np.array([state.baseline]), np.array([state.baseline_samples]),
                        np.array([cut]), np.array([state.signal]), np.array([state.cut_from_percent]))


def be_budget(policy: BEBudgetStrategy, prev: BEBudgetState | None, signal: float, signal_at: float,
              be_used: int, capacity: int, floor_percent: int, now: float,
              stale_after_s: float = STALE_AFTER_S) -> BEBudgetState:
    """One node's budget after this loop (module doc): ``prev`` the state of the previous loop (None = the
    budget just switched on: start at the floor), ``signal`` the worst LS value of ``policy.signal``
    (:func:`ls_signal`; −1 unknown) measured at ``signal_at`` seconds, ``be_used``/``capacity`` milli-cores,
    ``floor_percent`` the static suppress threshold, ``now`` seconds. Pure."""
    one = np.ones(1)
    start = BudgetArrays.initial(one * floor_percent, now) if prev is None else _arrays(prev)
    out = step_many(start, one * signal, one * signal_at, one * be_used, one * capacity, one * floor_percent,
                    one * policy.target_increase_percent, one * policy.max_percent, one * policy.step_percent,
                    one * policy.hold_s, one * allowed_rise(policy), now, stale_after_s)
    return out.state(0)


def threshold_changed(prev: BEBudgetState | None, new: BEBudgetState | None) -> bool:
    """Whether the budget's threshold moved this loop (a ``suppress`` QoSEvent with reason ``be_budget`` is due
    even when the BE limit written stays the same, e.g. a BE cpuset already at its 2-CPU minimum)."""
    return new is not None and (prev is None or prev.threshold_percent != new.threshold_percent)
