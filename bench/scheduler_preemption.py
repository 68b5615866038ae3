"""What priority preemption costs the scheduler: the in-process bench's cluster and pods (trace-built,
:mod:`scheduler_inprocess`) scheduled twice in the same run, cycle for cycle in turn, by the bench profile
without and with the DefaultPreemption PostFilter.

Pods that fit never reach the PostFilter, so their decision latency must not move; pods that fit
nowhere pay for the search (candidates, victims, node choice). A third of the pods get a priority drawn
from their class's range (REFERENCE.md §1) so that some lower-priority pods are there to preempt. No
node agent runs: victims stay on their nodes, so every preemptor stays nominated (in backoff) once it
has preempted.

Once the cluster is full, ``--wave`` high-priority (9999) copies of prod pods arrive: they preempt.
Prints pods/s of both runs, decision p50/p99 of placed pods, of failed attempts and of the preempting
attempts in each, the nominations and evictions. The last line is JSON.

Run: ``.venv/bin/python bench/scheduler_preemption.py --nodes 5000 --pods 50000`` (add ``--no-load-filter``
to make room mostly a matter of requests, so that the wave preempts). ``--device-share`` adds DeviceShare to
the profile's filters (the default profile has it; the bench's nodes and pods have no GPUs) and a third run,
``cpu-deps``, whose DefaultPreemption re-runs only NodeResourcesFit and MaxInstancePerNode (the filters it
re-ran before DeviceShare became pod-dependent): ``with`` / ``cpu-deps`` pods/s is the cost of the GPU path
to CPU-only pods, measured in one run.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import statistics
import time

import msgspec
import numpy as np
from scheduler_inprocess import NOW, bench_profile, build_cluster, build_pods, load

from colo.classes import PRIORITY_RANGES, priority_class_of
from colo.messages import PodSpec
from colo_scheduler.core import Scheduler
from colo_scheduler.settings import SchedulerSettings


def with_priorities(pods: list[PodSpec], seed: int) -> list[PodSpec]:
    """A third of the pods with a priority drawn uniformly from their class's range."""
    rng = random.Random(seed)
    out = []
    for p in pods:
        cls = priority_class_of(p)
        if cls in PRIORITY_RANGES and rng.random() < 1 / 3:
            lo, hi, _ = PRIORITY_RANGES[cls]
            p = msgspec.structs.replace(p, priority=rng.randint(lo, hi))
        out.append(p)
    return out


def _pct(xs: list[float], q: float) -> float:
    return round(float(np.percentile(xs, q)), 4) if xs else 0.0


def main() -> None:
    """Parse arguments, run both cores in turn, print a summary and a final JSON line."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--pods", type=int, default=50000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--wave", type=int, default=500, help="priority-9999 prod pods arriving on the full cluster")
    ap.add_argument("--no-load-filter", action="store_true",
                    help="drop the LoadAware filter (its measured load, which removing pods does not lower, "
                         "rules most full nodes out of preemption; without it requests decide)")
    ap.add_argument("--device-share", action="store_true",
                    help="DeviceShare in the filters, and a third run re-running only the CPU fit filters")
    args = ap.parse_args()
    cluster = build_cluster(args.nodes, args.seed)
    median_mem = int(statistics.median(n.allocatable.memory for n in cluster.nodes))
    pods = with_priorities(build_pods(args.pods, args.seed, median_mem), args.seed)
    prod = [p for p in pods if priority_class_of(p) == "prod"]
    wave = [msgspec.structs.replace(p, uid=f"wave-{k}-{p.uid}", name=f"wave-{k}", priority=9999)
            for k, p in enumerate(random.Random(args.seed).sample(prod, min(args.wave, len(prod))))]
    settings = SchedulerSettings(seed=args.seed)
    base = bench_profile(settings)
    if args.no_load_filter:
        base = dataclasses.replace(base, filter=tuple(f for f in base.filter if f != "LoadAware"))
    if args.device_share:
        base = dataclasses.replace(base, filter=(*base.filter, "DeviceShare"), reserve=(*base.reserve, "DeviceShare"))
    profiles = {"without": base, "with": dataclasses.replace(base, post_filter=("DefaultPreemption",))}
    if args.device_share:
        cpu_deps = {"DefaultPreemption": {"pod_dependent_filters": ["NodeResourcesFit", "MaxInstancePerNode"]}}
        profiles["cpu-deps"] = dataclasses.replace(profiles["with"], plugin_args=cpu_deps)
    cores = {name: Scheduler(settings, prof) for name, prof in profiles.items()}
    for core in cores.values():
        load(core, cluster)
        for p in pods:
            core.add_pod(p, NOW)
    wall = dict.fromkeys(cores, 0.0)
    placed_ms: dict[str, list[float]] = {name: [] for name in cores}
    failed_ms: dict[str, list[float]] = {name: [] for name in cores}
    nominated = dict.fromkeys(cores, 0)
    evictions = dict.fromkeys(cores, 0)
    wave_ms: dict[str, list[float]] = {name: [] for name in cores}
    now, cycle = NOW, 0
    for phase in ("fill", "wave"):
        if phase == "wave":  # the cluster is full: high-priority copies of prod pods arrive
            now += 1.0
            for core in cores.values():
                for p in wave:
                    core.add_pod(p, now)
        while any(c.queue.lengths()["active"] for c in cores.values()):
            order = list(cores)[cycle % len(cores):] + list(cores)[:cycle % len(cores)]
            for name in order:
                t0 = time.perf_counter()
                out = cores[name].schedule_cycle(now)
                wall[name] += time.perf_counter() - t0
                placed_ms[name].extend(p.decision_ms for p in out.placements)
                failed_ms[name].extend(f.decision_ms for f in out.failures)
                if phase == "wave":
                    wave_ms[name].extend(f.decision_ms for f in out.failures if f.result.nominated >= 0)
                nominated[name] += sum(1 for f in out.failures if f.result.nominated >= 0)
                evictions[name] += len(out.evictions)
            now += 0.001
            cycle += 1
    res: dict[str, object] = {"bench": "scheduler_preemption", "nodes": args.nodes, "pods": args.pods,
                              "wave": len(wave), "load_filter": not args.no_load_filter,
                              "device_share": args.device_share}
    for name in cores:
        n = len(placed_ms[name]) + len(failed_ms[name])
        res[name] = {
            "pods_per_s": round(n / wall[name]) if wall[name] else 0,
            "placed": len(placed_ms[name]), "failed_attempts": len(failed_ms[name]),
            "placed_p50_ms": _pct(placed_ms[name], 50), "placed_p99_ms": _pct(placed_ms[name], 99),
            "failed_p50_ms": _pct(failed_ms[name], 50), "failed_p99_ms": _pct(failed_ms[name], 99),
            "nominations": nominated[name], "evictions": evictions[name],
            "preempting_p50_ms": _pct(wave_ms[name], 50), "preempting_p99_ms": _pct(wave_ms[name], 99),
        }
        r = res[name]
        assert isinstance(r, dict)
        print(f"{name:>8} preemption: {r['pods_per_s']} pods/s; placed {r['placed']} "
              f"(p50 {r['placed_p50_ms']} ms, p99 {r['placed_p99_ms']} ms), failed attempts {r['failed_attempts']} "
              f"(p50 {r['failed_p50_ms']} ms, p99 {r['failed_p99_ms']} ms), nominations {r['nominations']}, "
              f"evictions {r['evictions']} (preempting attempts p50 {r['preempting_p50_ms']} ms, "
              f"p99 {r['preempting_p99_ms']} ms)")
    print(json.dumps(res))


if __name__ == "__main__":
    main()
