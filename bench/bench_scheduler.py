"""Scheduler cycle benchmark: 1,000 pods on 100 nodes, against a baseline measured in the same run.

Prints the cycle time and its ratio to one small NumPy operation ((100, 2) int64 add), so the
number is comparable across machines. Run: ``.venv/bin/python bench/bench_scheduler.py``.
"""

from __future__ import annotations

import timeit

from colo.messages import NodeMetric, NodeResource, NodeSpec, PodSpec, Resources, Usage
from colo_scheduler.core import Scheduler
from colo_scheduler.settings import SchedulerSettings

GI = 1024**3


def cycle_seconds(n_nodes: int = 100, n_pods: int = 1000) -> float:
    """Wall seconds of one scheduling cycle placing ``n_pods`` mixed LS/BE pods on ``n_nodes``."""
    s = Scheduler(SchedulerSettings())
    for i in range(n_nodes):
        r = Resources(cpu=64_000, memory=256 * GI, pods=110)
        s.on_node(NodeSpec(name=f"n{i}", capacity=r, allocatable=r), 0.0)
        s.on_node_resource(NodeResource(node=f"n{i}", batch_cpu=30_000, batch_memory=100 * GI), 0.0)
        s.on_metric(NodeMetric(node=f"n{i}", at=0.0, node_usage=Usage(cpu=10_000 + 100 * i, memory=50 * GI)),
                    0.0)
    for j in range(n_pods):
        if j % 2:
            spec = PodSpec(uid=f"p{j}", name=f"p{j}", requests=Resources(cpu=500, memory=GI // 2),
                           app=f"a{j % 7}", max_instance_per_node=20)
        else:
            spec = PodSpec(uid=f"b{j}", name=f"b{j}", priority_class="batch",
                           requests=Resources(batch_cpu=1000, batch_memory=GI))
        s.add_pod(spec, 1.0)
    t = timeit.default_timer()
    out = s.schedule_cycle(1.0)
    elapsed = timeit.default_timer() - t
    assert len(out.placements) == n_pods
    return elapsed


def main() -> None:
    """Print cycle time, baseline op time and their ratio (best of 3)."""
    base = min(timeit.repeat("a + b", setup="import numpy as np; a = np.zeros((100, 2), np.int64); "
                             "b = np.ones(2, np.int64)", number=20_000, repeat=3)) / 20_000
    cycle = min(cycle_seconds() for _ in range(3))
    print(f"cycle 1000 pods / 100 nodes: {cycle * 1e3:.1f} ms; baseline op {base * 1e6:.2f} us; "
          f"ratio {cycle / base:.0f} ops-equivalent ({cycle / base / 1000:.0f} per pod)")


if __name__ == "__main__":
    main()
