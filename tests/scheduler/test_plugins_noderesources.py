"""Resource scoring strategies (Kubernetes NodeResourcesFit scoringStrategy, BalancedAllocation):
hand-computed tables, kind columns for batch/mid pods, and argument validation."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from colo.messages import NodeResource, NodeSpec, PodSpec, Resources
from colo_scheduler.framework.interface import CycleState
from colo_scheduler.framework.registry import ProfileConfig, build_profile
from colo_scheduler.plugins import new_in_tree_registry
from colo_scheduler.podinfo import make_pod_info
from colo_scheduler.settings import SchedulerSettings
from colo_scheduler.table import NodeTable

SETTINGS = SchedulerSettings()


def _table(*nodes: tuple[int, int, int], batch: tuple[int, int] = (0, 0),
           allocated: list[Resources] | None = None) -> NodeTable:
    """Nodes (cpu milli, memory bytes, pods) named n0.., batch allocatable on every node, and
    per-node allocated requests (pods count 1 each when given)."""
    t = NodeTable()
    for i, (cpu, mem, pods) in enumerate(nodes):
        r = Resources(cpu=cpu, memory=mem, pods=pods)
        t.upsert_node(NodeSpec(name=f"n{i}", capacity=r, allocatable=r))
        t.set_node_resource(NodeResource(node=f"n{i}", batch_cpu=batch[0], batch_memory=batch[1]))
        if allocated:
            t.set_allocated(f"n{i}", allocated[i], 1)
    return t


def _scores(plugin: str, args: dict[str, Any] | None, table: NodeTable, spec: PodSpec) -> list[int]:
    p: Any = new_in_tree_registry().build(plugin, SETTINGS, args)
    state = CycleState(now=0.0, table=table)
    out = p.score(state, make_pod_info(spec))
    rows = np.arange(table.n, dtype=np.intp)[::-1].copy()
    assert np.array_equal(out[rows], p.score_rows(state, make_pod_info(spec), rows))
    return [int(v) for v in out]


POD = PodSpec(uid="p", name="p", requests=Resources(cpu=3000, memory=5000))
NODES = ((4000, 10_000, 0), (6000, 10_000, 0))


def _strategy(kind: str, **extra: Any) -> dict[str, Any]:
    return {"scoring_strategy": {"type": kind, **extra}}


CASES = [
    # name, plugin, args, table nodes, pod, expected per node
    ("least-allocated", "NodeResourcesFit", _strategy("LeastAllocated"), NODES, POD, [37, 50]),
    ("least-allocated-legacy-name", "NodeResourcesLeastAllocated", None, NODES, POD, [37, 50]),
    ("most-allocated", "NodeResourcesFit", _strategy("MostAllocated"), NODES, POD, [62, 50]),
    ("balanced", "NodeResourcesBalancedAllocation", None, NODES, POD, [87, 100]),
    # default shape 0 % → 10, 100 % → 0: cpu 75 % → 25, memory 50 % → 50, rounded mean 37.5 → 38
    ("requested-to-capacity-ratio", "NodeResourcesFit", _strategy("RequestedToCapacityRatio"), NODES, POD,
     [38, 50]),
    ("rtcr-packing-shape", "NodeResourcesFit",
     _strategy("RequestedToCapacityRatio", shape=[{"utilization": 0, "score": 0},
                                                 {"utilization": 100, "score": 10}]), NODES, POD, [63, 50]),
    ("least-weighted-cpu-3", "NodeResourcesFit",
     _strategy("LeastAllocated", resources=[{"name": "cpu", "weight": 3}, {"name": "memory", "weight": 1}]),
     NODES, POD, [31, 50]),
    # pods resource: node caps 4 pods → (4 − 1) × 100 // 4 = 75; no cap (2**62) → 99
    ("least-pods-only", "NodeResourcesFit", _strategy("LeastAllocated", resources=[{"name": "pods"}]),
     ((4000, 10_000, 4), (4000, 10_000, 0)), POD, [75, 99]),
    # over-committed: LeastAllocated 0 for cpu; MostAllocated caps at 100
    ("least-overcommitted", "NodeResourcesFit", _strategy("LeastAllocated"), ((2000, 10_000, 0),), POD, [25]),
    ("most-overcommitted", "NodeResourcesFit", _strategy("MostAllocated"), ((2000, 10_000, 0),), POD, [75]),
    ("balanced-best-effort-pod-skipped", "NodeResourcesBalancedAllocation", None, NODES,
     PodSpec(uid="be", name="be"), [0, 0]),
    # three resources: fractions .75, .5, 1/4 pods → population std
    ("balanced-three-resources", "NodeResourcesBalancedAllocation",
     {"resources": [{"name": "cpu"}, {"name": "memory"}, {"name": "pods"}]}, ((4000, 10_000, 4),), POD, [79]),
]


@pytest.mark.parametrize(("plugin", "args", "nodes", "spec", "expected"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_strategy_table(plugin: str, args: dict[str, Any] | None, nodes: tuple[tuple[int, int, int], ...],
                        spec: PodSpec, expected: list[int]) -> None:
    assert _scores(plugin, args, _table(*nodes), spec) == expected


def test_batch_pod_scores_batch_columns() -> None:
    """cpu/memory mean the pod's kind columns: batch 1000/1000 on batch allocatable 2000/4000
    → (50 + 75) // 2 = 62, whatever the native columns hold."""
    spec = PodSpec(uid="b", name="b", priority_class="batch",
                   requests=Resources(batch_cpu=1000, batch_memory=1000))
    table = _table((4000, 10_000, 0), (64_000, 10**12, 0), batch=(2000, 4000))
    assert _scores("NodeResourcesFit", None, table, spec) == [62, 62]


def test_zero_allocatable_resource_is_skipped() -> None:
    """Kubernetes skips a resource the node has none of: batch-memory 0 → batch-cpu alone counts."""
    spec = PodSpec(uid="b", name="b", priority_class="batch", requests=Resources(batch_cpu=1000))
    table = _table((4000, 10_000, 0), batch=(4000, 0))
    assert _scores("NodeResourcesFit", None, table, spec) == [75]


def test_allocated_requests_count() -> None:
    """requested = node's allocated + pod's request: 1000 m already on a 4000 m node."""
    table = _table((4000, 10_000, 0), allocated=[Resources(cpu=1000, memory=0)])
    assert _scores("NodeResourcesFit", _strategy("MostAllocated"), table, POD) == [(100 + 50) // 2]


def test_bad_arguments_list_every_problem() -> None:
    config = ProfileConfig(
        filter=("NodeResourcesFit",), score={"NodeResourcesBalancedAllocation": 1},
        plugin_args={
            "NodeResourcesFit": _strategy("RequestedToCapacityRatio",
                                          resources=[{"name": "gpu"}, {"name": "cpu", "weight": 0}],
                                          shape=[{"utilization": 50, "score": 11},
                                                 {"utilization": 40, "score": 1}]),
            "NodeResourcesBalancedAllocation": {"resources": [{"name": "cpu"}, {"name": "cpu"}]},
        })
    with pytest.raises(ValueError) as err:
        build_profile(config, new_in_tree_registry(), SETTINGS)
    msg = str(err.value)
    for part in ("unknown resource 'gpu'", "weight of 'cpu' must be within 1..100", "score 11 outside 0..10",
                 "utilization values must increase", "resource 'cpu' given twice"):
        assert part in msg


def test_unknown_strategy_type_is_refused() -> None:
    with pytest.raises(ValueError, match="NodeResourcesFit"):
        new_in_tree_registry().build("NodeResourcesFit", SETTINGS, _strategy("Packed"))
