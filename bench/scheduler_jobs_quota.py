"""Gangs and elastic quotas together in the in-process scheduler (issue 13 "Speed"), measured in one run.

The cluster and pods of :mod:`scheduler_inprocess` (trace-built nodes with load metrics; 70 % LS
workloads, 30 % BE batch-task instances). Two runs over the same pods, in turn, ``--rounds`` times, the
order alternated so that both see the same load of a shared machine:

* ``neither``: the bench profile of :mod:`scheduler_inprocess` (no Coscheduling, no ElasticQuota), the same
  pods in the same namespaces (below) without gangs, no quota;
* ``both``: that profile with Coscheduling (QueueSort, PreFilter, PostFilter, Reserve, Permit) and
  ElasticQuota (PreFilter, Reserve), 20 % of the pods in gangs of 8–256 members
  (:func:`scheduler_jobs.with_gangs`: a v2017 batch task's instances, Strict, ``min_member`` = size) and the
  quota tree of :func:`scheduler_quota.quota_tree` (two organisations of two teams; each team's min a quarter
  of the allocatable per resource, max the whole). Every pod is in one team by its namespace: a gang's members
  all in the team of the gang (CRC-32 of its name modulo 4), the other pods round robin.

pods/s = scheduling attempts (every decision, including members sent back with their gang) per second of
scheduling cycles (wall; ``pods_per_cpu_s`` per CPU second of the process); ``ratio`` = both / neither (the
median over rounds of the per-round ratios; ``ratio_cpu`` the same in CPU time). The issue's bar: ratio ≥ 0.8.
Then one 1,000-member gang on ``--big-nodes`` nodes (:func:`scheduler_jobs.big_gang`, the Coscheduling profile
and quotas off): the wall time from the first cycle to all members allowed; the bar is < 1 s. The last line is
JSON.

Run: ``.venv/bin/python bench/scheduler_jobs_quota.py --nodes 5000 --pods 20000``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import zlib

import msgspec
from scheduler_inprocess import bench_profile, build_cluster, build_pods
from scheduler_jobs import big_gang, run, with_gangs
from scheduler_quota import TEAMS, quota_tree

from colo.messages import PodSpec
from colo_scheduler.framework.registry import ProfileConfig
from colo_scheduler.settings import SchedulerSettings


def both_profile(settings: SchedulerSettings) -> ProfileConfig:
    """The bench profile with Coscheduling at every point it implements and ElasticQuota at PreFilter and
    Reserve (Coscheduling's PreFilter first, as the scheduler's default profile orders them)."""
    base = bench_profile(settings)
    return ProfileConfig(queue_sort="Coscheduling", pre_filter=("Coscheduling", "ElasticQuota"), filter=base.filter,
                         post_filter=("Coscheduling",), score=base.score,
                         reserve=(*base.reserve, "ElasticQuota", "Coscheduling"), permit=("Coscheduling",))


def in_teams(pods: list[PodSpec]) -> list[PodSpec]:
    """``pods`` with namespace ``ns-<team>``: a gang member its gang's team, the others round robin."""
    out = []
    for k, p in enumerate(pods):
        team = zlib.crc32(p.gang.name.encode()) % TEAMS if p.gang is not None else k % TEAMS
        out.append(msgspec.structs.replace(p, namespace=f"ns-{team}"))
    return out


def main() -> None:
    """Parse arguments, run, print a summary and a final JSON line."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--pods", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--big-nodes", type=int, default=5000)
    ap.add_argument("--big-members", type=int, default=1000, help="0: no big gang")
    ap.add_argument("--only", choices=("neither", "both"), default=None,
                    help="one run of that case only, no warm-up round (for callgrind: instructions per pod)")
    args = ap.parse_args()
    cluster = build_cluster(args.nodes, args.seed)
    median_mem = int(statistics.median(n.allocatable.memory for n in cluster.nodes))
    pods = build_pods(args.pods, args.seed, median_mem)
    gang_pods, n_gangs = with_gangs(pods)
    gang_pods = in_teams(gang_pods)
    members = sum(1 for p in gang_pods if p.gang is not None)
    settings = SchedulerSettings(seed=args.seed, decision_records=0)
    tree = quota_tree(cluster)
    plain_pods = [msgspec.structs.replace(p, gang=None) for p in gang_pods]  # the same pods and namespaces
    cases = {"neither": (plain_pods, bench_profile(settings), []), "both": (gang_pods, both_profile(settings), tree)}
    if args.only:
        pods_, profile, quotas = cases[args.only]
        r = run(cluster, pods_, settings, profile, quotas)
        print(json.dumps({"bench": "scheduler_jobs_quota", "case": args.only, "nodes": args.nodes, "pods": args.pods,
                          **{k: round(v, 3) for k, v in r.items()}}))
        return
    runs: dict[str, list[dict[str, float]]] = {k: [] for k in cases}
    run(cluster, gang_pods[: len(gang_pods) // 10], settings, both_profile(settings), tree)  # kernels, caches warm
    for r in range(args.rounds):
        for name in (list(cases) if r % 2 == 0 else list(reversed(cases))):
            pods_, profile, quotas = cases[name]
            runs[name].append(run(cluster, pods_, settings, profile, quotas))
    med = {k: statistics.median(x["pods_per_s"] for x in v) for k, v in runs.items()}
    med_cpu = {k: statistics.median(x["pods_per_cpu_s"] for x in v) for k, v in runs.items()}

    def ratio(key: str) -> float:
        return statistics.median(x[key] / y[key] for x, y in zip(runs["both"], runs["neither"]))

    out: dict[str, object] = {
        "bench": "scheduler_jobs_quota", "nodes": args.nodes, "pods": args.pods, "rounds": args.rounds,
        "gang_members": members, "gang_share": round(members / len(pods), 3), "gangs": n_gangs, "quotas": len(tree),
        "pods_per_s_neither": round(med["neither"]), "pods_per_s_both": round(med["both"]),
        "ratio": round(ratio("pods_per_s"), 3),
        "pods_per_cpu_s_neither": round(med_cpu["neither"]), "pods_per_cpu_s_both": round(med_cpu["both"]),
        "ratio_cpu": round(ratio("pods_per_cpu_s"), 3),
        "rounds_pods_per_s_neither": [round(x["pods_per_s"]) for x in runs["neither"]],
        "rounds_pods_per_s_both": [round(x["pods_per_s"]) for x in runs["both"]],
        "placed_neither": runs["neither"][0]["placed"], "placed_both": runs["both"][0]["placed"],
        "attempts_neither": runs["neither"][0]["attempts"], "attempts_both": runs["both"][0]["attempts"],
    }
    print(f"{args.pods} pods on {args.nodes} nodes, {members} in {n_gangs} gangs, {len(tree)} quotas: "
          f"{out['pods_per_s_both']} pods/s with gangs and quotas, {out['pods_per_s_neither']} with neither "
          f"(×{out['ratio']}, CPU ×{out['ratio_cpu']}); placed {out['placed_both']} vs {out['placed_neither']}")
    if args.big_members:
        big = big_gang(args.big_nodes, args.big_members, args.seed)
        out.update({"big_gang_members": args.big_members, "big_gang_nodes": args.big_nodes,
                    "big_gang_s": round(big["seconds"], 3), "big_gang_allowed": big["allowed"],
                    "big_gang_cycles": big["cycles"]})
        print(f"one {args.big_members}-member gang on {args.big_nodes} nodes: all {big['allowed']} allowed in "
              f"{out['big_gang_s']} s ({big['cycles']} cycle(s))")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
