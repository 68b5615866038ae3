"""Node-scoring policies for GPU pods: the FGD paper's baselines, FGD, and the selection of a node.

Every policy maps ``(table, pod, ctx)`` to ``(scores, device)``: ``scores`` (n,) float64, higher is better,
−inf where the pod does not fit; ``device`` (n,) int64, the device a GPU-share pod would take on each node
(−1: the default choice of :func:`~.state.pick_devices`). :func:`select_node` takes the best node.

The baselines follow the score plugins of the authors' simulator (``hkust-adsl/kubernetes-scheduler-simulator``,
``pkg/simulator/plugin/*_score.go``), including their integer 0–100 scale (kube-scheduler's
``MaxNodeScore``), whose truncation makes ties that the random tie-break then resolves:

* **Random** — any fitting node, any fitting device.
* **DotProd** (Tetris) — least dot product of the node's free (cpu, total GPU) and the pod's request, both
  divided by the largest node (128 cores, 8 GPUs).
* **GpuClustering** — nodes already holding pods of the same GPU kind (share, 1, 2, 4, 8 GPUs) first, then
  idle nodes, then others; within a class, less free GPU first.
* **GpuPacking** — shared devices first, then partly used nodes, then idle nodes.
* **BestFit** — least free (cpu, GPU) left after placing, each divided by the largest node, weights ½, ½.
* **FGD** — least increase of the fragmentation measure (:mod:`.frag`), on the simulator's scale
  ``int(100 · sigmoid(−ΔF / 1000))``; **FGD-exact** is the same measure unrounded (−ΔF).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from colo_scheduler.plugins.deviceshare.frag import DeltaCache, fragment_deltas
from colo_scheduler.plugins.deviceshare.state import (
    GPU_MILLI,
    MAX_GPUS,
    FloatArray,
    GpuNodeTable,
    IntArray,
    PodShape,
    TargetWorkload,
    fits,
)

MAX_SPEC_CPU = 128_000
"""milli-cores of the largest node, the normaliser of DotProd and BestFit (authors' ``MaxSpecCpu``)."""
MAX_SPEC_GPU = 8_000
"""milli-GPU of the largest node (authors' ``MaxSpecGpu``)."""
MAX_NODE_SCORE = 100
"""kube-scheduler's ``framework.MaxNodeScore``."""


@dataclass
class PolicyContext:
    """What a policy may keep between pods of one run on an ``n``-node table: a seeded ``rng``, the
    ``target`` workload, a ΔF ``cache`` and ``memo``, values derived once from the target."""

    rng: np.random.Generator
    target: TargetWorkload
    n: int
    cache: DeltaCache = field(init=False)
    memo: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.cache = DeltaCache(self.n, self.target)


Scores = tuple[FloatArray, IntArray]
Policy = Callable[[GpuNodeTable, PodShape, PolicyContext], Scores]


def _masked(table: GpuNodeTable, pod: PodShape, raw: FloatArray) -> Scores:
    ok = fits(table, pod)
    return np.where(ok, raw, -np.inf), np.full(raw.shape[0], -1, dtype=np.int64)


def score_random(table: GpuNodeTable, pod: PodShape, ctx: PolicyContext) -> Scores:
    """Uniform scores; a GPU-share pod takes a random fitting device."""
    n = table.gpu_free.shape[0]
    scores, dev = _masked(table, pod, np.asarray(ctx.rng.random(n), dtype=np.float64))
    if pod.is_share:
        keys = np.where(table.gpu_free >= pod.gpu_milli, ctx.rng.random(table.gpu_free.shape), -1.0)
        dev = np.argmax(keys, axis=1).astype(np.int64)
    return scores, dev


def score_dot_product(table: GpuNodeTable, pod: PodShape, ctx: PolicyContext) -> Scores:
    """``int(100 · (1 − (ĉ_free·ĉ_req + ĝ_free·ĝ_req) / 2))``, ^ = divided by MAX_SPEC_*."""
    gpu_left = table.gpu_free.sum(axis=1)
    dot = (table.cpu_free / MAX_SPEC_CPU * (pod.cpu / MAX_SPEC_CPU)
           + gpu_left / MAX_SPEC_GPU * (pod.gpu_request / MAX_SPEC_GPU)) / 2
    return _masked(table, pod, np.trunc(MAX_NODE_SCORE * (1 - dot)))


def score_gpu_clustering(table: GpuNodeTable, pod: PodShape, ctx: PolicyContext) -> Scores:
    """Class offset (75 only this kind, 50 this kind among others, 25 idle, 0 other kinds) plus
    ``25 · (8000 − free GPU) // 8000``; CPU-only pods score 0 everywhere."""
    n = table.gpu_free.shape[0]
    if pod.num_gpu == 0:
        return _masked(table, pod, np.zeros(n))
    kind = 0 if pod.is_share else pod.num_gpu
    kinds = (table.affinity > 0).sum(axis=1)
    same = table.affinity[:, kind] > 0
    offset = np.where(same, np.where(kinds == 1, 75, 50), np.where(kinds == 0, 25, 0))
    fill = (MAX_NODE_SCORE // 4) * (MAX_SPEC_GPU - table.gpu_free.sum(axis=1)) // MAX_SPEC_GPU
    return _masked(table, pod, (offset + fill).astype(np.float64))


def score_gpu_packing(table: GpuNodeTable, pod: PodShape, ctx: PolicyContext) -> Scores:
    """Shared device: ``max(100 − free% of it / 10, 50)``; fully free devices on a used node:
    ``max(50 − devices taken, 33)``; idle node: ``max(33 − its devices, its devices)``; CPU-only pods 0."""
    n = table.gpu_free.shape[0]
    if pod.num_gpu == 0:
        return _masked(table, pod, np.zeros(n))
    present = np.arange(MAX_GPUS)[None, :] < table.gpu_count[:, None]
    full = ((table.gpu_free == GPU_MILLI) & present).sum(axis=1)
    idle = full == table.gpu_count
    sorted_free = np.sort(np.where(table.gpu_free >= pod.gpu_milli, table.gpu_free, GPU_MILLI + 1), axis=1)
    taken = sorted_free[:, :pod.num_gpu]
    full_taken = (taken == GPU_MILLI).sum(axis=1)
    free_pct = (np.where(taken <= GPU_MILLI, taken, 0) * 100 // GPU_MILLI).sum(axis=1)
    raw = np.where(idle, np.maximum(MAX_NODE_SCORE // 3 - full, full),
                   np.where(full_taken > 0, np.maximum(MAX_NODE_SCORE // 2 - full_taken, MAX_NODE_SCORE // 3),
                            np.maximum(MAX_NODE_SCORE - free_pct // 10, MAX_NODE_SCORE // 2)))
    return _masked(table, pod, raw.astype(np.float64))


def score_best_fit(table: GpuNodeTable, pod: PodShape, ctx: PolicyContext) -> Scores:
    """``int(100 · (1 − ½ (cpu_free − cpu)/128000 − ½ (gpu_free − gpu)/8000))``."""
    left = (0.5 * (table.cpu_free - pod.cpu) / MAX_SPEC_CPU
            + 0.5 * (table.gpu_free.sum(axis=1) - pod.gpu_request) / MAX_SPEC_GPU)
    return _masked(table, pod, np.trunc(MAX_NODE_SCORE * (1 - left)))


def score_fgd(table: GpuNodeTable, pod: PodShape, ctx: PolicyContext) -> Scores:
    """FGD on the simulator's scale: ``int(100 · sigmoid(−ΔF / 1000))`` (ΔF in milli-GPU)."""
    delta, dev = fragment_deltas(table, pod, ctx.target, ctx.cache)
    with np.errstate(over="ignore"):
        scores = np.trunc(MAX_NODE_SCORE / (1 + np.exp(delta / 1000)))
    return np.where(np.isfinite(delta), scores, -np.inf), dev


def score_fgd_exact(table: GpuNodeTable, pod: PodShape, ctx: PolicyContext) -> Scores:
    """FGD unrounded: −ΔF (milli-GPU)."""
    delta, dev = fragment_deltas(table, pod, ctx.target, ctx.cache)
    return -delta, dev


def select_node(scores: FloatArray, rng: np.random.Generator, ties: str = "first") -> int:
    """Index of a best-scoring node; −1 when no node fits (all −inf). ``ties``: ``"first"`` takes the first
    listed of equal nodes (what reproduces the authors' published figures, docs/gpu.md), ``"random"`` one
    uniformly at random (kube-scheduler's ``selectHost``). Raises ValueError on another ``ties``."""
    best = scores.max() if scores.shape[0] else -np.inf
    if not np.isfinite(best):
        return -1
    if ties == "first":
        return int(np.argmax(scores))
    if ties != "random":
        raise ValueError(f"ties must be 'first' or 'random', got {ties!r}")
    ties_at = np.flatnonzero(scores == best)
    return int(ties_at[rng.integers(ties_at.shape[0])]) if ties_at.shape[0] > 1 else int(ties_at[0])


BASELINES: dict[str, Policy] = {
    "Random": score_random,
    "DotProd": score_dot_product,
    "GpuClustering": score_gpu_clustering,
    "GpuPacking": score_gpu_packing,
    "BestFit": score_best_fit,
    "FGD": score_fgd,
    "FGD-exact": score_fgd_exact,
}
"""The paper's policies by the names its figures use (plus FGD-exact)."""
