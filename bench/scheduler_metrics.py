"""What the scheduler's Prometheus updates cost per pod: the stream of bench/scheduler_stream.py scheduled twice
in one process, with and without the updates the service makes after each cycle (CPU time of this process: the machine's
other work does not count).

The service calls :func:`colo_scheduler.metrics.observe_binds` once per bind pipeline and
:func:`colo_scheduler.metrics.observe_cycle` once per cycle (the pending-pods gauge is read at scrape time and
costs nothing here). This bench runs the same nodes and pods (:func:`scheduler_e2e.make_nodes`,
:func:`scheduler_e2e.make_pods`) through fresh cores in cycles of ``--cycle`` pods, ``--rounds`` times each
way, alternating so that the machine's drift hits both, and compares the best round of each: ``ratio`` =
CPU µs a pod with metrics / without (1.00 = free), after ``--warmup`` pods not measured. The bind results are the store's answer "bound" for every
placement (no Redis here). ``update_us_per_pod`` times the two calls alone (thread CPU time, best round): the steadier
figure on a shared machine. The last line is JSON.

Run: ``.venv/bin/python bench/scheduler_metrics.py``.
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

from colo.messages import NodeMetric, Usage  # noqa: E402
from colo.store import BindResult  # noqa: E402
from colo_scheduler.core import Scheduler  # noqa: E402
from colo_scheduler.metrics import observe_binds, observe_cycle  # noqa: E402
from colo_scheduler.settings import SchedulerSettings  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--pods", type=int, default=3000, help="pods measured")
    ap.add_argument("--warmup", type=int, default=2000, help="pods placed before measuring (classes built)")
    ap.add_argument("--cycle", type=int, default=10, help="pods per scheduling cycle")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    nodes, resources = make_nodes(args.nodes, rng)
    pods = make_pods("p", args.warmup + args.pods, rng)
    ok = BindResult(True, "")

    def build() -> Scheduler:
        core = Scheduler(SchedulerSettings())
        for spec in nodes:
            core.on_node(spec, 100.0)
        for nr in resources:
            core.on_node_resource(nr, 100.0)
        for spec in nodes:
            usage = Usage(cpu=spec.allocatable.cpu // 4, memory=spec.allocatable.memory // 4)
            core.on_metric(NodeMetric(node=spec.name, at=95.0, node_usage=usage), 100.0)
        return core

    spent = [0.0]  # seconds inside the metric updates, measured pods only

    def run(metered: bool) -> float:
        core, t = build(), 100.0
        spent[0] = 0.0
        t0 = time.process_time()
        for k in range(0, len(pods), args.cycle):
            if k == args.warmup:
                t0 = time.process_time()
            c0 = time.perf_counter()
            for p in pods[k:k + args.cycle]:
                core.add_pod(p, t)
            out = core.schedule_cycle(t)
            if metered:
                m0 = time.thread_time()
                observe_binds(out.placements, [ok] * len(out.placements), 0.001)
                observe_cycle(out, time.perf_counter() - c0)
                if k >= args.warmup:
                    spent[0] += time.thread_time() - m0
            t += 0.002
        return (time.process_time() - t0) / max(args.pods, 1) * 1e6

    plain, metered, updates = [], [], []
    for _ in range(args.rounds):
        plain.append(run(False))
        metered.append(run(True))
        updates.append(spent[0] / max(args.pods, 1) * 1e6)
    ratio = min(metered) / min(plain)
    print(f"{args.pods} pods on {args.nodes} nodes in cycles of {args.cycle}, best of {args.rounds}: "
          f"{min(plain):.1f} CPU µs a pod without metrics, {min(metered):.1f} with: ratio {ratio:.3f}; "
          f"the updates themselves {min(updates):.2f} µs a pod ({min(updates) / min(plain):.1%})")
    print(json.dumps({"bench": "scheduler_metrics", "nodes": args.nodes, "pods": args.pods, "cycle": args.cycle,
                      "us_per_pod_plain": round(min(plain), 1), "us_per_pod_metered": round(min(metered), 1),
                      "ratio": round(ratio, 3),
                      "update_us_per_pod": round(min(updates), 2), "rounds_plain": [round(x, 1) for x in plain],
                      "rounds_metered": [round(x, 1) for x in metered]}))


if __name__ == "__main__":
    main()
