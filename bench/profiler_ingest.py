"""Ingest speed of the profiler's histogram add path: ``python bench/profiler_ingest.py``.

Prints samples per second for (a) vectorized adds of large batches straight into a
:class:`HistogramBank` and (b) whole NodeMetrics through :meth:`ProfileModel.ingest`
(30 pods per node, so 36 samples per report), each for CPU and memory together.
"""

from __future__ import annotations

import json
import time

import numpy as np

from colo.messages import NodeMetric, PodMetric, Usage
from colo_profiler.histogram import HistogramBank
from colo_profiler.model import CPU_BUCKETS, ProfileModel


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


def bench_metrics(nodes: int = 200, pods_per_node: int = 30, rounds: int = 10) -> float:
    """Samples/s (CPU + memory pairs) of :meth:`ProfileModel.ingest` over whole NodeMetrics."""
    rng = np.random.default_rng(2)
    metrics = [
        [NodeMetric(node=f"n{i}", at=60.0 * k, system_usage=Usage(cpu=500, memory=1 << 30),
                    pods=[PodMetric(uid=f"n{i}-p{j}", cpu=int(rng.integers(0, 4000)),
                                    memory=int(rng.integers(1 << 20, 8 << 30)), priority_class="prod")
                          for j in range(pods_per_node)])
         for i in range(nodes)]
        for k in range(rounds)
    ]
    model = ProfileModel()
    start = time.perf_counter()
    n = sum(model.ingest(m) for batch in metrics for m in batch)
    return n / (time.perf_counter() - start)


def main() -> None:
    """Run both benchmarks; print the figures, then a final JSON line (target: ingest ≥ 200,000 samples/s)."""
    bank, ingest = bench_bank(), bench_metrics()
    print(f"HistogramBank.add, 100k-sample batches: {bank:,.0f} samples/s")
    print(f"ProfileModel.ingest, NodeMetrics of 30 pods: {ingest:,.0f} samples/s (cpu+memory each)")
    print(json.dumps({"bank_add_samples_per_s": round(bank), "ingest_samples_per_s": round(ingest),
                      "ingest_vs_target_200k": round(ingest / 200_000, 2)}))


if __name__ == "__main__":
    main()
