"""Each GPU policy's node choice on small hand-made tables (plugins/deviceshare/policies.py, fgdplus.py),
one row per case; the scores follow the authors' plugins (docs/gpu.md)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from colo_scheduler.plugins.deviceshare.fgdplus import POLICIES
from colo_scheduler.plugins.deviceshare.policies import PolicyContext, select_node
from colo_scheduler.plugins.deviceshare.state import (
    GpuNodeTable,
    PodShape,
    TargetWorkload,
    allocate,
    pick_devices,
)

SHARE = PodShape(cpu=4000, mem=1024, num_gpu=1, gpu_milli=500)
ONE = PodShape(cpu=4000, mem=1024, num_gpu=1, gpu_milli=1000)
CPU_ONLY = PodShape(cpu=32000, mem=1024, num_gpu=0, gpu_milli=0)


def cluster() -> GpuNodeTable:
    """Node 0: T4, 2 GPUs, 32 cores, idle.  Node 1: G2, 8 GPUs, 96 cores, one device half used by a share pod.
    Node 2: V100, 4 GPUs, 16 cores, two devices used by 1-GPU pods.  Node 3: A10, 1 GPU, 128 cores, idle."""
    table = GpuNodeTable.from_nodes([(32000, 131072, 2, "T4"), (96000, 393216, 8, "G2"),
                                     (16000, 131072, 4, "V100"), (128000, 1048576, 1, "A10")])
    allocate(table, 1, SHARE, [3])
    allocate(table, 2, ONE, [0])
    allocate(table, 2, ONE, [1])
    return table


@dataclass(frozen=True)
class Case:
    name: str
    policy: str
    pod: PodShape
    node: int
    why: str


TARGET = TargetWorkload.from_counts({(4000, 500, 1, 0): 0.4, (4000, 1000, 1, 0): 0.4, (8000, 1000, 4, 0): 0.2})

CASES = [
    Case("bestfit-1gpu", "BestFit", ONE, 2, "least (cpu, gpu) left: 8 cores and 1 GPU on node 2"),
    Case("bestfit-share", "BestFit", SHARE, 2, "node 2 leaves 8 cores, 1.5 GPUs: least"),
    Case("dotprod-1gpu-tie", "DotProd", ONE, 0, "nodes 0 and 2 both score 98 on the integer scale: first"),
    Case("dotprod-cpu-heavy", "DotProd", PodShape(12000, 1024, 1, 1000), 0,
         "node 2 lacks the cores; node 0's free (32 cores, 2 GPUs) has the least dot product: 97"),
    Case("packing-share", "GpuPacking", SHARE, 1, "a shared device (node 1, device 3, 500 free) scores 95"),
    Case("packing-1gpu", "GpuPacking", ONE, 1, "used nodes 1 and 2 take one fully free device: 49 (first of"
         " the tie) > idle nodes 0 (max(33 − 2, 2) = 31) and 3 (32)"),
    Case("clustering-share", "GpuClustering", SHARE, 1, "node 1 holds only share pods: 75 + fill"),
    Case("clustering-1gpu", "GpuClustering", ONE, 2, "node 2 holds only 1-GPU pods: 75 + fill"),
    Case("fgd-share", "FGD", SHARE, 1, "filling the half device leaves no new fragment"),
    Case("fgd-exact-share", "FGD-exact", SHARE, 1, "same, unrounded"),
    Case("fgd-4gpu", "FGD-exact", PodShape(8000, 1024, 4, 1000), 1, "only node 1 fits 4 whole GPUs"),
    Case("fgd-cpu-only", "FGD", CPU_ONLY, 1, "ΔF = 0 on nodes 1 and 3: the first listed of the tie"),
    Case("ours-cpu-only", "Ours", CPU_ONLY, 3, "32 cores off node 1 strand its GPUs; node 3 has CPU to spare"),
    Case("ours-share", "Ours", SHARE, 1, "as FGD"),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_policy_choice(case: Case) -> None:
    table = cluster()
    ctx = PolicyContext(np.random.default_rng(0), TARGET, 4)
    scores, dev = POLICIES[case.policy](table, case.pod, ctx)
    node = select_node(scores, ctx.rng, "first")
    assert node == case.node, f"{case.why}; scores {scores}"
    devices = pick_devices(table.gpu_free[node], case.pod, int(dev[node]))
    if case.pod is SHARE and case.node == 1:
        assert devices == [3]


def test_random_picks_every_fitting_node_and_no_other() -> None:
    table = cluster()
    ctx = PolicyContext(np.random.default_rng(1), TARGET, 4)
    pod = PodShape(20000, 1024, 1, 1000)  # node 2 has 12 cores left: does not fit
    seen = {select_node(POLICIES["Random"](table, pod, ctx)[0], ctx.rng, "random") for _ in range(200)}
    assert seen == {0, 1, 3}


def test_no_fit_selects_nothing() -> None:
    table = cluster()
    ctx = PolicyContext(np.random.default_rng(0), TARGET, 4)
    for name, policy in POLICIES.items():
        scores, _ = policy(table, PodShape(1000, 1024, 8, 1000), ctx)  # no node has 8 free GPUs
        assert select_node(scores, ctx.rng) == -1, name


def test_select_node_rejects_unknown_tie_rule() -> None:
    with pytest.raises(ValueError, match="ties"):
        select_node(np.array([1.0, 1.0]), np.random.default_rng(0), "last")
