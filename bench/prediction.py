"""Peak prediction accuracy on the Bitbrains series: ``python bench/prediction.py [--k 7]``.

For every VM of ``bitbrains-gwa-t-12-rnd/2013-7`` (60 VMs, 300 s samples, one month)
each method predicts, at the start of every day ``d ≥ k``, three peaks of day ``d``
from the samples before it, and is scored against what happened:

* ``cpu_p95`` / ``cpu_p99`` — the 95th / 99th percentile of the day's CPU samples,
  in cores (usage MHz ÷ (provisioned MHz ÷ cores): the reference bucket layout is in
  cores); percentile = smallest sample whose cumulative share reaches p;
* ``memory_max`` — the day's highest memory usage, bytes (KB × 1024).

Days are 86,400 s from the first timestamp of the trace (2013-06-30 22:03:24 UTC,
00:03 in the VMs' Amsterdam time zone), 30 in all. Gap rows (0 cores) are missing
data and skipped; a day with fewer than half its 288 samples is not scored (its
samples still feed later predictions). ``provisioned`` is the day's highest
provisioned cores / memory bytes — the VM's size, known in advance like a request.

Scores, per VM-day: a **violation** when actual > predicted; **slack** =
(predicted − actual) / provisioned, averaged (``waste`` and ``shortfall`` are its
positive and negative parts, so slack = waste − shortfall). Methods:

* ``request`` — the provisioned size;
* ``vpa`` — p90 × 1.15 of a 24 h half-life decaying histogram (REFERENCE.md §7);
* ``koordinator`` — p95 × 1.10 (CPU, 12 h half-life) / p98 × 1.10 (memory, 24 h), the
  reference's peak; the memory target is the day's max but the reference predicts
  with p98, so p98 it is. Both histogram methods use the profiler's
  :class:`HistogramBank` with the reference layouts (CPU_BUCKETS in cores,
  MEMORY_BUCKETS in bytes), one 300 s sample at a time; series younger than 24 h
  (and empty histograms) are predicted at provisioned (cold start, §7);
* ``ours`` — :class:`colo_profiler.predict.PeakPredictor`: exact decayed p95 (24 h
  half-life) + a per-VM margin learned from the VM's own past misses + a cap at
  max(provisioned, highest sample seen). Its one knob, ``violation_price``, is set per
  target from the tuning VMs only (``--tuning``, default 1–30): the price with the
  fewest violations among those whose tuning slack ≤ koordinator's tuning slack.

Prints one JSON line per method × target (scores for the held-out, tuning and all
VMs), a table, ``ours`` at every price (the trade-off curve), ablations, and a
final summary JSON line with ``ours_beats_koordinator`` (violation ≤ and slack <).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np
import numpy.typing as npt
from rich.console import Console
from rich.table import Table

from colo.sim.traces import VMSamples, list_vms, load_vm_samples
from colo_profiler.histogram import Buckets, HistogramBank
from colo_profiler.model import CPU_BUCKETS, MEMORY_BUCKETS
from colo_profiler.predict import PeakPredictor, PeakPredictorConfig

T = TypeVar("T")
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

DAY_S = 86_400.0
SAMPLE_S = 300.0
MIN_DAY_FRACTION = 0.5
"""A day needs this share of its 288 samples to be scored."""
HOUR_S = 3600.0
COLD_START_S = 24 * HOUR_S
TARGETS = ("cpu_p95", "cpu_p99", "memory_max")
METHODS = ("request", "vpa", "koordinator", "ours")
PRICE_GRID = (0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 2.0)
"""Candidate ``violation_price`` values of ``ours`` (provisioned × days per missed peak)."""


# ---------------------------------------------------------------------------- data


@dataclass
class VMDays:
    """One VM cut into days: samples in cores / bytes, ``day`` index per sample (shape ``(n,)``)."""

    vm: str
    at_s: FloatArray
    day: npt.NDArray[np.intp]
    cpu_cores: FloatArray
    memory_bytes: FloatArray
    cores: FloatArray
    memory_provisioned_bytes: FloatArray


@dataclass
class Actuals:
    """Per target, arrays of shape ``(n_vms, n_days)``: actual peak, provisioned, samples per day.

    ``actual``/``provisioned`` are NaN on days without samples.
    """

    actual: dict[str, FloatArray]
    provisioned: dict[str, FloatArray]
    samples: npt.NDArray[np.intp]

    @property
    def complete(self) -> BoolArray:
        """Days with at least half their samples (scored, and used to learn from)."""
        return np.asarray(self.samples >= MIN_DAY_FRACTION * DAY_S / SAMPLE_S)


def to_days(s: VMSamples, t0: float) -> VMDays:
    """Convert a VM's raw samples: CPU MHz → cores, memory KB → bytes, day index from ``t0``."""
    return VMDays(
        vm=s.vm, at_s=np.asarray(s.at_s), day=((s.at_s - t0) // DAY_S).astype(np.intp),
        cpu_cores=s.cpu_usage_mhz * s.cores / s.cpu_capacity_mhz, memory_bytes=s.memory_usage_kb * 1024.0,
        cores=np.asarray(s.cores), memory_provisioned_bytes=s.memory_provisioned_kb * 1024.0,
    )


def day_percentile(values: FloatArray, p: float) -> float:
    """Smallest sample whose cumulative share reaches ``p`` (inverted CDF); shape ``(n,)``, n ≥ 1."""
    return float(np.quantile(values, p, method="inverted_cdf"))


def actuals(vms: Sequence[VMDays], n_days: int) -> Actuals:
    """The scored quantities of every VM-day (see module docstring)."""
    shape = (len(vms), n_days)
    out = {t: np.full(shape, np.nan) for t in TARGETS}
    prov = {t: np.full(shape, np.nan) for t in TARGETS}
    samples = np.zeros(shape, dtype=np.intp)
    for i, vm in enumerate(vms):
        for d in np.unique(vm.day):
            m = vm.day == d
            samples[i, d] = int(m.sum())
            out["cpu_p95"][i, d] = day_percentile(vm.cpu_cores[m], 0.95)
            out["cpu_p99"][i, d] = day_percentile(vm.cpu_cores[m], 0.99)
            out["memory_max"][i, d] = float(vm.memory_bytes[m].max())
            prov["cpu_p95"][i, d] = prov["cpu_p99"][i, d] = float(vm.cores[m].max())
            prov["memory_max"][i, d] = float(vm.memory_provisioned_bytes[m].max())
    return Actuals(out, prov, samples)


# ---------------------------------------------------------------------------- scoring


def violations(predicted: FloatArray, actual: FloatArray) -> BoolArray:
    """True where the actual peak exceeded the prediction (equal is not a violation); same shapes."""
    return np.asarray(actual > predicted)


def slack(predicted: FloatArray, actual: FloatArray, provisioned: FloatArray) -> FloatArray:
    """(predicted − actual) / provisioned per VM-day; same shapes, provisioned > 0."""
    return np.asarray((predicted - actual) / provisioned)


def score(predicted: FloatArray, actual: FloatArray, provisioned: FloatArray, mask: BoolArray) -> dict[str, float]:
    """``violation_rate``, ``slack``, ``waste``, ``shortfall`` (means over ``mask``) and ``vm_days``.

    All arrays of one shape; raises ValueError when the mask selects nothing or a
    selected prediction is not finite.
    """
    p, a, v = predicted[mask], actual[mask], provisioned[mask]
    if p.size == 0:
        raise ValueError("no VM-day to score")
    if not np.isfinite(p).all():
        raise ValueError("a scored VM-day has no finite prediction")
    s = slack(p, a, v)
    return {"violation_rate": float(violations(p, a).mean()), "slack": float(s.mean()),
            "waste": float(np.maximum(s, 0).mean()), "shortfall": float(np.maximum(-s, 0).mean()),
            "vm_days": int(p.size)}


def pooled(scores: Sequence[dict[str, float]]) -> dict[str, float]:
    """Scores of several targets pooled VM-day by VM-day (weighted by ``vm_days``)."""
    n = sum(s["vm_days"] for s in scores)
    out = {k: sum(s[k] * s["vm_days"] for s in scores) / n for k in ("violation_rate", "slack", "waste",
                                                                     "shortfall")}
    return {**out, "vm_days": int(n)}


def beats(ours: dict[str, float], ref: dict[str, float]) -> bool:
    """The goal: violation rate equal or lower and slack strictly lower."""
    return ours["violation_rate"] <= ref["violation_rate"] and ours["slack"] < ref["slack"]


# ---------------------------------------------------------------------------- methods


def predict_request(act: Actuals) -> dict[str, FloatArray]:
    """The provisioned size of each VM-day."""
    return {t: act.provisioned[t].copy() for t in TARGETS}


def predict_histogram(vms: Sequence[VMDays], act: Actuals, t0: float, n_days: int, resource: str, buckets: Buckets,
                      half_life_s: float, percentile: float, factor: float, cold_start_s: float | None,
                      ) -> FloatArray:
    """``percentile × factor`` of a decaying :class:`HistogramBank` at each day start, shape ``(n_vms, n_days)``.

    ``resource`` "cpu" (cores) or "memory" (bytes). Each day is queried before its
    own samples are added. Empty rows and, when ``cold_start_s`` is set, VMs whose
    first sample is younger than it are predicted at provisioned.
    """
    target = "cpu_p95" if resource == "cpu" else "memory_max"
    bank = HistogramBank(buckets, half_life_s, capacity=len(vms))
    rows = np.array([bank.alloc() for _ in vms], dtype=np.intp)
    values = [vm.cpu_cores if resource == "cpu" else vm.memory_bytes for vm in vms]
    first = np.array([vm.at_s[0] for vm in vms])
    out = np.full((len(vms), n_days), np.nan)
    for d in range(n_days):
        start = t0 + d * DAY_S
        pred = bank.percentiles(rows, percentile) * factor
        cold = bank.total_weight(rows) <= 0
        if cold_start_s is not None:
            cold |= start - first < cold_start_s
        out[:, d] = np.where(cold, act.provisioned[target][:, d], pred)
        today = [vm.day == d for vm in vms]
        bank.add(np.concatenate([np.full(int(m.sum()), r) for r, m in zip(rows, today)]),
                 np.concatenate([v[m] for v, m in zip(values, today)]),
                 np.concatenate([vm.at_s[m] for vm, m in zip(vms, today)]))
    return out


@dataclass
class OursRun:
    """``ours`` at one price: peak, base, margin and cap per VM-day and target, shape ``(n_vms, n_days)``."""

    peak: dict[str, FloatArray]
    base: dict[str, FloatArray]
    cap: dict[str, FloatArray]
    margin: dict[str, FloatArray]
    cold: dict[str, BoolArray]


def predict_ours(vms: Sequence[VMDays], act: Actuals, t0: float, n_days: int, prices: Sequence[float],
                 ) -> dict[float, OursRun]:
    """Run one :class:`PeakPredictor` per VM and target, forecasting at every price in ``prices`` at once:
    predict at each day start, then add the day's samples, then settle the day's actual peak if the day
    is complete (base and residuals do not depend on the price, only the margin does)."""
    shape = (len(vms), n_days)

    def nan() -> dict[str, FloatArray]:
        return {t: np.full(shape, np.nan) for t in TARGETS}

    def empty() -> OursRun:
        return OursRun(peak=nan(), base=nan(), cap=nan(), margin=nan(),
                       cold={t: np.zeros(shape, dtype=bool) for t in TARGETS})

    runs = {p: empty() for p in prices}
    complete = act.complete
    for i, vm in enumerate(vms):
        for target in TARGETS:
            predictor = PeakPredictor(PeakPredictorConfig())
            values = vm.memory_bytes if target == "memory_max" else vm.cpu_cores
            for d in range(n_days):
                m = vm.day == d
                if not m.any():
                    continue
                forecasts = predictor.predict_many(t0 + d * DAY_S, float(act.provisioned[target][i, d]), prices)
                for p, f in zip(prices, forecasts):
                    run = runs[p]
                    run.peak[target][i, d], run.base[target][i, d] = f.peak, f.base
                    run.cap[target][i, d], run.margin[target][i, d] = f.cap, f.margin
                    run.cold[target][i, d] = f.cold
                predictor.add(vm.at_s[m], values[m])
                if complete[i, d]:
                    predictor.settle(forecasts[0], float(act.actual[target][i, d]))
    return runs


# ---------------------------------------------------------------------------- driver


def parse_range(spec: str) -> set[str]:
    """"1-30" or "1-10,41-45" → VM ids; raises ValueError on malformed input."""
    out: set[str] = set()
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        if not lo.strip().isdigit() or (hi and not hi.strip().isdigit()):
            raise ValueError(f"bad VM range {part!r} in {spec!r} (expected e.g. 1-30)")
        out.update(str(v) for v in range(int(lo), int(hi or lo) + 1))
    return out


def scores_by_population(pred: dict[str, FloatArray], act: Actuals, masks: dict[str, BoolArray],
                         ) -> dict[str, dict[str, dict[str, float]]]:
    """{population: {target or "overall": score}}."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for pop, mask in masks.items():
        per = {t: score(pred[t], act.actual[t], act.provisioned[t], mask) for t in TARGETS}
        out[pop] = {**per, "overall": pooled(list(per.values()))}
    return out


def choose_price(sweep: dict[float, dict[str, dict[str, dict[str, float]]]],
                 ref: dict[str, dict[str, dict[str, float]]], target: str) -> float:
    """Fewest tuning violations among prices whose tuning slack ≤ the reference's (else the lowest slack)."""
    tuning = {p: s["tuning"][target] for p, s in sweep.items()}
    ok = [p for p, s in tuning.items() if s["slack"] <= ref["tuning"][target]["slack"]]
    if not ok:
        return min(tuning, key=lambda p: tuning[p]["slack"])
    return min(ok, key=lambda p: (tuning[p]["violation_rate"], tuning[p]["slack"]))


def rounded(s: dict[str, float]) -> dict[str, float]:
    """Scores rounded for printing."""
    return {k: (v if k == "vm_days" else round(v, 4)) for k, v in s.items()}


def timed(label: str, seconds: dict[str, float], fn: Callable[[], T]) -> T:
    """Run ``fn`` and record its wall time under ``label``."""
    start = time.perf_counter()
    out = fn()
    seconds[label] = round(time.perf_counter() - start, 3)
    return out


def main(argv: Sequence[str] | None = None) -> None:
    """Run every method, print JSON lines, a table, the trade-off curve, ablations and a summary line."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--k", type=int, default=7, help="training days before the first scored day (7)")
    ap.add_argument("--tuning", default="1-30", help="VM ids the price of ours is tuned on (1-30)")
    ap.add_argument("--traces", type=Path, default=None, help="traces directory (default: colo.sim.traces)")
    args = ap.parse_args(argv)
    seconds: dict[str, float] = {}
    start = time.perf_counter()

    ids = list_vms(args.traces)
    raw = [load_vm_samples(v, args.traces) for v in ids]
    t0 = min(float(s.at_s[0]) for s in raw)
    n_days = int((max(float(s.at_s[-1]) for s in raw) - t0) // DAY_S) + 1
    if not 0 < args.k < n_days:
        raise SystemExit(f"--k must be within 1..{n_days - 1}, got {args.k}")
    vms = [to_days(s, t0) for s in raw]
    act = actuals(vms, n_days)
    seconds["load"] = round(time.perf_counter() - start, 3)

    tuning_ids = parse_range(args.tuning)
    in_tuning = np.array([v in tuning_ids for v in ids])
    if not in_tuning.any() or in_tuning.all():
        raise SystemExit(f"--tuning {args.tuning!r} must select some but not all of {len(ids)} VMs")
    scored = act.complete.copy()
    scored[:, : args.k] = False
    masks = {"held_out": scored & ~in_tuning[:, None], "tuning": scored & in_tuning[:, None], "all": scored}

    preds: dict[str, dict[str, FloatArray]] = {"request": predict_request(act)}
    vpa_cpu = timed("vpa_cpu", seconds, lambda: predict_histogram(
        vms, act, t0, n_days, "cpu", CPU_BUCKETS, 24 * HOUR_S, 0.90, 1.15, None))
    vpa_mem = timed("vpa_memory", seconds, lambda: predict_histogram(
        vms, act, t0, n_days, "memory", MEMORY_BUCKETS, 24 * HOUR_S, 0.90, 1.15, None))
    preds["vpa"] = {"cpu_p95": vpa_cpu, "cpu_p99": vpa_cpu, "memory_max": vpa_mem}
    ko_cpu = timed("koordinator_cpu", seconds, lambda: predict_histogram(
        vms, act, t0, n_days, "cpu", CPU_BUCKETS, 12 * HOUR_S, 0.95, 1.10, COLD_START_S))
    ko_mem = timed("koordinator_memory", seconds, lambda: predict_histogram(
        vms, act, t0, n_days, "memory", MEMORY_BUCKETS, 24 * HOUR_S, 0.98, 1.10, COLD_START_S))
    preds["koordinator"] = {"cpu_p95": ko_cpu, "cpu_p99": ko_cpu, "memory_max": ko_mem}
    ref = scores_by_population(preds["koordinator"], act, masks)

    # ours at every candidate price (all VMs), the price then chosen from the tuning rows only
    sweep_start = time.perf_counter()
    runs = predict_ours(vms, act, t0, n_days, PRICE_GRID)
    seconds["ours_all_prices"] = round(time.perf_counter() - sweep_start, 3)
    sweep = {p: scores_by_population(r.peak, act, masks) for p, r in runs.items()}
    price = {t: choose_price(sweep, ref, t) for t in TARGETS}
    ours = {t: runs[price[t]] for t in TARGETS}
    preds["ours"] = {t: ours[t].peak[t] for t in TARGETS}

    results = {m: scores_by_population(preds[m], act, masks) for m in METHODS}
    for m in METHODS:
        for t in TARGETS:
            line: dict[str, object] = {"method": m, "target": t, **{pop: rounded(results[m][pop][t]) for pop in masks}}
            if m == "ours":
                line["violation_price"] = price[t]
            print(json.dumps(line))

    ablations = ablation_predictions(preds["koordinator"], ours, act)
    ablation_scores = {name: scores_by_population(p, act, masks) for name, p in ablations.items()}
    beats_ko = {pop: {t: beats(results["ours"][pop][t], results["koordinator"][pop][t])
                      for t in (*TARGETS, "overall")} for pop in masks}
    print_tables(results, sweep, price, ablation_scores)
    seconds["total"] = round(time.perf_counter() - start, 3)
    n_pred = int(sum((~np.isnan(runs[PRICE_GRID[0]].base[t])).sum() for t in TARGETS))
    print(f"time: load {seconds['load']} s, koordinator {seconds['koordinator_cpu'] + seconds['koordinator_memory']:.3f} s, "
          f"vpa {seconds['vpa_cpu'] + seconds['vpa_memory']:.3f} s, ours {seconds['ours_all_prices']} s "
          f"({n_pred:,} VM-day-target forecasts at {len(PRICE_GRID)} prices each, "
          f"{1e6 * seconds['ours_all_prices'] / n_pred:.0f} µs apiece), total {seconds['total']} s")
    print(json.dumps({
        "bench": "prediction", "k": args.k, "days": n_days, "vms": len(ids), "tuning_vms": args.tuning,
        "vm_days": {pop: results["ours"][pop]["cpu_p95"]["vm_days"] for pop in masks},
        "methods": {m: {pop: {t: {"violation_rate": round(s["violation_rate"], 4), "slack": round(s["slack"], 4)}
                              for t, s in results[m][pop].items()} for pop in ("all", "held_out")}
                    for m in METHODS},
        "ours_violation_price": price,
        "ours_beats_koordinator": beats_ko,
        "seconds": seconds,
        "time_ratio_ours_vs_koordinator": round(
            seconds["ours_all_prices"] / (seconds["koordinator_cpu"] + seconds["koordinator_memory"]), 2),
    }))


def ablation_predictions(koordinator: dict[str, FloatArray], ours: dict[str, OursRun], act: Actuals,
                         ) -> dict[str, dict[str, FloatArray]]:
    """What each part of ``ours`` is worth: the cap alone on koordinator; ours with the learned margin
    replaced by the reference's × 1.10; ours without the cap."""
    out: dict[str, dict[str, FloatArray]] = {"koordinator+cap": {}, "ours_margin_x1.10": {}, "ours_no_cap": {}}
    for t in TARGETS:
        r, prov = ours[t], act.provisioned[t]
        cold = r.cold[t] | np.isnan(r.base[t])
        out["koordinator+cap"][t] = np.where(np.isnan(r.cap[t]), koordinator[t], np.fmin(koordinator[t], r.cap[t]))
        out["ours_margin_x1.10"][t] = np.where(cold, prov, np.fmin(r.base[t] * 1.10, r.cap[t]))
        out["ours_no_cap"][t] = np.where(cold, prov, r.base[t] + r.margin[t] * prov)
    return out


def print_tables(results: dict[str, dict[str, dict[str, dict[str, float]]]],
                 sweep: dict[float, dict[str, dict[str, dict[str, float]]]], price: dict[str, float],
                 ablations: dict[str, dict[str, dict[str, dict[str, float]]]]) -> None:
    """The method table, the price sweep of ours, and the ablations (held-out and all VMs)."""
    console = Console(width=172)

    def cell(s: dict[str, float]) -> str:
        return f"{s['violation_rate']:.3f}/{s['slack']:+.3f}"

    def table(title: str, rows: dict[str, dict[str, dict[str, dict[str, float]]]]) -> Table:
        tab = Table(title=title + " — violation rate / slack (held-out VMs | all VMs)")
        tab.add_column("method", no_wrap=True)
        for t in (*TARGETS, "overall"):
            tab.add_column(f"{t} held-out", no_wrap=True)
            tab.add_column(f"{t} all", no_wrap=True)
        for name, res in rows.items():
            tab.add_row(name, *(cell(res[pop][t]) for t in (*TARGETS, "overall") for pop in ("held_out", "all")))
        return tab

    console.print(table("Peak prediction, Bitbrains 2013-7", results))
    chosen = ", ".join(f"{t} {p}" for t, p in price.items())
    console.print(table(f"ours by violation_price (chosen on the tuning VMs: {chosen})",
                        {f"price {p}": s for p, s in sweep.items()}))
    console.print(table("Ablations", {"koordinator": results["koordinator"], **ablations,
                                      "ours": results["ours"]}))


if __name__ == "__main__":
    main()
