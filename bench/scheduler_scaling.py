"""How the in-process scheduler's cost grows with the cluster: pods/s, decision latency and memory
at 1k, 5k and 20k nodes, with the same trace-built workload as bench/scheduler_inprocess.py.

For each size: ``pods`` pods are scheduled on a fresh scheduler; memory is the growth of the
process's resident set while the cluster is scheduled, and ``table_mb`` the node
table's NumPy arrays. ``uncached_ms_per_pod`` is one decision with every filter and score
recomputed over all nodes (the class cache off): the cost that grows linearly with nodes, which
the cache pays once per pod class. The baseline for ratios is the 1k-node run of the same process.

Run: ``.venv/bin/python bench/scheduler_scaling.py`` (``--sizes 1000,5000,20000 --pods 20000``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).parent))

from scheduler_inprocess import bench_profile, build_cluster, build_pods, load, run_vectorized  # noqa: E402

from colo_scheduler.core import Scheduler  # noqa: E402
from colo_scheduler.settings import SchedulerSettings  # noqa: E402


def table_bytes(core: Scheduler) -> int:
    """Bytes of the node table's NumPy arrays (capacity rows included)."""
    t = core.table
    arrays = [t._alloc, t._allocated, t._free, t._metric_usage, t._metric_at, t._pending, t._est_usage]
    return sum(a.nbytes for a in arrays) + sum(a.nbytes for a in t.app_counts.values())


def uncached_ms(cluster: object, pods: list, settings: SchedulerSettings, sample: int = 20) -> float:  # type: ignore[type-arg]
    """Mean ms of one decision with the class cache off, on the loaded cluster."""
    core = Scheduler(settings, bench_profile(settings), use_class_cache=False)
    load(core, cluster)  # type: ignore[arg-type]
    state = core.framework.begin_cycle(10_000.0)
    infos = [core.pod_info(p, 10_000.0) for p in pods[:sample]]
    t0 = time.perf_counter()
    for info in infos:
        core.framework.schedule_one(state, info)
    return (time.perf_counter() - t0) / sample * 1e3


def main() -> None:
    """Run every size, print a table and a final JSON line."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1000,5000,20000")
    ap.add_argument("--pods", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    settings = SchedulerSettings(seed=args.seed)
    rows = []
    for n in (int(x) for x in args.sizes.split(",")):
        cluster = build_cluster(n, args.seed)
        median_mem = int(statistics.median(s.allocatable.memory for s in cluster.nodes))
        pods = build_pods(args.pods, args.seed, median_mem)
        rss0 = psutil.Process().memory_info().rss
        res = run_vectorized(cluster, pods, settings)
        peak = psutil.Process().memory_info().rss - rss0
        core = Scheduler(settings, bench_profile(settings))
        load(core, cluster)
        rows.append({
            "nodes": n, "pods": args.pods, "pods_per_s": round(res["pods_per_s"]),
            "decision_p50_ms": round(res["decision_p50_ms"], 4), "decision_p99_ms": round(res["decision_p99_ms"], 3),
            "placed": res["placed"], "uncached_ms_per_pod": round(uncached_ms(cluster, pods, settings), 3),
            "class_full_syncs": res["class_full"], "rss_growth_mb": round(peak / 2**20, 1),
            "table_mb": round(table_bytes(core) / 2**20, 2),
        })
        r = rows[-1]
        print(f"{n:>6} nodes: {r['pods_per_s']:>6} pods/s  p50 {r['decision_p50_ms']} ms  p99 {r['decision_p99_ms']} ms  "
              f"uncached {r['uncached_ms_per_pod']} ms/pod  rss +{r['rss_growth_mb']} MB  table {r['table_mb']} MB  "
              f"placed {r['placed']}", flush=True)
    base = rows[0]
    for r in rows:
        r["pods_per_s_vs_first"] = round(r["pods_per_s"] / base["pods_per_s"], 2)
        r["uncached_vs_first"] = round(r["uncached_ms_per_pod"] / base["uncached_ms_per_pod"], 2)
    print(json.dumps({"bench": "scheduler_scaling", "sizes": rows}))


if __name__ == "__main__":
    main()
