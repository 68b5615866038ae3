"""What NodeNUMAResource costs the scheduler: :mod:`scheduler_inprocess`'s cluster and pods (alibaba-gpu-v2023
nodes with the documented default topology, docs/topology.md "Sources"; LS and BE pods), scheduled by that
bench's profile without and with NodeNUMAResource (PreFilter, Filter, Score weight 1, Reserve), in turns in one
process, so that machine load hits both alike.

Two workloads: ``plain`` — the bench's pods as they are (no pod wants a cpuset: the plugin's cost on ordinary
pods); ``lse`` — the same with ``--lse-share`` of the LS workloads whose CPU request is whole cores turned LSE
(those pods get cpusets: the accumulator and NUMA filter run per node).

Run: ``.venv/bin/python bench/numa_overhead.py --nodes 2000 --pods 20000 --rounds 3``. Prints pods/s of each
profile per round and the ratio with/without (median over rounds); the last line is JSON.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
from pathlib import Path

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scheduler_inprocess import Cluster, bench_profile, build_cluster, build_pods, run_vectorized  # noqa: E402

from colo.messages import PodSpec  # noqa: E402
from colo.sim.node_topology import default_topology  # noqa: E402
from colo_scheduler.framework.registry import ProfileConfig  # noqa: E402
from colo_scheduler.settings import SchedulerSettings  # noqa: E402

NUMA = "NodeNUMAResource"


def with_numa(base: ProfileConfig) -> ProfileConfig:
    """``base`` with NodeNUMAResource at PreFilter, after NodeResourcesFit in Filter and Reserve, score 1."""
    def after_fit(names: tuple[str, ...]) -> tuple[str, ...]:
        k = names.index("NodeResourcesFit") + 1 if "NodeResourcesFit" in names else len(names)
        return (*names[:k], NUMA, *names[k:])

    return dataclasses.replace(base, pre_filter=(*base.pre_filter, NUMA), filter=after_fit(base.filter),
                               reserve=after_fit(base.reserve), score={**base.score, NUMA: 1})


def with_topology(cluster: Cluster) -> Cluster:
    """Every node with the default topology of its CPU count."""
    nodes = [msgspec.structs.replace(n, topology=default_topology(n.capacity.cpu)) for n in cluster.nodes]
    return Cluster(nodes, cluster.resources, cluster.metrics)


def lse_variant(pods: list[PodSpec], share: float) -> tuple[list[PodSpec], int]:
    """``pods`` with the LS workloads (apps) of whole-core requests, every 1/share-th one, made LSE; and how
    many pods that made LSE."""
    apps = sorted({p.app for p in pods if p.qos_class == "LS" and p.requests.cpu > 0 and p.requests.cpu % 1000 == 0})
    step = max(1, round(1 / share)) if share > 0 else 0
    chosen = set(apps[::step]) if step else set()
    out = [msgspec.structs.replace(p, qos_class="LSE") if p.app in chosen else p for p in pods]
    return out, sum(1 for p in out if p.qos_class == "LSE")


def main() -> None:
    """Parse arguments, run the rounds, print per-round figures and a final JSON line."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=2000)
    ap.add_argument("--pods", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--lse-share", type=float, default=0.1, help="share of whole-core LS workloads made LSE")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    cluster = with_topology(build_cluster(args.nodes, args.seed))
    median_mem = int(statistics.median(n.allocatable.memory for n in cluster.nodes))
    plain = build_pods(args.pods, args.seed, median_mem)
    lse, n_lse = lse_variant(plain, args.lse_share)
    settings = SchedulerSettings(seed=args.seed, decision_records=0)
    base = bench_profile(settings)
    profiles = {"without": base, "with": with_numa(base)}
    result: dict[str, dict[str, list[float]]] = {w: {p: [] for p in profiles} for w in ("plain", "lse")}
    placed: dict[str, dict[str, int]] = {w: {} for w in result}
    for r in range(args.rounds):
        for workload, pods in (("plain", plain), ("lse", lse)):
            for name, profile in (profiles.items() if r % 2 == 0 else reversed(profiles.items())):
                res = run_vectorized(cluster, pods, settings, profile)
                result[workload][name].append(res["pods_per_cpu_s"])
                placed[workload][name] = int(res["placed"])
                print(f"round {r} {workload:5} {name:7} {res['pods_per_cpu_s']:9.0f} pods/cpu-s "
                      f"placed {res['placed']}", flush=True)
    out: dict[str, object] = {"bench": "numa_overhead", "nodes": args.nodes, "pods": args.pods,
                              "rounds": args.rounds, "lse_pods": n_lse}
    for workload, by in result.items():
        med = {name: statistics.median(v) for name, v in by.items()}
        out[workload] = {"pods_per_cpu_s_without": round(med["without"]), "pods_per_cpu_s_with": round(med["with"]),
                         "ratio_with_over_without": round(med["with"] / med["without"], 3),
                         "placed_without": placed[workload]["without"], "placed_with": placed[workload]["with"]}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
