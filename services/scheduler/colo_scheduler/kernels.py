"""Compiled loops (Numba) for the few-row work of the scheduling hot path.

A class entry is brought up to date over the handful of rows changed since its last pod
(framework/classcache.py): there, NumPy's cost is its per-call overhead (about a microsecond a
call, a dozen calls a plugin), not the arithmetic. These kernels do a plugin's whole row
computation in one call, with the same integer formulas as the array paths they stand for (the
tests compare both: tests/scheduler/test_kernels.py). Full passes over every node stay in NumPy.

Kernels take int64 (and bool) arrays; those named ``sync_*`` / ``set_*`` write the arrays they are
given, every other one leaves its inputs alone and returns fresh values. Quantities must lie below :data:`KERNEL_QUANTITY_BELOW` and free amounts (or room) at
most their divisor (allocatable), as the table keeps them, so that ``100 × quantity`` and the
weighted sums stay within int64; callers take the array path otherwise. Free amounts and room may be
as low as −2^63 (over-committed nodes): they are compared with the request before subtracting.

Compiled code is cached on disk (``cache=True``): in ``__pycache__`` next to this module, else in
Numba's user cache (``~/.cache/numba``), else — neither writable, as in a container with a read-only
root filesystem — in ``<tmp>/colo-numba-cache``; ``NUMBA_CACHE_DIR`` overrides all three. The first
run after an install or a change of this file compiles (3–5 s on 2 cores), later ones load (~0.4 s):
:func:`warm_up` does it, so that a service pays before it reports ready, not in its first cycle
(``make install`` and the scheduler's image call it once).
"""

from __future__ import annotations

import logging
import os
import tempfile
import time

if "NUMBA_CACHE_DIR" not in os.environ and not any(
        os.access(d, os.W_OK) for d in (os.path.join(os.path.dirname(os.path.abspath(__file__)), "__pycache__"),
                                        os.path.dirname(os.path.abspath(__file__)),
                                        os.path.expanduser("~/.cache"), os.path.expanduser("~"))):
    # Numba reads this when it is first imported (just below): without a writable place its cache
    # locator fails at import ("no locator available")
    os.environ["NUMBA_CACHE_DIR"] = os.path.join(tempfile.gettempdir(), "colo-numba-cache")

import numpy as np  # noqa: E402
import numpy.typing as npt  # noqa: E402
from numba import njit  # noqa: E402

IntArray = npt.NDArray[np.int64]
IntpArray = npt.NDArray[np.intp]
BoolArray = npt.NDArray[np.bool_]

log = logging.getLogger("colo.scheduler")

KERNEL_QUANTITY_BELOW = 2**55
"""Quantities (allocatable, free, room, requests) the kernels take: 100 × x + 100 × r stays within
int64 (2^63) for x, r below this."""


@njit(cache=True, nogil=True)
def fit_rows(free: IntArray, rows: IntpArray, fit_request: IntArray) -> BoolArray:  # pragma: no cover - compiled
    """(m,) True where ``free[i, c] >= fit_request[c]`` for every column c of row i = ``rows[k]``
    (NodeResourcesFit; ``fit_request`` holds a large negative number for unrequested columns)."""
    m = rows.shape[0]
    out = np.empty(m, np.bool_)
    ncol = fit_request.shape[0]
    for k in range(m):
        i = rows[k]
        ok = True
        for c in range(ncol):
            if free[i, c] < fit_request[c]:
                ok = False
                break
        out[k] = ok
    return out


@njit(cache=True, nogil=True)
def least_allocated_rows(free: IntArray, divisor: IntArray, rows: IntpArray, cols: IntpArray, weights: IntArray,
                         request: IntArray, den: IntArray) -> IntArray:  # pragma: no cover - compiled
    """(m,) Kubernetes LeastAllocated on rows ``rows``: Σ_j weights[j] × (max(free − request, 0) × 100
    // divisor) over columns ``cols[j]``, then // den (``den`` of length 1: the same on every row,
    else per row). ``divisor`` = allocatable floored at 1."""
    m = rows.shape[0]
    out = np.empty(m, np.int64)
    same = den.shape[0] == 1
    for k in range(m):
        i = rows[k]
        num = 0
        for j in range(cols.shape[0]):
            w = weights[j]
            if w == 0:
                continue
            c = cols[j]
            f = free[i, c]
            r = request[c]
            if f > r:  # compared before subtracting: a free amount near −2^63 minus r would wrap
                num += w * ((f - r) * 100 // divisor[i, c])
        out[k] = num // (den[0] if same else den[i])
    return out


@njit(cache=True, nogil=True)
def under_rows(slack: IntArray, rows: IntpArray, e_cpu: int, e_mem: int) -> BoolArray:  # pragma: no cover
    """(m,) True where ``slack[i, 0] > e_cpu`` and ``slack[i, 1] > e_mem`` (LoadAware's threshold
    test, with 200 × the pod's estimate)."""
    m = rows.shape[0]
    out = np.empty(m, np.bool_)
    for k in range(m):
        i = rows[k]
        out[k] = slack[i, 0] > e_cpu and slack[i, 1] > e_mem
    return out


@njit(cache=True, nogil=True)
def load_score_rows(room: IntArray, divisor: IntArray, rows: IntpArray, e_cpu: int, e_mem: int, w_cpu: int,
                    w_mem: int, weight_sum: int) -> IntArray:  # pragma: no cover - compiled
    """(m,) LoadAware's score on rows ``rows``: (w_cpu × (max(room_cpu − e_cpu, 0) × 100 // d_cpu) +
    w_mem × (max(room_mem − e_mem, 0) × 100 // d_mem)) // weight_sum (REFERENCE.md §4)."""
    m = rows.shape[0]
    out = np.empty(m, np.int64)
    for k in range(m):
        i = rows[k]
        # compared before subtracting: a room near −2^63 minus the estimate would wrap
        x = room[i, 0] - e_cpu if room[i, 0] > e_cpu else 0
        y = room[i, 1] - e_mem if room[i, 1] > e_mem else 0
        out[k] = (w_cpu * (x * 100 // divisor[i, 0]) + w_mem * (y * 100 // divisor[i, 1])) // weight_sum
    return out


@njit(cache=True, nogil=True)
def shifted_scores(masked: IntArray, rows: IntpArray, deltas: IntArray, shift: int) -> tuple[IntArray, int, int]:
    # pragma: no cover - compiled
    """Final scores of a pick whose NormalizeScore parts are one constant but on a few rows: (n,)
    ``masked[i] + shift`` on feasible rows (``masked`` ≥ 0), plus ``deltas[k]`` on row ``rows[k]``
    (repeats add up), −1 on infeasible rows; with the best value (−1 when no row is feasible) and
    how many rows reach it. ``shift`` = Σ weight × constant, ``deltas`` = weight × (score − constant),
    so that the values equal total + Σ weight × normalised score (framework/runner.py)."""
    n = masked.shape[0]
    out = np.empty(n, np.int64)
    for i in range(n):
        v = masked[i]
        out[i] = v + shift if v >= 0 else -1
    for k in range(rows.shape[0]):
        i = rows[k]
        if masked[i] >= 0:
            out[i] += deltas[k]
    best = -1
    count = 0
    for i in range(n):
        v = out[i]
        if v > best:
            best = v
            count = 1
        elif v == best:
            count += 1
    return out, best, count


@njit(cache=True, nogil=True)
def kth_of(scores: IntArray, value: int, k: int) -> int:  # pragma: no cover - compiled
    """The row of the ``k``-th (from 0, ascending rows) entry of ``scores`` equal to ``value``; −1 when
    fewer."""
    for i in range(scores.shape[0]):
        if scores[i] == value:
            if k == 0:
                return i
            k -= 1
    return -1


@njit(cache=True, nogil=True)
def runner_up(scores: IntArray, pick: int) -> int:  # pragma: no cover - compiled
    """The first row of the highest score ≥ 0 other than ``pick`` (NumPy's argmax with ``pick``
    excluded); −1 when no other row scores ≥ 0."""
    best = -1
    row = -1
    for i in range(scores.shape[0]):
        if i != pick and scores[i] > best:
            best = scores[i]
            row = i
    return row


@njit(cache=True, nogil=True)
def spread_rows(raw: IntArray, feasible: BoolArray) -> tuple[IntpArray, IntArray, int]:  # pragma: no cover
    """SelectorSpread's normalisation in one pass: the rows where ``raw`` (pods of the app per node,
    ≥ 0) is not 0, ascending; their scores 100 × (top − min(raw, top)) // top; and top = the largest
    ``raw`` over feasible rows (0 when none: the scores are then meaningless, the caller uses 100)."""
    n = raw.shape[0]
    m = 0
    top = 0
    for i in range(n):
        c = raw[i]
        if c != 0:
            m += 1
            if feasible[i] and c > top:
                top = c
    rows = np.empty(m, np.intp)
    values = np.zeros(m, np.int64)
    k = 0
    for i in range(n):
        c = raw[i]
        if c != 0:
            rows[k] = i
            if top > 0:
                values[k] = 100 * (top - min(c, top)) // top
            k += 1
    return rows, values, top


@njit(cache=True, nogil=True)
def sync_bool_rows(target: BoolArray, rows: IntpArray, values: BoolArray, write: bool) -> bool:  # pragma: no cover
    """Whether ``target[rows]`` differs from ``values``; with ``write`` also ``target[rows] = values``
    (without, it stops at the first difference: the caller copies a shared mask before writing)."""
    changed = False
    for k in range(rows.shape[0]):
        i = rows[k]
        if target[i] != values[k]:
            changed = True
            if not write:
                return True
            target[i] = values[k]
    return changed


@njit(cache=True, nogil=True)
def set_feasible_rows(feasible: BoolArray, rows: IntpArray, values: BoolArray) -> int:  # pragma: no cover
    """``feasible[rows] = values``; returns the change of the number of True entries."""
    delta = 0
    for k in range(rows.shape[0]):
        i = rows[k]
        v = values[k]
        if feasible[i] != v:
            delta += 1 if v else -1
            feasible[i] = v
    return delta


@njit(cache=True, nogil=True)
def set_total_rows(total: IntArray, masked: IntArray, rows: IntpArray, totals: IntArray, feasible: BoolArray,
                   floor: int) -> IntpArray:  # pragma: no cover - compiled
    """``total[rows] = totals`` and ``masked[rows]`` = the total where ``feasible`` else −1; returns the
    positions k whose masked value changed with the old or the new value ≥ ``floor`` (the rows a
    class's score buckets must move; framework/buckets.py)."""
    m = rows.shape[0]
    moved = np.empty(m, np.intp)
    j = 0
    for k in range(m):
        i = rows[k]
        t = totals[k]
        total[i] = t
        new = t if feasible[k] else -1
        old = masked[i]
        if old != new:
            masked[i] = new
            if old >= floor or new >= floor:
                moved[j] = k
                j += 1
    return moved[:j]


@njit(cache=True, nogil=True)
def outside(scores: IntArray, lo: int, hi: int) -> bool:  # pragma: no cover - compiled
    """Whether any of ``scores`` lies outside ``lo``..``hi`` (one pass, stops at the first)."""
    for i in range(scores.shape[0]):
        v = scores[i]
        if v < lo or v > hi:
            return True
    return False


_warm = False


def warm_up() -> None:
    """Compile (or load from the disk cache) every kernel for the types the scheduler passes; once
    per process (later calls return at once). Without it the first decision that needs a kernel
    pays the load (~0.2–0.4 s) or the compile (seconds)."""
    global _warm
    if _warm:
        return
    t0 = time.perf_counter()
    free = np.ones((2, 7), np.int64)
    rows = np.arange(2, dtype=np.intp)
    cols = np.arange(2, dtype=np.intp)
    fit_rows(free, rows, free[0])
    least_allocated_rows(free, free, rows, cols, np.ones(2, np.int64), free[0], np.ones(1, np.int64))
    under_rows(free, rows, 0, 0)
    load_score_rows(free, free, rows, 0, 0, 1, 1, 2)
    scores, best, _ = shifted_scores(free[0], rows, free[0, :2], 0)
    kth_of(scores, best, 0)
    runner_up(scores, 0)
    flags = np.ones(2, np.bool_)
    sync_bool_rows(flags.copy(), rows, flags, True)
    set_feasible_rows(flags.copy(), rows, flags)
    set_total_rows(free[0].copy(), free[1].copy(), rows, free[0, :2], flags, 0)
    spread_rows(free[0], np.ones(7, np.bool_))
    outside(free[0], 0, 100)
    frozen = free[0].copy()
    frozen.setflags(write=False)  # shared constant score vectors are read-only (selectorspread.py)
    outside(frozen, 0, 100)
    _warm = True
    log.info("row kernels ready in %.1f s (compiled on a first run, loaded from the disk cache after)",
             time.perf_counter() - t0)
