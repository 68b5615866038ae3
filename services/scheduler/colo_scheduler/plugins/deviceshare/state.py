"""GPU node table, pod shapes and the target workload — the data DeviceShare's kernels work on.

Units: CPU in milli-cores, memory in MiB, GPU in milli-GPU per device (1000 = one whole GPU). A node has at
most :data:`MAX_GPUS` devices; the columns of absent devices hold 0 free milli, which no formula here
distinguishes from a fully used device (0 free fits no GPU request and adds nothing to any sum).
GPU models are small integers (:attr:`GpuNodeTable.model`); a pod's allowed models are a bit mask over them
(bit ``1 << model``), 0 meaning any model.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

MAX_GPUS = 8
"""Devices per node the table holds (the largest nodes of Alibaba's gpu-v2023 trace have 8)."""

GPU_MILLI = 1000
"""Milli-GPU of one whole device."""

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@dataclass
class GpuNodeTable:
    """Free resources of n GPU nodes; the arrays are written in place by :func:`allocate`.

    Shapes: ``gpu_free`` (n, MAX_GPUS) milli-GPU free per device; ``gpu_count`` (n,) devices present;
    ``cpu_free`` (n,) milli-cores; ``mem_free`` (n,) MiB; ``model`` (n,) GPU model id (index into
    ``model_names``); ``affinity`` (n, MAX_GPUS + 1) GPU pods placed per kind (column 0 GPU-share pods,
    column k pods of k whole GPUs), which GpuClustering reads; ``version`` (n,) bumped on every change so that
    score caches know which rows to recompute.
    """

    gpu_free: IntArray
    gpu_count: IntArray
    cpu_free: IntArray
    mem_free: IntArray
    model: IntArray
    affinity: IntArray
    version: IntArray
    model_names: tuple[str, ...]

    @classmethod
    def from_nodes(cls, nodes: Sequence[tuple[int, int, int, str]]) -> GpuNodeTable:
        """Table of empty nodes from ``(cpu_milli, memory_mib, gpu_count, model)`` rows.

        Raises ValueError listing every row with a negative quantity or more than MAX_GPUS devices.
        """
        problems = [f"nodes[{i}]: {row}" for i, row in enumerate(nodes)
                    if min(row[0], row[1], row[2]) < 0 or row[2] > MAX_GPUS]
        if problems:
            raise ValueError("bad GPU nodes (negative quantity or more than "
                             f"{MAX_GPUS} GPUs): " + "; ".join(problems))
        names = tuple(sorted({row[3] for row in nodes}))
        n = len(nodes)
        count = np.array([row[2] for row in nodes], dtype=np.int64)
        gpu_free = np.zeros((n, MAX_GPUS), dtype=np.int64)
        gpu_free[np.arange(MAX_GPUS)[None, :] < count[:, None]] = GPU_MILLI
        return cls(gpu_free=gpu_free, gpu_count=count,
                   cpu_free=np.array([row[0] for row in nodes], dtype=np.int64),
                   mem_free=np.array([row[1] for row in nodes], dtype=np.int64),
                   model=np.array([names.index(row[3]) for row in nodes], dtype=np.int64),
                   affinity=np.zeros((n, MAX_GPUS + 1), dtype=np.int64),
                   version=np.zeros(n, dtype=np.int64), model_names=names)

    def copy(self) -> GpuNodeTable:
        """Deep copy (every array copied)."""
        return GpuNodeTable(self.gpu_free.copy(), self.gpu_count.copy(), self.cpu_free.copy(),
                            self.mem_free.copy(), self.model.copy(), self.affinity.copy(),
                            self.version.copy(), self.model_names)

    def models_mask(self, spec: str) -> int:
        """Bit mask of the models named in ``spec`` (``|``-separated, the trace's ``gpu_spec``); 0 = any.

        A spec naming no model of this table gives a mask no node matches (bit 62)."""
        names = [s for s in spec.split("|") if s]
        if not names:
            return 0
        mask = 0
        for name in names:
            if name in self.model_names:
                mask |= 1 << self.model_names.index(name)
        return mask or 1 << 62


@dataclass(frozen=True)
class PodShape:
    """A pod's requests: ``cpu`` milli-cores, ``mem`` MiB, ``num_gpu`` devices of ``gpu_milli`` milli-GPU
    each (a GPU-share pod has ``num_gpu == 1`` and ``gpu_milli < 1000``; a CPU-only pod ``num_gpu == 0``),
    ``models`` allowed-model mask (0 = any)."""

    cpu: int
    mem: int
    num_gpu: int
    gpu_milli: int
    models: int = 0

    @property
    def gpu_request(self) -> int:
        """Total milli-GPU requested."""
        return self.num_gpu * self.gpu_milli

    @property
    def is_share(self) -> bool:
        """True for a GPU-share pod (a fraction of one device)."""
        return self.num_gpu == 1 and self.gpu_milli < GPU_MILLI


@dataclass(frozen=True)
class TargetWorkload:
    """FGD's target workload: K pod shapes and their probabilities (arrays of shape (K,)).

    ``cpu`` milli-cores, ``gpu_milli`` per device (0 for CPU-only shapes), ``num_gpu`` devices, ``models``
    allowed-model masks, ``prob`` probabilities summing to 1."""

    cpu: IntArray
    gpu_milli: IntArray
    num_gpu: IntArray
    models: IntArray
    prob: FloatArray

    @classmethod
    def from_pods(cls, pods: Iterable[PodShape], popularity: float = 0.95) -> TargetWorkload:
        """The most frequent shapes (cpu, gpu_milli, num_gpu, models) covering ``popularity`` of the pods,
        probabilities renormalised over them — the authors' "typical pods" (simulator defaults:
        popularity threshold 95 %, CPU-only pods included, counted by pods; ``pkg/utils/frag.go``).

        Raises ValueError on an empty pod list or a popularity outside (0, 1]."""
        if not 0 < popularity <= 1:
            raise ValueError(f"popularity must lie in (0, 1], got {popularity}")
        counts = Counter((p.cpu, p.gpu_milli if p.num_gpu else 0, p.num_gpu, p.models) for p in pods)
        if not counts:
            raise ValueError("target workload from an empty pod list")
        return cls.from_counts(counts, popularity)

    @classmethod
    def from_counts(cls, counts: Mapping[tuple[int, int, int, int], float], popularity: float = 1.0
                    ) -> TargetWorkload:
        """Shapes ``(cpu, gpu_milli, num_gpu, models)`` with weights; keeps the heaviest covering
        ``popularity`` of the weight (ties by shape order), renormalised. Raises ValueError when empty."""
        ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        total = float(sum(w for _, w in ranked))
        if total <= 0:
            raise ValueError("target workload has no weight")
        kept: list[tuple[tuple[int, int, int, int], float]] = []
        cum = 0.0
        for shape, w in ranked:
            if cum >= popularity * total - 1e-9:
                break
            kept.append((shape, w))
            cum += w
        prob = np.array([w for _, w in kept], dtype=np.float64)
        return cls(cpu=np.array([s[0] for s, _ in kept], dtype=np.int64),
                   gpu_milli=np.array([s[1] for s, _ in kept], dtype=np.int64),
                   num_gpu=np.array([s[2] for s, _ in kept], dtype=np.int64),
                   models=np.array([s[3] for s, _ in kept], dtype=np.int64),
                   prob=prob / prob.sum())


def fits(table: GpuNodeTable, pod: PodShape) -> npt.NDArray[np.bool_]:
    """(n,) True where the pod fits: CPU, memory, model, and ``num_gpu`` devices with ``gpu_milli`` free
    each (whole-GPU pods need fully free devices, as their requests are 1000 milli)."""
    ok = (table.cpu_free >= pod.cpu) & (table.mem_free >= pod.mem)
    if pod.models:
        ok &= ((1 << table.model) & pod.models) != 0
    if pod.num_gpu:
        ok &= (table.gpu_free >= pod.gpu_milli).sum(axis=1) >= pod.num_gpu
    return ok


def pick_devices(gpu_free_row: IntArray, pod: PodShape, share_device: int = -1) -> list[int]:
    """Devices for a pod on one node: ``share_device`` for a GPU-share pod when given (≥ 0), else the
    tightest fitting device (fewest free milli, lowest index on ties); for whole GPUs the lowest-indexed
    fully free devices — the authors' "best" selection (``open-gpu-share/cache/gpunodeinfo.go``).

    Raises ValueError when the node cannot hold the pod."""
    if pod.num_gpu == 0:
        return []
    if pod.is_share:
        if share_device >= 0:
            if gpu_free_row[share_device] < pod.gpu_milli:
                raise ValueError(f"device {share_device} has {gpu_free_row[share_device]} milli free, "
                                 f"pod needs {pod.gpu_milli}")
            return [share_device]
        cands = [(int(f), i) for i, f in enumerate(gpu_free_row) if f >= pod.gpu_milli]
        if not cands:
            raise ValueError(f"no device with {pod.gpu_milli} milli free")
        return [min(cands)[1]]
    free = [i for i, f in enumerate(gpu_free_row) if f >= pod.gpu_milli]
    if len(free) < pod.num_gpu:
        raise ValueError(f"{len(free)} devices free, pod needs {pod.num_gpu}")
    return free[:pod.num_gpu]


def allocate(table: GpuNodeTable, node: int, pod: PodShape, devices: Sequence[int]) -> None:
    """Subtract the pod's requests from row ``node`` (devices as :func:`pick_devices` chose them), count it in
    ``affinity`` and bump ``version``. Raises ValueError when a quantity would go negative."""
    if table.cpu_free[node] < pod.cpu or table.mem_free[node] < pod.mem:
        raise ValueError(f"node {node} lacks CPU or memory for {pod}")
    if len(devices) != pod.num_gpu or any(table.gpu_free[node, d] < pod.gpu_milli for d in devices):
        raise ValueError(f"devices {list(devices)} of node {node} cannot hold {pod}")
    table.cpu_free[node] -= pod.cpu
    table.mem_free[node] -= pod.mem
    for d in devices:
        table.gpu_free[node, d] -= pod.gpu_milli
    if pod.num_gpu:
        table.affinity[node, 0 if pod.is_share else pod.num_gpu] += 1
    table.version[node] += 1
