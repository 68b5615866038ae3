"""FGD's node fragmentation measure against a target workload, and its change when a pod lands (Numba).

Definition (Weng et al., ATC'23, §4; the authors' ``pkg/utils/frag.go``, ``NodeGpuShareFragAmountScore``):
for a node with free devices f_1..f_G (milli-GPU), free CPU c and model μ, and a target shape s (cpu c_s,
num_gpu k_s devices of m_s milli each, allowed models M_s) of probability p_s,

* F_s = Σ_{g: f_g < m_s} f_g when s fits the node (μ ∈ M_s, c ≥ c_s and at least k_s devices have
  f_g ≥ m_s) — the free GPU on devices too small for s;
* F_s = Σ_g f_g otherwise (all free GPU is a fragment to s); also for CPU-only shapes (m_s = 0), whose
  F_s is the whole free GPU as in the authors' code.

The node's fragmentation is F = Σ_s p_s F_s, in milli-GPU. Memory plays no part (as in the paper).
FGD scores a node by −ΔF, the increase of F if the pod were placed there, choosing a GPU-share pod's device
to make ΔF least.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from colo_scheduler.plugins.deviceshare.state import (
    FloatArray,
    GpuNodeTable,
    IntArray,
    PodShape,
    TargetWorkload,
)


@njit(cache=True, nogil=True)
def frag_one(row: IntArray, cpu: int, model: int, t_cpu: IntArray, t_milli: IntArray, t_num: IntArray,
             t_models: IntArray, t_prob: FloatArray) -> float:  # pragma: no cover - compiled
    """F of one node: ``row`` (MAX_GPUS,) free milli per device, ``cpu`` free milli-cores, ``model`` id;
    target arrays (K,). Returns milli-GPU."""
    total = 0
    for g in range(row.shape[0]):
        total += row[g]
    frag = 0.0
    for s in range(t_cpu.shape[0]):
        m = t_milli[s]
        if m == 0 or (t_models[s] != 0 and ((1 << model) & t_models[s]) == 0) or cpu < t_cpu[s]:
            frag += t_prob[s] * total
            continue
        cnt = 0
        below = 0
        for g in range(row.shape[0]):
            if row[g] >= m:
                cnt += 1
            else:
                below += row[g]
        frag += t_prob[s] * (below if cnt >= t_num[s] else total)
    return frag


@njit(cache=True, nogil=True)
def frag_rows(gpu_free: IntArray, cpu_free: IntArray, model: IntArray, t_cpu: IntArray, t_milli: IntArray,
              t_num: IntArray, t_models: IntArray, t_prob: FloatArray) -> FloatArray:  # pragma: no cover
    """(n,) F of every node (milli-GPU)."""
    n = gpu_free.shape[0]
    out = np.empty(n, np.float64)
    for i in range(n):
        out[i] = frag_one(gpu_free[i], cpu_free[i], model[i], t_cpu, t_milli, t_num, t_models, t_prob)
    return out


@njit(cache=True, nogil=True)
def delta_one(row: IntArray, cpu: int, model: int, p_cpu: int, p_num: int, p_milli: int,
              t_cpu: IntArray, t_milli: IntArray, t_num: IntArray, t_models: IntArray,
              t_prob: FloatArray) -> tuple[float, int]:  # pragma: no cover - compiled
    """(F after − F before, device) for a pod that fits this node; device is the chosen one for a GPU-share
    pod (least F after, lowest index on ties), −1 otherwise (whole GPUs take the lowest fully free ones)."""
    before = frag_one(row, cpu, model, t_cpu, t_milli, t_num, t_models, t_prob)
    work = row.copy()
    if p_num == 1 and p_milli < 1000:
        best = np.inf
        dev = -1
        for g in range(row.shape[0]):
            if row[g] < p_milli:
                continue
            seen = False  # a device as free as an earlier one gives the same F: the earlier one wins ties
            for h in range(g):
                if row[h] == row[g]:
                    seen = True
                    break
            if seen:
                continue
            work[g] = row[g] - p_milli
            after = frag_one(work, cpu - p_cpu, model, t_cpu, t_milli, t_num, t_models, t_prob)
            work[g] = row[g]
            if after < best:
                best = after
                dev = g
        return best - before, dev
    left = p_num
    for g in range(row.shape[0]):
        if left == 0:
            break
        if row[g] >= p_milli and p_milli > 0:
            work[g] -= p_milli
            left -= 1
    after = frag_one(work, cpu - p_cpu, model, t_cpu, t_milli, t_num, t_models, t_prob)
    return after - before, -1


@njit(cache=True, nogil=True)
def delta_rows(gpu_free: IntArray, cpu_free: IntArray, mem_free: IntArray, model: IntArray, version: IntArray,
               p_cpu: int, p_mem: int, p_num: int, p_milli: int, p_models: int,
               t_cpu: IntArray, t_milli: IntArray, t_num: IntArray, t_models: IntArray, t_prob: FloatArray,
               cache_delta: FloatArray, cache_dev: IntArray, cache_ver: IntArray
               ) -> tuple[FloatArray, IntArray]:  # pragma: no cover - compiled
    """(n,) ΔF (+inf where the pod does not fit) and (n,) device, reusing the caches (n,) — one column of a
    :class:`DeltaCache` — for rows whose ``version`` has not changed since they were computed."""
    n = gpu_free.shape[0]
    out = np.full(n, np.inf)
    dev = np.full(n, -1, np.int64)
    for i in range(n):
        if cpu_free[i] < p_cpu or mem_free[i] < p_mem:
            continue
        if p_models != 0 and ((1 << model[i]) & p_models) == 0:
            continue
        if p_num > 0:
            cnt = 0
            for g in range(gpu_free.shape[1]):
                if gpu_free[i, g] >= p_milli:
                    cnt += 1
            if cnt < p_num:
                continue
        if cache_ver[i] == version[i]:
            out[i] = cache_delta[i]
            dev[i] = cache_dev[i]
            continue
        d, g = delta_one(gpu_free[i], cpu_free[i], model[i], p_cpu, p_num, p_milli,
                         t_cpu, t_milli, t_num, t_models, t_prob)
        out[i] = d
        dev[i] = g
        cache_delta[i] = d
        cache_dev[i] = g
        cache_ver[i] = version[i]
    return out, dev


def node_fragmentation(table: GpuNodeTable, target: TargetWorkload) -> FloatArray:
    """(n,) fragmentation F of every node against ``target``, in milli-GPU (module docstring)."""
    return frag_rows(table.gpu_free, table.cpu_free, table.model, target.cpu, target.gpu_milli,
                     target.num_gpu, target.models, target.prob)


class DeltaCache:
    """ΔF per (node, pod shape), valid while the node's ``version`` is unchanged — a pod changes one node, so
    a shape seen before costs a recomputation on that node only. Arrays (n, S) grow by shape as needed."""

    def __init__(self, n: int, target: TargetWorkload) -> None:
        self.target = target
        self.n = n
        self.index: dict[tuple[int, int, int, int, int], int] = {}
        self.delta = np.zeros((0, n))
        self.dev = np.zeros((0, n), dtype=np.int64)
        self.ver = np.zeros((0, n), dtype=np.int64)

    def column(self, pod: PodShape) -> int:
        """Row of the cache arrays for this pod's shape (memory included: it decides fit)."""
        key = (pod.cpu, pod.mem, pod.num_gpu, pod.gpu_milli, pod.models)
        col = self.index.get(key)
        if col is None:
            col = len(self.index)
            self.index[key] = col
            self.delta = np.vstack([self.delta, np.zeros((1, self.n))])
            self.dev = np.vstack([self.dev, np.full((1, self.n), -1, dtype=np.int64)])
            self.ver = np.vstack([self.ver, np.full((1, self.n), -1, dtype=np.int64)])
        return col


def fragment_deltas(table: GpuNodeTable, pod: PodShape, target: TargetWorkload,
                    cache: DeltaCache | None = None) -> tuple[FloatArray, IntArray]:
    """ΔF (n,) in milli-GPU if ``pod`` were placed on each node (+inf where it does not fit) and the device
    chosen for a GPU-share pod (n,) (−1 otherwise). With ``cache`` (built for this table and target),
    unchanged rows are not recomputed."""
    if cache is None:
        cache = DeltaCache(table.gpu_free.shape[0], target)
    elif cache.target is not target:
        raise ValueError("DeltaCache was built for another target workload")
    col = cache.column(pod)
    t = target
    return delta_rows(table.gpu_free, table.cpu_free, table.mem_free, table.model, table.version,
                      pod.cpu, pod.mem, pod.num_gpu, pod.gpu_milli, pod.models,
                      t.cpu, t.gpu_milli, t.num_gpu, t.models, t.prob,
                      cache.delta[col], cache.dev[col], cache.ver[col])

