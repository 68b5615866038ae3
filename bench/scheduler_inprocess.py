"""In-process scheduler throughput on a large cluster built from the public traces.

Nodes: sizes sampled from alibaba-gpu-v2023's node list (GPU nodes carry a NoSchedule
taint and a label), four zones as labels, load metrics from Bitbrains VM utilisation
samples, batch allocatable = 65 % of allocatable − usage. Pods: 70 % prod LS pods with the
requests of alibaba-gpu-v2023's online pods (GPU pods tolerate the taint and select GPU
nodes; workloads of 20 replicas, some capped per node, a fifth pinned to a zone), 30 % BE
batch pods from alibaba-v2017 ``batch_task`` (batch-cpu / batch-memory; every instance of a
task shares its spec). Default profile: QueueSort,
NodeSelector, TaintToleration, NodeResourcesFit, MaxInstancePerNode, LoadAware filters and
the default scores.

Prints per-pod decision latency percentiles, pods/s (scheduling cycles only, and including
queue intake), and ``speedup_vs_loop``: the same decisions made by the per-node Python loop of
:mod:`colo_scheduler.loop`, timed on a subsample of pods in this run. The last line is JSON.

Run: ``.venv/bin/python bench/scheduler_inprocess.py --nodes 5000 --pods 50000``; with
``--compare-pick 3`` it also runs the framework's array pick and its score-bucket pick (same
decisions) side by side, cycle for cycle, three times, and prints their ratios. ``pods_per_cpu_s`` divides by
the process's CPU time in the cycles, the steadier figure when other work shares the CPUs.
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import statistics
import time
import zlib
from dataclasses import dataclass

import numpy as np
import psutil

from colo.messages import NodeMetric, NodeResource, NodeSpec, PodSpec, Resources, Taint, Toleration, Usage
from colo.sim import traces
from colo_scheduler.core import Scheduler
from colo_scheduler.framework.registry import ProfileConfig
from colo_scheduler.settings import SchedulerSettings

ZONES = ("zone-a", "zone-b", "zone-c", "zone-d")
GPU_TAINT = Taint(key="nvidia.com/gpu", value="present", effect="NoSchedule")
NOW = 10_000.0


@dataclass
class Cluster:
    """What the bench feeds the scheduler: node specs, batch allocatable and metrics."""

    nodes: list[NodeSpec]
    resources: list[NodeResource]
    metrics: list[NodeMetric]


def build_cluster(n: int, seed: int) -> Cluster:
    """``n`` nodes sampled from the trace node list with Bitbrains utilisation as load."""
    rng = random.Random(seed)
    trace_nodes = traces.load_nodes()
    vms = traces.list_vms()
    series = [traces.load_vm(v) for v in rng.sample(vms, min(20, len(vms)))]
    nodes, resources, metrics = [], [], []
    for i in range(n):
        t = rng.choice(trace_nodes)
        r = Resources(cpu=t.cpu_milli, memory=t.memory_bytes, pods=110)
        name = f"node-{i:05}"
        nodes.append(NodeSpec(name=name, capacity=r, allocatable=r,
                              labels={"topology.kubernetes.io/zone": ZONES[i % len(ZONES)],
                                      "colo.io/gpu": str(t.gpu > 0).lower()},
                              taints=[GPU_TAINT] if t.gpu > 0 else []))
        vm = rng.choice(series)
        k = rng.randrange(len(vm.cpu_util))
        cpu_used = int(t.cpu_milli * min(vm.cpu_util[k], 0.9))
        mem_used = int(t.memory_bytes * min(vm.memory_util[k], 0.9))
        metrics.append(NodeMetric(node=name, at=NOW - 30, node_usage=Usage(cpu=cpu_used, memory=mem_used)))
        resources.append(NodeResource(node=name, batch_cpu=max(0, int(t.cpu_milli * 0.65) - cpu_used),
                                      batch_memory=max(0, int(t.memory_bytes * 0.65) - mem_used)))
    return Cluster(nodes, resources, metrics)


POD_LIST = "alibaba-gpu-v2023/openb_pod_list_default.csv"


def _v2023_online_pods() -> list[tuple[int, int, int]]:
    """(cpu milli-cores, memory bytes, GPUs) of the LS / Burstable / Guaranteed pods of alibaba-gpu-v2023."""
    with traces.trace_path(POD_LIST).open(newline="") as f:
        return [(int(r["cpu_milli"]), int(r["memory_mib"]) * 2**20, int(r["num_gpu"] or 0))
                for r in csv.DictReader(f) if r["qos"] in ("LS", "Burstable", "Guaranteed")]


def build_pods(n: int, seed: int, median_node_memory: int) -> list[PodSpec]:
    """``n`` pods: 70 % prod LS pods of alibaba-gpu-v2023 (requests = limits; GPU pods tolerate the GPU
    taint and select GPU nodes; one workload per 20 pods, some capped per node, a fifth pinned to a
    zone), 30 % BE pods of v2017 batch tasks (every instance of a task shares its spec)."""
    rng = random.Random(seed + 1)
    online = _v2023_online_pods()
    tasks = [t for t in traces.load_batch_tasks() if t.plan_cpu > 0 and t.plan_mem > 0]
    m_norm = traces.v2017_median_machine_memory()
    n_ls = n * 7 // 10
    pods: list[PodSpec] = []
    for j in range(0, n_ls, 20):  # a workload: 20 replicas of one trace pod
        cpu, mem, gpu = rng.choice(online)
        app = f"svc-{j // 20}"
        pinned = zlib.crc32(app.encode()) % 5 == 0
        selector = {"colo.io/gpu": "true"} if gpu else {}
        if pinned:
            selector["topology.kubernetes.io/zone"] = ZONES[zlib.crc32(app.encode()) % 4]
        cap = rng.choice((-1, -1, 1, 2))
        for k in range(min(20, n_ls - j)):
            pods.append(PodSpec(
                uid=f"ls-{j + k}", name=f"ls-{j + k}", priority_class="prod", qos_class="LS", app=app,
                requests=Resources(cpu=cpu, memory=mem), limits=Resources(cpu=cpu, memory=mem),
                max_instance_per_node=cap, node_selector=selector,
                tolerations=[Toleration(key=GPU_TAINT.key, operator="Exists")] if gpu else [],
                created_at=float(j + k)))
    j = 0
    while len(pods) < n:
        t = rng.choice(tasks)
        mem = max(1, round(t.plan_mem / m_norm * median_node_memory))
        for _ in range(min(t.instances, n - len(pods))):
            pods.append(PodSpec(
                uid=f"be-{j}", name=f"be-{j}", priority_class="batch", qos_class="BE",
                app=f"job-{t.job_id}-{t.task_id}",
                requests=Resources(batch_cpu=t.plan_cpu * 10, batch_memory=mem),
                limits=Resources(batch_cpu=t.plan_cpu * 10, batch_memory=mem), created_at=float(j)))
            j += 1
    rng.shuffle(pods)  # arrivals interleave LS and BE
    return pods


def load(core: Scheduler, cluster: Cluster) -> None:
    """Register the cluster in a scheduler core."""
    for spec in cluster.nodes:
        core.on_node(spec, NOW)
    for nr in cluster.resources:
        core.on_node_resource(nr, NOW)
    for m in cluster.metrics:
        core.on_metric(m, NOW)


def bench_profile(settings: SchedulerSettings) -> ProfileConfig:
    """The profile the issue asks for: fit + load-aware + selector + taints (+ the per-node cap the
    trace carries), scored by LoadAware and LeastAllocated."""
    return ProfileConfig(
        queue_sort="PrioritySort",
        filter=("NodeSelector", "TaintToleration", "NodeResourcesFit", "MaxInstancePerNode", "LoadAware"),
        score={"LoadAware": settings.load_aware_weight, "NodeResourcesLeastAllocated": settings.least_allocated_weight},
        reserve=("NodeResourcesFit", "LoadAware", "MaxInstancePerNode"))


def run_vectorized(cluster: Cluster, pods: list[PodSpec], settings: SchedulerSettings,
                   profile: ProfileConfig | None = None, use_score_buckets: bool = True) -> dict[str, float]:
    """Schedule every pod; wall and CPU times of intake and cycles, per-pod decision latencies.
    ``use_score_buckets`` False picks with passes over the class arrays (the reference path)."""
    core = Scheduler(settings, profile or bench_profile(settings), use_score_buckets=use_score_buckets)
    load(core, cluster)
    t0 = time.perf_counter()
    for p in pods:
        core.add_pod(p, NOW)
    intake_s = time.perf_counter() - t0
    latencies: list[float] = []
    placed = failed = 0
    cycles_s = cycles_cpu_s = 0.0
    now = NOW
    while len(core.queue.lengths()) and core.queue.lengths()["active"]:
        t0, c0 = time.perf_counter(), time.process_time()
        out = core.schedule_cycle(now)
        cycles_s += time.perf_counter() - t0
        cycles_cpu_s += time.process_time() - c0
        latencies.extend(p.decision_ms for p in out.placements)
        latencies.extend(f.decision_ms for f in out.failures)
        placed += len(out.placements)
        failed += len(out.failures)
        now += 0.001
    lat = np.array(latencies)
    return {
        "placed": placed, "unschedulable": failed, "cycles_s": cycles_s, "intake_s": intake_s,
        "pods_per_s": (placed + failed) / cycles_s, "pods_per_cpu_s": (placed + failed) / cycles_cpu_s,
        "pods_per_s_with_intake": (placed + failed) / (cycles_s + intake_s),
        "decision_p50_ms": float(np.percentile(lat, 50)), "decision_p99_ms": float(np.percentile(lat, 99)),
        "decision_max_ms": float(lat.max()),
        "class_full": core.framework.cache.stats["full"],
        "class_incremental": core.framework.cache.stats["incremental"],
    }


def run_loop(cluster: Cluster, pods: list[PodSpec], settings: SchedulerSettings, sample: int,
             seed: int) -> tuple[float, float, int]:
    """Per-pod seconds of the vectorised framework and of the per-node loop on the same ``sample``
    pods at the same state (the cluster after a warm-up placement of other pods); and how many
    loop decisions disagreed with the vectorised choice (must be 0)."""
    from colo_scheduler.loop import loop_best_nodes

    core = Scheduler(settings, bench_profile(settings), use_class_cache=False)
    load(core, cluster)
    for p in pods[: len(pods) // 2]:  # a partly filled cluster
        core.add_pod(p, NOW)
    core.schedule_cycle(NOW)
    rng = random.Random(seed)
    probe = rng.sample(pods[len(pods) // 2:], sample)
    infos = [core.pod_info(p, NOW) for p in probe]
    state = core.framework.begin_cycle(NOW)
    t0 = time.perf_counter()
    picks = [core.framework.schedule_one(state, info).node for info in infos]
    vec_s = (time.perf_counter() - t0) / sample
    t0 = time.perf_counter()
    bests = [loop_best_nodes(core.table, NOW, info, core.framework.profile, settings) for info in infos]
    loop_s = (time.perf_counter() - t0) / sample
    disagree = sum(1 for pick, best in zip(picks, bests) if (pick not in best) if best or pick >= 0)
    return vec_s, loop_s, disagree


def main() -> None:
    """Parse arguments, run, print a summary and a final JSON line."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--pods", type=int, default=50000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--loop-sample", type=int, default=30, help="pods timed with the per-node loop")
    ap.add_argument("--detail", choices=("summary", "nodes"), default="summary",
                    help="decision record detail of placed pods")
    ap.add_argument("--records", type=int, default=10000, help="decision records kept (0 = off)")
    ap.add_argument("--compare-pick", type=int, default=0, metavar="ROUNDS",
                    help="also run the array pick and the score-bucket pick side by side (cycles in turn) "
                         "ROUNDS times and report their ratios")
    args = ap.parse_args()
    if args.loop_sample < 1:
        ap.error("--loop-sample must be at least 1 (the speedup divides by the loop's time)")

    cluster = build_cluster(args.nodes, args.seed)
    median_mem = int(statistics.median(n.allocatable.memory for n in cluster.nodes))
    pods = build_pods(args.pods, args.seed, median_mem)
    settings = SchedulerSettings(seed=args.seed, decision_detail=args.detail, decision_records=args.records)
    rss0 = psutil.Process().memory_info().rss
    res = run_vectorized(cluster, pods, settings)
    peak = psutil.Process().memory_info().rss - rss0
    vec_s, loop_s, disagree = run_loop(cluster, pods, settings, args.loop_sample, args.seed)
    out = {
        "bench": "scheduler_inprocess", "nodes": args.nodes, "pods": args.pods,
        "pods_per_s": round(res["pods_per_s"]), "pods_per_s_with_intake": round(res["pods_per_s_with_intake"]),
        "pods_per_cpu_s": round(res["pods_per_cpu_s"]),
        "decision_p50_ms": round(res["decision_p50_ms"], 4), "decision_p99_ms": round(res["decision_p99_ms"], 4),
        "decision_max_ms": round(res["decision_max_ms"], 3),
        "placed": res["placed"], "unschedulable": res["unschedulable"],
        "speedup_vs_loop": round(loop_s * res["pods_per_s"], 1), "loop_ms_per_pod": round(loop_s * 1e3, 2),
        "speedup_vs_loop_uncached": round(loop_s / vec_s, 1),
        "vectorized_uncached_ms_per_pod": round(vec_s * 1e3, 3), "loop_disagreements": disagree,
        "class_full_syncs": res["class_full"], "class_incremental_syncs": res["class_incremental"],
        "rss_growth_mb": round(peak / 2**20, 1), "detail": args.detail,
    }
    print(f"{args.pods} pods on {args.nodes} nodes: {out['pods_per_s']} pods/s "
          f"({out['pods_per_s_with_intake']} with queue intake), decision p50 {out['decision_p50_ms']} ms "
          f"p99 {out['decision_p99_ms']} ms; placed {out['placed']}, unschedulable {out['unschedulable']}")
    print(f"per-node Python loop: {out['loop_ms_per_pod']} ms/pod; the framework is ×{out['speedup_vs_loop']} "
          f"faster per pod in the run above (×{out['speedup_vs_loop_uncached']} faster even with its class cache "
          f"off, {out['vectorized_uncached_ms_per_pod']} ms/pod); {disagree} of {args.loop_sample} loop decisions "
          "disagreed")
    print("(pods/s counts scheduling cycles; 'with queue intake' adds building each pod's scheduling state on "
          "arrival. The workload fills the cluster on purpose, so later pods are unschedulable: a decision too.)")
    if args.compare_pick:
        out["compare_pick"] = compare_pick(cluster, pods, settings, args.compare_pick)
        c = out["compare_pick"]
        print(f"score buckets vs array pick over {args.compare_pick} round(s): pods/s ×{c['ratio_pods_per_s']}, "
              f"pods per CPU second ×{c['ratio_pods_per_cpu_s']}, decision p50 ×{c['ratio_p50']} "
              f"p99 ×{c['ratio_p99']}")
    print(json.dumps(out))


def compare_pick(cluster: Cluster, pods: list[PodSpec], settings: SchedulerSettings,
                 rounds: int) -> dict[str, object]:
    """The array pick against the score-bucket pick, ``rounds`` times: two cores (the same pods,
    seed and profile; ``use_score_buckets`` False and True) run their scheduling cycles in turn,
    swapping which goes first every cycle, so that both see the same load of a shared machine.
    Per path: pods/s (wall), pods per CPU second, decision p50/p99 (ms) of the median round, and the
    ratios bucket/array per round and their median. Every cycle must place and fail the same pods
    on the same nodes in both (raises RuntimeError otherwise)."""
    rows: list[dict[str, dict[str, float]]] = []
    for _ in range(rounds):
        cores = {name: Scheduler(settings, bench_profile(settings), use_score_buckets=flag)
                 for name, flag in (("array", False), ("buckets", True))}
        wall = dict.fromkeys(cores, 0.0)
        cpu = dict.fromkeys(cores, 0.0)
        lat: dict[str, list[float]] = {name: [] for name in cores}
        for core in cores.values():
            load(core, cluster)
            for p in pods:
                core.add_pod(p, NOW)
        now, cycle = NOW, 0
        while cores["array"].queue.lengths()["active"]:
            order = list(cores) if cycle % 2 == 0 else list(reversed(cores))
            seen = {}
            for name in order:
                t0, c0 = time.perf_counter(), time.process_time()
                cyc = cores[name].schedule_cycle(now)
                wall[name] += time.perf_counter() - t0
                cpu[name] += time.process_time() - c0
                lat[name].extend([p.decision_ms for p in cyc.placements] + [f.decision_ms for f in cyc.failures])
                seen[name] = ([(p.pod.uid, p.node) for p in cyc.placements], [f.pod.uid for f in cyc.failures])
            if seen["array"] != seen["buckets"]:
                raise RuntimeError(f"the two pick paths decided differently in cycle {cycle}")
            now += 0.001
            cycle += 1
        rows.append({name: {"pods_per_s": len(lat[name]) / wall[name], "pods_per_cpu_s": len(lat[name]) / cpu[name],
                            "decision_p50_ms": float(np.percentile(lat[name], 50)),
                            "decision_p99_ms": float(np.percentile(lat[name], 99))} for name in cores})
    keys = ("pods_per_s", "pods_per_cpu_s", "decision_p50_ms", "decision_p99_ms")
    ratios = {k: [r["buckets"][k] / r["array"][k] for r in rows] for k in keys}
    mid = sorted(range(rounds), key=lambda k: ratios["pods_per_s"][k])[rounds // 2]
    summary: dict[str, object] = {
        name: {k: round(v, 4 if k.endswith("_ms") else None) for k, v in rows[mid][name].items()}
        for name in ("array", "buckets")}
    for k, label in zip(keys, ("ratio_pods_per_s", "ratio_pods_per_cpu_s", "ratio_p50", "ratio_p99")):
        summary[label] = round(statistics.median(ratios[k]), 3)
        summary[label + "_rounds"] = [round(v, 3) for v in ratios[k]]
    return summary


if __name__ == "__main__":
    main()
