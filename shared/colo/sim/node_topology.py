"""The documented default topology and GPUs of alibaba-gpu-v2023 nodes, which the trace does not describe
(docs/topology.md "Sources").

* :func:`default_topology` — ``cpu_milli // 1000`` logical CPUs as 2 threads per core (1 when the count is odd),
  2 sockets of one NUMA node each when the cores split evenly (else 1 socket), Linux numbering
  (:func:`colo.messages.smt_topology`). The trace's 96-CPU nodes become 2 × 24 cores × 2 threads.
* :func:`trace_gpus` — ``gpu`` GPUs of the row's ``model``, indices 0..gpu−1, memory from
  :data:`GPU_MEMORY_BYTES`.
"""

from __future__ import annotations

from colo.messages import GPUInfo, NodeTopology, smt_topology

GIB = 1024**3

GPU_MEMORY_BYTES = {
    "A10": 24 * GIB,
    "P100": 16 * GIB,
    "T4": 16 * GIB,
    "V100M16": 16 * GIB,
    "V100M32": 32 * GIB,
}
"""Memory per GPU model of the trace (the vendors' data sheets; V100M16/M32 are the 16 and 32 GiB V100).
``G2`` and ``G3`` are anonymised models in the trace: they get :data:`UNKNOWN_GPU_MEMORY_BYTES`."""

UNKNOWN_GPU_MEMORY_BYTES = 16 * GIB
"""Memory of a GPU whose model is not in :data:`GPU_MEMORY_BYTES` (an assumption: the trace's common size)."""


def default_topology(cpu_milli: int) -> NodeTopology:
    """The module doc's topology for a node of ``cpu_milli`` milli-cores (empty under 1 CPU)."""
    cpus = cpu_milli // 1000
    if cpus < 1:
        return NodeTopology()
    threads = 2 if cpus % 2 == 0 else 1
    cores = cpus // threads
    sockets = 2 if cores % 2 == 0 else 1
    return smt_topology(sockets, cores // sockets, threads, 1)


def trace_gpus(count: int, model: str) -> list[GPUInfo]:
    """``count`` GPUs of ``model`` (indices 0..count−1, memory per :data:`GPU_MEMORY_BYTES`)."""
    memory = GPU_MEMORY_BYTES.get(model, UNKNOWN_GPU_MEMORY_BYTES)
    return [GPUInfo(index=k, model=model, memory_bytes=memory) for k in range(max(count, 0))]
