"""Weighted max-min fair sharing (water-filling), vectorized over nodes.

This is how the CFS scheduler divides contended CPU between sibling groups in steady state: every group gets
min(demand, λ × weight) with the fill level λ chosen so the capacity is used up (or every demand met).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

F64 = npt.NDArray[np.float64]


def water_fill(demand: F64, weight: F64, capacity: F64) -> F64:
    """Allocation ``(N, M)`` for demands and weights ``(N, M)`` on capacities ``(N,)`` (same units as demand).

    Rows whose total demand fits get their demand; otherwise alloc = min(demand, λ × weight) with
    Σ alloc = capacity. Zero-weight entries get nothing in a contended row. Exact (sorts
    demand/weight ratios per row); O(N · M log M).
    """
    demand = np.maximum(demand, 0.0)
    cap = np.maximum(capacity, 0.0)
    w = np.where(demand > 0, np.maximum(weight, 0.0), 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(demand > 0, np.where(w > 0, demand / w, np.inf), 0.0)
    order = np.argsort(ratio, axis=1, kind="stable")
    r = np.take_along_axis(ratio, order, axis=1)
    d = np.take_along_axis(demand, order, axis=1)
    ws = np.take_along_axis(w, order, axis=1)
    cum_d = np.cumsum(d, axis=1)
    rest_w = ws.sum(axis=1, keepdims=True) - np.cumsum(ws, axis=1) + ws  # weight of items k..end
    with np.errstate(invalid="ignore"):
        level = cum_d - d + r * rest_w  # total allocated when λ = r_k (items before k saturated)
    level = np.where(np.isnan(level), np.inf, level)
    reach = level >= cap[:, None]
    k = np.argmax(reach, axis=1)
    any_reach = reach.any(axis=1)
    rows = np.arange(demand.shape[0])
    sat = (cum_d - d)[rows, k]
    rw = rest_w[rows, k]
    with np.errstate(divide="ignore", invalid="ignore"):
        lam = np.where(rw > 0, (cap - sat) / rw, np.inf)
        alloc = np.where(w > 0, np.minimum(demand, lam[:, None] * w), 0.0)
    fits = demand.sum(axis=1) <= cap
    return np.where((fits | ~any_reach)[:, None], demand, alloc)
