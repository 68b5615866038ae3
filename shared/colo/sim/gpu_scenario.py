"""The ``gpu`` demo scenario (``make demo SCENARIO=gpu``; docs/scenario.md "GPU scenario").

Nodes are a seeded sample of alibaba-gpu-v2023's GPU node list; the online and best-effort pods are that trace's
GPU pods, with its CPU, memory and GPU requests, arriving in the trace's creation order; batch CPU work comes
from alibaba-v2017 exactly as the default scenario makes it (:func:`colo.sim.scenario._batch_pods`, as jobs
with ``params.jobs``). Deterministic from ``params.seed``.

Rules (every default below is stated with its reason):

* **Nodes**: ``params.nodes`` rows of ``openb_node_list_gpu_node.csv`` drawn without replacement with
  ``Random(seed)``, with the default topology and the row's GPUs (:mod:`colo.sim.node_topology`).
* **GPU pods**: the rows with ``num_gpu > 0`` created at or after :attr:`GpuParams.window_start_s`, drawn with
  replacement with ``Random(f"{seed}-gpu")`` (the FGD paper's sampling, §6.1) until their GPU requests reach
  :attr:`GpuParams.demand` × the sampled nodes' GPUs, then ordered by trace creation time.
* **QoS** (the trace's ``qos`` column → Colo, REFERENCE.md §1): ``LS``, ``Guaranteed`` and ``Burstable`` →
  QoS ``LS``, class ``prod``, priority 9500 (Kubernetes Guaranteed/Burstable pods of a prod service are
  Koordinator LS); ``BE`` → QoS ``BE``, class ``batch``, priority 5500 (in the colo run slo-manager's default
  profile moves them onto batch-cpu/batch-memory like every BE batch pod).
* **Requests**: ``cpu_milli`` milli-cores, ``memory_mib`` × 2^20 bytes (requests = limits); GPUs as
  ``GPURequest(count=num_gpu, milli=gpu_milli)`` for one device, whole devices for several; ``gpu_spec``
  (``|``-separated) as the allowed models (empty in every row of the default pod list: any model).
* **Time**: arrival = warm-up + (creation − window start) / k with k = (trace end − window start) /
  (run − warm-up), the *compression factor* (trace seconds per demo second; order and relative spacing kept).
  A pod runs for its trace lifetime (deletion − creation) divided by :attr:`GpuParams.lifetime_compression`
  (default 1: trace seconds). Compressing lifetimes by k too keeps the trace's concurrency, and the trace's pod
  list is thin: at most 53 of its GPU pods are alive at any instant over its 1,213 GPU nodes, so a 40-node
  cluster's pods alive would request 1–2 % of its GPUs most of the time (docs/scenario.md "GPU scenario").
* **Workload**: a GPU pod is ``SimWorkload(kind="batch")`` using its CPU request and memory for its lifetime,
  then Succeeded (the sim's finite workload; its GPUs are freed by the node agent when it ends). Label
  ``colo.sim/kind=gpu``: not counted as a batch task.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass
from pathlib import Path

import msgspec

from colo.messages import ElasticQuota, GPURequest, NodeSpec, PodSpec, Resources, SimWorkload
from colo.sim import gpu_traces as gt
from colo.sim import traces as tr
from colo.sim.scenario import (
    BATCH_PRIORITY,
    LS_PRIORITY,
    Arrival,
    Scenario,
    ScenarioParams,
    WorkloadArrival,
    _as_jobs,
    _batch_pods,
    node_spec,
)

TRACE_END_S = 12_902_960
"""The largest deletion time of ``openb_pod_list_default.csv`` (README §3): the trace's end, seconds."""

QOS_MAP: dict[str, tuple[str, str, int]] = {
    "LS": ("LS", "prod", LS_PRIORITY),
    "Guaranteed": ("LS", "prod", LS_PRIORITY),
    "Burstable": ("LS", "prod", LS_PRIORITY),
    "BE": ("BE", "batch", BATCH_PRIORITY),
}
"""The trace's ``qos`` → (Colo QoS class, priority class, priority)."""


@dataclass(frozen=True)
class GpuParams:
    """The GPU pods' rules (module doc). ``window_start_s`` trace second from which pods are drawn (default
    10,000,000, day 115.7: 95 % of the GPU pods are created after it, the first 115 days hold 5 %);
    ``demand`` Σ GPU requests drawn / cluster GPUs (default 4.0: with trace lifetimes, the GPU requests of the
    pods alive in a 40-node, 2 h run then pass 80 % of the cluster's GPUs in its second hour and reach it near
    the end, where fragmentation decides what fits; 3.0 peaked at 65 % allocated, 1.3 — the paper's arrival
    point without departures — stays near 45 % requested); ``lifetime_compression`` divides trace lifetimes
    (1 = trace seconds)."""

    window_start_s: int = 10_000_000
    demand: float = 4.0
    lifetime_compression: float = 1.0

    def problems(self) -> list[str]:
        """Every invalid value (empty when valid)."""
        out = []
        if not 0 <= self.window_start_s < TRACE_END_S:
            out.append(f"window_start_s must be within 0..{TRACE_END_S}, got {self.window_start_s}")
        if self.demand <= 0:
            out.append(f"demand must be > 0, got {self.demand}")
        if self.lifetime_compression <= 0:
            out.append(f"lifetime_compression must be > 0, got {self.lifetime_compression}")
        return out


def _gpu_nodes(params: ScenarioParams, rng: random.Random, root: Path | None) -> list[NodeSpec]:
    pool = gt.load_gpu_nodes(root)
    if params.nodes > len(pool):
        raise ValueError(f"asked for {params.nodes} nodes, the GPU node list has {len(pool)}")
    return [node_spec(n) for n in sorted(rng.sample(pool, params.nodes), key=lambda n: n.sn)]


def gpu_request(row: gt.TraceGpuPod) -> GPURequest:
    """The :class:`GPURequest` of a trace row with GPUs (module doc "Requests")."""
    models = [m for m in row.gpu_spec.split("|") if m]
    milli = row.gpu_milli if row.num_gpu == 1 else 1000
    return GPURequest(count=row.num_gpu, milli=milli, models=models)


def _pod(row: gt.TraceGpuPod, draw: int, at: float, lifetime_s: float) -> PodSpec:
    qos, cls, prio = QOS_MAP[row.qos]
    res = Resources(cpu=row.cpu_milli, memory=row.memory_bytes)
    uid = f"gpu-{row.name}-{draw}"
    return PodSpec(
        uid=uid, name=uid, namespace="gpu" if qos == "LS" else "gpu-batch",
        labels={"app": row.name, "colo.sim/kind": "gpu", "colo.sim/trace-qos": row.qos},
        priority=prio, priority_class=cls, qos_class=qos, requests=res, limits=res, app=row.name,  # type: ignore[arg-type]
        created_at=at, gpu=gpu_request(row),
        sim=SimWorkload(kind="batch", cpu_milli=row.cpu_milli, memory_bytes=row.memory_bytes,
                        duration_s=max(1.0, lifetime_s)))


def _gpu_pods(params: ScenarioParams, gpu: GpuParams, nodes: list[NodeSpec],
              root: Path | None) -> tuple[list[Arrival], dict[str, object]]:
    rows = [r for r in gt.load_gpu_pods(root) if r.num_gpu > 0 and r.creation_s >= gpu.window_start_s]
    unknown = sorted({r.qos for r in rows} - set(QOS_MAP))
    if unknown:
        raise ValueError(f"{gt.GPU_POD_LIST}: unknown qos {', '.join(unknown)}")
    cluster_gpus = sum(len(n.gpus) for n in nodes)
    rng = random.Random(f"{params.seed}-gpu")
    drawn: list[tuple[gt.TraceGpuPod, int]] = []
    total_milli = 0
    while rows and total_milli < gpu.demand * cluster_gpus * 1000:
        row = rng.choice(rows)
        drawn.append((row, len(drawn)))
        total_milli += row.gpu_total_milli
    drawn.sort(key=lambda d: (d[0].creation_s, d[0].name, d[1]))
    window_s = params.hours * 3600 - params.batch_warmup_s
    k = (TRACE_END_S - gpu.window_start_s) / window_s
    arrivals = []
    for row, draw in drawn:
        at = params.batch_warmup_s + (row.creation_s - gpu.window_start_s) / k
        arrivals.append(Arrival(round(at, 3), _pod(row, draw, at, row.lifetime_s / gpu.lifetime_compression)))
    ls = [a for a in arrivals if a.pod.qos_class == "LS"]
    desc: dict[str, object] = {
        "gpu_params": asdict(gpu),
        "cluster_gpus": cluster_gpus,
        "gpu_pods_in_window": len(rows),
        "gpu_pods": len(arrivals),
        "gpu_pods_ls": len(ls),
        "gpu_pods_be": len(arrivals) - len(ls),
        "gpu_pods_share": sum(1 for r, _ in drawn if r.num_gpu == 1 and r.gpu_milli < 1000),
        "gpu_pods_multi": sum(1 for r, _ in drawn if r.num_gpu > 1),
        "gpu_requested": round(total_milli / 1000, 2),
        "gpu_time_compression": round(k, 2),
        "ls_pods": len(ls),
    }
    return arrivals, desc


def _time_weighted_ls(arrivals: list[Arrival], params: ScenarioParams) -> list[Arrival]:
    """The LS GPU pods with requests × the share of the run they are alive (arrival to arrival + lifetime, cut
    at the run's end): the online load the teams' quotas are sized against (:func:`colo.sim.jobs.batch_pool`,
    ``batch_offer_estimate``), since these pods come and go, unlike the default scenario's services."""
    run_s = params.hours * 3600
    out = []
    for a in arrivals:
        if a.pod.qos_class != "LS" or a.pod.sim is None:
            continue
        share = max(0.0, min(run_s, a.at + a.pod.sim.duration_s) - a.at) / run_s
        r = a.pod.requests
        out.append(Arrival(a.at, msgspec.structs.replace(
            a.pod, requests=Resources(cpu=round(r.cpu * share), memory=round(r.memory * share)))))
    return out


def build_gpu_scenario(params: ScenarioParams | None = None, root: Path | None = None,
                       gpu: GpuParams | None = None) -> Scenario:
    """The ``gpu`` scenario for ``params`` (nodes, hours, seed, batch and job settings) and ``gpu`` (module
    doc). Raises ValueError listing every invalid parameter (or an asked node count above the GPU node
    list's 1,213) and TraceError when a trace file is missing."""
    params = params or ScenarioParams()
    gpu = gpu or GpuParams()
    problems = params.problems() + gpu.problems()
    if problems:
        raise ValueError("; ".join(problems))
    rng = random.Random(params.seed)
    nodes = _gpu_nodes(params, rng, root)
    gpu_arrivals, gpu_desc = _gpu_pods(params, gpu, nodes, root)
    tasks, batch_desc = _batch_pods(params, nodes, root)
    workloads: list[WorkloadArrival] = []
    quotas: list[ElasticQuota] = []
    baseline_quotas: list[ElasticQuota] = []
    job_desc: dict[str, object] = {}
    batch: list[Arrival] = []
    if params.jobs:
        workloads, quotas, baseline_quotas, job_desc = _as_jobs(params, tasks, nodes,
                                                                _time_weighted_ls(gpu_arrivals, params))
    else:
        batch = [Arrival(t.at, pod) for t in tasks for pod in t.pods]
    arrivals = sorted(gpu_arrivals + batch, key=lambda a: (a.at, a.pod.uid))
    cluster_cpu = sum(n.allocatable.cpu for n in nodes)
    desc: dict[str, object] = {
        "params": asdict(params),
        "traces_dir": str(root or tr.traces_dir()),
        "traces": [gt.GPU_NODE_LIST, gt.GPU_POD_LIST, tr.BATCH_TASK, tr.SERVER_EVENT],
        "nodes": len(nodes),
        "cluster_cpu_milli": cluster_cpu,
        "cluster_memory_bytes": sum(n.allocatable.memory for n in nodes),
        **gpu_desc,
        **batch_desc,
        **job_desc,
    }
    return Scenario(params=params, nodes=nodes, arrivals=arrivals, description=desc, workloads=workloads,
                    quotas=quotas, baseline_quotas=baseline_quotas)
