"""Reading alibaba-gpu-v2023's GPU node list and pod list (``shared/traces/README.md`` §3) for the ``gpu``
demo scenario (:mod:`colo.sim.gpu_scenario`). Loaders only parse and convert units (milli-cores, bytes,
milli-GPU, seconds); nothing is synthetic.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from colo.sim.traces import MIB, TraceNode, trace_path

GPU_NODE_LIST = "alibaba-gpu-v2023/openb_node_list_gpu_node.csv"
"""The 1,213 GPU nodes (6,212 GPUs): columns ``sn, cpu_milli, memory_mib, gpu, model``."""
GPU_POD_LIST = "alibaba-gpu-v2023/openb_pod_list_default.csv"
"""The 8,152 pods: ``name, cpu_milli, memory_mib, num_gpu, gpu_milli, gpu_spec, qos, pod_phase,
creation_time, deletion_time, scheduled_time``."""


@dataclass(frozen=True)
class TraceGpuPod:
    """A row of ``openb_pod_list_default.csv``: ``cpu_milli`` milli-cores, ``memory_bytes`` (MiB × 2^20),
    ``num_gpu`` devices of ``gpu_milli`` milli-GPU each (the trace gives ``gpu_milli`` for one device; a pod
    of several GPUs takes them whole), ``gpu_spec`` the allowed models (``|``-separated, empty = any), ``qos``
    (LS, BE, Burstable, Guaranteed), creation and deletion in trace seconds."""

    name: str
    cpu_milli: int
    memory_bytes: int
    num_gpu: int
    gpu_milli: int
    gpu_spec: str
    qos: str
    phase: str
    creation_s: int
    deletion_s: int

    @property
    def lifetime_s(self) -> int:
        """Deletion − creation, trace seconds (≥ 0)."""
        return max(0, self.deletion_s - self.creation_s)

    @property
    def gpu_total_milli(self) -> int:
        """The pod's GPU request in milli-GPU (``num_gpu`` × ``gpu_milli``)."""
        return self.num_gpu * self.gpu_milli


def load_gpu_nodes(root: Path | None = None) -> list[TraceNode]:
    """The GPU nodes of ``openb_node_list_gpu_node.csv`` (1,213 rows), as :class:`TraceNode`."""
    return list(_load_gpu_nodes(trace_path(GPU_NODE_LIST, root)))


@lru_cache(maxsize=4)
def _load_gpu_nodes(path: Path) -> tuple[TraceNode, ...]:
    with path.open(newline="") as f:
        return tuple(TraceNode(r["sn"], int(r["cpu_milli"]), int(r["memory_mib"]) * MIB, int(r["gpu"] or 0),
                               r.get("model") or "") for r in csv.DictReader(f))


def load_gpu_pods(root: Path | None = None) -> list[TraceGpuPod]:
    """Every pod of ``openb_pod_list_default.csv`` (8,152 rows; 7,064 with GPUs), in file order. A whole-GPU
    row has ``gpu_milli`` 1000; ``num_gpu`` 0 rows are CPU-only."""
    return list(_load_gpu_pods(trace_path(GPU_POD_LIST, root)))


@lru_cache(maxsize=4)
def _load_gpu_pods(path: Path) -> tuple[TraceGpuPod, ...]:
    with path.open(newline="") as f:
        return tuple(
            TraceGpuPod(r["name"], int(r["cpu_milli"]), int(r["memory_mib"]) * MIB, int(r["num_gpu"] or 0),
                        int(r["gpu_milli"] or 0), r.get("gpu_spec") or "", r["qos"], r["pod_phase"],
                        int(r["creation_time"] or 0), int(r["deletion_time"] or 0))
            for r in csv.DictReader(f))
