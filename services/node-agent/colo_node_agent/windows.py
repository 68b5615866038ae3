"""Report windows for NodeMetric (REFERENCE.md §2): ring buffers of samples, averages and percentiles.

Samples are taken every sub-step (``dt`` seconds) for all nodes at once; arrays are ``(nodes, slots)``.
The percentile of n samples is the sorted sample at index ``int(n × p) − 1`` floored at 0 (REFERENCE.md §2).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from colo.messages import AggregatedUsage

F64 = npt.NDArray[np.float64]

AGG_WINDOWS_S: tuple[int, ...] = (300, 600, 1800)
"""Aggregated node usage windows: 5 m / 10 m / 30 m (REFERENCE.md §2)."""
AGG_STATS: tuple[tuple[str, float], ...] = (("p50", 0.5), ("p90", 0.9), ("p95", 0.95), ("p99", 0.99))


def percentile_index(n: int, p: float) -> int:
    """Index into n ascending samples for percentile ``p`` (0–1): int(n × p) − 1, floored at 0."""
    return max(int(n * p) - 1, 0)


def percentile(samples: list[float], p: float) -> float:
    """Percentile ``p`` of ``samples`` by the REFERENCE.md §2 rule. Raises ValueError when empty."""
    if not samples:
        raise ValueError("percentile of no samples")
    ordered = sorted(samples)
    return ordered[percentile_index(len(ordered), p)]


class Ring:
    """A ring of the last ``size`` samples for ``rows`` series (e.g. nodes): ``push`` a ``(rows,)`` vector."""

    def __init__(self, rows: int, size: int) -> None:
        self.data: F64 = np.zeros((rows, size))
        self.size = size
        self.count = 0
        self.pos = 0

    def push(self, values: F64) -> None:
        """Append one sample per row."""
        self.data[:, self.pos] = values
        self.pos = (self.pos + 1) % self.size
        self.count = min(self.count + 1, self.size)

    def last(self, n: int) -> F64:
        """The last min(n, count) samples, ``(rows, k)``, oldest first."""
        k = min(n, self.count)
        idx = (self.pos - k + np.arange(k)) % self.size
        return self.data[:, idx]

    def mean(self, n: int) -> F64:
        """Per-row mean of the last n samples (zeros when empty)."""
        window = self.last(n)
        if window.shape[1] == 0:
            return np.zeros(self.data.shape[0])
        out: F64 = np.asarray(window.mean(axis=1), dtype=np.float64)
        return out


def aggregated(cpu: Ring, mem: Ring, dt: float) -> list[list[AggregatedUsage]]:
    """Per row, avg/p50/p90/p95/p99 of node CPU (milli) and memory (bytes) over each of AGG_WINDOWS_S."""
    rows = cpu.data.shape[0]
    out: list[list[AggregatedUsage]] = [[] for _ in range(rows)]
    for window in AGG_WINDOWS_S:
        n = max(math.ceil(window / dt), 1)
        c, m = np.sort(cpu.last(n), axis=1), np.sort(mem.last(n), axis=1)
        k = c.shape[1]
        if k == 0:
            continue
        stats: list[tuple[str, F64, F64]] = [("avg", c.mean(axis=1), m.mean(axis=1))]
        for name, p in AGG_STATS:
            i = percentile_index(k, p)
            stats.append((name, c[:, i], m[:, i]))
        for name, cv, mv in stats:
            cl, ml = cv.tolist(), mv.tolist()
            for r in range(rows):
                out[r].append(AggregatedUsage(window_s=window, stat=name,  # type: ignore[arg-type]
                                              cpu=int(cl[r]), memory=int(ml[r])))
    return out
