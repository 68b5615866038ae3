"""A deleted node (``Scheduler.remove_node``, ``NodeTable.retire``) is no candidate for any pod, its batch offer
included, until it registers again; one row per kind of pod."""

from __future__ import annotations

import pytest
from sched_helpers import GI, MI, node, node_resource, pod, scheduler

from colo.messages import PodSpec, Toleration

CASES = [
    ("plain", pod("p", 500, MI)),
    ("no requests", pod("p")),
    ("batch", pod("p", batch_cpu=500, batch_memory=MI)),
    ("tolerates cordon", pod("p", 500, MI, tolerations=[Toleration(key="node.kubernetes.io/unschedulable",
                                                                   operator="Exists", effect="NoSchedule")])),
]


@pytest.mark.parametrize(("name", "spec"), CASES, ids=[c[0] for c in CASES])
def test_a_removed_node_takes_no_pod_until_it_registers_again(name: str, spec: PodSpec) -> None:
    core = scheduler(seed=1)
    core.on_node(node("gone", cpu=8000, memory=16 * GI), 0.0)
    core.on_node_resource(node_resource("gone", batch_cpu=8000, batch_memory=8 * GI), 0.0)
    assert core.remove_node("gone") and not core.remove_node("gone")
    core.on_node_resource(node_resource("gone", batch_cpu=8000, batch_memory=8 * GI), 1.0)  # ignored
    core.add_pod(spec, 1.0)
    assert core.schedule_cycle(1.0).placements == []
    core.on_node(node("gone", cpu=8000, memory=16 * GI), 2.0)
    core.on_node_resource(node_resource("gone", batch_cpu=8000, batch_memory=8 * GI), 2.0)
    placed = core.schedule_cycle(100.0).placements
    assert [(p.pod.uid, p.node) for p in placed] == [("p", "gone")]
    assert not core.table.retired


def test_removing_an_unknown_node_does_nothing() -> None:
    core = scheduler(seed=1)
    assert not core.remove_node("nowhere")
