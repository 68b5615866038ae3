"""The DeviceShare plugin inside the scheduler on the FGD paper's experiment: the nodes of
``openb_node_list_gpu_node.csv`` (GPUs as ``NodeSpec.gpus``), pods sampled from ``openb_pod_list_default.csv``
as :mod:`gpu_fragmentation` samples them (seeded, until 130 % of the cluster's GPUs arrived, none leaving),
submitted one at a time to the scheduler core with the default profile; records the share of GPUs allocated when
100 % and 130 % of the cluster's GPUs have arrived, and pods per CPU-second of the whole scheduler (one cycle per
pod: the slowest way to drive it). Compare with ``gpu_fragmentation.py --ties random`` (the kernels alone).

Run: ``.venv/bin/python bench/deviceshare_trace.py --seed 42 [--score-cpu-pods] [--other-weights 0]``; last line
JSON. ``--score-cpu-pods`` sets ``DeviceShareArgs.score_cpu_pods``; ``--other-weights`` the LoadAware and
LeastAllocated weights (1 in the default profile).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gpu_fragmentation as gf  # noqa: E402

from colo.messages import GPURequest, NodeSpec, PodSpec, Resources  # noqa: E402
from colo.sim.node_topology import trace_gpus  # noqa: E402
from colo_scheduler.core import Scheduler  # noqa: E402
from colo_scheduler.plugins.deviceshare.plugin import DeviceShare, DeviceShareArgs  # noqa: E402
from colo_scheduler.plugins.deviceshare.state import GpuNodeTable  # noqa: E402
from colo_scheduler.settings import SchedulerSettings  # noqa: E402

MI = 1 << 20


def main() -> None:
    """Parse arguments, run, print the JSON line."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--score-cpu-pods", action="store_true")
    ap.add_argument("--other-weights", type=int, default=1)
    args = ap.parse_args()
    root = Path(os.environ.get("COLO_TRACES_DIR", "../shared/traces")) / "alibaba-gpu-v2023"
    nodes = gf.read_nodes(root / "openb_node_list_gpu_node.csv")
    table = GpuNodeTable.from_nodes(nodes)
    shapes = gf.read_pods(root / "openb_pod_list_default.csv", table)
    total = int(table.gpu_count.sum()) * 1000
    arrivals = gf.sample(shapes, gf.workload_weights(shapes, "default"), total, args.seed)
    core = Scheduler(SchedulerSettings(seed=1, least_allocated_weight=args.other_weights,
                                       load_aware_weight=args.other_weights))
    ds = core.framework.profile.plugins["DeviceShare"]
    assert isinstance(ds, DeviceShare)
    ds.args = DeviceShareArgs(score_cpu_pods=args.score_cpu_pods)
    for k, (cpu, mem, g, model) in enumerate(nodes):
        r = Resources(cpu=cpu, memory=mem * MI, pods=10_000)
        core.on_node(NodeSpec(name=f"n{k:04}", capacity=r, allocatable=r, gpus=trace_gpus(g, model)), 0.0)

    def names(mask: int) -> list[str]:
        return [m for b, m in enumerate(table.model_names) if mask >> b & 1] if mask and mask != 1 << 62 else []

    arrived = alloc = 0
    marks: dict[float, float] = {}
    t0 = time.process_time()
    for j, p in enumerate(arrivals):
        gpu = GPURequest(count=p.num_gpu, milli=p.gpu_milli, models=names(p.models)) if p.num_gpu else None
        core.add_pod(PodSpec(uid=f"p{j}", name=f"p{j}", requests=Resources(cpu=p.cpu, memory=p.mem * MI), gpu=gpu), 1.0)
        alloc += p.gpu_request * len(core.schedule_cycle(1.0).placements)
        arrived += p.gpu_request
        for m in (1.0, 1.3):
            if m not in marks and arrived >= m * total:
                marks[m] = alloc / total
    cpu_s = time.process_time() - t0
    print(json.dumps({"bench": "deviceshare_trace", "seed": args.seed, "score_cpu_pods": args.score_cpu_pods,
                      "other_weights": args.other_weights, "pods": len(arrivals),
                      "alloc_pct_at_100": round(100 * marks.get(1.0, alloc / total), 2),
                      "alloc_pct_at_130": round(100 * marks.get(1.3, alloc / total), 2),
                      "pods_per_cpu_s": round(len(arrivals) / cpu_s)}))


if __name__ == "__main__":
    main()
