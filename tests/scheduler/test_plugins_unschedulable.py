"""NodeUnschedulable: a cordoned node takes no new pod unless the pod tolerates the cordon taint."""

from __future__ import annotations

import pytest
from msgspec.structs import replace
from sched_helpers import node, pod, scheduler

from colo.messages import PodSpec, Toleration

NOW = 100.0
CORDON = "node.kubernetes.io/unschedulable"

CASES = [
    ("cordoned-rejected", True, pod("p", 100), None, {"node(s) were unschedulable": 1}),
    ("schedulable-passes", False, pod("p", 100), "n", {}),
    ("tolerates-cordon-key", True, pod("p", 100, tolerations=[Toleration(key=CORDON, operator="Exists")]), "n", {}),
    ("tolerates-everything", True, pod("p", 100, tolerations=[Toleration(operator="Exists")]), "n", {}),
    ("toleration-wrong-effect", True,
     pod("p", 100, tolerations=[Toleration(key=CORDON, operator="Exists", effect="NoExecute")]), None,
     {"node(s) were unschedulable": 1}),
    ("toleration-other-key", True, pod("p", 100, tolerations=[Toleration(key="gpu", operator="Exists")]), None,
     {"node(s) were unschedulable": 1}),
]


@pytest.mark.parametrize(("unschedulable", "spec", "placed", "reasons"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_node_unschedulable(unschedulable: bool, spec: PodSpec, placed: str | None,
                            reasons: dict[str, int]) -> None:
    s = scheduler()
    s.on_node(replace(node("n"), unschedulable=unschedulable), NOW)
    s.add_pod(spec, NOW)
    out = s.schedule_cycle(NOW)
    assert (out.placements[0].node if out.placements else None) == placed
    assert (out.failures[0].result.reasons if out.failures else {}) == reasons


def test_uncordon_admits_again() -> None:
    """The mask follows the node's spec: cordon, then uncordon, and the waiting pod is placed with a new one."""
    s = scheduler()
    s.on_node(replace(node("n"), unschedulable=True), NOW)
    s.add_pod(pod("p", 100), NOW)
    assert s.schedule_cycle(NOW).placements == []
    s.on_node(node("n"), NOW + 1)
    s.add_pod(pod("q", 100), NOW + 1)
    out = s.schedule_cycle(NOW + 1)
    assert sorted((pl.pod.spec.uid, pl.node) for pl in out.placements) == [("p", "n"), ("q", "n")]
