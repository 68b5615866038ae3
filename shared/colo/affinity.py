"""Node affinity of a pod: validation and matching against node labels (Kubernetes semantics).

Shared by the scheduler (NodeAffinity plugin) and admission, so that both refuse the same
pods for the same reasons. Matching follows Kubernetes ``labels.Requirement.Matches`` and
``nodeaffinity.NodeSelector``: required terms are ORed, the expressions of a term ANDed, a
term without expressions matches nothing; the preferred score of a node is the sum of the
weights of the preferred terms it matches.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from colo.messages import (
    Affinity,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    NodeSpec,
    PodSpec,
    PreferredSchedulingTerm,
    Taint,
    Toleration,
)

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
"""Kubernetes NodeSelectorOperator values."""

_INT64 = re.compile(r"[+-]?[0-9]+\Z")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def parse_int64(value: str) -> int | None:
    """``value`` as Go's ``strconv.ParseInt(value, 10, 64)`` reads it, or None when it does not parse
    (spaces, underscores, other bases and out-of-range values do not)."""
    if not _INT64.match(value):
        return None
    v = int(value)
    return v if _INT64_MIN <= v <= _INT64_MAX else None


def requirement_problems(req: NodeSelectorRequirement, where: str) -> list[str]:
    """Every problem of one requirement (Kubernetes ValidateNodeSelectorRequirement)."""
    errors: list[str] = []
    if not req.key:
        errors.append(f"{where}: empty key")
    if req.operator not in OPERATORS:
        errors.append(f"{where}: unknown operator {req.operator!r}; known: {', '.join(OPERATORS)}")
    elif req.operator in ("In", "NotIn") and not req.values:
        errors.append(f"{where}: operator {req.operator} needs at least one value")
    elif req.operator in ("Exists", "DoesNotExist") and req.values:
        errors.append(f"{where}: operator {req.operator} takes no values")
    elif req.operator in ("Gt", "Lt"):
        if len(req.values) != 1:
            errors.append(f"{where}: operator {req.operator} needs exactly one value")
        elif parse_int64(req.values[0]) is None:
            errors.append(f"{where}: operator {req.operator} needs an integer value, got {req.values[0]!r}")
    return errors


def affinity_problems(affinity: Affinity | None) -> list[str]:
    """Every problem of a pod's node affinity; empty when valid (or absent).

    Checks: at least one required term, every requirement (:func:`requirement_problems`), preferred
    weights within 1..100 (Kubernetes ValidateNodeAffinity / ValidatePreferredSchedulingTerms)."""
    na = affinity.node_affinity if affinity is not None else None
    if na is None:
        return []
    errors: list[str] = []
    if na.required is not None:
        terms = na.required.node_selector_terms
        if not terms:
            errors.append("node affinity: required needs at least one node selector term")
        for t, term in enumerate(terms):
            for e, req in enumerate(term.match_expressions):
                errors += requirement_problems(req, f"node affinity: required term {t} expression {e}")
    for t, pref in enumerate(na.preferred):
        if not 1 <= pref.weight <= 100:
            errors.append(f"node affinity: preferred term {t} weight must be within 1..100, got {pref.weight}")
        for e, req in enumerate(pref.preference.match_expressions):
            errors += requirement_problems(req, f"node affinity: preferred term {t} expression {e}")
    return errors


def requirement_matches(req: NodeSelectorRequirement, labels: Mapping[str, str]) -> bool:
    """Whether node ``labels`` satisfy ``req`` (valid requirements; an unknown operator matches nothing)."""
    op = req.operator
    value = labels.get(req.key)
    if op == "In":
        return value is not None and value in req.values
    if op == "NotIn":
        return value is None or value not in req.values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt") and value is not None and len(req.values) == 1:
        have, want = parse_int64(value), parse_int64(req.values[0])
        if have is None or want is None:
            return False
        return have > want if op == "Gt" else have < want
    return False


def term_matches(term: NodeSelectorTerm, labels: Mapping[str, str]) -> bool:
    """Every expression of ``term`` holds; a term without expressions matches nothing."""
    return bool(term.match_expressions) and all(requirement_matches(r, labels) for r in term.match_expressions)


def required_matches(terms: Sequence[NodeSelectorTerm], labels: Mapping[str, str]) -> bool:
    """At least one of ``terms`` matches (terms ORed)."""
    return any(term_matches(t, labels) for t in terms)


def preferred_score(preferred: Sequence[PreferredSchedulingTerm], labels: Mapping[str, str]) -> int:
    """Σ weights of the preferred terms matching ``labels`` (Kubernetes NodeAffinity Score, raw)."""
    return sum(p.weight for p in preferred if term_matches(p.preference, labels))


def tolerates_taint(key: str, operator: str, value: str, effect: str, taint: Taint) -> bool:
    """Whether a toleration given by its fields tolerates ``taint`` (Kubernetes ``Toleration.ToleratesTaint``):
    an empty effect matches every effect; ``Exists`` with an empty key matches every taint, with a key any
    value of it; ``Equal`` needs key and value equal."""
    if effect and effect != taint.effect:
        return False
    if operator == "Exists":
        return key in ("", taint.key)
    return key == taint.key and value == taint.value


def toleration_tolerates(toleration: Toleration, taint: Taint) -> bool:
    """:func:`tolerates_taint` of a :class:`~colo.messages.Toleration`."""
    return tolerates_taint(toleration.key, toleration.operator, toleration.value, toleration.effect, taint)


def taints_tolerated(spec: PodSpec, node: NodeSpec) -> bool:
    """Every NoSchedule/NoExecute taint of ``node`` is tolerated by ``spec`` (PreferNoSchedule never
    filters), and a cordoned node (``unschedulable``) only with a toleration of
    ``node.kubernetes.io/unschedulable:NoSchedule`` (Kubernetes TaintToleration and NodeUnschedulable)."""
    taints = list(node.taints)
    if node.unschedulable:
        taints.append(UNSCHEDULABLE_TAINT)
    return all(t.effect == "PreferNoSchedule" or any(toleration_tolerates(tol, t) for tol in spec.tolerations)
               for t in taints)


def node_selected(spec: PodSpec, labels: Mapping[str, str]) -> bool:
    """``spec``'s node selector (every pair in ``labels``) and required node affinity (a term matches,
    :func:`required_matches`) admit a node with ``labels`` (Kubernetes NodeSelector and NodeAffinity Filter)."""
    if any(labels.get(k) != v for k, v in spec.node_selector.items()):
        return False
    na = spec.affinity.node_affinity if spec.affinity is not None else None
    return na is None or na.required is None or required_matches(na.required.node_selector_terms, labels)


UNSCHEDULABLE_TAINT = Taint(key="node.kubernetes.io/unschedulable", effect="NoSchedule")
"""The taint Kubernetes puts on a cordoned node."""
