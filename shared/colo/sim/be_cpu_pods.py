"""CPU-heavy real batch work: alibaba-gpu-v2023's CPU-only best-effort pods as batch pods
(``ScenarioParams.be_cpu_pods_fraction``; docs/scenario.md "CPU-heavy batch pods").

The v2017 batch tasks ask about 2.2 times more memory per core than the v2023 nodes have, so with them alone
memory binds long before CPU. The rows of ``openb_pod_list_default.csv`` with ``num_gpu`` = 0 and ``qos`` = BE
(450 pods, 10,432 cores, 18.2 TiB: 1.78 GiB per core against the nodes' 4.6–5.7) have the opposite shape; both
sources together give batch work that a memory-aware placement (BatchResourcesBalancedAllocation) can pair.

Rules (deterministic from ``params.seed``):

* **Draw**: rows drawn with replacement with ``Random(f"{seed}-be-cpu")`` until their CPU-time
  Σ ``cpu_milli`` × run lifetime reaches ``be_cpu_pods_fraction`` × cluster CPU × run length: a share of
  the cluster's CPU-time, as ``batch_offered_cpu_fraction`` measures the v2017 pods.
* **Arrival**: uniform in [warm-up, warm-up + ``arrival_fraction`` × (run − warm-up)) from the same generator
  (the trace's creation times span 149 days; compressed into 2 h they would arrive in a few bursts), sorted by
  time then draw. ``arrival_fraction`` 1 spreads them over the whole batch window; a smaller one gives a
  backlog early (the ``saturated`` preset: 0.25).
* **Lifetime**: the trace's deletion − creation in trace seconds (not compressed: they are already minutes
  to hours, median 181 s, p90 5.5 h), capped at the run's length, at least :data:`MIN_LIFETIME_S`.
* **Pod**: requests = limits = ``cpu_milli`` milli-cores and ``memory_mib`` × 2^20 bytes; QoS ``BE``, class
  ``batch``, priority 5500, namespace ``batch``, label ``colo.sim/kind=batch`` (counted as batch tasks by
  the metrics; in colo runs the slo-manager's default profile moves them onto batch-cpu/batch-memory like
  every BE batch pod); ``SimWorkload(kind="batch")`` using its requests for its lifetime. Bare pods, also
  with ``params.jobs``: the trace gives them no job and no team (no gang, no elastic quota).
"""

from __future__ import annotations

import random
from pathlib import Path

from colo.messages import NodeSpec, PodSpec, Resources, SimWorkload
from colo.sim import gpu_traces as gt

MIN_LIFETIME_S = 60.0
"""Shortest run lifetime, seconds: one sim tick (the trace's shortest CPU-only BE pod lives 142 s)."""
BATCH_PRIORITY = 5500
"""koord-batch priority, as the v2017 batch pods (:data:`colo.sim.scenario.BATCH_PRIORITY`)."""


def cpu_only_be_rows(root: Path | None = None) -> list[gt.TraceGpuPod]:
    """The rows of ``openb_pod_list_default.csv`` with ``num_gpu`` 0 and ``qos`` BE (450), in file order;
    raises TraceError when the file is missing."""
    return [r for r in gt.load_gpu_pods(root) if r.num_gpu == 0 and r.qos == "BE"]


def be_cpu_pod(row: gt.TraceGpuPod, draw: int, at: float, lifetime_s: float) -> PodSpec:
    """The batch pod of trace ``row`` (module doc "Pod"), uid ``becpu-<name>-<draw>``, created at ``at``
    seconds, running ``lifetime_s`` seconds."""
    res = Resources(cpu=row.cpu_milli, memory=row.memory_bytes)
    uid = f"becpu-{row.name}-{draw}"
    return PodSpec(
        uid=uid, name=uid, namespace="batch",
        labels={"app": f"becpu-{row.name}", "colo.sim/kind": "batch", "colo.sim/source": "gpu-v2023"},
        priority=BATCH_PRIORITY, priority_class="batch", qos_class="BE", requests=res, limits=res,
        app=f"becpu-{row.name}", created_at=at,
        sim=SimWorkload(kind="batch", cpu_milli=row.cpu_milli, memory_bytes=row.memory_bytes,
                        duration_s=lifetime_s))


def be_cpu_pods(fraction: float, seed: int, hours: float, warmup_s: float, nodes: list[NodeSpec],
                root: Path | None = None, arrival_fraction: float = 1.0,
                ) -> tuple[list[tuple[float, PodSpec]], dict[str, object]]:
    """(arrival seconds, pod) pairs sorted by time then uid, and their description for the report, for a
    CPU-time share ``fraction`` (≥ 0; 0 gives none) of ``nodes`` over a run of ``hours`` whose batch
    window starts at ``warmup_s``, arriving over its first ``arrival_fraction`` (0–1] (module doc). Raises TraceError when the pod list is missing and
    ValueError when it has no CPU-only BE row."""
    if fraction <= 0:
        return [], {}
    rows = cpu_only_be_rows(root)
    if not rows:
        raise ValueError(f"{gt.GPU_POD_LIST}: no row with num_gpu 0 and qos BE")
    run_s = hours * 3600.0
    window_s = (run_s - warmup_s) * arrival_fraction
    cluster_cpu = sum(n.allocatable.cpu for n in nodes)
    cluster_mem = sum(n.allocatable.memory for n in nodes)
    target = fraction * cluster_cpu * run_s
    rng = random.Random(f"{seed}-be-cpu")
    out: list[tuple[float, PodSpec]] = []
    cpu_s = mem_s = 0.0
    while cpu_s < target:
        row = rng.choice(rows)
        at = round(warmup_s + rng.random() * window_s, 3)
        lifetime = max(MIN_LIFETIME_S, min(float(row.lifetime_s), run_s))
        out.append((at, be_cpu_pod(row, len(out), at, lifetime)))
        cpu_s += row.cpu_milli * lifetime
        mem_s += row.memory_bytes * lifetime
    out.sort(key=lambda a: (a[0], a[1].uid))
    desc: dict[str, object] = {
        "be_cpu_rows_in_trace": len(rows),
        "be_cpu_pods": len(out),
        "be_cpu_pods_cpu_milli": sum(p.requests.cpu for _, p in out),
        "be_cpu_offered_cpu_fraction": round(cpu_s / (cluster_cpu * run_s), 4),
        "be_cpu_offered_memory_fraction": round(mem_s / (cluster_mem * run_s), 4),
    }
    return out, desc
