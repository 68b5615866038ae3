"""colo.affinity's admission helpers (shared by the descheduler's target choice): taint toleration with the
scheduler's TaintToleration / NodeUnschedulable semantics, node selector and required affinity."""

from __future__ import annotations

import pytest

from colo.affinity import node_selected, taints_tolerated, toleration_tolerates
from colo.messages import (
    Affinity,
    NodeAffinity,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    NodeSpec,
    PodSpec,
    Resources,
    Taint,
    Toleration,
)

TAINT = Taint(key="dedicated", value="gpu", effect="NoSchedule")
TOLERATION_CASES = [
    ("equal-match", Toleration(key="dedicated", value="gpu"), TAINT, True),
    ("equal-other-value", Toleration(key="dedicated", value="cpu"), TAINT, False),
    ("equal-other-key", Toleration(key="pool", value="gpu"), TAINT, False),
    ("exists-key", Toleration(key="dedicated", operator="Exists"), TAINT, True),
    ("exists-empty-key-matches-all", Toleration(operator="Exists"), TAINT, True),
    ("effect-mismatch", Toleration(key="dedicated", value="gpu", effect="NoExecute"), TAINT, False),
    ("empty-effect-matches-every-effect", Toleration(key="dedicated", operator="Exists"),
     Taint(key="dedicated", effect="NoExecute"), True),
]


@pytest.mark.parametrize(("toleration", "taint", "tolerated"), [c[1:] for c in TOLERATION_CASES],
                         ids=[c[0] for c in TOLERATION_CASES])
def test_toleration_tolerates(toleration: Toleration, taint: Taint, tolerated: bool) -> None:
    assert toleration_tolerates(toleration, taint) is tolerated


def node(taints: list[Taint] | None = None, unschedulable: bool = False) -> NodeSpec:
    r = Resources(cpu=1000)
    return NodeSpec(name="n", capacity=r, allocatable=r, taints=taints or [], unschedulable=unschedulable)


NODE_CASES = [
    ("no-taints", node(), [], True),
    ("prefer-no-schedule-never-filters", node([Taint(key="k", effect="PreferNoSchedule")]), [], True),
    ("noschedule-untolerated", node([TAINT]), [], False),
    ("noexecute-untolerated", node([Taint(key="k", effect="NoExecute")]), [], False),
    ("tolerated", node([TAINT]), [Toleration(key="dedicated", operator="Exists")], True),
    ("one-of-two-tolerated", node([TAINT, Taint(key="k", effect="NoExecute")]),
     [Toleration(key="dedicated", operator="Exists")], False),
    ("cordoned", node(unschedulable=True), [], False),
    ("cordoned-tolerated", node(unschedulable=True),
     [Toleration(key="node.kubernetes.io/unschedulable", operator="Exists", effect="NoSchedule")], True),
]


@pytest.mark.parametrize(("spec", "tolerations", "ok"), [c[1:] for c in NODE_CASES], ids=[c[0] for c in NODE_CASES])
def test_taints_tolerated(spec: NodeSpec, tolerations: list[Toleration], ok: bool) -> None:
    assert taints_tolerated(PodSpec(uid="p", name="p", tolerations=tolerations), spec) is ok


def required(key: str, op: str, *values: str) -> Affinity:
    term = NodeSelectorTerm(match_expressions=[NodeSelectorRequirement(key=key, operator=op,  # type: ignore[arg-type]
                                                                       values=list(values))])
    return Affinity(node_affinity=NodeAffinity(required=NodeSelector(node_selector_terms=[term])))


SELECT_CASES = [
    ("nothing-asked", {}, None, {"zone": "a"}, True),
    ("selector-matches", {"zone": "a"}, None, {"zone": "a", "x": "y"}, True),
    ("selector-other-value", {"zone": "a"}, None, {"zone": "b"}, False),
    ("selector-missing-label", {"zone": "a"}, None, {}, False),
    ("affinity-in", {}, required("zone", "In", "a", "b"), {"zone": "b"}, True),
    ("affinity-notin", {}, required("zone", "NotIn", "b"), {"zone": "b"}, False),
    ("selector-and-affinity-both-needed", {"zone": "a"}, required("disk", "Exists"), {"zone": "a"}, False),
]


@pytest.mark.parametrize(("selector", "affinity", "labels", "ok"), [c[1:] for c in SELECT_CASES],
                         ids=[c[0] for c in SELECT_CASES])
def test_node_selected(selector: dict[str, str], affinity: Affinity | None, labels: dict[str, str], ok: bool) -> None:
    assert node_selected(PodSpec(uid="p", name="p", node_selector=selector, affinity=affinity), labels) is ok
