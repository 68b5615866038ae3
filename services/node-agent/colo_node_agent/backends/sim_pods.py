"""The ``sim`` backend's pod table: ``(nodes, slots)`` NumPy columns for every pod on every virtual node.

A pod occupies one slot of its node's row. Series workloads are stored flat (one array for all pods, with
offset/length per slot) so that demand at time t is one gather for the whole cluster.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from colo.classes import priority_class_of, qos_class_of
from colo.messages import PodSpec, PriorityClass, QoSClass

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
BOOL = npt.NDArray[np.bool_]


class PodTable:
    """Columns ``(nodes, slots)``; grows the slot dimension as needed. CPU milli-cores, memory bytes, seconds."""

    def __init__(self, nodes: int, slots: int = 16, ring: int = 30) -> None:
        self.nodes = nodes
        self.ring = ring
        self.ring_pos = 0
        self.slots = 0
        self.specs: dict[tuple[int, int], PodSpec] = {}
        self.qos: dict[tuple[int, int], QoSClass] = {}
        self.prio_class: dict[tuple[int, int], PriorityClass] = {}
        self.assigned: dict[tuple[int, int], tuple[int, ...]] = {}
        """The cpuset the scheduler chose for an LSE/LSR pod (``PodBound.cpuset``), by slot."""
        self.where: dict[str, tuple[int, int]] = {}
        self._cpu_series: list[float] = [0.0]
        self._mem_series: list[float] = [0.0]
        self._flat_dirty = True
        self.flat_cpu: F64 = np.zeros(1)
        self.flat_mem: F64 = np.zeros(1)
        self._grow(slots)

    def _grow(self, slots: int) -> None:
        old = self.slots
        n = self.nodes

        def ext(a: npt.NDArray[np.generic] | None, fill: float | bool, dtype: type) -> npt.NDArray[np.generic]:
            new: npt.NDArray[np.generic] = np.full((n, slots), fill, dtype=dtype)
            if a is not None:
                new[:, :old] = a
            return new

        get = self.__dict__.get
        self.active: BOOL = ext(get("active"), False, bool)  # type: ignore[assignment]
        self.is_be: BOOL = ext(get("is_be"), False, bool)  # type: ignore[assignment]
        self.is_batch: BOOL = ext(get("is_batch"), False, bool)  # type: ignore[assignment]
        self.priority: F64 = ext(get("priority"), 0.0, float)  # type: ignore[assignment]
        self.start: F64 = ext(get("start"), 0.0, float)  # type: ignore[assignment]
        self.shares: F64 = ext(get("shares"), 1024.0, float)  # type: ignore[assignment]
        self.quota_cap: F64 = ext(get("quota_cap"), np.inf, float)  # type: ignore[assignment]
        self.mem_limit: F64 = ext(get("mem_limit"), np.inf, float)  # type: ignore[assignment]
        self.const_cpu: F64 = ext(get("const_cpu"), 0.0, float)  # type: ignore[assignment]
        self.const_mem: F64 = ext(get("const_mem"), 0.0, float)  # type: ignore[assignment]
        self.step: F64 = ext(get("step"), 300.0, float)  # type: ignore[assignment]
        self.cpu_off: I64 = ext(get("cpu_off"), 0, np.int64)  # type: ignore[assignment]
        self.cpu_len: I64 = ext(get("cpu_len"), 0, np.int64)  # type: ignore[assignment]
        self.mem_off: I64 = ext(get("mem_off"), 0, np.int64)  # type: ignore[assignment]
        self.mem_len: I64 = ext(get("mem_len"), 0, np.int64)  # type: ignore[assignment]
        self.cpu_scale: F64 = ext(get("cpu_scale"), 0.0, float)  # type: ignore[assignment]
        self.mem_scale: F64 = ext(get("mem_scale"), 0.0, float)  # type: ignore[assignment]
        self.work_left_s: F64 = ext(get("work_left_s"), 0.0, float)  # type: ignore[assignment]
        self.cpu_used: F64 = ext(get("cpu_used"), 0.0, float)  # type: ignore[assignment]
        self.mem_used: F64 = ext(get("mem_used"), 0.0, float)  # type: ignore[assignment]
        self.demand: F64 = ext(get("demand"), 0.0, float)  # type: ignore[assignment]
        rings = []
        for name in ("ring_cpu", "ring_mem", "ring_n"):
            new = np.zeros((n, slots, self.ring))
            if name in self.__dict__:
                new[:, :old] = self.__dict__[name]
            rings.append(new)
        self.ring_cpu: F64 = rings[0]
        self.ring_mem: F64 = rings[1]
        self.ring_n: F64 = rings[2]
        self.slots = slots

    def record(self) -> None:
        """Push the current ``cpu_used``/``mem_used`` of every slot into the usage ring."""
        p = self.ring_pos
        self.ring_cpu[:, :, p] = self.cpu_used
        self.ring_mem[:, :, p] = self.mem_used
        self.ring_n[:, :, p] = self.active
        self.ring_pos = (p + 1) % self.ring

    def window_usage(self) -> tuple[F64, F64]:
        """Per-slot mean CPU (milli) and memory (bytes) over the samples in the ring while the pod ran."""
        n = np.maximum(self.ring_n.sum(axis=2), 1.0)
        return self.ring_cpu.sum(axis=2) / n, self.ring_mem.sum(axis=2) / n

    def add(self, node: int, spec: PodSpec, at: float) -> tuple[int, int]:
        """Place ``spec`` on row ``node`` started at ``at``; returns its (node, slot). Caller checks uniqueness."""
        free = np.flatnonzero(~self.active[node])
        if free.size == 0:
            self._grow(self.slots * 2)
            free = np.flatnonzero(~self.active[node])
        key = (node, int(free[0]))
        s = key[1]
        qos = qos_class_of(spec)
        self.specs[key] = spec
        self.qos[key] = qos
        self.prio_class[key] = priority_class_of(spec)
        self.where[spec.uid] = key
        self.active[node, s] = True
        self.is_be[node, s] = qos == "BE"
        self.priority[node, s] = float(spec.priority if spec.priority is not None else 0)
        self.start[node, s] = at
        for ring in (self.ring_cpu, self.ring_mem, self.ring_n):
            ring[node, s, :] = 0
        for col in (self.cpu_used, self.mem_used, self.demand, self.cpu_len, self.mem_len, self.const_cpu, self.const_mem, self.work_left_s,
                    self.cpu_scale, self.mem_scale):
            col[node, s] = 0
        self.is_batch[node, s] = False
        w = spec.sim
        if w is None:
            # no workload description: use the requests as a constant demand, running until evicted
            r = spec.requests
            self.const_cpu[node, s] = r.cpu or r.batch_cpu or r.mid_cpu
            self.const_mem[node, s] = r.memory or r.batch_memory or r.mid_memory
        elif w.kind == "batch":
            self.is_batch[node, s] = True
            self.const_cpu[node, s] = w.cpu_milli
            self.const_mem[node, s] = w.memory_bytes
            self.work_left_s[node, s] = max(w.duration_s, 0.0)
        else:
            self.step[node, s] = w.step_s if w.step_s > 0 else 300.0
            self.cpu_off[node, s], self.cpu_len[node, s] = self._append(self._cpu_series, w.cpu_util)
            self.mem_off[node, s], self.mem_len[node, s] = self._append(self._mem_series, w.memory_util)
            self.cpu_scale[node, s] = w.cpu_scale_milli
            self.mem_scale[node, s] = w.memory_scale_bytes
        return key

    def _append(self, flat: list[float], series: list[float]) -> tuple[int, int]:
        off = len(flat)
        flat.extend(max(float(v), 0.0) for v in series)
        self._flat_dirty = True
        return off, len(series)

    def remove(self, uid: str) -> tuple[tuple[int, int], PodSpec] | None:
        """Free the slot of ``uid``; returns (key, spec) or None when unknown."""
        key = self.where.pop(uid, None)
        if key is None:
            return None
        self.active[key] = False
        self.qos.pop(key)
        self.prio_class.pop(key)
        self.assigned.pop(key, None)
        return key, self.specs.pop(key)

    def demand_at(self, t: float) -> tuple[F64, F64]:
        """CPU demand (milli) and memory (bytes) of every slot at time ``t``; zeros for free slots."""
        if self._flat_dirty:
            self.flat_cpu = np.asarray(self._cpu_series)
            self.flat_mem = np.asarray(self._mem_series)
            self._flat_dirty = False
        k = np.floor(np.maximum(t - self.start, 0.0) / self.step).astype(np.int64)
        ci = np.where(self.cpu_len > 0, self.cpu_off + k % np.maximum(self.cpu_len, 1), 0)
        mi = np.where(self.mem_len > 0, self.mem_off + k % np.maximum(self.mem_len, 1), 0)
        cpu = self.const_cpu + self.flat_cpu[ci] * self.cpu_scale
        mem = self.const_mem + self.flat_mem[mi] * self.mem_scale
        return np.where(self.active, cpu, 0.0), np.where(self.active, mem, 0.0)
