"""The runtime quota calculator (REFERENCE.md §8): oracle O15, our own cases, and hypothesis properties
over random sibling sets and trees."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from colo_scheduler.plugins.elasticquota.runtime import (
    UNLIMITED,
    Demand,
    TreeQuota,
    largest_remainder,
    sibling_runtimes,
    tree_runtimes,
)

# name, weight, request, min (REFERENCE.md §10 O15: total 100, all lend, max unlimited)
O15 = [("A", 40, 5, 10), ("B", 60, 20, 15), ("C", 50, 40, 20), ("D", 80, 70, 15)]


def _o15(weights: dict[str, int] | None = None) -> dict[str, int]:
    w = weights or {}
    return sibling_runtimes(100, [Demand(n, m, UNLIMITED, w.get(n, wt), r) for n, wt, r, m in O15])


@pytest.mark.parametrize(("case", "weights", "expected"), [
    ("O15 row 1", None, {"A": 5, "B": 20, "C": 35, "D": 40}),
    ("O15 row 2: D weight 0", {"D": 0}, {"A": 5, "B": 20, "C": 40, "D": 15}),
])
def test_oracle_o15(case: str, weights: dict[str, int] | None, expected: dict[str, int]) -> None:
    assert _o15(weights) == expected, case


# (case, total, [(name, min, max, weight, request, allow_lent)], expected)
CASES = [
    ("everyone below min and lending gets its request", 100,
     [("a", 30, 100, 1, 10, True), ("b", 30, 100, 1, 20, True)], {"a": 10, "b": 20}),
    ("a quota that does not lend keeps its min", 100,
     [("a", 30, 100, 1, 10, False), ("b", 10, 100, 1, 90, True)], {"a": 30, "b": 70}),
    ("a lender's idle min goes to the borrower", 100,
     [("a", 50, 100, 1, 0, True), ("b", 50, 100, 1, 100, True)], {"a": 0, "b": 100}),
    ("the owner wants its min back: borrower drops to its own min", 100,
     [("a", 50, 100, 1, 50, True), ("b", 50, 100, 1, 100, True)], {"a": 50, "b": 50}),
    ("requests are capped at max", 100,
     [("a", 0, 30, 1, 90, True), ("b", 0, 100, 1, 90, True)], {"a": 30, "b": 70}),
    ("equal weights, odd leftover: the tie goes by name", 101,
     [("b", 0, 1000, 1, 1000, True), ("a", 0, 1000, 1, 1000, True)], {"a": 51, "b": 50}),
    ("largest remainder, not rounding each share (3 × 1/3 of 10)", 10,
     [("a", 0, 99, 1, 99, True), ("b", 0, 99, 1, 99, True), ("c", 0, 99, 1, 99, True)],
     {"a": 4, "b": 3, "c": 3}),
    ("a capped share goes round again by weight", 100,
     [("a", 0, 100, 2, 10, True), ("b", 0, 100, 1, 100, True), ("c", 0, 100, 1, 100, True)],
     {"a": 10, "b": 45, "c": 45}),
    ("only weight-0 quotas want more: the rest stays unassigned", 100,
     [("a", 10, 100, 0, 100, True), ("b", 10, 100, 5, 20, True)], {"a": 10, "b": 20}),
    ("Σ min above the total: shared by the starting amounts, sum fits", 10,
     [("a", 10, 100, 1, 50, True), ("b", 30, 100, 1, 50, True)], {"a": 3, "b": 7}),
    ("no quotas", 100, [], {}),
    ("a total of 0", 0, [("a", 0, 10, 1, 10, True)], {"a": 0}),
]


@pytest.mark.parametrize(("case", "total", "quotas", "expected"), CASES, ids=[c[0] for c in CASES])
def test_sibling_runtimes(case: str, total: int, quotas: list[tuple[str, int, int, int, int, bool]],
                          expected: dict[str, int]) -> None:
    assert sibling_runtimes(total, [Demand(*q) for q in quotas]) == expected


def test_largest_remainder_sums_to_total_and_skips_weight_zero() -> None:
    assert largest_remainder(7, [("a", 1), ("b", 1), ("c", 0)]) == {"a": 4, "b": 3, "c": 0}
    assert largest_remainder(5, [("a", 0)]) == {"a": 0}


def test_tree_runtimes_parent_share_is_split_among_children() -> None:
    # root 100: team x (min 60) and team y (min 40) both want everything; x's children share x's 60
    quotas = [TreeQuota("x", "", 60, UNLIMITED, 60), TreeQuota("y", "", 40, UNLIMITED, 40, request=100),
              TreeQuota("x1", "x", 20, UNLIMITED, 1, request=100), TreeQuota("x2", "x", 40, UNLIMITED, 1, request=5)]
    got = tree_runtimes(100, quotas)
    assert got == {"x": 60, "y": 40, "x1": 55, "x2": 5}
    assert got["x1"] + got["x2"] <= got["x"]


def test_tree_parent_request_is_its_childrens_capped_sum() -> None:
    # x's children ask 10 + 200 (capped at 30): x asks 40 < its min 50 and lends: runtime 40, y gets 60
    quotas = [TreeQuota("x", "", 50, UNLIMITED, 1), TreeQuota("y", "", 0, UNLIMITED, 1, request=1000),
              TreeQuota("x1", "x", 0, UNLIMITED, 1, request=10), TreeQuota("x2", "x", 0, 30, 1, request=200)]
    got = tree_runtimes(100, quotas)
    assert (got["x"], got["y"]) == (40, 60)
    assert (got["x1"], got["x2"]) == (10, 30)


# ------------------------------------------------------------------ properties

_quota = st.tuples(st.integers(0, 1000), st.integers(0, 2000), st.integers(0, 100), st.integers(0, 3000),
                   st.booleans())


@settings(max_examples=300, deadline=None)
@given(total=st.integers(0, 5000), raw=st.lists(_quota, max_size=8))
def test_sibling_properties(total: int, raw: list[tuple[int, int, int, int, bool]]) -> None:
    quotas = [Demand(f"q{k}", mn, mn + extra, w, req, lend) for k, (mn, extra, w, req, lend) in enumerate(raw)]
    got = sibling_runtimes(total, quotas)
    assert sum(got.values()) <= total
    fits = sum(q.min for q in quotas) <= total
    for q in quotas:
        r = got[q.name]
        assert 0 <= r <= q.max
        req = min(q.request, q.max)
        if q.allow_lent:
            assert r <= max(req, 0)
        if fits:
            assert r >= (min(q.min, req) if q.allow_lent else q.min), (q, r)


@st.composite
def _trees(draw: st.DrawFn) -> list[TreeQuota]:
    n = draw(st.integers(1, 10))
    out: list[TreeQuota] = []
    for k in range(n):
        parent = "" if k == 0 else draw(st.sampled_from(["", *[q.name for q in out]]))
        mn, extra, w, req = draw(st.integers(0, 300)), draw(st.integers(0, 600)), draw(st.integers(0, 50)), \
            draw(st.integers(0, 1000))
        out.append(TreeQuota(f"q{k}", parent, mn, mn + extra, w, req, draw(st.booleans())))
    return out


@settings(max_examples=300, deadline=None)
@given(total=st.integers(0, 3000), quotas=_trees())
def test_tree_properties(total: int, quotas: list[TreeQuota]) -> None:
    got = tree_runtimes(total, quotas)
    assert set(got) == {q.name for q in quotas}
    children: dict[str, list[TreeQuota]] = {}
    for q in quotas:
        children.setdefault(q.parent, []).append(q)
    amount = {"": total, **got}
    for parent, kids in children.items():
        assert sum(got[k.name] for k in kids) <= amount[parent], parent
        if sum(k.min for k in kids) <= amount[parent]:
            for k in kids:
                if not k.allow_lent:
                    assert got[k.name] >= k.min, k
    for q in quotas:
        assert 0 <= got[q.name] <= q.max
