"""Our policy ("Ours", FGD+): FGD's fragmentation gradient plus the CPU stranding it does not see, packing
as a tie-break.

FGD's measure F (:mod:`.frag`) asks whether the *next* pod of each target shape fits a node. It misses the
slower loss a node suffers when its CPU runs out before its GPUs do: a CPU-only pod of 32 cores on an
8-GPU node with 96 cores changes no shape's fit (ΔF = 0), yet it leaves CPU for five, not eight, of the
trace's typical 11-core GPU pods. We count that as *CPU-stranded GPU*,

    S = max(0, G_free − CPU_free / r̄)        (milli-GPU),

the free GPU that the node's remaining CPU cannot feed at the target workload's CPU per GPU
r̄ = Σ_s p_s c_s / Σ_s p_s k_s m_s over its GPU shapes (milli-cores per milli-GPU; 11.6 cores per GPU for
the gpu-v2023 default list). The score (higher is better) of a node is

    −ΔF / 1000 − α · ΔS / 1000 − λ · L,

ΔF and ΔS the increases if the pod landed there (in GPUs after the division), L the BestFit leftover after
placing (½ free CPU / 128 cores + ½ free GPU / 8 GPUs, in [0, 1]). α = 0.3 and λ = 0.1 were chosen on the
bench (``bench/gpu_fragmentation.py``; docs/gpu.md has the sweep): α from 0.1 to 1 all beat FGD, λ puts
equal-gradient nodes in packing order, which FGD leaves to the tie-break.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from colo_scheduler.plugins.deviceshare.frag import fragment_deltas
from colo_scheduler.plugins.deviceshare.policies import (
    BASELINES,
    MAX_SPEC_CPU,
    MAX_SPEC_GPU,
    Policy,
    PolicyContext,
    Scores,
)
from colo_scheduler.plugins.deviceshare.state import (
    FloatArray,
    GpuNodeTable,
    IntArray,
    PodShape,
    TargetWorkload,
)

STRANDING_WEIGHT = 0.3
"""α: GPUs of fragmentation one CPU-stranded GPU is worth."""
PACKING_WEIGHT = 0.1
"""λ: GPUs of fragmentation the whole BestFit leftover range [0, 1] is worth."""


def cpu_per_gpu(target: TargetWorkload) -> float:
    """r̄, milli-cores per milli-GPU of the target's GPU shapes; 0 when it has none (no stranding term)."""
    gpu = target.prob * target.gpu_milli * target.num_gpu
    total = float(gpu.sum())
    return float((target.prob * target.cpu)[gpu > 0].sum()) / total if total > 0 else 0.0


def stranded_gpu(gpu_free: np.ndarray, cpu_free: np.ndarray, ratio: float) -> np.ndarray:
    """S = max(0, gpu_free − cpu_free / ratio), milli-GPU, elementwise over (n,) arrays; 0 for ratio 0."""
    if ratio <= 0:
        return np.zeros(np.shape(gpu_free))
    return np.maximum(0.0, gpu_free - cpu_free / ratio)


@njit(cache=True, nogil=True)
def _combine(delta: FloatArray, gpu_free: IntArray, cpu_free: IntArray, p_cpu: int, p_gpu: int, ratio: float,
             alpha: float, lam: float) -> FloatArray:  # pragma: no cover - compiled
    """(n,) −ΔF/1000 − α ΔS/1000 − λ L; −inf where ``delta`` is +inf (no fit)."""
    n = delta.shape[0]
    out = np.full(n, -np.inf)
    for i in range(n):
        if not np.isfinite(delta[i]):
            continue
        g = 0
        for d in range(gpu_free.shape[1]):
            g += gpu_free[i, d]
        ds = 0.0
        if ratio > 0:
            ds = (max(0.0, (g - p_gpu) - (cpu_free[i] - p_cpu) / ratio)
                  - max(0.0, g - cpu_free[i] / ratio))
        left = 0.5 * (cpu_free[i] - p_cpu) / MAX_SPEC_CPU + 0.5 * (g - p_gpu) / MAX_SPEC_GPU
        out[i] = -delta[i] / 1000.0 - alpha * ds / 1000.0 - lam * left
    return out


def score_ours(table: GpuNodeTable, pod: PodShape, ctx: PolicyContext) -> Scores:
    """−ΔF/1000 − α ΔS/1000 − λ L per node (module docstring); −inf where the pod does not fit."""
    delta, dev = fragment_deltas(table, pod, ctx.target, ctx.cache)
    ratio = ctx.memo.get("cpu_per_gpu")
    if ratio is None:
        ratio = ctx.memo["cpu_per_gpu"] = cpu_per_gpu(ctx.target)
    return _combine(delta, table.gpu_free, table.cpu_free, pod.cpu, pod.gpu_request, ratio,
                    STRANDING_WEIGHT, PACKING_WEIGHT), dev


POLICIES: dict[str, Policy] = {**BASELINES, "Ours": score_ours}
"""Every policy the bench runs, by name."""


def warm_up() -> None:
    """Compile (or load from Numba's cache) the kernels on a one-node table."""
    table = GpuNodeTable.from_nodes([(1000, 1000, 1, "")])
    pod = PodShape(100, 100, 1, 500)
    ctx = PolicyContext(np.random.default_rng(0), TargetWorkload.from_pods([pod]), 1)
    score_ours(table, pod, ctx)
