"""Ingest speed of the profiler's histogram add path: ``python bench/profiler_ingest.py``.

Prints samples per second for (a) vectorized adds of large batches straight into a
:class:`HistogramBank` and (b) whole NodeMetrics through :meth:`ProfileModel.ingest`
(30 pods per node, so 36 samples per report), each for CPU and memory together, once with pods
without workload and once with every pod in a workload (10 apps per node, each pod's sample also
added to its workload's model). A sample is one value of the report (pod, class or system); the
workload copies are extra work counted in ``workload_samples``, not in the rate. Also with
``peak_method = "adaptive"`` (every pod bound with a request; window maxima tracked at each flush) and the
time of one adaptive window roll-over for all pods (bases, residuals and margins; once per
``margin_window_s``, a day by default). Ends with a JSON line: the rates, the ratios with/without workloads
and adaptive/reference (same process) and against the 200,000 samples/s target.
"""

from __future__ import annotations

import json
import time

import numpy as np

from colo.messages import NodeMetric, PodMetric, Usage
from colo_profiler.histogram import HistogramBank
from colo_profiler.model import CPU_BUCKETS, ProfileModel
from colo_profiler.settings import ProfilerSettings


def bench_bank(n_rows: int = 10_000, batch: int = 100_000, repeats: int = 20) -> float:
    """Samples/s of :meth:`HistogramBank.add` with ``batch`` samples per call."""
    bank = HistogramBank(CPU_BUCKETS, half_life_s=12 * 3600.0, capacity=n_rows)
    rows = np.array([bank.alloc() for _ in range(n_rows)])
    rng = np.random.default_rng(1)
    r = rng.choice(rows, batch)
    v = rng.gamma(2.0, 0.5, batch)
    start = time.perf_counter()
    for k in range(repeats):
        bank.add(r, v, 60.0 * k)
    return batch * repeats / (time.perf_counter() - start)


def node_metrics(nodes: int, pods_per_node: int, rounds: int, seed: int = 2) -> list[list[NodeMetric]]:
    """``rounds`` lists of one NodeMetric per node, pods ``n<i>-p<j>`` with random usage, 60 s apart."""
    rng = np.random.default_rng(seed)
    return [
        [NodeMetric(node=f"n{i}", at=60.0 * k, system_usage=Usage(cpu=500, memory=1 << 30),
                    pods=[PodMetric(uid=f"n{i}-p{j}", cpu=int(rng.integers(0, 4000)),
                                    memory=int(rng.integers(1 << 20, 8 << 30)), priority_class="prod")
                          for j in range(pods_per_node)])
         for i in range(nodes)]
        for k in range(rounds)
    ]


def bench_metrics(metrics: list[list[NodeMetric]], workloads: bool, apps_per_node: int = 10,
                  peak_method: str | None = None) -> tuple[float, int]:
    """Samples/s (CPU + memory pairs) of :meth:`ProfileModel.ingest` over whole NodeMetrics, and the workload
    samples added on top. With ``workloads`` every pod is first bound with app ``app<j mod apps_per_node>``;
    with ``peak_method`` ("reference" or "adaptive") the model uses it and every pod is first bound with a
    request (no workload)."""
    model = ProfileModel(ProfilerSettings(peak_method=peak_method) if peak_method else None)  # type: ignore[arg-type]
    if peak_method:
        for m in metrics[0]:
            for p in m.pods:
                model.pod_bound(p.uid, m.node, 4000, 8 << 30, "prod", at=0.0)
    if workloads:
        for m in metrics[0]:
            for j, p in enumerate(m.pods):
                model.pod_bound(p.uid, m.node, 4000, 8 << 30, "prod", at=0.0,
                                workload=("bench", f"app{j % apps_per_node}"))
    start = time.perf_counter()
    n = sum(model.ingest(m) for batch in metrics for m in batch)
    model.flush()
    return n / (time.perf_counter() - start), model.workload_samples


def bench_roll(metrics: list[list[NodeMetric]], days: int = 5) -> tuple[float, int]:
    """Seconds of one adaptive window roll-over that settles every pod (best of ``days`` − 1), and the pods rolled: the reports of
    ``metrics`` are replayed as ``days`` days (margin window 1 day), so each roll settles every pod."""
    model = ProfileModel(ProfilerSettings(peak_method="adaptive"))
    for m in metrics[0]:
        for p in m.pods:
            model.pod_bound(p.uid, m.node, 4000, 8 << 30, "prod", at=0.0)
    best = float("inf")
    for day in range(days):
        for batch in metrics:
            for m in batch:
                model.ingest(NodeMetric(node=m.node, at=m.at + 86400.0 * day, system_usage=m.system_usage,
                                        pods=m.pods))
        model.flush()
        start = time.perf_counter()
        model.roll(day + 1)
        if day > 0:  # the first roll only records bases: no residual to settle yet
            best = min(best, time.perf_counter() - start)
    return best, len(model.pods)


def main() -> None:
    """Run the benchmarks; print the figures, then a final JSON line (target: ingest ≥ 200,000 samples/s)."""
    bank = bench_bank()
    metrics = node_metrics(nodes=200, pods_per_node=30, rounds=10)
    bench_metrics(metrics[:1], workloads=True)  # warm-up
    plain: list[float] = []
    with_wl: list[float] = []
    bound: list[float] = []
    adaptive: list[float] = []
    extra = 0
    for _ in range(3):  # interleaved, best of three each: the machine is shared
        plain.append(bench_metrics(metrics, workloads=False)[0])
        rate, extra = bench_metrics(metrics, workloads=True)
        with_wl.append(rate)
        bound.append(bench_metrics(metrics, workloads=False, peak_method="reference")[0])
        adaptive.append(bench_metrics(metrics, workloads=False, peak_method="adaptive")[0])
    ingest, ingest_wl, ingest_bound, ingest_ad = max(plain), max(with_wl), max(bound), max(adaptive)
    roll_s, rolled = bench_roll(metrics)
    print(f"HistogramBank.add, 100k-sample batches: {bank:,.0f} samples/s")
    print(f"ProfileModel.ingest, NodeMetrics of 30 pods, no workloads: {ingest:,.0f} samples/s (cpu+memory each)")
    print(f"ProfileModel.ingest, every pod in a workload: {ingest_wl:,.0f} samples/s "
          f"(+{extra:,} workload samples)")
    print(f"ProfileModel.ingest, pods bound first: reference {ingest_bound:,.0f}, adaptive {ingest_ad:,.0f} "
          "samples/s")
    print(f"adaptive window roll-over, {rolled:,} pods: {roll_s:.3f} s (once per margin_window_s)")
    print(json.dumps({"bank_add_samples_per_s": round(bank), "ingest_samples_per_s": round(ingest),
                      "ingest_workloads_samples_per_s": round(ingest_wl),
                      "workloads_vs_plain": round(ingest_wl / ingest, 3),
                      "ingest_adaptive_samples_per_s": round(ingest_ad),
                      "ingest_bound_reference_samples_per_s": round(ingest_bound),
                      "adaptive_vs_reference": round(ingest_ad / ingest_bound, 3),
                      "adaptive_roll_s": round(roll_s, 4), "adaptive_roll_pods": rolled,
                      "ingest_vs_target_200k": round(min(ingest, ingest_wl, ingest_ad) / 200_000, 2)}))


if __name__ == "__main__":
    main()
