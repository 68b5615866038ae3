"""Shared helpers of the profiler tests: expected peaks of constant series, metric feeding, a busy model."""

from __future__ import annotations

import numpy as np

from colo.messages import NodeMetric, PodMetric, Usage
from colo_profiler.model import CPU_BUCKETS, MEMORY_BUCKETS, ProfileModel

GI = 1 << 30
DAY = 86400.0


def _end_of_bucket(buckets: object, value: float) -> float:
    b = buckets.find(np.array([value]))[0]  # type: ignore[attr-defined]
    return float(buckets.ends[b])  # type: ignore[attr-defined]


def cpu_peak(milli: int) -> int:
    """Expected peak of a constant CPU series: bucket end × 1.10, in milli-cores."""
    return round(_end_of_bucket(CPU_BUCKETS, milli / 1000) * 1000 * 1.1)


def mem_peak(nbytes: int) -> int:
    """Expected peak of a constant memory series: bucket end × 1.10, in bytes."""
    return round(_end_of_bucket(MEMORY_BUCKETS, nbytes) * 1.1)


def feed(model: ProfileModel, node: str, start: float, n: int, system: tuple[int, int],
         pods: dict[str, tuple[int, int]], step: float = 60.0) -> None:
    """``n`` NodeMetrics of ``node`` every ``step`` seconds from ``start``, constant usage per pod."""
    for k in range(n):
        model.ingest(metric(node, start + k * step, system, pods))


def metric(node: str, at: float, system: tuple[int, int], pods: dict[str, tuple[int, int]]) -> NodeMetric:
    """One NodeMetric: system usage and (cpu milli-cores, memory bytes) per pod uid."""
    return NodeMetric(node=node, at=at, window_s=60, system_usage=Usage(cpu=system[0], memory=system[1]),
                      pods=[PodMetric(uid=u, cpu=c, memory=m) for u, (c, m) in pods.items()])


def busy_series(seed: int, nodes: int, pods_per_node: int, rounds: int, start: float,
                step: float) -> list[NodeMetric]:
    """Random NodeMetrics of pods ``n<i>-p<j>`` on nodes ``n<i>`` (round-major order)."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(rounds):
        for i in range(nodes):
            pods = {f"n{i}-p{j}": (int(rng.gamma(2.0, 400.0)), int(rng.gamma(2.0, GI)))
                    for j in range(pods_per_node)}
            out.append(metric(f"n{i}", start + k * step, (int(rng.integers(100, 900)), GI), pods))
    return out
