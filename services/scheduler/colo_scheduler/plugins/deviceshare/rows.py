"""DeviceShare's GPU bookings as arrays over the scheduler's node-table rows, and its Filter and Score over
rows as compiled loops (Numba): one call per decision or per changed row instead of a Python loop per node.

:class:`GpuRows` mirrors :class:`~.book.NodeGPUs` row by row (the plugin writes a row whenever a node's
bookings or spec change). Shapes (``cap`` ≥ the table's n rows, grown by doubling):

* ``free`` (cap, MAX_GPUS) int64 — milli-GPU free per GPU position (0 where the node has no GPU; negative
  only for an overcommitted assignment adopted from the store);
* ``bits`` (cap, MAX_GPUS) int64 — ``1 << model bit`` of the GPU at each position, 0 where there is none;
* ``model`` (cap,) int64 — model bit of the node's first GPU (FGD's node model);
* ``has`` (cap,) bool — the node has GPUs;
* ``ver`` (cap,) int64 — bumped at every write of the row (the score cache keys on it).

Scores are cached per pod shape (:class:`ScoreCache`): a row's raw score and device are kept while its
``ver`` and free CPU are unchanged and the target workload is the same, so a class the framework recomputes
over all rows (after many placements elsewhere) costs a pass that recomputes only the rows that changed.

A pod's allowed models are a bit mask over the same bits (0: any model). The kernels compute exactly what
:meth:`.plugin.DeviceShare.fit` and :meth:`.plugin.DeviceShare.evaluate` compute per node in Python (those
stay as the reference the tests and the loop oracle compare against).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from numba import njit

from colo_scheduler.plugins.deviceshare.fgdplus import PACKING_WEIGHT, STRANDING_WEIGHT
from colo_scheduler.plugins.deviceshare.frag import delta_one
from colo_scheduler.plugins.deviceshare.policies import MAX_SPEC_CPU, MAX_SPEC_GPU
from colo_scheduler.plugins.deviceshare.state import MAX_GPUS, FloatArray, IntArray, TargetWorkload

BoolArray = npt.NDArray[np.bool_]
IntpArray = npt.NDArray[np.intp]

RAW_PER_GPU = 10_000
"""Raw score units per GPU of node score (10⁻⁴ GPU resolution)."""
NO_FIT = -(2**40)
"""Raw score of a node the pod does not fit (never feasible; normalisation ignores it)."""


class GpuRows:
    """Per-row GPU arrays (module doc); rows are those of the scheduler's node table."""

    def __init__(self, capacity: int = 64) -> None:
        self.free = np.zeros((capacity, MAX_GPUS), np.int64)
        self.bits = np.zeros((capacity, MAX_GPUS), np.int64)
        self.model = np.zeros(capacity, np.int64)
        self.has = np.zeros(capacity, np.bool_)
        self.ver = np.zeros(capacity, np.int64)

    def ensure(self, n: int) -> None:
        """Room for ``n`` rows (new rows: no GPUs)."""
        cap = len(self.has)
        if n <= cap:
            return
        while cap < n:
            cap *= 2
        for name in ("free", "bits", "model", "has", "ver"):
            old = getattr(self, name)
            new = np.zeros((cap,) + old.shape[1:], old.dtype)
            new[: len(old)] = old
            setattr(self, name, new)

    def write(self, i: int, free: IntArray | None, bits: list[int]) -> None:
        """Row ``i`` from a node's free milli per position (None: no GPUs) and model bits per position."""
        self.ensure(i + 1)
        self.ver[i] += 1
        self.free[i] = 0
        self.bits[i] = 0
        if free is None or not bits:
            self.has[i] = False
            self.model[i] = 0
            return
        self.has[i] = True
        self.free[i] = free
        self.bits[i, : len(bits)] = [1 << b for b in bits]
        self.model[i] = bits[0]


@njit(cache=True, nogil=True)
def fit_rows(rows: IntpArray, free: IntArray, bits: IntArray, count: int, milli: int,
             mask: int) -> BoolArray:  # pragma: no cover - compiled
    """(len(rows),) True where ``count`` GPUs of an allowed model (``mask``; 0 any) have ``milli`` free."""
    out = np.zeros(rows.shape[0], np.bool_)
    for k in range(rows.shape[0]):
        i = rows[k]
        c = 0
        for d in range(free.shape[1]):
            b = bits[i, d]
            if b != 0 and (mask == 0 or (b & mask) != 0) and free[i, d] >= milli:
                c += 1
        out[k] = c >= count
    return out


class ScoreCache:
    """Raw scores and devices per pod shape (count, milli, model mask, CPU) and policy and row, valid while the row's
    ``ver`` and free CPU are those recorded (arrays (cap,); ``ver`` −1: not computed). :meth:`clear` when
    the target workload changes; at most :data:`SHAPES` shapes are kept (then it starts afresh)."""

    SHAPES = 256

    def __init__(self) -> None:
        self.shapes: dict[tuple[int, int, int, int, bool], tuple[IntArray, IntArray, IntArray, IntArray]] = {}

    def clear(self) -> None:
        """Forget every shape."""
        self.shapes.clear()

    def arrays(self, key: tuple[int, int, int, int, bool], cap: int) -> tuple[IntArray, IntArray, IntArray, IntArray]:
        """(raw, device, ver, cpu) of shape ``key`` for ``cap`` rows (fresh when absent or too short)."""
        got = self.shapes.get(key)
        if got is None or len(got[0]) < cap:
            if len(self.shapes) >= self.SHAPES:
                self.shapes.clear()
            got = self.shapes[key] = (np.zeros(cap, np.int64), np.full(cap, -1, np.int64),
                                      np.full(cap, -1, np.int64), np.zeros(cap, np.int64))
        return got


@njit(cache=True, nogil=True)
def score_rows(rows: IntpArray, free: IntArray, bits: IntArray, model: IntArray, has: BoolArray, ver: IntArray,
               cpu_free: IntArray, count: int, milli: int, mask: int, p_cpu: int,
               t_cpu: IntArray, t_milli: IntArray, t_num: IntArray, t_models: IntArray, t_prob: FloatArray,
               ratio: float, ours: bool, c_raw: IntArray, c_dev: IntArray, c_ver: IntArray, c_cpu: IntArray,
               ) -> tuple[IntArray, IntArray]:  # pragma: no cover - compiled
    """(raw scores, device) over ``rows`` for a pod of ``count`` GPUs of ``milli`` (count 0: a CPU pod)
    with ``p_cpu`` milli-cores: raw = round(s · RAW_PER_GPU) of the policy's node score s in GPUs (``ours``:
    −ΔF/1000 − α ΔS/1000 − λ L, else FGD's −ΔF/1000), :data:`NO_FIT` where the GPUs do not fit; a CPU pod
    scores 0 on a node without GPUs (it strands no GPU there). device: the position a GPU-share pod takes,
    else −1. ``cpu_free`` (n,) milli-cores per row; target arrays (K,); ``ratio`` r̄ (milli-cores per
    milli-GPU, 0: no stranding term); ``c_*`` the shape's :class:`ScoreCache` arrays, read and written."""
    k_rows = rows.shape[0]
    raw = np.empty(k_rows, np.int64)
    dev = np.full(k_rows, -1, np.int64)
    row = np.zeros(free.shape[1], np.int64)
    p_gpu = count * milli
    for k in range(k_rows):
        i = rows[k]
        if not has[i]:
            raw[k] = 0 if count == 0 else NO_FIT
            continue
        if c_ver[i] == ver[i] and c_cpu[i] == cpu_free[i]:
            raw[k] = c_raw[i]
            dev[k] = c_dev[i]
            continue
        c_ver[i] = ver[i]
        c_cpu[i] = cpu_free[i]
        c_dev[i] = -1
        c = 0
        g = 0
        for d in range(free.shape[1]):
            b = bits[i, d]
            f = free[i, d]
            if b != 0 and (mask == 0 or (b & mask) != 0):
                v = f if f > 0 else 0
                row[d] = v
                g += v
                if f >= milli:
                    c += 1
            else:
                row[d] = 0
        if c < count:
            raw[k] = c_raw[i] = NO_FIT
            continue
        cpu = cpu_free[i]
        delta, got = delta_one(row, cpu if cpu > 0 else 0, model[i], p_cpu, count, milli,
                               t_cpu, t_milli, t_num, t_models, t_prob)
        if ours:
            ds = 0.0
            if ratio > 0:
                ds = (max(0.0, (g - p_gpu) - (cpu - p_cpu) / ratio) - max(0.0, g - cpu / ratio))
            left = 0.5 * (cpu - p_cpu) / MAX_SPEC_CPU + 0.5 * (g - p_gpu) / MAX_SPEC_GPU
            s = -delta / 1000.0 - STRANDING_WEIGHT * ds / 1000.0 - PACKING_WEIGHT * left
        else:
            s = -delta / 1000.0
        raw[k] = c_raw[i] = round(s * RAW_PER_GPU)
        dev[k] = c_dev[i] = got
    return raw, dev


def score_target(rows: IntpArray, gpu: GpuRows, cpu_free: IntArray, count: int, milli: int, mask: int,
                 p_cpu: int, target: TargetWorkload, ratio: float, ours: bool, cache: ScoreCache
                 ) -> tuple[IntArray, IntArray]:
    """:func:`score_rows` against ``target`` (its arrays unpacked), through ``cache`` (built for this
    target and policy)."""
    t = target
    c = cache.arrays((count, milli, mask, p_cpu, ours), len(gpu.has))
    return score_rows(rows, gpu.free, gpu.bits, gpu.model, gpu.has, gpu.ver, cpu_free, count, milli, mask, p_cpu,
                      t.cpu, t.gpu_milli, t.num_gpu, t.models, t.prob, ratio, ours, c[0], c[1], c[2], c[3])


@njit(cache=True, nogil=True)
def min_max(raw: IntArray, feasible: BoolArray) -> tuple[IntpArray, IntArray] | None:  # pragma: no cover
    """kube-scheduler's min-max normalisation, sparse: ``100 · (raw − min) // (max − min)`` with min and
    max over the feasible rows, as (rows (k,) ascending, values (k,)) of the rows where it is above 0 (every
    other row scores 0); None when no row is feasible or all feasible rows have one raw score."""
    n = raw.shape[0]
    lo = 0
    hi = 0
    first = True
    for i in range(n):
        if feasible[i]:
            v = raw[i]
            if first:
                lo = hi = v
                first = False
            elif v < lo:
                lo = v
            elif v > hi:
                hi = v
    if first or hi == lo:
        return None
    rows = np.empty(n, np.intp)
    values = np.empty(n, np.int64)
    k = 0
    span = hi - lo
    for i in range(n):
        if feasible[i]:
            v = (raw[i] - lo) * 100 // span
            if v > 0:
                rows[k] = i
                values[k] = v
                k += 1
    return rows[:k].copy(), values[:k].copy()


_warm = False


def warm_up() -> None:
    """Compile (or load from Numba's cache) the kernels on a one-row table, once per process."""
    global _warm
    if _warm:
        return
    _warm = True
    gpu = GpuRows(1)
    gpu.write(0, np.full(MAX_GPUS, 1000, np.int64), [0])
    rows = np.zeros(1, np.intp)
    fit_rows(rows, gpu.free, gpu.bits, 1, 500, 0)
    min_max(np.zeros(1, np.int64), np.ones(1, np.bool_))
    t = TargetWorkload.from_counts({(1000, 1000, 1, 0): 1.0})
    score_target(rows, gpu, np.array([4000], np.int64), 1, 500, 0, 1000, t, 1.0, True, ScoreCache())
