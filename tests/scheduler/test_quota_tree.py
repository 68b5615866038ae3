"""The elastic quota tree: validation lists every problem with its field path; pods map to leaf quotas by
label, then match_labels, then namespace."""

from __future__ import annotations

import pytest

from colo.messages import QUOTA_NAME_LABEL, ElasticQuota, PodSpec
from colo_scheduler.plugins.elasticquota.book import QuotaBook
from colo_scheduler.plugins.elasticquota.tree import QuotaTree, QuotaTreeError


def q(name: str, parent: str = "", **kw: object) -> ElasticQuota:
    return ElasticQuota(name=name, parent=parent, **kw)  # type: ignore[arg-type]


INVALID = [
    ("unknown parent", [q("a", "nope")], ["quota a: parent: quota 'nope' not found"]),
    ("cycle", [q("a", "b"), q("b", "a")],
     ["quota a: parent: cycle through 'a'", "quota b: parent: cycle through 'b'"]),
    ("min above max", [q("a", min={"cpu": 5}, max={"cpu": 4})], ["quota a: min.cpu: 5 exceeds max.cpu 4"]),
    ("unknown resource and negative amount", [q("a", min={"gpu": 1}, max={"cpu": -1})],
     ["quota a: min.gpu: unknown resource (one of cpu, memory, batch_cpu, batch_memory, mid_cpu, mid_memory, pods)",
      "quota a: max.cpu: must be an integer >= 0, got -1"]),
    ("children's min above the parent's", [q("p", min={"cpu": 10}), q("c1", "p", min={"cpu": 6}),
                                          q("c2", "p", min={"cpu": 6})],
     ["quota p: min.cpu: 10 is less than its children's Σ min 12 (c1, c2)"]),
    ("a parent selecting pods", [q("p", namespaces=["x"]), q("c", "p")],
     ["quota p: namespaces/match_labels: a quota with children selects no pods"]),
    ("one namespace, two quotas", [q("a", namespaces=["x"]), q("b", namespaces=["x"])],
     ["quota b: namespaces: 'x' is already selected by quota a"]),
    ("one namespace listed three times by the second quota: one problem", [q("a", namespaces=["x"]),
                                                                            q("b", namespaces=["x", "x", "x"])],
     ["quota b: namespaces: 'x' is already selected by quota a"]),
    ("the root's name, and a name given twice", [q("root"), q("a"), q("a")],
     ["quota 'root': name: must be non-empty and not 'root'", "quota a: name: given twice"]),
]


def test_a_namespace_listed_twice_by_one_quota_is_one_selection() -> None:
    assert QuotaTree.problems([q("a", namespaces=["x", "x"])]) == []


@pytest.mark.parametrize(("case", "specs", "problems"), INVALID, ids=[c[0] for c in INVALID])
def test_invalid_trees_list_every_problem(case: str, specs: list[ElasticQuota], problems: list[str]) -> None:
    with pytest.raises(QuotaTreeError) as exc:
        QuotaTree.build(specs)
    assert exc.value.problems == problems
    assert QuotaTree.problems(specs) == problems


def test_valid_tree_order_and_chains() -> None:
    t = QuotaTree.build([q("c", "p", min={"cpu": 2}), q("p", min={"cpu": 5}), q("d", "p"), q("z")])
    assert t.order == ["p", "z", "c", "d"]
    assert t.chain("c") == ("c", "p") and t.chain("z") == ("z",) and t.chain("nope") == ()
    assert not t.nodes["p"].leaf and t.nodes["c"].leaf
    assert t.nodes["c"].constrained[0] and not t.nodes["c"].constrained[1]


def _pod(namespace: str = "default", **labels: str) -> PodSpec:
    return PodSpec(uid="u", name="u", namespace=namespace, labels=labels)


LOOKUP = [
    ("the quota label wins", _pod("ns-a", **{QUOTA_NAME_LABEL: "by-label", "team": "b"}), "by-label"),
    ("match_labels before namespace", _pod("ns-a", team="b"), "team-b"),
    ("the most specific match_labels", _pod("ns-a", team="b", tier="gold"), "team-b-gold"),
    ("namespace", _pod("ns-a"), "ns-quota"),
    ("nothing selects it", _pod("other"), ""),
]


@pytest.mark.parametrize(("case", "spec", "quota"), LOOKUP, ids=[c[0] for c in LOOKUP])
def test_pod_to_leaf_quota(case: str, spec: PodSpec, quota: str) -> None:
    t = QuotaTree.build([q("by-label"), q("team-b", match_labels={"team": "b"}),
                         q("team-b-gold", match_labels={"team": "b", "tier": "gold"}),
                         q("ns-quota", namespaces=["ns-a"])])
    assert t.quota_of(spec) == quota


def test_book_refuses_invalid_change_keeps_old_tree_and_defers_orphans() -> None:
    book = QuotaBook()
    assert book.apply(q("child", "parent", min={"cpu": 1})) == []  # parent not there yet: kept aside
    assert "child" in book.deferred and not book.active
    assert book.apply(q("parent", min={"cpu": 4})) == []
    assert set(book.tree.nodes) == {"parent", "child"} and not book.deferred
    problems = book.apply(q("parent", min={"cpu": 0}))
    assert problems == ["quota parent: min.cpu: 0 is less than its children's Σ min 1 (child)"]
    assert book.tree.nodes["parent"].min[0] == 4  # unchanged
    assert book.apply(q("child", deleted=True)) == []
    assert set(book.tree.nodes) == {"parent"}


@pytest.mark.parametrize(("first", "second"), [("team-spark", "team-dup"), ("team-a", "team-b")])
def test_a_refused_namespace_clash_names_the_refused_quota_first(first: str, second: str) -> None:
    """The quota that arrives second is the one refused, whatever the names' order; the one in force keeps it."""
    book = QuotaBook()
    assert book.apply(q(first, namespaces=["spark"])) == []
    assert book.apply(q(second, namespaces=["spark"])) == [
        f"quota {second}: namespaces: 'spark' is already selected by quota {first}"]
    assert set(book.tree.nodes) == {first}
    assert book.apply(q(first, namespaces=["spark"], max={"cpu": 8})) == []  # a change of the owner is no clash
