"""GPU assignments on a node agent (docs/gpu.md "On the node"): the sim backend's enforcement of the devices
the scheduler assigned, and the environment the host backend gives a pod's process.

Devices are ((GPU index, milli-GPU), ...) as ``PodBound.devices`` / the binding carry them (1000 milli = a whole
GPU). The invariant :class:`GpuLedger` enforces: every device is a GPU of the node, and no GPU is booked above
1000 milli in total (so a whole-GPU pod never shares its GPU).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from colo.messages import GPUInfo, devices_format

VISIBLE_DEVICES = "CUDA_VISIBLE_DEVICES"
"""The CUDA runtime's device list: the pod's GPU indices, comma-separated (``"0,3"``)."""
COLO_GPU_DEVICES = "COLO_GPU_DEVICES"
"""Colo's own form, ``"index:milli,..."`` (``"3:250"`` = a quarter of GPU 3), for a user to map onto another
runtime (``NVIDIA_VISIBLE_DEVICES``, ``HIP_VISIBLE_DEVICES``, a share limiter)."""


def gpu_env(devices: tuple[tuple[int, int], ...]) -> dict[str, str]:
    """The environment of a pod's process with ``devices``: :data:`VISIBLE_DEVICES` and
    :data:`COLO_GPU_DEVICES`; empty for a pod without GPUs (its own env, if any, is left alone)."""
    if not devices:
        return {}
    return {VISIBLE_DEVICES: ",".join(str(i) for i, _ in devices), COLO_GPU_DEVICES: devices_format(devices)}


@dataclass
class GpuLedger:
    """The GPUs of one node (``gpus``: index → model) and the milli-GPU booked on each by the pods running there
    (``pods``: uid → devices)."""

    gpus: dict[int, str]
    pods: dict[str, tuple[tuple[int, int], ...]] = field(default_factory=dict)
    used: dict[int, int] = field(default_factory=dict)

    @classmethod
    def of(cls, gpus: list[GPUInfo]) -> GpuLedger:
        """An empty ledger for a node's registered GPUs."""
        return cls({g.index: g.model for g in gpus})

    def problems(self, devices: tuple[tuple[int, int], ...]) -> list[str]:
        """Why ``devices`` may not start here: a GPU the node lacks, a share outside 1..1000 milli, a GPU that
        would go over 100 % (naming what holds it). Empty = they fit."""
        out: list[str] = []
        for idx, milli in devices:
            if idx not in self.gpus:
                out.append(f"GPU {idx} is not on this node (it has {sorted(self.gpus)})")
            elif not 0 < milli <= 1000:
                out.append(f"GPU {idx}: share {milli} milli outside 1..1000")
            elif self.used.get(idx, 0) + milli > 1000:
                holders = sorted(u for u, ds in self.pods.items() if any(i == idx for i, _ in ds))
                out.append(f"GPU {idx} overcommitted: {self.used.get(idx, 0)} milli held by "
                           f"{', '.join(holders)}, {milli} more asked")
        return out

    def add(self, uid: str, devices: tuple[tuple[int, int], ...]) -> None:
        """Book ``devices`` for ``uid`` (call :meth:`problems` first)."""
        if not devices:
            return
        self.pods[uid] = devices
        for idx, milli in devices:
            self.used[idx] = self.used.get(idx, 0) + milli

    def remove(self, uid: str) -> None:
        """Free ``uid``'s devices (nothing when it holds none)."""
        for idx, milli in self.pods.pop(uid, ()):
            self.used[idx] -= milli
