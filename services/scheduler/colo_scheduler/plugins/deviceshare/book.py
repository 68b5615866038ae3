"""Per-node GPU bookings of the DeviceShare plugin: which pod holds how much of which GPU.

The scheduler's memory only; what survives a restart is the device list stored with each binding
(:attr:`colo.store_binds.BindRequest.devices`), which the scheduler hands back when it adopts the bound pods
(:data:`colo_scheduler.podinfo.ASSIGNED_DEVICES`), so :class:`NodeGPUs` is rebuilt exactly.

Units: milli-GPU per device (1000 = a whole GPU). Positions 0..MAX_GPUS−1 index the node's GPUs in
``NodeSpec.gpus`` order sorted by GPU index (the ``nvidia-smi`` minor); :attr:`NodeGPUs.index` maps a
position to its GPU index.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from colo.messages import GPUInfo
from colo_scheduler.plugins.deviceshare.state import GPU_MILLI, MAX_GPUS, IntArray


@dataclass
class NodeGPUs:
    """The GPUs of one node and what is booked on them: ``index`` (k,) GPU index per position, ``models``
    (k,) model name per position, ``free`` (MAX_GPUS,) milli-GPU free per position (0 where no GPU),
    ``pods`` uid → ((position, milli-GPU), ...)."""

    index: tuple[int, ...]
    models: tuple[str, ...]
    free: IntArray
    pods: dict[str, tuple[tuple[int, int], ...]] = field(default_factory=dict)
    version: int = 0
    """Bumped at every change (the plugin's memo of answers keys on it)."""

    @classmethod
    def of(cls, gpus: list[GPUInfo]) -> NodeGPUs:
        """Empty bookings of a node's GPUs (the first :data:`MAX_GPUS` by index)."""
        ordered = sorted(gpus, key=lambda g: g.index)[:MAX_GPUS]
        free = np.zeros(MAX_GPUS, np.int64)
        free[:len(ordered)] = GPU_MILLI
        return cls(index=tuple(g.index for g in ordered), models=tuple(g.model for g in ordered), free=free)

    def position(self, gpu_index: int) -> int:
        """The position of GPU ``gpu_index``; −1 when the node has no such GPU."""
        try:
            return self.index.index(gpu_index)
        except ValueError:
            return -1

    def add(self, uid: str, devices: tuple[tuple[int, int], ...]) -> list[str]:
        """Book ``devices`` ((position, milli), ...) for ``uid`` (replacing what it held); returns the
        problems (a position the node lacks, a GPU that would go over 1000 milli). Positions the node lacks
        are skipped; an overcommitted GPU is booked anyway (free goes negative; the caller logs it) so that
        an assignment loaded from the store is never silently lost."""
        self.remove(uid)
        self.version += 1
        problems: list[str] = []
        kept: list[tuple[int, int]] = []
        for pos, milli in devices:
            if not 0 <= pos < len(self.index):
                problems.append(f"no GPU at position {pos}")
                continue
            if self.free[pos] < milli:
                problems.append(f"GPU {self.index[pos]} has {int(self.free[pos])} milli free, {milli} booked")
            self.free[pos] -= milli
            kept.append((pos, milli))
        self.pods[uid] = tuple(kept)
        return problems

    def remove(self, uid: str) -> tuple[tuple[int, int], ...]:
        """Forget ``uid``'s bookings; the (position, milli) it held (empty when none)."""
        held = self.pods.pop(uid, None)
        if held is None:
            return ()
        self.version += 1
        for pos, milli in held:
            self.free[pos] += milli
        return held
