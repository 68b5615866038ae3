"""Node affinity (Kubernetes semantics): operators, terms ORed / expressions ANDed, preferred weights and
their normalization, invalid affinity rejected at PreFilter, wire compatibility of PodSpec."""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np
import pytest
from sched_helpers import MI, node, pod, scheduler

from colo.affinity import affinity_problems, requirement_matches
from colo.messages import (
    Affinity,
    NodeAffinity,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodSpec,
    PreferredSchedulingTerm,
)
from colo_scheduler.framework.interface import UNSCHEDULABLE_AND_UNRESOLVABLE

NOW = 100.0


def req(key: str, op: str, *values: str) -> NodeSelectorRequirement:
    return NodeSelectorRequirement(key=key, operator=op, values=list(values))


def term(*exprs: NodeSelectorRequirement) -> NodeSelectorTerm:
    return NodeSelectorTerm(match_expressions=list(exprs))


def with_affinity(spec: PodSpec, required: list[NodeSelectorTerm] | None = None,
                  preferred: list[tuple[int, NodeSelectorTerm]] | None = None) -> PodSpec:
    na = NodeAffinity(required=NodeSelector(node_selector_terms=required) if required is not None else None,
                      preferred=[PreferredSchedulingTerm(weight=w, preference=t) for w, t in preferred or []])
    return msgspec.structs.replace(spec, affinity=Affinity(node_affinity=na))


LABELS = {"zone": "a", "gen": "7", "disk": "ssd"}

MATCH = [
    ("in-match", req("zone", "In", "a", "b"), True),
    ("in-other-value", req("zone", "In", "b"), False),
    ("in-missing-key", req("rack", "In", "a"), False),
    ("notin-match", req("zone", "NotIn", "b"), True),
    ("notin-value-listed", req("zone", "NotIn", "a"), False),
    ("notin-missing-key-matches", req("rack", "NotIn", "a"), True),
    ("exists", req("disk", "Exists"), True),
    ("exists-missing", req("rack", "Exists"), False),
    ("does-not-exist", req("rack", "DoesNotExist"), True),
    ("does-not-exist-present", req("disk", "DoesNotExist"), False),
    ("gt", req("gen", "Gt", "6"), True),
    ("gt-equal-fails", req("gen", "Gt", "7"), False),
    ("lt", req("gen", "Lt", "10"), True),
    ("lt-negative", req("gen", "Lt", "-1"), False),
    ("gt-label-not-integer", req("disk", "Gt", "1"), False),
    ("gt-missing-key", req("rack", "Gt", "1"), False),
]


@pytest.mark.parametrize(("requirement", "expected"), [c[1:] for c in MATCH], ids=[c[0] for c in MATCH])
def test_requirement_semantics(requirement: NodeSelectorRequirement, expected: bool) -> None:
    assert requirement_matches(requirement, LABELS) is expected


NODES = [("a7", {"zone": "a", "gen": "7"}), ("b7", {"zone": "b", "gen": "7"}), ("b3", {"zone": "b", "gen": "3"}),
         ("none", {})]

REQUIRED = [
    ("one-term", [term(req("zone", "In", "b"))], {"b7", "b3"}),
    ("expressions-anded", [term(req("zone", "In", "b"), req("gen", "Gt", "5"))], {"b7"}),
    ("terms-ored", [term(req("zone", "In", "a")), term(req("gen", "Lt", "5"))], {"a7", "b3"}),
    ("empty-term-matches-nothing", [term()], set()),
    ("empty-term-ored-with-real", [term(), term(req("zone", "In", "a"))], {"a7"}),
    ("does-not-exist", [term(req("zone", "DoesNotExist"))], {"none"}),
]


@pytest.mark.parametrize(("terms", "feasible"), [c[1:] for c in REQUIRED], ids=[c[0] for c in REQUIRED])
def test_required_terms_filter(terms: list[NodeSelectorTerm], feasible: set[str]) -> None:
    s = scheduler()
    for name, labels in NODES:
        s.on_node(node(name, labels=labels), NOW)
    spec = with_affinity(pod("p", 100, MI), required=terms)
    info = s.pod_info(spec, NOW)
    state = s.framework.begin_cycle(NOW)
    plugin: Any = s.framework.profile.plugins["NodeAffinity"]
    mask = plugin.filter(state, info)
    got = {n for i, n in enumerate(s.table.names) if mask is None or mask[i]}
    assert got == feasible
    rows = np.arange(s.table.n, dtype=np.intp)
    codes, labels = plugin.reason_codes(state, info, rows)
    assert {s.table.names[i] for i in np.flatnonzero(codes)} == set(s.table.names) - feasible
    s.add_pod(spec, NOW)
    out = s.schedule_cycle(NOW)
    if feasible:
        assert out.placements and out.placements[0].node in feasible
    else:
        assert out.failures[0].result.reasons == {"node(s) didn't match Pod's node affinity/selector": 4}


PREFERRED = [
    # weights: zone a → 20, gen > 5 → 60 ; raw a7 80, b7 60, b3 0, none 0 → ×100 // 80
    ("weights-summed-and-normalized", [(20, term(req("zone", "In", "a"))), (60, term(req("gen", "Gt", "5")))],
     {"a7": 100, "b7": 75, "b3": 0, "none": 0}),
    ("nothing-matches-all-zero", [(50, term(req("zone", "In", "z")))], {"a7": 0, "b7": 0, "b3": 0, "none": 0}),
    ("raw-above-100-scaled", [(100, term(req("zone", "Exists"))), (100, term(req("gen", "In", "7")))],
     {"a7": 100, "b7": 100, "b3": 50, "none": 0}),
]


@pytest.mark.parametrize(("preferred", "expected"), [c[1:] for c in PREFERRED], ids=[c[0] for c in PREFERRED])
def test_preferred_terms_score(preferred: list[tuple[int, NodeSelectorTerm]], expected: dict[str, int]) -> None:
    s = scheduler()
    for name, labels in NODES:
        s.on_node(node(name, labels=labels), NOW)
    info = s.pod_info(with_affinity(pod("p", 100, MI), preferred=preferred), NOW)
    state = s.framework.begin_cycle(NOW)
    plugin: Any = s.framework.profile.plugins["NodeAffinity"]
    raw = plugin.score(state, info)
    norm = plugin.normalize(state, info, raw, np.ones(s.table.n, np.bool_))
    if isinstance(norm, int):  # the same score on every node
        norm = np.full(s.table.n, norm)
    assert dict(zip(s.table.names, norm.tolist())) == expected


def test_normalize_uses_feasible_maximum_only() -> None:
    """An infeasible node with the highest raw score does not set the maximum and stays within 0..100
    (counted as the maximum)."""
    s = scheduler()
    for name, labels in NODES:
        s.on_node(node(name, labels=labels), NOW)
    prefs = [(100, term(req("zone", "In", "a"))), (40, term(req("gen", "In", "7")))]
    info = s.pod_info(with_affinity(pod("p", 100, MI), preferred=prefs), NOW)
    state = s.framework.begin_cycle(NOW)
    plugin: Any = s.framework.profile.plugins["NodeAffinity"]
    raw = plugin.score(state, info)
    norm = plugin.normalize(state, info, raw, np.array([False, True, True, True]))
    assert norm.tolist() == [100, 100, 0, 0]


def test_preferred_affinity_decides_placement() -> None:
    s = scheduler()
    for name, labels in NODES:
        s.on_node(node(name, labels=labels), NOW)
    s.add_pod(with_affinity(pod("p", 100, MI), preferred=[(10, term(req("gen", "Lt", "5")))]), NOW)
    assert [p.node for p in s.schedule_cycle(NOW).placements] == ["b3"]


INVALID = [
    ("bad-operator", [term(req("zone", "Near", "a"))], "unknown operator 'Near'"),
    ("gt-non-integer", [term(req("gen", "Gt", "seven"))], "operator Gt needs an integer value, got 'seven'"),
    ("lt-two-values", [term(req("gen", "Lt", "1", "2"))], "operator Lt needs exactly one value"),
    ("in-without-values", [term(req("zone", "In"))], "operator In needs at least one value"),
    ("exists-with-values", [term(req("zone", "Exists", "a"))], "operator Exists takes no values"),
    ("no-terms", [], "required needs at least one node selector term"),
]


@pytest.mark.parametrize(("terms", "message"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_invalid_affinity_rejected_at_prefilter(terms: list[NodeSelectorTerm], message: str) -> None:
    s = scheduler()
    s.on_node(node("n", labels={"zone": "a", "gen": "7"}), NOW)
    s.add_pod(with_affinity(pod("p", 100, MI), required=terms), NOW)
    out = s.schedule_cycle(NOW)
    assert not out.placements
    result = out.failures[0].result
    assert result.code == UNSCHEDULABLE_AND_UNRESOLVABLE and result.rejectors == {"NodeAffinity"}
    (reason,) = result.reasons
    assert reason.startswith("invalid node affinity: ") and message in reason


def test_every_problem_listed_and_bad_preferred_weight() -> None:
    spec = with_affinity(pod("p"), required=[term(req("a", "Gt", "x"), req("", "In", "v"))],
                         preferred=[(0, term(req("b", "Exists"))), (101, term(req("c", "Lt", "1.5")))])
    problems = affinity_problems(spec.affinity)
    assert len(problems) == 5
    assert any("preferred term 0 weight must be within 1..100, got 0" in p for p in problems)
    assert any("preferred term 1 weight must be within 1..100, got 101" in p for p in problems)
    assert any("empty key" in p for p in problems)


def test_podspec_wire_compatibility() -> None:
    """Old messages (no affinity) decode; affinity round-trips; defaults are omitted on the wire."""
    old = msgspec.json.encode({"uid": "u", "name": "n", "requests": {"cpu": 100}})
    spec = msgspec.json.decode(old, type=PodSpec)
    assert spec.affinity is None
    assert b"affinity" not in msgspec.json.encode(spec)
    new = with_affinity(spec, required=[term(req("zone", "In", "a"))], preferred=[(5, term(req("g", "Exists")))])
    assert msgspec.json.decode(msgspec.json.encode(new), type=PodSpec) == new
    wire = msgspec.json.decode(msgspec.json.encode(new))
    assert wire["affinity"]["node_affinity"]["preferred"][0]["preference"]["match_expressions"][0] == {
        "key": "g", "operator": "Exists"}
