"""Whether LS GPU pods wait behind BE GPU pods in the ``gpu`` demo scenario: one ``colo`` run of
``python -m colo.sim --scenario gpu`` (short by default), then per QoS class the GPU pods submitted, ever bound,
unschedulable at the end (last attempt unschedulable, not bound since) and the GPUs the class's running pods hold
at the end, with the preemptions.

Run: ``.venv/bin/python bench/gpu_preemption_sim.py --nodes 10 --hours 1`` (about 1 min here). The last line
is JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections import Counter
from pathlib import Path

from colo.classes import qos_class_of
from colo.sim.presets import preset
from colo.sim.run import run_all
from colo.sim.scenario import ScenarioParams


def main() -> None:
    """Parse arguments, run the scenario's ``colo`` run, print the counts."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=10)
    ap.add_argument("--hours", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=Path("out/gpu-preemption"))
    args = ap.parse_args()
    chosen = preset("gpu")
    scenario = chosen.build(ScenarioParams(**{"jobs": True, **chosen.params, "nodes": args.nodes,
                                              "hours": args.hours, "seed": args.seed}))
    args.out.mkdir(parents=True, exist_ok=True)
    (result,) = asyncio.run(run_all(scenario, args.out, ("colo",), show_progress=False))
    m = result.metrics
    submitted: Counter[str] = Counter()
    bound: Counter[str] = Counter()
    waiting: Counter[str] = Counter()
    running_milli: Counter[str] = Counter()
    ls_reasons: Counter[str] = Counter()
    for pod in scenario.gpu_pods():
        qos = qos_class_of(pod)
        if pod.uid not in m.submitted_at:
            continue
        submitted[qos] += 1
        bound[qos] += pod.uid in m.bind_events
        waits = pod.uid in m.unschedulable and pod.uid not in m.bound_node
        waiting[qos] += waits
        if waits and qos == "LS" and pod.gpu is not None:
            shape = "share" if pod.gpu.milli < 1000 else f"{pod.gpu.count} GPU"
            ls_reasons[f"{shape}: {m.unschedulable_top.get(pod.uid, '?')}"] += 1
        if m.phase.get(pod.uid) in ("Bound", "Running") and pod.gpu is not None:
            running_milli[qos] += pod.gpu.count * pod.gpu.milli
    summary = m.summary()
    res = {"bench": "gpu_preemption_sim", "nodes": args.nodes, "hours": args.hours, "seed": args.seed,
           "submitted": dict(submitted), "bound": dict(bound), "unschedulable_at_end": dict(waiting),
           "gpus_held_at_end": {q: v / 1000 for q, v in running_milli.items()},
           "preemptions": summary["preemptions"], "gpu_alloc_avg": round(summary["gpu_alloc_avg"], 4),
           "violations": len(result.violations), "ls_waiting_by_shape_and_reason": dict(ls_reasons.most_common())}
    for qos in sorted(submitted):
        print(f"{qos:>3} GPU pods: {submitted[qos]} submitted, {bound[qos]} bound, "
              f"{waiting[qos]} unschedulable at the end, holding {running_milli[qos] / 1000:g} GPUs at the end")
    print(json.dumps(res))


if __name__ == "__main__":
    main()
