"""What DeviceShare costs the scheduler on pods that request no GPU: :mod:`scheduler_inprocess`'s cluster and
pods (alibaba-gpu-v2023 nodes, their GPUs registered from the trace as ``NodeSpec.gpus``; LS and BE CPU pods),
scheduled by that bench's profile without and with DeviceShare (Filter, Score weight 3, Reserve), in turns in one
process, so that machine load hits both alike. The placed counts of both are printed (CPU and memory fitting
unchanged: they should be equal).

Run: ``.venv/bin/python bench/deviceshare_overhead.py --nodes 2000 --pods 20000 --rounds 3``. Prints pods/s of
each profile per round and the ratio with/without (median over rounds); the last line is JSON.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import statistics
import sys
from pathlib import Path

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scheduler_inprocess import Cluster, bench_profile, build_cluster, build_pods, run_vectorized  # noqa: E402

from colo.sim import traces  # noqa: E402
from colo.sim.node_topology import trace_gpus  # noqa: E402
from colo_scheduler.framework.registry import ProfileConfig  # noqa: E402
from colo_scheduler.settings import SchedulerSettings  # noqa: E402

DS = "DeviceShare"


def with_deviceshare(base: ProfileConfig, score_cpu_pods: bool = False) -> ProfileConfig:
    """``base`` with DeviceShare after NodeResourcesFit in Filter and Reserve, score weight 3 (CPU pods scored
    too with ``score_cpu_pods``)."""
    def after_fit(names: tuple[str, ...]) -> tuple[str, ...]:
        k = names.index("NodeResourcesFit") + 1 if "NodeResourcesFit" in names else len(names)
        return (*names[:k], DS, *names[k:])

    plugin_args = {**base.plugin_args, DS: {"score_cpu_pods": True}} if score_cpu_pods else base.plugin_args
    return dataclasses.replace(base, filter=after_fit(base.filter), reserve=after_fit(base.reserve),
                               score={**base.score, DS: 3}, plugin_args=plugin_args)


def with_gpus(cluster: Cluster, seed: int) -> Cluster:
    """Every GPU node (label ``colo.io/gpu=true``) with the GPUs of a trace GPU node of its CPU size."""
    rng = random.Random(seed)
    gpu_rows = [t for t in traces.load_nodes() if t.gpu > 0]
    nodes = []
    for n in cluster.nodes:
        if n.labels.get("colo.io/gpu") == "true":
            same = [t for t in gpu_rows if t.cpu_milli == n.capacity.cpu] or gpu_rows
            t = rng.choice(same)
            n = msgspec.structs.replace(n, gpus=trace_gpus(t.gpu, t.model))
        nodes.append(n)
    return Cluster(nodes, cluster.resources, cluster.metrics)


def main() -> None:
    """Parse arguments, run the rounds, print per-round figures and a final JSON line."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=2000)
    ap.add_argument("--pods", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--score-cpu-pods", action="store_true", help="DeviceShareArgs.score_cpu_pods")
    args = ap.parse_args()
    cluster = with_gpus(build_cluster(args.nodes, args.seed), args.seed)
    median_mem = int(statistics.median(n.allocatable.memory for n in cluster.nodes))
    pods = build_pods(args.pods, args.seed, median_mem)
    settings = SchedulerSettings(seed=args.seed, decision_records=0)
    base = bench_profile(settings)
    profiles = {"without": base, "with": with_deviceshare(base, args.score_cpu_pods)}
    result: dict[str, list[float]] = {p: [] for p in profiles}
    placed: dict[str, int] = {}
    for r in range(args.rounds):
        for name, profile in (profiles.items() if r % 2 == 0 else reversed(profiles.items())):
            res = run_vectorized(cluster, pods, settings, profile)
            result[name].append(res["pods_per_cpu_s"])
            placed[name] = int(res["placed"])
            print(f"round {r} {name:7} {res['pods_per_cpu_s']:9.0f} pods/cpu-s placed {res['placed']}", flush=True)
    med = {name: statistics.median(v) for name, v in result.items()}
    print(json.dumps({"bench": "deviceshare_overhead", "nodes": args.nodes, "pods": args.pods, "rounds": args.rounds,
                      "score_cpu_pods": args.score_cpu_pods, "gpu_nodes": sum(1 for n in cluster.nodes if n.gpus),
                      "pods_per_cpu_s_without": round(med["without"]), "pods_per_cpu_s_with": round(med["with"]),
                      "ratio_with_over_without": round(med["with"] / med["without"], 3),
                      "placed_without": placed["without"], "placed_with": placed["with"]}))


if __name__ == "__main__":
    main()
