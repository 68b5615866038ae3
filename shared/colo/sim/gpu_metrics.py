"""GPU allocation and fragmentation over a run, from the bindings on the bus (docs/scenario.md "GPU scenario").

Source: every ``PodBound`` carries the GPUs the scheduler assigned (``devices``: index and share), and every
``PodStatus`` that ends a pod (Succeeded, Failed: completed, evicted, preempted, refused) frees them, as the sim
node agent's ``GpuLedger`` does. The coordinator already consumes both streams, so the per-tick GPU state costs
no extra message and no store read; it is sampled after the step's settle, when both streams are drained.

Fragmentation is the FGD measure (Weng et al., USENIX ATC'23, §4; docs/gpu.md "The fragmentation measure"),
written here over NumPy so that ``colo`` needs nothing of the scheduler: for a node with free devices
f_1..f_G (milli-GPU), free CPU c, and a target shape s (c_s milli-cores, k_s devices of m_s milli, models
M_s), F_s = Σ_{g: f_g < m_s} f_g when s fits (c ≥ c_s, model allowed, ≥ k_s devices with f_g ≥ m_s), else
Σ_g f_g; F = Σ_s p_s F_s. The target is the scenario's own GPU pods, p_s their shares by count. Free CPU is
the node's allocatable minus the native ``cpu`` requests of its bound pods: in the colo run, batch pods on
batch-cpu leave it to the GPU pods.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from colo.messages import NodeSpec, PodBound, PodSpec, PodStatus, allocations_devices

GPU_MILLI = 1000
"""milli-GPU in a whole device."""


@dataclass(frozen=True)
class Shape:
    """A target pod shape: ``cpu`` milli-cores, ``count`` devices of ``milli`` milli-GPU, allowed ``models``
    (empty = any)."""

    cpu: int
    count: int
    milli: int
    models: tuple[str, ...] = ()


def target_shapes(pods: list[PodSpec]) -> list[tuple[Shape, float]]:
    """The GPU pods' shapes with their share by count (Σ = 1; empty without GPU pods), most frequent first."""
    counts = Counter(Shape(p.requests.cpu or p.requests.batch_cpu, p.gpu.count, p.gpu.milli, tuple(p.gpu.models))
                     for p in pods if p.gpu is not None)
    total = sum(counts.values())
    return [(s, n / total) for s, n in sorted(counts.items(), key=lambda kv: (-kv[1], repr(kv[0])))]


def fragmentation(free: npt.NDArray[np.int64], cpu_free: npt.NDArray[np.int64], models: list[str],
                  shapes: list[tuple[Shape, float]]) -> npt.NDArray[np.float64]:
    """F per node (milli-GPU, module doc) for ``free`` (n, G) milli-GPU free per device (0 beyond a node's
    devices), ``cpu_free`` (n,) milli-cores, ``models`` (n) GPU model per node and ``shapes`` (shape, p_s)."""
    total = free.sum(axis=1).astype(np.float64)
    out = np.zeros(len(free), dtype=np.float64)
    for s, p in shapes:
        big = free >= s.milli
        fits = (cpu_free >= s.cpu) & (big.sum(axis=1) >= s.count)
        if s.models:
            fits &= np.array([m in s.models for m in models], dtype=bool)
        small = np.where(big, 0, free).sum(axis=1).astype(np.float64)
        out += p * np.where(fits, small, total)
    return out


@dataclass
class GpuUsage:
    """The GPUs held per node and device, fed with bindings and pod ends; :meth:`sample` gives the cluster's
    allocated share and fragmentation and records any device held above 100 % in ``violations``."""

    names: list[str]
    models: list[str]
    gpus: npt.NDArray[np.int64]
    """(n,) devices per node."""
    cpu_alloc: npt.NDArray[np.int64]
    """(n,) allocatable milli-cores per node."""
    shapes: list[tuple[Shape, float]]
    held: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros((0, 1), dtype=np.int64))
    cpu_used: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    pods: dict[str, tuple[int, tuple[tuple[int, int], ...], int, float]] = field(default_factory=dict)
    """uid → (node row, devices, native cpu request, bound at)."""
    gpu_pods_bound: set[str] = field(default_factory=set)
    violations: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, nodes: list[NodeSpec], pods: list[PodSpec]) -> GpuUsage:
        """Empty usage of ``nodes`` with the target shapes of ``pods`` (:func:`target_shapes`)."""
        g = max([len(n.gpus) for n in nodes] + [1])
        u = cls(names=[n.name for n in nodes], models=[n.gpus[0].model if n.gpus else "" for n in nodes],
                gpus=np.array([len(n.gpus) for n in nodes], dtype=np.int64),
                cpu_alloc=np.array([n.allocatable.cpu for n in nodes], dtype=np.int64),
                shapes=target_shapes(pods))
        u.held = np.zeros((len(nodes), g), dtype=np.int64)
        u.cpu_used = np.zeros(len(nodes), dtype=np.int64)
        return u

    @property
    def total_milli(self) -> int:
        """The cluster's GPUs in milli-GPU."""
        return int(self.gpus.sum()) * GPU_MILLI

    def _row(self, node: str) -> int:
        try:
            return self.names.index(node)
        except ValueError:
            return -1

    def on_bound(self, msg: PodBound) -> None:
        """Book the binding's devices and native CPU request on its node (a rebind replaces the old booking)."""
        uid = msg.spec.uid
        self._release(uid)
        row = self._row(msg.node)
        if row < 0:
            return
        devices = allocations_devices(msg.devices)
        for idx, milli in devices:
            if 0 <= idx < self.held.shape[1]:
                self.held[row, idx] += milli
        self.cpu_used[row] += msg.spec.requests.cpu
        self.pods[uid] = (row, devices, msg.spec.requests.cpu, msg.at)
        if msg.spec.gpu is not None:
            self.gpu_pods_bound.add(uid)

    def on_status(self, msg: PodStatus) -> None:
        """Free a pod's booking when it ended (Succeeded or Failed) on the node it was bound to, no earlier
        than its binding (a status of a previous binding does not free a rebind)."""
        if msg.phase not in ("Succeeded", "Failed"):
            return
        booked = self.pods.get(msg.uid)
        if booked is not None and self.names[booked[0]] == msg.node and msg.at >= booked[3]:
            self._release(msg.uid)

    def _release(self, uid: str) -> None:
        booked = self.pods.pop(uid, None)
        if booked is None:
            return
        row, devices, cpu, _ = booked
        for idx, milli in devices:
            if 0 <= idx < self.held.shape[1]:
                self.held[row, idx] -= milli
        self.cpu_used[row] -= cpu

    def sample(self, t: float) -> tuple[float, float]:
        """(GPUs allocated, GPUs fragmented) as shares of the cluster's GPUs at virtual time ``t`` (0, 0 without
        GPUs); a device held above 1000 milli or beyond a node's devices adds a violation."""
        total = self.total_milli
        if not total:
            return 0.0, 0.0
        cols = np.arange(self.held.shape[1])[None, :]
        present = cols < self.gpus[:, None]
        for r, c in zip(*np.nonzero((self.held > GPU_MILLI) | (~present & (self.held != 0)))):
            self.violations.append(f"t={t:.0f}s {self.names[r]}: GPU {c} held {self.held[r, c]} milli")
        free = np.where(present, np.clip(GPU_MILLI - self.held, 0, GPU_MILLI), 0)
        frag = fragmentation(free, self.cpu_alloc - self.cpu_used, self.models, self.shapes) if self.shapes else None
        allocated = float(np.where(present, np.clip(self.held, 0, GPU_MILLI), 0).sum()) / total
        return allocated, (float(frag.sum()) / total if frag is not None else 0.0)
