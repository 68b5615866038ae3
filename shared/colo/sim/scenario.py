"""Scenario assembly from the real traces, deterministic from a seed (docs/scenario.md).

A :class:`Scenario` is a list of nodes (``NodeSpec``), online LS pods submitted at
time 0 whose demand follows Bitbrains VM series, and batch pods with arrival times
from the Alibaba v2017 batch tasks. Every number comes from a trace file or from a
documented scaling rule below; the same ``ScenarioParams`` always give the same
scenario, byte for byte.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from colo.messages import (
    HOSTNAME_LABEL,
    ElasticQuota,
    NodeSpec,
    PodSpec,
    Resources,
    SimWorkload,
    WorkloadSpec,
)
from colo.sim import jobs as jb
from colo.sim import traces as tr
from colo.sim.be_cpu_pods import be_cpu_pods
from colo.sim.gpu_traces import GPU_POD_LIST
from colo.sim.node_topology import default_topology, trace_gpus

V2017_MACHINES = 1313
"""Machines of the v2017 trace (``server_event.csv``); batch instances scale by nodes / this."""
V2017_MACHINE_CORES = 64
"""CPU cores of every v2017 machine (``server_event.csv`` column 5)."""
PODS_PER_NODE = 110
"""Kubernetes' default max pods per node, used as allocatable pods."""
LS_PRIORITY = 9500
BATCH_PRIORITY = 5500
LOAD_AWARE_CPU_THRESHOLD = 0.65
"""LoadAware CPU filter threshold (REFERENCE.md §4), used to keep LS packing placeable."""
LOAD_AWARE_CPU_FACTOR = 0.85
"""LoadAware CPU estimation factor (REFERENCE.md §4)."""
VM_STEP_S = 300.0
"""Bitbrains sampling interval (README §5)."""


@dataclass(frozen=True)
class ScenarioParams:
    """Inputs of :func:`build_scenario`; see docs/scenario.md for each rule.

    ``nodes`` count sampled from the v2023 node list (``node_kind`` "all" or "cpu");
    ``hours`` of virtual time; ``ls_cpu_fraction`` target share of cluster CPU requested
    by LS pods; ``batch_scale`` multiplies the nodes/1313 instance scaling;
    ``batch_window_start_s`` trace second where the batch window starts;
    ``min_batch_duration_s`` drops shorter tasks (below the tick resolution);
    ``max_batch_pod_cpu_milli`` caps the CPU of a pod made of grouped instances;
    ``batch_warmup_s`` delays every batch arrival so that the long-running online services
    (which pre-exist in a real cluster) are placed first.

    Jobs (docs/scenario.md "Jobs, gangs and teams"): with ``jobs`` every batch task enters as one ``Job``
    (:mod:`colo.sim.jobs`) instead of bare pods; its pods form one gang of ``min_member`` = all of them up
    to ``gang_large_members``, else ``gang_large_min_fraction`` of them; tasks are split among ``teams``
    teams, each with an elastic quota of min = an equal share of ``quota_min_fraction`` of the batch capacity
    the run offers and max = ``quota_max_factor`` × min; ``high_priority_fraction`` of the tasks arriving after
    ``high_priority_after_fraction`` of the run are high-priority jobs, koord-batch at 5900 (at least one when > 0).

    CPU-heavy batch (docs/scenario.md "CPU-heavy batch pods", :mod:`colo.sim.be_cpu_pods`):
    ``be_cpu_pods_fraction`` > 0 adds alibaba-gpu-v2023's CPU-only BE pods as bare batch pods until their
    CPU-time reaches that share of the cluster's over the run (0 = none, the default); they arrive over the first
    ``be_cpu_pods_arrival_fraction`` of the batch window (1 = all of it, the default; the ``saturated`` preset
    takes 0.25 so that the demand exceeds what fits from early on, not only after the cluster has filled up).
    """

    nodes: int = 100
    hours: float = 6.0
    seed: int = 1
    node_kind: str = "all"
    ls_cpu_fraction: float = 0.6
    batch_scale: float = 0.5
    batch_window_start_s: int = 21600
    min_batch_duration_s: int = 600
    max_batch_pod_cpu_milli: int = 8000
    batch_warmup_s: int = 300
    jobs: bool = False
    teams: int = 2
    gang_large_members: int = 64
    gang_large_min_fraction: float = 0.5
    high_priority_fraction: float = 0.03
    high_priority_after_fraction: float = 0.25
    quota_min_fraction: float = 0.8
    quota_max_factor: float = 1.5
    be_cpu_pods_fraction: float = 0.0
    be_cpu_pods_arrival_fraction: float = 1.0

    def problems(self) -> list[str]:
        """Every invalid parameter (empty when valid)."""
        out: list[str] = []
        if self.nodes < 1:
            out.append(f"nodes must be ≥ 1, got {self.nodes}")
        if self.hours <= 0:
            out.append(f"hours must be > 0, got {self.hours}")
        if self.node_kind not in ("all", "cpu"):
            out.append(f"node_kind must be 'all' or 'cpu', got {self.node_kind!r}")
        if not 0 <= self.ls_cpu_fraction <= 1:
            out.append(f"ls_cpu_fraction must be within 0..1, got {self.ls_cpu_fraction}")
        if self.batch_scale < 0:
            out.append(f"batch_scale must be ≥ 0, got {self.batch_scale}")
        if self.batch_warmup_s < 0:
            out.append(f"batch_warmup_s must be ≥ 0, got {self.batch_warmup_s}")
        elif self.hours > 0 and self.batch_warmup_s >= self.hours * 3600:
            out.append(f"hours {self.hours:g} ({self.hours * 3600:g} s) must be longer than the batch warm-up, "
                       f"batch_warmup_s {self.batch_warmup_s} s (--hours above {self.batch_warmup_s / 3600:.3g})")
        if self.max_batch_pod_cpu_milli < 1:
            out.append("max_batch_pod_cpu_milli must be ≥ 1")
        if not 1 <= self.teams <= 26:
            out.append(f"teams must be within 1..26, got {self.teams}")
        if self.gang_large_members < 1:
            out.append(f"gang_large_members must be ≥ 1, got {self.gang_large_members}")
        if not 0 < self.gang_large_min_fraction <= 1:
            out.append(f"gang_large_min_fraction must be within (0, 1], got {self.gang_large_min_fraction}")
        if not 0 <= self.high_priority_fraction <= 1:
            out.append(f"high_priority_fraction must be within 0..1, got {self.high_priority_fraction}")
        if not 0 <= self.high_priority_after_fraction < 1:
            out.append(f"high_priority_after_fraction must be within [0, 1), got {self.high_priority_after_fraction}")
        if not 0 < self.quota_min_fraction <= 1:
            out.append(f"quota_min_fraction must be within (0, 1], got {self.quota_min_fraction}")
        if self.quota_max_factor < 1:
            out.append(f"quota_max_factor must be ≥ 1 (max below min), got {self.quota_max_factor}")
        if not 0 <= self.be_cpu_pods_fraction <= 10:
            out.append(f"be_cpu_pods_fraction must be within 0..10, got {self.be_cpu_pods_fraction}")
        if not 0 < self.be_cpu_pods_arrival_fraction <= 1:
            out.append(f"be_cpu_pods_arrival_fraction must be within (0, 1], got {self.be_cpu_pods_arrival_fraction}")
        return out

    def job_params(self) -> jb.JobParams:
        """The job modelling's parameters."""
        return jb.JobParams(teams=self.teams, gang_large_members=self.gang_large_members,
                            gang_large_min_fraction=self.gang_large_min_fraction,
                            high_priority_fraction=self.high_priority_fraction,
                            high_priority_after_fraction=self.high_priority_after_fraction,
                            quota_min_fraction=self.quota_min_fraction, quota_max_factor=self.quota_max_factor,
                            seed=self.seed)


@dataclass(frozen=True)
class Arrival:
    """A pod submitted at virtual time ``at`` (seconds from the start of the run)."""

    at: float
    pod: PodSpec


@dataclass(frozen=True)
class WorkloadArrival:
    """A workload (a batch task's ``Job``) submitted at virtual time ``at`` (seconds from the start of the run)."""

    at: float
    workload: WorkloadSpec


@dataclass
class Scenario:
    """Nodes and pod arrivals (sorted by time, then uid) plus a description for the report; with
    ``params.jobs`` the batch tasks are ``workloads`` (sorted by time, then uid) and the teams' ``quotas``
    (on batch-cpu/batch-memory, shares of the estimated batch offer) and ``baseline_quotas`` (on cpu/memory,
    shares of what the LS requests leave) for a run without co-location."""

    params: ScenarioParams
    nodes: list[NodeSpec]
    arrivals: list[Arrival]
    description: dict[str, object] = field(default_factory=dict)
    workloads: list[WorkloadArrival] = field(default_factory=list)
    quotas: list[ElasticQuota] = field(default_factory=list)
    baseline_quotas: list[ElasticQuota] = field(default_factory=list)

    @property
    def duration_s(self) -> float:
        """Length of the run in seconds (``hours`` × 3600)."""
        return self.params.hours * 3600.0

    def ls_pods(self) -> list[PodSpec]:
        """The online pods."""
        return [a.pod for a in self.arrivals if a.pod.labels.get("colo.sim/kind") == "ls"]

    def batch_pods(self) -> list[PodSpec]:
        """The batch pods submitted bare (with ``params.jobs`` only the CPU-heavy ones of
        ``params.be_cpu_pods_fraction``: see :meth:`jobs`)."""
        return [a.pod for a in self.arrivals if a.pod.labels.get("colo.sim/kind") == "batch"]

    def gpu_pods(self) -> list[PodSpec]:
        """The pods with a GPU request (the ``gpu`` scenario's, :mod:`colo.sim.gpu_scenario`)."""
        return [a.pod for a in self.arrivals if a.pod.gpu is not None]

    def jobs(self) -> list[WorkloadSpec]:
        """The batch tasks' Jobs (empty without ``params.jobs``)."""
        return [w.workload for w in self.workloads]


def _nodes(params: ScenarioParams, rng: random.Random, root: Path | None) -> list[NodeSpec]:
    pool = tr.load_nodes(root)
    if params.node_kind == "cpu":
        pool = [n for n in pool if n.gpu == 0]
    if params.nodes > len(pool):
        raise ValueError(f"asked for {params.nodes} nodes, the trace has {len(pool)} ({params.node_kind})")
    chosen = sorted(rng.sample(pool, params.nodes), key=lambda n: n.sn)
    return [node_spec(n) for n in chosen]


def node_spec(n: tr.TraceNode) -> NodeSpec:
    """The NodeSpec of a gpu-v2023 node row: capacity = allocatable = its CPU and memory and
    :data:`PODS_PER_NODE` pods, the default topology and the row's GPUs (:mod:`colo.sim.node_topology`)."""
    res = Resources(cpu=n.cpu_milli, memory=n.memory_bytes, pods=PODS_PER_NODE)
    return NodeSpec(name=n.sn, capacity=res, allocatable=res, cpus=n.cpu_milli // 1000,
                    labels={"colo.sim/gpu": str(n.gpu), HOSTNAME_LABEL: n.sn},
                    topology=default_topology(n.cpu_milli), gpus=trace_gpus(n.gpu, n.model))


class _Rooms:
    """LS packing state over all nodes as arrays (one entry per node)."""

    def __init__(self, nodes: list[NodeSpec]) -> None:
        self.cpu_cap = np.array([n.allocatable.cpu for n in nodes], dtype=np.int64)
        self.mem_cap = np.array([n.allocatable.memory for n in nodes], dtype=np.int64)
        self.cpu = np.zeros(len(nodes), dtype=np.int64)
        self.cpu_limit = np.zeros(len(nodes), dtype=np.int64)
        self.mem = np.zeros(len(nodes), dtype=np.int64)
        self.apps: dict[str, np.ndarray] = {}

    def place(self, s: tr.TraceService) -> bool:
        """Spread placement of ``s`` (most CPU left afterwards, as the scheduler's least-allocated score
        prefers; ties by node order); False if none fits."""
        fits = ((self.cpu + s.cpu_request_milli <= self.cpu_cap)
                & ((self.cpu_limit + s.cpu_limit_milli) * LOAD_AWARE_CPU_FACTOR
                   <= LOAD_AWARE_CPU_THRESHOLD * self.cpu_cap)
                & (self.mem + s.memory_request_bytes <= self.mem_cap))
        if s.max_instance_per_node >= 0 and s.app in self.apps:
            fits &= self.apps[s.app] < s.max_instance_per_node
        if not fits.any():
            return False
        left = np.where(fits, self.cpu_cap - self.cpu - s.cpu_request_milli, -1)
        i = int(np.argmax(left))
        self.cpu[i] += s.cpu_request_milli
        self.cpu_limit[i] += s.cpu_limit_milli
        self.mem[i] += s.memory_request_bytes
        self.apps.setdefault(s.app, np.zeros(len(self.cpu), dtype=np.int64))[i] += 1
        return True


def _series(vm: tr.VMSeries, offset: int, samples: int) -> tuple[list[float], list[float]]:
    n = len(vm.cpu_util)
    idx = [(offset + i) % n for i in range(samples)]
    return [round(vm.cpu_util[i], 4) for i in idx], [round(vm.memory_util[i], 4) for i in idx]


def _ls_pods(params: ScenarioParams, nodes: list[NodeSpec], rng: random.Random,
             root: Path | None) -> tuple[list[Arrival], dict[str, object]]:
    services = tr.load_services(root)
    rng.shuffle(services)
    rooms = _Rooms(nodes)
    cluster_cpu = sum(n.allocatable.cpu for n in nodes)
    target = params.ls_cpu_fraction * cluster_cpu
    chosen: list[tr.TraceService] = []
    requested = 0
    for s in services:
        if requested >= target:
            break
        if rooms.place(s):
            requested += s.cpu_request_milli
            chosen.append(s)
    vms = tr.list_vms(root)
    cache: dict[str, tr.VMSeries] = {}
    samples = int(params.hours * 3600 // VM_STEP_S) + 1
    arrivals = []
    # largest first, as the packing check would place them: the scheduler orders equal
    # priorities by creation time, so creation times 1 ms apart carry that order
    ordered = sorted(chosen, key=lambda s: (-s.cpu_request_milli, -s.memory_request_bytes, s.instance))
    for i, s in enumerate(ordered):
        vm_id = rng.choice(vms)
        vm = cache.get(vm_id) or cache.setdefault(vm_id, tr.load_vm(vm_id, root))
        cpu_util, mem_util = _series(vm, rng.randrange(len(vm.cpu_util)), samples)
        res = Resources(cpu=s.cpu_request_milli, memory=s.memory_request_bytes)
        lim = Resources(cpu=s.cpu_limit_milli, memory=s.memory_limit_bytes)
        pod = PodSpec(
            uid=f"ls-{s.instance.replace('_', '-')}", name=s.instance.replace("_", "-"),
            namespace="online", labels={"app": s.app, "colo.sim/kind": "ls", "colo.sim/vm": vm_id},
            priority=LS_PRIORITY, priority_class="prod", qos_class="LS", requests=res, limits=lim,
            app=s.app, max_instance_per_node=s.max_instance_per_node, created_at=i * 0.001,
            sim=SimWorkload(kind="series", step_s=VM_STEP_S, cpu_util=cpu_util, memory_util=mem_util,
                            cpu_scale_milli=s.cpu_limit_milli, memory_scale_bytes=s.memory_limit_bytes),
        )
        arrivals.append(Arrival(0.0, pod))
    desc: dict[str, object] = {
        "ls_instances_in_trace": len(services),
        "ls_pods": len(arrivals),
        "ls_cpu_requested_milli": requested,
        "ls_cpu_requested_fraction": round(requested / cluster_cpu, 4) if cluster_cpu else 0.0,
        "ls_memory_requested_fraction": round(
            sum(s.memory_request_bytes for s in chosen) / max(1, sum(n.allocatable.memory for n in nodes)), 4),
        "ls_apps": len({s.app for s in chosen}),
        "bitbrains_vms_used": len(cache),
    }
    return arrivals, desc


@dataclass(frozen=True)
class _TaskPods:
    """The pods of one batch task (identical, ``batch-<job>-<task>-<k>``) and their arrival."""

    job_id: str
    task_id: str
    at: float
    pods: list[PodSpec]


def _batch_pods(params: ScenarioParams, nodes: list[NodeSpec],
                root: Path | None) -> tuple[list[_TaskPods], dict[str, object]]:
    tasks = tr.load_batch_tasks(root)
    m_norm = tr.v2017_median_machine_memory(root)
    cluster_cpu = sum(n.allocatable.cpu for n in nodes)
    cluster_mem = sum(n.allocatable.memory for n in nodes)
    bytes_per_milli = cluster_mem / max(1, cluster_cpu)
    machine_bytes = V2017_MACHINE_CORES * 1000 * bytes_per_milli
    start = params.batch_window_start_s
    end = start + params.hours * 3600 - params.batch_warmup_s
    window = [t for t in tasks if t.status == "Terminated" and start <= t.create_s < end
              and t.duration_s >= params.min_batch_duration_s and t.plan_cpu > 0]
    window.sort(key=lambda t: (t.create_s, t.job_id, t.task_id))
    scale = params.nodes / V2017_MACHINES * params.batch_scale
    out: list[_TaskPods] = []
    pods_total = 0
    offered_milli_s = 0.0
    offered_byte_s = 0.0
    for t in window:
        cpu_inst = t.plan_cpu * 10
        group = max(1, params.max_batch_pod_cpu_milli // cpu_inst)
        expected = t.instances * scale / group
        task_rng = random.Random(f"{params.seed}-{t.job_id}-{t.task_id}")
        count = int(expected) + (1 if task_rng.random() < expected - int(expected) else 0)
        cpu = cpu_inst * group
        memory = round(t.plan_mem / m_norm * machine_bytes) * group
        res = Resources(cpu=cpu, memory=memory)
        at = float(t.create_s - start + params.batch_warmup_s)
        pods: list[PodSpec] = []
        for k in range(count):
            uid = f"batch-{t.job_id}-{t.task_id}-{k}"
            pod = PodSpec(
                uid=uid, name=uid, namespace="batch",
                labels={"app": f"job-{t.job_id}", "colo.sim/kind": "batch"},
                priority=BATCH_PRIORITY, qos_class="BE", requests=res, limits=res,
                app=f"job-{t.job_id}", created_at=at,
                sim=SimWorkload(kind="batch", cpu_milli=cpu, memory_bytes=memory,
                                duration_s=float(t.duration_s)),
            )
            pods.append(pod)
            offered_milli_s += cpu * t.duration_s
            offered_byte_s += memory * t.duration_s
        if pods:
            out.append(_TaskPods(str(t.job_id), str(t.task_id), at, pods))
            pods_total += len(pods)
    desc: dict[str, object] = {
        "batch_tasks_in_trace": len(tasks),
        "batch_tasks_in_window": len(window),
        "batch_pods": pods_total,
        "batch_instance_scale": round(scale, 6),
        "v2017_machine_memory_normalized": round(m_norm, 4),
        "v2017_machine_memory_bytes": round(machine_bytes),
        "batch_offered_cpu_fraction": round(offered_milli_s / (cluster_cpu * params.hours * 3600), 4),
        "batch_offered_memory_fraction": round(offered_byte_s / (cluster_mem * params.hours * 3600), 4),
    }
    return out, desc


def _as_jobs(params: ScenarioParams, tasks: list[_TaskPods], nodes: list[NodeSpec], ls: list[Arrival],
             ) -> tuple[list[WorkloadArrival], list[ElasticQuota], list[ElasticQuota], dict[str, object]]:
    """Each task's pods as one Job of its team, the teams' quotas and their description (docs/scenario.md)."""
    jp = params.job_params()
    after_s = params.high_priority_after_fraction * params.hours * 3600
    high = jb.high_priority_tasks([(f"{t.job_id}-{t.task_id}", t.at) for t in tasks],
                                  jp.high_priority_fraction, after_s, jp.seed)
    workloads = []
    for t in tasks:
        team = jb.team_of(t.job_id, jp.teams)
        w = jb.make_job(t.pods, t.job_id, t.task_id, team, f"{t.job_id}-{t.task_id}" in high, t.at, jp)
        workloads.append(WorkloadArrival(t.at, w))
    workloads.sort(key=lambda w: (w.at, w.workload.uid))
    offer = jb.batch_offer_estimate(nodes, [a.pod for a in ls])
    pool = jb.batch_pool(nodes, [a.pod for a in ls])
    quotas = jb.team_quotas(offer, jp.teams, jp.quota_min_fraction, jp.quota_max_factor, jb.BATCH_KEYS)
    baseline_quotas = jb.team_quotas(pool, jp.teams, jp.quota_min_fraction, jp.quota_max_factor, jb.NATIVE_KEYS)
    gangs = [w.workload for w in workloads if w.workload.pod_group is not None]
    desc: dict[str, object] = {
        "jobs": len(workloads),
        "gangs": len(gangs),
        "gang_pods": sum(w.parallelism for w in gangs),
        "gang_largest": max((w.parallelism for w in gangs), default=0),
        "gangs_partial_min_member": sum(1 for w in gangs if w.pod_group and w.pod_group.min_member < w.parallelism),
        "high_priority_jobs": sorted(w.workload.name for w in workloads if w.workload.template.priority == jb.HIGH_PRIORITY),
        "jobs_per_team": {team: sum(1 for w in workloads if w.workload.labels[jb.TEAM_LABEL] == team)
                          for team in jb.team_names(jp.teams)},
        "batch_offer_estimate_cpu_milli": offer.cpu,
        "batch_offer_estimate_memory_bytes": offer.memory,
        "batch_pool_cpu_milli": pool.cpu,
        "batch_pool_memory_bytes": pool.memory,
        "quotas": {q.name: {"min": q.min, "max": q.max} for q in quotas},
        "baseline_quotas": {q.name: {"min": q.min, "max": q.max} for q in baseline_quotas},
    }
    return workloads, quotas, baseline_quotas, desc


def build_scenario(params: ScenarioParams | None = None, root: Path | None = None) -> Scenario:
    """Assemble the scenario for ``params`` from the traces under ``root`` (default :func:`traces_dir`).

    Raises ValueError for invalid parameters (every problem listed) and TraceError when a
    trace file is missing.
    """
    params = params or ScenarioParams()
    problems = params.problems()
    if problems:
        raise ValueError("; ".join(problems))
    rng = random.Random(params.seed)
    nodes = _nodes(params, rng, root)
    ls, ls_desc = _ls_pods(params, nodes, rng, root)
    tasks, batch_desc = _batch_pods(params, nodes, root)
    workloads: list[WorkloadArrival] = []
    quotas: list[ElasticQuota] = []
    baseline_quotas: list[ElasticQuota] = []
    job_desc: dict[str, object] = {}
    if params.jobs:
        workloads, quotas, baseline_quotas, job_desc = _as_jobs(params, tasks, nodes, ls)
        batch = []
    else:
        batch = [Arrival(t.at, pod) for t in tasks for pod in t.pods]
    cpu_heavy, cpu_heavy_desc = be_cpu_pods(params.be_cpu_pods_fraction, params.seed, params.hours,
                                            params.batch_warmup_s, nodes, root,
                                            arrival_fraction=params.be_cpu_pods_arrival_fraction)
    batch += [Arrival(at, pod) for at, pod in cpu_heavy]
    arrivals = sorted(ls + batch, key=lambda a: (a.at, a.pod.uid))
    traces = [tr.NODE_LIST, tr.DLRM_TRACE, tr.BITBRAINS_DIR, tr.BATCH_TASK, tr.SERVER_EVENT]
    desc: dict[str, object] = {
        "params": asdict(params),
        "traces_dir": str(root or tr.traces_dir()),
        "traces": traces + ([GPU_POD_LIST] if cpu_heavy else []),
        "nodes": len(nodes),
        "cluster_cpu_milli": sum(n.allocatable.cpu for n in nodes),
        "cluster_memory_bytes": sum(n.allocatable.memory for n in nodes),
        **ls_desc,
        **batch_desc,
        **cpu_heavy_desc,
        **job_desc,
    }
    return Scenario(params=params, nodes=nodes, arrivals=arrivals, description=desc, workloads=workloads,
                    quotas=quotas, baseline_quotas=baseline_quotas)
