"""The DeviceShare plugin inside the scheduler on the FGD paper's experiment: the nodes of
``openb_node_list_gpu_node.csv`` (GPUs as ``NodeSpec.gpus``), pods sampled from ``openb_pod_list_default.csv``
as :mod:`gpu_fragmentation` samples them (seeded, until 130 % of the cluster's GPUs arrived, none leaving),
submitted one at a time to the scheduler core with the default profile; records the share of GPUs allocated when
100 % and 130 % of the cluster's GPUs have arrived, and pods per CPU-second of the whole scheduler (one cycle per
pod: the slowest way to drive it). Compare with ``gpu_fragmentation.py --ties random`` (the kernels alone).

Variants (``--variants``, comma-separated ``POLICY:CPU`` with POLICY ``Ours`` or ``FGD`` and CPU the
``DeviceShareArgs.score_cpu_pods`` of ``auto`` (None, the default), ``on`` or ``off``) run in turns on the same pods
of every seed in one process, so that machine load hits them alike; ``Ours:auto`` is the default profile and
settings; POLICY ``none`` gives DeviceShare's Score weight 0 (its Filter and Reserve still run): the
scheduler's own speed on these pods, the baseline of the pods/s column.

Run: ``.venv/bin/python bench/deviceshare_trace.py --seeds 5 [--variants FGD:off,Ours:auto] [--other-weights 0]``;
one line per variant and seed, a table of the means, last line JSON. ``--other-weights`` sets the LoadAware and
LeastAllocated weights (1 in the default profile).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gpu_fragmentation as gf  # noqa: E402

from colo.messages import GPURequest, NodeSpec, PodSpec, Resources  # noqa: E402
from colo.sim.node_topology import trace_gpus  # noqa: E402
from colo_scheduler.core import Scheduler  # noqa: E402
from colo_scheduler.plugins import default_profile_config  # noqa: E402
from colo_scheduler.plugins.deviceshare.plugin import DeviceShare  # noqa: E402
from colo_scheduler.plugins.deviceshare.state import GpuNodeTable  # noqa: E402
from colo_scheduler.settings import ProfileSettings, SchedulerSettings  # noqa: E402

MI = 1 << 20


CPU_MODES: dict[str, bool | None] = {"auto": None, "on": True, "off": False}


def run(nodes: list[tuple[int, int, int, str]], arrivals: list[gf.PodShape], names: list[str], policy: str,
        score_cpu_pods: bool | None, other_weights: int, per_cycle: int) -> dict[str, float]:
    """One variant on one seed's arrivals, ``per_cycle`` pods queued per scheduling cycle (placed one at a
    time in arrival order either way): allocation % at 100 / 130 % arrived, pods per CPU-second."""
    settings = SchedulerSettings(seed=1, least_allocated_weight=other_weights, load_aware_weight=other_weights)
    score = dict(default_profile_config(settings).score)
    if policy == "none":  # DeviceShare's Filter and Reserve only: the scheduler's speed without its Score
        score["DeviceShare"] = 0
    args = {"policy": policy if policy != "none" else "FGD", "score_cpu_pods": score_cpu_pods}
    settings = msgspec.structs.replace(settings, profile=ProfileSettings(score=score, plugin_args={"DeviceShare": args}))
    core = Scheduler(settings)
    ds = core.framework.profile.plugins["DeviceShare"]
    assert isinstance(ds, DeviceShare)
    for k, (cpu, mem, g, model) in enumerate(nodes):
        r = Resources(cpu=cpu, memory=mem * MI, pods=10_000)
        core.on_node(NodeSpec(name=f"n{k:04}", capacity=r, allocatable=r, gpus=trace_gpus(g, model)), 0.0)

    def allowed(mask: int) -> list[str]:
        return [m for b, m in enumerate(names) if mask >> b & 1] if mask and mask != 1 << 62 else []

    total = sum(g for _, _, g, _ in nodes) * 1000
    specs = [PodSpec(uid=f"p{j}", name=f"p{j}", created_at=float(j), requests=Resources(cpu=p.cpu, memory=p.mem * MI),
                     gpu=GPURequest(count=p.num_gpu, milli=p.gpu_milli, models=allowed(p.models)) if p.num_gpu else None)
             for j, p in enumerate(arrivals)]
    placed: set[str] = set()
    t0 = time.process_time()
    for start in range(0, len(specs), per_cycle):
        for spec in specs[start:start + per_cycle]:
            core.add_pod(spec, 1.0)
        placed.update(pl.pod.uid for pl in core.schedule_cycle(1.0).placements)
    cpu_s = time.process_time() - t0
    arrived = alloc = 0
    marks: dict[float, float] = {}
    for p, spec in zip(arrivals, specs):
        alloc += p.gpu_request if spec.uid in placed else 0
        arrived += p.gpu_request
        for m in (1.0, 1.3):
            if m not in marks and arrived >= m * total:
                marks[m] = alloc / total
    return {"alloc_pct_at_100": round(100 * marks.get(1.0, alloc / total), 2),
            "alloc_pct_at_130": round(100 * marks.get(1.3, alloc / total), 2),
            "pods_per_cpu_s": round(len(arrivals) / cpu_s)}


def main() -> None:
    """Parse arguments, run every variant on every seed, print the table and the JSON line."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=5, help="seeds 42, 43, …")
    ap.add_argument("--seed", type=int, default=42, help="first seed")
    ap.add_argument("--variants", default="none:off,FGD:off,Ours:off,Ours:auto")
    ap.add_argument("--other-weights", type=int, default=1)
    ap.add_argument("--per-cycle", type=int, default=1,
                    help="pods queued per scheduling cycle (1: one cycle per pod; up to max_pods_per_cycle, 2000)")
    args = ap.parse_args()
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    for v in variants:
        policy, _, cpu = v.partition(":")
        if policy not in ("Ours", "FGD", "none") or cpu not in CPU_MODES:
            ap.error(f"variant {v!r}: want POLICY:CPU, POLICY Ours, FGD or none, CPU one of {', '.join(CPU_MODES)}")
    root = Path(os.environ.get("COLO_TRACES_DIR", "../shared/traces")) / "alibaba-gpu-v2023"
    nodes = gf.read_nodes(root / "openb_node_list_gpu_node.csv")
    table = GpuNodeTable.from_nodes(nodes)
    shapes = gf.read_pods(root / "openb_pod_list_default.csv", table)
    total = int(table.gpu_count.sum()) * 1000
    got: dict[str, list[dict[str, float]]] = {v: [] for v in variants}
    for seed in range(args.seed, args.seed + args.seeds):
        arrivals = gf.sample(shapes, gf.workload_weights(shapes, "default"), total, seed)
        order = variants if seed % 2 == 0 else variants[::-1]
        for v in order:
            policy, _, cpu = v.partition(":")
            res = run(nodes, arrivals, list(table.model_names), policy, CPU_MODES[cpu], args.other_weights,
                      args.per_cycle)
            got[v].append(res)
            print(f"seed {seed} {v:10} {res['alloc_pct_at_100']:6.2f} {res['alloc_pct_at_130']:6.2f} "
                  f"{res['pods_per_cpu_s']:7.0f} pods/cpu-s", flush=True)
    means = {v: {"alloc_pct_at_100": round(statistics.fmean(r["alloc_pct_at_100"] for r in rs), 2),
                 "alloc_pct_at_130": round(statistics.fmean(r["alloc_pct_at_130"] for r in rs), 2),
                 "pods_per_cpu_s": round(statistics.median(r["pods_per_cpu_s"] for r in rs))}
             for v, rs in got.items()}
    print(f"{'variant':12} {'@100 %':>7} {'@130 %':>7} {'pods/cpu-s':>11}")
    for v, m in means.items():
        print(f"{v:12} {m['alloc_pct_at_100']:7.2f} {m['alloc_pct_at_130']:7.2f} {m['pods_per_cpu_s']:11.0f}")
    print(json.dumps({"bench": "deviceshare_trace", "seeds": list(range(args.seed, args.seed + args.seeds)),
                      "other_weights": args.other_weights, "per_cycle": args.per_cycle, "variants": means}))


if __name__ == "__main__":
    main()
