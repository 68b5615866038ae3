"""Elastic quota cost in the in-process scheduler (issue 13), measured in one run.

The cluster and pods of :mod:`scheduler_inprocess` (trace-built nodes with load metrics; 70 % LS
workloads, 30 % BE batch-task instances). Three runs over the same pods, in turn, ``--rounds`` times:

* ``plain``: the bench profile of :mod:`scheduler_inprocess` (no ElasticQuota);
* ``no_quotas``: that profile with ElasticQuota at PreFilter and Reserve, no quota defined;
* ``quotas``: the same profile with a tree of quotas: two organisations of two teams each, every pod in
  one team by its namespace (round robin); per resource each team's min is a quarter of the cluster's
  allocatable, its max the whole, so teams borrow from one another and the runtime quotas move as demand
  is placed (recomputed at most once a cycle).

pods/s = scheduling attempts per second of scheduling cycles (wall; ``pods_per_cpu_s`` per CPU second of
the process, steadier on a shared machine); ``ratio_quotas`` = quotas / plain and ``ratio_plugin`` =
no_quotas / plain (medians over rounds of the per-round ratios; ``*_cpu`` the same in CPU time). The last
line is JSON.

Run: ``.venv/bin/python bench/scheduler_quota.py --nodes 5000 --pods 20000``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import msgspec
from scheduler_inprocess import NOW, Cluster, bench_profile, build_cluster, build_pods, load

from colo.messages import RESOURCE_NAMES, ElasticQuota, PodSpec
from colo_scheduler.core import Scheduler
from colo_scheduler.framework.registry import ProfileConfig
from colo_scheduler.settings import SchedulerSettings

TEAMS = 4


def quota_profile(settings: SchedulerSettings) -> ProfileConfig:
    """The bench profile with ElasticQuota at PreFilter and Reserve."""
    base = bench_profile(settings)
    return ProfileConfig(queue_sort=base.queue_sort, pre_filter=("ElasticQuota",), filter=base.filter,
                         score=base.score, reserve=(*base.reserve, "ElasticQuota"))


def quota_tree(cluster: Cluster) -> list[ElasticQuota]:
    """Two organisations of two teams; each team's min a quarter of the cluster's allocatable per resource."""
    total = {r: 0 for r in RESOURCE_NAMES}
    for n in cluster.nodes:
        for r in ("cpu", "memory", "pods"):
            total[r] += getattr(n.allocatable, r)
    for nr in cluster.resources:
        total["batch_cpu"] += nr.batch_cpu
        total["batch_memory"] += nr.batch_memory
    res = ("cpu", "memory", "batch_cpu", "batch_memory")
    team_min = {r: total[r] // TEAMS for r in res}
    out = [ElasticQuota(name=f"org-{o}", min={r: 2 * team_min[r] for r in res}, max={r: total[r] for r in res})
           for o in range(2)]
    out += [ElasticQuota(name=f"team-{t}", parent=f"org-{t // 2}", namespaces=[f"ns-{t}"], min=team_min,
                         max={r: total[r] for r in res}) for t in range(TEAMS)]
    return out


def run(cluster: Cluster, pods: list[PodSpec], settings: SchedulerSettings, profile: ProfileConfig,
        quotas: list[ElasticQuota]) -> dict[str, float]:
    """Schedule until no pod is active; attempts per second of cycles and pods placed."""
    core = Scheduler(settings, profile)
    load(core, cluster)
    for q in quotas:
        assert core.on_quota(q) == []
    for p in pods:
        core.add_pod(p, NOW)
    attempts = placed = 0
    cycles_s = cycles_cpu_s = 0.0
    now = NOW
    while core.queue.lengths()["active"]:
        t0, c0 = time.perf_counter(), time.process_time()
        out = core.schedule_cycle(now)
        cycles_s += time.perf_counter() - t0
        cycles_cpu_s += time.process_time() - c0
        placed += len(out.placements)
        attempts += len(out.placements) + len(out.failures)
        now += 0.001
    return {"pods_per_s": attempts / cycles_s, "pods_per_cpu_s": attempts / cycles_cpu_s, "attempts": attempts,
            "placed": placed, "cycles_s": cycles_s}


def main() -> None:
    """Parse arguments, run, print a summary and a final JSON line."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--pods", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    cluster = build_cluster(args.nodes, args.seed)
    median_mem = int(statistics.median(n.allocatable.memory for n in cluster.nodes))
    pods = [msgspec.structs.replace(p, namespace=f"ns-{k % TEAMS}")
            for k, p in enumerate(build_pods(args.pods, args.seed, median_mem))]
    settings = SchedulerSettings(seed=args.seed, decision_records=0)
    tree = quota_tree(cluster)
    cases = {"plain": (bench_profile(settings), []), "no_quotas": (quota_profile(settings), []),
             "quotas": (quota_profile(settings), tree)}
    runs: dict[str, list[dict[str, float]]] = {k: [] for k in cases}
    run(cluster, pods[: len(pods) // 10], settings, quota_profile(settings), tree)  # kernels, caches warm
    for r in range(args.rounds):  # in turn, the order rotated: all three see the same load of a shared machine
        names = list(cases)[r % 3:] + list(cases)[: r % 3]
        for name in names:
            profile, quotas = cases[name]
            runs[name].append(run(cluster, pods, settings, profile, quotas))
    med = {k: statistics.median(r["pods_per_s"] for r in v) for k, v in runs.items()}
    med_cpu = {k: statistics.median(r["pods_per_cpu_s"] for r in v) for k, v in runs.items()}

    def ratio(a: str, b: str, key: str) -> float:
        return statistics.median(x[key] / y[key] for x, y in zip(runs[a], runs[b]))

    out = {
        "bench": "scheduler_quota", "nodes": args.nodes, "pods": args.pods, "rounds": args.rounds,
        "quotas": len(tree),
        "pods_per_s_plain": round(med["plain"]), "pods_per_s_no_quotas": round(med["no_quotas"]),
        "pods_per_s_quotas": round(med["quotas"]),
        "ratio_quotas": round(ratio("quotas", "plain", "pods_per_s"), 3),
        "ratio_plugin": round(ratio("no_quotas", "plain", "pods_per_s"), 3),
        "pods_per_cpu_s_plain": round(med_cpu["plain"]), "pods_per_cpu_s_quotas": round(med_cpu["quotas"]),
        "ratio_quotas_cpu": round(ratio("quotas", "plain", "pods_per_cpu_s"), 3),
        "ratio_plugin_cpu": round(ratio("no_quotas", "plain", "pods_per_cpu_s"), 3),
        "placed_plain": runs["plain"][0]["placed"], "placed_quotas": runs["quotas"][0]["placed"],
    }
    print(f"{args.pods} pods on {args.nodes} nodes: {out['pods_per_s_quotas']} pods/s with {len(tree)} quotas, "
          f"{out['pods_per_s_plain']} without the plugin (×{out['ratio_quotas']}); the plugin with no quota "
          f"×{out['ratio_plugin']}; placed {out['placed_quotas']} vs {out['placed_plain']}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
