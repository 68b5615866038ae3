"""Colocation profiles in full: label and namespace selectors, sub-priority, and admission refusing what the
scheduler would refuse (REFERENCE.md §1, Koordinator ClusterColocationProfile)."""

from __future__ import annotations

from typing import Any

import pytest

from colo.messages import (
    Affinity,
    NodeAffinity,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodAdmitted,
    PodRejected,
    PodSpec,
    PreferredSchedulingTerm,
    Resources,
)
from colo.settings import SettingsError, build_settings
from colo_slo_manager.admission import KOORDINATOR_PRIORITY_LABEL, admit, profile_matches
from colo_slo_manager.selectors import LabelSelector, LabelSelectorRequirement
from colo_slo_manager.settings import ColocationProfile, SloManagerSettings

NS = "kubernetes.io/metadata.name"


def req(key: str, op: str, *values: str) -> LabelSelectorRequirement:
    return LabelSelectorRequirement(key=key, operator=op, values=list(values))  # type: ignore[arg-type]


def pod(namespace: str = "default", **labels: str) -> PodSpec:
    return PodSpec(uid="u1", name="p1", namespace=namespace, labels=labels, qos_class="BE", priority=5500,
                   requests=Resources(cpu=1000))


@pytest.mark.parametrize(("expressions", "labels", "want"), [
    pytest.param([req("app", "In", "spark", "flink")], {"app": "flink"}, True, id="in"),
    pytest.param([req("app", "In", "spark")], {"app": "web"}, False, id="in-other-value"),
    pytest.param([req("app", "In", "spark")], {}, False, id="in-missing-key"),
    pytest.param([req("tier", "NotIn", "prod")], {"tier": "dev"}, True, id="notin"),
    pytest.param([req("tier", "NotIn", "prod")], {}, True, id="notin-missing-key-matches"),
    pytest.param([req("tier", "NotIn", "prod")], {"tier": "prod"}, False, id="notin-listed"),
    pytest.param([req("batch", "Exists")], {"batch": ""}, True, id="exists"),
    pytest.param([req("batch", "Exists")], {}, False, id="exists-missing"),
    pytest.param([req("online", "DoesNotExist")], {}, True, id="doesnotexist"),
    pytest.param([req("online", "DoesNotExist")], {"online": "1"}, False, id="doesnotexist-present"),
    pytest.param([req("app", "In", "spark"), req("online", "DoesNotExist")], {"app": "spark", "online": "y"},
                 False, id="anded"),
])
def test_pod_label_expressions(expressions: list[LabelSelectorRequirement], labels: dict[str, str],
                               want: bool) -> None:
    profile = ColocationProfile(name="p", match_expressions=expressions)
    assert profile_matches(profile, pod(**labels)) is want


def test_expressions_and_match_labels_both_hold() -> None:
    profile = ColocationProfile(name="p", match_labels={"team": "data"}, match_expressions=[req("app", "Exists")])
    assert profile_matches(profile, pod(team="data", app="x"))
    assert not profile_matches(profile, pod(app="x"))
    assert not profile_matches(profile, pod(team="data"))


@pytest.mark.parametrize(("selector", "namespace", "want"), [
    pytest.param(LabelSelector(match_labels={NS: "analytics"}), "analytics", True, id="labels-equal"),
    pytest.param(LabelSelector(match_labels={NS: "analytics"}), "web", False, id="labels-other"),
    pytest.param(LabelSelector(match_expressions=[req(NS, "In", "a", "b")]), "b", True, id="in"),
    pytest.param(LabelSelector(match_expressions=[req(NS, "NotIn", "kube-system")]), "kube-system", False,
                 id="notin-excluded"),
    pytest.param(LabelSelector(match_expressions=[req(NS, "NotIn", "kube-system")]), "default", True,
                 id="notin-other"),
    pytest.param(LabelSelector(), "anything", True, id="empty-matches-all"),
])
def test_namespace_selector_on_the_namespace_name(selector: LabelSelector, namespace: str, want: bool) -> None:
    profile = ColocationProfile(name="p", namespace_selector=selector)
    assert profile_matches(profile, pod(namespace=namespace)) is want


@pytest.mark.parametrize(("data", "fragments"), [
    pytest.param({"name": "p", "namespace_selector": {"match_labels": {"team": "a"}}},
                 ["namespace_selector may only test kubernetes.io/metadata.name", "team"], id="other-namespace-label"),
    pytest.param({"name": "p", "match_expressions": [{"key": "a", "operator": "In"},
                                                     {"key": "b", "operator": "Exists", "values": ["x"]},
                                                     {"key": "c", "operator": "Gt", "values": ["1"]},
                                                     {"key": "", "operator": "Exists"}]},
                 ["needs at least one value", "takes no values", "operator", "'' is not a valid label key"],
                 id="bad-requirements"),
    pytest.param({"name": "p", "match_labels": {"app": "not valid!"}, "koordinator_priority": 2**31},
                 ["is not a valid label value", "int32"], id="bad-label-and-sub-priority"),
])
def test_profile_selector_problems_all_listed(data: dict[str, Any], fragments: list[str]) -> None:
    with pytest.raises(SettingsError) as err:
        build_settings(SloManagerSettings, {"profiles": [data]})
    joined = "\n".join(err.value.errors)
    for fragment in fragments:
        assert fragment in joined, fragment


def test_koordinator_priority_becomes_a_label() -> None:
    profile = ColocationProfile(name="p", qos_class="BE", priority_class="batch", koordinator_priority=1200)
    got = admit(pod(), SloManagerSettings(profiles=[profile]), now=1.0)
    assert isinstance(got, PodAdmitted)
    assert got.spec.labels[KOORDINATOR_PRIORITY_LABEL] == "1200" and got.spec.priority == 5500


def _affinity(*exprs: NodeSelectorRequirement, weight: int = 10) -> Affinity:
    return Affinity(node_affinity=NodeAffinity(
        required=NodeSelector(node_selector_terms=[NodeSelectorTerm(match_expressions=list(exprs))]),
        preferred=[PreferredSchedulingTerm(weight=weight, preference=NodeSelectorTerm())]))


def test_bad_node_affinity_rejected_with_every_problem() -> None:
    bad = PodSpec(uid="a1", name="a1", priority=9500, requests=Resources(cpu=500), affinity=_affinity(
        NodeSelectorRequirement(key="zone", operator="Near", values=["a"]),
        NodeSelectorRequirement(key="gpu", operator="Gt", values=["many"]), weight=0))
    got = admit(bad, SloManagerSettings(), now=1.0)
    assert isinstance(got, PodRejected)
    assert "unknown operator 'Near'" in got.reason and "integer value" in got.reason
    assert "weight must be within 1..100" in got.reason


def test_valid_node_affinity_admitted() -> None:
    good = PodSpec(uid="a2", name="a2", priority=9500, requests=Resources(cpu=500), affinity=_affinity(
        NodeSelectorRequirement(key="zone", operator="In", values=["a"])))
    assert isinstance(admit(good, SloManagerSettings(), now=1.0), PodAdmitted)


@pytest.mark.parametrize(("spec", "fragments"), [
    pytest.param(PodSpec(uid="k1", name="k1", priority=9500, requests=Resources(cpu=500, mid_cpu=500)),
                 ["must have priority class mid, got prod", "one kind of resources"], id="prod-with-mid"),
    pytest.param(PodSpec(uid="k2", name="k2", priority=7500, requests=Resources(cpu=500, mid_cpu=500)),
                 ["one kind of resources, got cpu/memory and mid-*"], id="mid-mixing-native"),
])
def test_resource_kind_problems_rejected(spec: PodSpec, fragments: list[str]) -> None:
    got = admit(spec, SloManagerSettings(), now=1.0)
    assert isinstance(got, PodRejected)
    for fragment in fragments:
        assert fragment in got.reason, fragment


def test_mid_profile_translation_passes_the_kind_check() -> None:
    profile = ColocationProfile(name="mid", match_labels={"tier": "mid"}, qos_class="LS", priority_class="mid")
    spec = PodSpec(uid="m1", name="m1", labels={"tier": "mid"}, requests=Resources(cpu=500, memory=10**9))
    got = admit(spec, SloManagerSettings(profiles=[profile]), now=1.0)
    assert isinstance(got, PodAdmitted) and got.spec.requests == Resources(mid_cpu=500, mid_memory=10**9)
