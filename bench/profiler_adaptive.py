"""The profiler's own pod peaks on the Bitbrains series, ``peak_method`` reference vs adaptive:
``python bench/profiler_adaptive.py [--k 7] [--cpu-price P] [--memory-price P]``.

Where ``bench/prediction.py`` scores the predictors alone, this runs the service's model
(:class:`colo_profiler.model.ProfileModel`) end to end: each of the 60 VMs of
``bitbrains-gwa-t-12-rnd/2013-7`` is a prod pod on its own node, requesting its cores (milli-cores) and
its provisioned memory (bytes, the trace's highest), and every 300 s sample is one NodeMetric. Times are
shifted so that day 0 starts at the trace's first timestamp, which aligns the adaptive margin windows
(``margin_window_s`` = 1 day) with the scored days. At the start of every day ``d ≥ k``, before any of its
samples, each pod's published ``cpu_peak`` / ``memory_peak`` is read and scored with ``prediction.score``
against the day's ``cpu_p95`` (what the reference peak stands for), ``cpu_max`` and ``memory_max``:
violation rate (actual > peak) and slack ((peak − actual) / provisioned), over days with ≥ half their
samples; scores for all VMs and for the halves 1–30 (used to pick the default prices) and 31–60.
Both models see the same samples in the same process; the final JSON line has both methods'
scores and the adaptive − reference differences.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence

import numpy as np
from prediction import DAY_S, MIN_DAY_FRACTION, SAMPLE_S, score

from colo.messages import NodeMetric, PodMetric, Usage
from colo.sim.traces import list_vms, load_vm_samples
from colo_profiler.model import ProfileModel
from colo_profiler.settings import ProfilerSettings

TARGETS = ("cpu_p95", "cpu_max", "memory_max")


def main(argv: Sequence[str] | None = None) -> None:
    """Run both methods over the trace; print a line per method and target, then a summary JSON line."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--k", type=int, default=7, help="days before the first scored day (7)")
    ap.add_argument("--cpu-price", type=float, default=ProfilerSettings().cpu_violation_price)
    ap.add_argument("--memory-price", type=float, default=ProfilerSettings().memory_violation_price)
    args = ap.parse_args(argv)
    ids = list_vms()
    raw = [load_vm_samples(v) for v in ids]
    t0 = min(float(s.at_s[0]) for s in raw)
    n_days = int((max(float(s.at_s[-1]) for s in raw) - t0) // DAY_S) + 1
    shape = (len(ids), n_days)
    actual = {t: np.full(shape, np.nan) for t in TARGETS}
    prov = {t: np.full(shape, np.nan) for t in TARGETS}
    samples = np.zeros(shape, dtype=np.intp)
    events: list[tuple[float, int, int, int]] = []
    requests = []
    for i, s in enumerate(raw):
        cpu = s.cpu_usage_mhz * s.cores / s.cpu_capacity_mhz
        mem = s.memory_usage_kb * 1024.0
        at = s.at_s - t0
        day = (at // DAY_S).astype(np.intp)
        requests.append((int(round(float(s.cores.max()) * 1000)), int(float(s.memory_provisioned_kb.max()) * 1024)))
        for d in np.unique(day):
            m = day == d
            samples[i, d] = int(m.sum())
            actual["cpu_p95"][i, d] = float(np.quantile(cpu[m], 0.95, method="inverted_cdf"))
            actual["cpu_max"][i, d] = float(cpu[m].max())
            actual["memory_max"][i, d] = float(mem[m].max())
            prov["cpu_p95"][i, d] = prov["cpu_max"][i, d] = requests[i][0] / 1000.0
            prov["memory_max"][i, d] = float(requests[i][1])
        events += zip(at.tolist(), [i] * len(at), np.rint(cpu * 1000).astype(int).tolist(),
                      np.rint(mem).astype(int).tolist())
    events.sort()
    scored = samples >= MIN_DAY_FRACTION * DAY_S / SAMPLE_S
    scored[:, : args.k] = False

    settings = {"reference": ProfilerSettings(expiry_s=40 * DAY_S),
                "adaptive": ProfilerSettings(expiry_s=40 * DAY_S, peak_method="adaptive",
                                             cpu_violation_price=args.cpu_price,
                                             memory_violation_price=args.memory_price)}
    models = {name: ProfileModel(st) for name, st in settings.items()}
    names = [f"vm{v}" for v in ids]
    for m in models.values():
        for i, name in enumerate(names):
            m.pod_bound(name, name, requests[i][0], requests[i][1], "prod", at=float(raw[i].at_s[0] - t0))
    peaks = {name: {t: np.full(shape, np.nan) for t in TARGETS} for name in models}
    seconds = dict.fromkeys(models, 0.0)
    day, j = 0, 0
    while day < n_days:
        end = (day + 1) * DAY_S
        for name, m in models.items():
            start = time.perf_counter()
            if day >= args.k:
                known = [n for n in names if n in m.nodes]
                for prof in m.profiles(known, day * DAY_S):
                    i = names.index(prof.node)
                    p = prof.pods[0]
                    peaks[name]["cpu_p95"][i, day] = peaks[name]["cpu_max"][i, day] = p.cpu_peak / 1000.0
                    peaks[name]["memory_max"][i, day] = float(p.memory_peak)
            k = j
            while k < len(events) and events[k][0] < end:
                at, i, cpu, mem = events[k]
                m.ingest(NodeMetric(node=names[i], at=at, window_s=300, system_usage=Usage(cpu=0, memory=0),
                                    pods=[PodMetric(uid=names[i], cpu=cpu, memory=mem)]))
                k += 1
            seconds[name] += time.perf_counter() - start
        j = k
        day += 1

    tuning = np.array([i < len(ids) // 2 for i in range(len(ids))])[:, None]
    pops = {"all": scored, "vms_1_30": scored & tuning, "vms_31_60": scored & ~tuning}
    by_pop = {pop: {name: {t: score(peaks[name][t], actual[t], prov[t], mask & ~np.isnan(peaks[name][t]))
                           for t in TARGETS} for name in models} for pop, mask in pops.items()}
    results = by_pop["all"]
    for name in models:
        for t in TARGETS:
            print(json.dumps({"method": name, "target": t, **{
                pop: {"violation_rate": round(r[name][t]["violation_rate"], 4), "slack": round(r[name][t]["slack"], 4),
                      "vm_days": r[name][t]["vm_days"]} for pop, r in by_pop.items()}}))
    print(json.dumps({
        "bench": "profiler_adaptive", "k": args.k, "vms": len(ids), "days": n_days,
        "prices": {"cpu": args.cpu_price, "memory": args.memory_price},
        "scores": {name: {t: {"violation_rate": round(r["violation_rate"], 4), "slack": round(r["slack"], 4)}
                          for t, r in res.items()} for name, res in results.items()},
        "adaptive_minus_reference": {t: {k: round(results["adaptive"][t][k] - results["reference"][t][k], 4)
                                         for k in ("violation_rate", "slack")} for t in TARGETS},
        "seconds": {k: round(v, 2) for k, v in seconds.items()},
        "time_ratio_adaptive_vs_reference": round(seconds["adaptive"] / seconds["reference"], 3),
    }))


if __name__ == "__main__":
    main()
