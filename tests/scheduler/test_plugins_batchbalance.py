"""BatchResourcesBalancedAllocation: hand-computed scores, one named row per case, and its place in the default
profile (weight ``batch_balanced_weight``, left out at 0)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from colo.messages import NodeResource, NodeSpec, PodSpec, Resources
from colo.settings import SettingsError
from colo_scheduler.framework.interface import CycleState
from colo_scheduler.plugins import default_profile_config, new_in_tree_registry
from colo_scheduler.podinfo import make_pod_info
from colo_scheduler.settings import SchedulerSettings
from colo_scheduler.table import NodeTable

SETTINGS = SchedulerSettings()
NAME = "BatchResourcesBalancedAllocation"
NATIVE = Resources(cpu=64_000, memory=10**12, pods=110)
OFFER = (8000, 16_000)
"""batch-cpu milli-cores, batch-memory bytes offered on every node."""

MEMORY_FULL = Resources(batch_cpu=1000, batch_memory=14_000)
CPU_FULL = Resources(batch_cpu=7000, batch_memory=2000)


def _table(*allocated: Resources, offer: tuple[int, int] = OFFER) -> NodeTable:
    t = NodeTable()
    for i, a in enumerate(allocated):
        t.upsert_node(NodeSpec(name=f"n{i}", capacity=NATIVE, allocatable=NATIVE))
        t.set_node_resource(NodeResource(node=f"n{i}", batch_cpu=offer[0], batch_memory=offer[1]))
        t.set_allocated(f"n{i}", a, 1)
    return t


def _batch(cpu: int, memory: int, cls: Any = "batch") -> PodSpec:
    return PodSpec(uid="b", name="b", priority_class=cls, requests=Resources(batch_cpu=cpu, batch_memory=memory))


CASES = [
    # name, allocated per node, pod, expected scores per node
    # n0: cpu (1000 + 2000) / 8000 = .375, memory (14000 + 1000) / 16000 = .9375 → std .28125 → 71;
    # n1: cpu 9000 / 8000 → 1, memory 3000 / 16000 = .1875 → std .40625 → 59
    ("cpu-heavy-pod-prefers-memory-full-node", (MEMORY_FULL, CPU_FULL), _batch(2000, 1000), [71, 59]),
    # n0: cpu 1500 / 8000 = .1875, memory 18000 / 16000 → 1 → 59; n1: .9375, 6000 / 16000 = .375 → 71
    ("memory-heavy-pod-prefers-cpu-full-node", (MEMORY_FULL, CPU_FULL), _batch(500, 4000), [59, 71]),
    # equal fractions .5 / .5 on an empty node → std 0 → 100
    ("even-pod-on-empty-node", (Resources(),), _batch(4000, 8000), [100]),
    ("free-class-scored-like-batch", (MEMORY_FULL, CPU_FULL), _batch(2000, 1000, "free"), [71, 59]),
    ("prod-pod-scores-zero", (MEMORY_FULL, CPU_FULL),
     PodSpec(uid="p", name="p", priority_class="prod", requests=Resources(cpu=2000, memory=1000)), [0, 0]),
    ("mid-pod-scores-zero", (MEMORY_FULL, CPU_FULL),
     PodSpec(uid="m", name="m", priority_class="mid", requests=Resources(mid_cpu=2000, mid_memory=1000)), [0, 0]),
    ("batch-pod-requesting-nothing-scores-zero", (MEMORY_FULL, CPU_FULL), _batch(0, 0), [0, 0]),
]


@pytest.mark.parametrize(("allocated", "spec", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_score_table(allocated: tuple[Resources, ...], spec: PodSpec, expected: list[int]) -> None:
    table = _table(*allocated)
    p: Any = new_in_tree_registry().build(NAME, SETTINGS, None)
    state = CycleState(now=0.0, table=table)
    out = p.score(state, make_pod_info(spec))
    rows = np.arange(table.n, dtype=np.intp)[::-1].copy()
    assert np.array_equal(out[rows], p.score_rows(state, make_pod_info(spec), rows))
    assert [int(v) for v in out] == expected


def test_in_default_profile_with_its_weight() -> None:
    assert default_profile_config(SETTINGS).score[NAME] == 1
    assert default_profile_config(SchedulerSettings(batch_balanced_weight=3)).score[NAME] == 3
    assert NAME not in default_profile_config(SchedulerSettings(batch_balanced_weight=0)).score


def test_negative_weight_is_refused() -> None:
    with pytest.raises(SettingsError, match="batch_balanced_weight must be >= 0"):
        SchedulerSettings(batch_balanced_weight=-1)
