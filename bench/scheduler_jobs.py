"""Gang scheduling cost in the in-process scheduler (issue 13), measured in one run.

The cluster and pods of :mod:`scheduler_inprocess` (trace-built nodes with load metrics; 70 % LS
workloads, 30 % BE batch-task instances). Three runs over the same pods, in turn, ``--rounds`` times:

* ``plain``: the bench profile of :mod:`scheduler_inprocess` (no Coscheduling);
* ``no_gangs``: that profile with Coscheduling at QueueSort, PreFilter, PostFilter, Reserve and Permit;
* ``gangs``: the same profile with 20 % of the pods in gangs of 8–256 members: the instances of a
  v2017 batch task form a gang (tasks of fewer than 8 instances are left alone, larger ones cut into
  gangs of at most 256), ``min_member`` = the gang's size, Strict.

pods/s = scheduling attempts (every decision, including members sent back with their gang) per second
of scheduling cycles (wall; ``pods_per_cpu_s`` per CPU second of the process, steadier on a shared
machine); ``ratio_gangs`` = gangs / no_gangs and ``ratio_plugin`` = no_gangs / plain (medians over
rounds of the per-round ratios; ``*_cpu`` the same in CPU time). Then one 1,000-member gang on ``--big-nodes`` nodes: the wall time from the
first cycle to all members allowed (placements out). The last line is JSON.

Run: ``.venv/bin/python bench/scheduler_jobs.py --nodes 5000 --pods 20000``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import defaultdict
from collections.abc import Sequence

import msgspec
from scheduler_inprocess import NOW, Cluster, bench_profile, build_cluster, build_pods, load

from colo.messages import ElasticQuota, GangSpec, PodSpec, Resources
from colo_scheduler.core import Scheduler
from colo_scheduler.framework.registry import ProfileConfig
from colo_scheduler.settings import SchedulerSettings

GANG_SHARE = 0.20
MIN_GANG, MAX_GANG = 8, 256


def gang_profile(settings: SchedulerSettings) -> ProfileConfig:
    """The bench profile with Coscheduling at every point it implements."""
    base = bench_profile(settings)
    return ProfileConfig(queue_sort="Coscheduling", pre_filter=("Coscheduling",), filter=base.filter,
                         post_filter=("Coscheduling",), score=base.score,
                         reserve=(*base.reserve, "Coscheduling"), permit=("Coscheduling",))


def with_gangs(pods: list[PodSpec], share: float = GANG_SHARE) -> tuple[list[PodSpec], int]:
    """``pods`` with the instances of batch tasks grouped into gangs of 8–256 until ``share`` of all
    pods are members; the number of gangs."""
    by_task: dict[str, list[int]] = defaultdict(list)
    for k, p in enumerate(pods):
        if p.uid.startswith("be-"):
            by_task[p.app].append(k)
    out = list(pods)
    target, members, gangs = int(len(pods) * share), 0, 0
    for app, ks in sorted(by_task.items()):
        for start in range(0, len(ks), MAX_GANG):
            chunk = ks[start:start + MAX_GANG]
            if len(chunk) < MIN_GANG or members >= target:
                continue
            chunk = chunk[: target - members] if target - members >= MIN_GANG else chunk
            gs = GangSpec(name=f"default/{app}-{start // MAX_GANG}", min_member=len(chunk),
                          total_member=len(chunk), created_at=min(pods[k].created_at for k in chunk))
            for k in chunk:
                out[k] = msgspec.structs.replace(pods[k], gang=gs)
            members += len(chunk)
            gangs += 1
    return out, gangs


def run(cluster: Cluster, pods: list[PodSpec], settings: SchedulerSettings, profile: ProfileConfig,
        quotas: Sequence[ElasticQuota] = ()) -> dict[str, float]:
    """Schedule until no pod is active (after applying ``quotas``); attempts per second of cycles and pods placed.

    Raises RuntimeError when the core refuses a quota."""
    core = Scheduler(settings, profile)
    load(core, cluster)
    for q in quotas:
        problems = core.on_quota(q)
        if problems:
            raise RuntimeError(f"quota {q.name} refused: {problems}")
    for p in pods:
        core.add_pod(p, NOW)
    infos = {}
    cycles_s = cycles_cpu_s = 0.0
    placed = 0
    now = NOW
    while core.queue.lengths()["active"]:
        t0, c0 = time.perf_counter(), time.process_time()
        out = core.schedule_cycle(now)
        cycles_s += time.perf_counter() - t0
        cycles_cpu_s += time.process_time() - c0
        placed += len(out.placements)
        for p in out.placements:
            infos[p.pod.uid] = p.pod
        now += 0.001
    attempts = sum(p.attempts for p in core.queue.pods()) + sum(p.attempts for p in infos.values())
    attempts += sum(p.attempts for p, _, _ in core.waiting.values())
    return {"pods_per_s": attempts / cycles_s, "pods_per_cpu_s": attempts / cycles_cpu_s, "attempts": attempts,
            "placed": placed, "cycles_s": cycles_s}


def big_gang(nodes: int, members: int, seed: int) -> dict[str, float]:
    """Wall seconds from the first cycle to all ``members`` of one gang allowed, on ``nodes`` nodes."""
    cluster = build_cluster(nodes, seed)
    settings = SchedulerSettings(seed=seed, decision_records=0)
    core = Scheduler(settings, gang_profile(settings))
    load(core, cluster)
    gs = GangSpec(name="default/train", min_member=members, total_member=members, created_at=NOW)
    r = Resources(cpu=1000, memory=2 * 2**30)
    for k in range(members):
        core.add_pod(PodSpec(uid=f"train-{k}", name=f"train-{k}", priority_class="prod", qos_class="LS",
                             requests=r, limits=r, created_at=NOW, gang=gs), NOW)
    t0 = time.perf_counter()
    allowed, cycles, now = 0, 0, NOW
    while allowed < members and cycles < 100:
        allowed += len(core.schedule_cycle(now).placements)
        cycles += 1
        now += 0.001
    return {"seconds": time.perf_counter() - t0, "allowed": allowed, "cycles": cycles}


def main() -> None:
    """Parse arguments, run, print a summary and a final JSON line."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--pods", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--big-nodes", type=int, default=5000)
    ap.add_argument("--big-members", type=int, default=1000)
    args = ap.parse_args()
    cluster = build_cluster(args.nodes, args.seed)
    median_mem = int(statistics.median(n.allocatable.memory for n in cluster.nodes))
    pods = build_pods(args.pods, args.seed, median_mem)
    gang_pods, n_gangs = with_gangs(pods)
    members = sum(1 for p in gang_pods if p.gang is not None)
    settings = SchedulerSettings(seed=args.seed, decision_records=0)
    runs: dict[str, list[dict[str, float]]] = {"plain": [], "no_gangs": [], "gangs": []}
    cases = {"plain": (pods, bench_profile(settings)), "no_gangs": (pods, gang_profile(settings)),
             "gangs": (gang_pods, gang_profile(settings))}
    run(cluster, pods[: len(pods) // 10], settings, gang_profile(settings))  # compiled kernels, warm caches
    for r in range(args.rounds):  # in turn, the order rotated, so that all three see the same load of a shared machine
        names = list(cases)[r % 3:] + list(cases)[: r % 3]
        for name in names:
            runs[name].append(run(cluster, cases[name][0], settings, cases[name][1]))
    med = {k: statistics.median(r["pods_per_s"] for r in v) for k, v in runs.items()}
    med_cpu = {k: statistics.median(r["pods_per_cpu_s"] for r in v) for k, v in runs.items()}

    def ratio(a: str, b: str, key: str) -> float:
        return statistics.median(x[key] / y[key] for x, y in zip(runs[a], runs[b]))

    ratio_gangs, ratio_plugin = ratio("gangs", "no_gangs", "pods_per_s"), ratio("no_gangs", "plain", "pods_per_s")
    big = big_gang(args.big_nodes, args.big_members, args.seed)
    out = {
        "bench": "scheduler_jobs", "nodes": args.nodes, "pods": args.pods, "rounds": args.rounds,
        "gang_members": members, "gangs": n_gangs,
        "pods_per_s_plain": round(med["plain"]), "pods_per_s_no_gangs": round(med["no_gangs"]),
        "pods_per_s_gangs": round(med["gangs"]),
        "ratio_gangs": round(ratio_gangs, 3), "ratio_plugin": round(ratio_plugin, 3),
        "pods_per_cpu_s_plain": round(med_cpu["plain"]), "pods_per_cpu_s_no_gangs": round(med_cpu["no_gangs"]),
        "pods_per_cpu_s_gangs": round(med_cpu["gangs"]),
        "ratio_gangs_cpu": round(ratio("gangs", "no_gangs", "pods_per_cpu_s"), 3),
        "ratio_plugin_cpu": round(ratio("no_gangs", "plain", "pods_per_cpu_s"), 3),
        "placed_no_gangs": runs["no_gangs"][0]["placed"], "placed_gangs": runs["gangs"][0]["placed"],
        "big_gang_members": args.big_members, "big_gang_nodes": args.big_nodes,
        "big_gang_s": round(big["seconds"], 3), "big_gang_allowed": big["allowed"], "big_gang_cycles": big["cycles"],
    }
    print(f"{args.pods} pods on {args.nodes} nodes, {members} in {n_gangs} gangs: {out['pods_per_s_gangs']} pods/s "
          f"with gangs, {out['pods_per_s_no_gangs']} without (×{out['ratio_gangs']}); the plugin on pods without "
          f"gangs ×{out['ratio_plugin']} of the plain profile ({out['pods_per_s_plain']} pods/s)")
    print(f"one {args.big_members}-member gang on {args.big_nodes} nodes: all {big['allowed']} allowed in "
          f"{out['big_gang_s']} s ({big['cycles']} cycle(s))")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
