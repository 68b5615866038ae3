"""The scheduler core fed the end-to-end bench's cluster and pod stream, in small cycles, in one process.

``bench/scheduler_e2e.py`` spends most of its scheduler CPU in the core, on a stream where ~50 LS
workloads and 6 BE shapes interleave pod by pod and cycles hold ~10 pods. This bench reproduces that
work without NATS and Redis: the same nodes (:func:`scheduler_e2e.make_nodes`, fresh metrics at a
quarter of allocatable) and pods (:func:`scheduler_e2e.make_pods`), ``--cycle`` pods per cycle;
``--warmup`` pods first (classes built), then ``--pods`` measured. It prints µs per pod (wall and
CPU), the class cache's counters and ``speedup_vs_uncached``: the same stream through a core without
the class cache (every filter and score over all nodes per pod, the reference path), timed in this
process on ``--baseline-pods`` pods. The last line is JSON.

Its wall time drifts with the shared machine; for a figure that does not, count instructions
(``--warmup`` alone is the baseline to subtract):

    valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        .venv/bin/python bench/scheduler_stream.py --pods 1000 --baseline-pods 0   # "Collected", minus:
    valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        .venv/bin/python bench/scheduler_stream.py --pods 0

Run: ``.venv/bin/python bench/scheduler_stream.py``.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scheduler_e2e import make_nodes, make_pods  # noqa: E402

from colo.messages import NodeMetric, PodSpec, Usage  # noqa: E402
from colo_scheduler.core import Scheduler  # noqa: E402
from colo_scheduler.settings import SchedulerSettings  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--pods", type=int, default=3000, help="pods measured")
    ap.add_argument("--warmup", type=int, default=3000, help="pods placed before measuring")
    ap.add_argument("--cycle", type=int, default=10, help="pods per scheduling cycle")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--baseline-pods", type=int, default=300, help="pods timed without the class cache (0 = skip)")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    nodes, resources = make_nodes(args.nodes, rng)
    pods = make_pods("p", args.warmup + args.pods, rng)

    def build(use_class_cache: bool) -> Scheduler:
        core = Scheduler(SchedulerSettings(), use_class_cache=use_class_cache)
        for spec in nodes:
            core.on_node(spec, 100.0)
        for nr in resources:
            core.on_node_resource(nr, 100.0)
        for spec in nodes:
            usage = Usage(cpu=spec.allocatable.cpu // 4, memory=spec.allocatable.memory // 4)
            core.on_metric(NodeMetric(node=spec.name, at=95.0, node_usage=usage), 100.0)
        return core

    def run(core: Scheduler, batch: list[PodSpec], t: float) -> tuple[float, int]:
        placed = 0
        for k in range(0, len(batch), args.cycle):
            for p in batch[k:k + args.cycle]:
                core.add_pod(p, t)
            placed += len(core.schedule_cycle(t).placements)
            t += 0.002
        return t, placed

    def measure(core: Scheduler, count: int) -> tuple[float, float, int]:
        t, _ = run(core, pods[:args.warmup], 100.0)
        w0, c0 = time.perf_counter(), time.process_time()
        _, placed = run(core, pods[args.warmup:args.warmup + count], t)
        return time.perf_counter() - w0, time.process_time() - c0, placed

    core = build(True)
    wall, cpu, placed = measure(core, args.pods)
    n = max(args.pods, 1)
    stats = core.framework.cache.stats
    speedup = None
    if args.baseline_pods > 0 and args.pods > 0:
        k = min(args.baseline_pods, args.pods)
        base_wall, _, _ = measure(build(False), k)
        speedup = round((base_wall / k) / (wall / n), 2)
    print(f"{args.pods} pods on {args.nodes} nodes in cycles of {args.cycle}: {wall / n * 1e6:.1f} µs a pod "
          f"({cpu / n * 1e6:.1f} µs CPU), {placed} placed; {len(core.framework.cache.entries)} classes kept, "
          f"{stats['full']} full / {stats['incremental']} incremental class syncs"
          + (f"; ×{speedup} over the uncached reference path" if speedup is not None else ""))
    print(json.dumps({"bench": "scheduler_stream", "nodes": args.nodes, "pods": args.pods, "cycle": args.cycle,
                      "us_per_pod": round(wall / n * 1e6, 1), "cpu_us_per_pod": round(cpu / n * 1e6, 1),
                      "placed": placed, "classes": len(core.framework.cache.entries),
                      "class_full_syncs": stats["full"], "class_incremental_syncs": stats["incremental"],
                      "speedup_vs_uncached": speedup}))


if __name__ == "__main__":
    main()
