"""Victim selection: the least that cures the excess, class keys first; against a brute-force optimum."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from colo_descheduler.lownodeload import Candidate, LowNodeLoad, NodeLoad
from colo_descheduler.settings import DeschedulerSettings
from colo_descheduler.victims import cures, select_victims, tier, usage3

GI = 1 << 30
ALLOC32 = (32_000, 128 * GI)


def test_one_8_core_pod_not_3_then_8() -> None:
    """5-core excess on a 32-core node at 90.6 %: main took the 3-core pod (closest to 5) and then the
    8-core one, 11 cores; the single 8-core pod covers the excess: 8 cores."""
    lnl = LowNodeLoad(DeschedulerSettings(consecutive_high_rounds=1, max_migrating_per_node=5))
    nodes = [NodeLoad("hot", ALLOC32, (29_000, 20 * GI)), NodeLoad("cold", ALLOC32, (1000, 10 * GI)),
             NodeLoad("cold2", ALLOC32, (1000, 10 * GI))]
    pods = {"hot": [Candidate("p3", "hot", (3000, GI)), Candidate("p8", "hot", (8000, GI))]}
    res = lnl.run(nodes, pods, {}, {}, {}, lambda: True)
    assert [e.uid for e in res.evictions] == ["p8"]
    assert sum(e.usage[0] for e in res.evictions) == 8000


SELECT_CASES = [
    ("smallest-single-cover", [("a", 3000, 0, "none"), ("b", 8000, 0, "none"), ("c", 6000, 0, "none")],
     (5000, 0, 0), ["c"]),
    ("fewest-when-none-covers", [("a", 3000, 0, "none"), ("b", 2000, 0, "none"), ("c", 2500, 0, "none"),
                                 ("d", 1000, 0, "none")], (5000, 0, 0), ["a", "b"]),
    ("lower-class-first-even-if-more-pods", [("prod", 9000, 0, "prod"), ("b1", 3000, 0, "batch"),
                                             ("b2", 3000, 0, "batch")], (5000, 0, 0), ["b1", "b2"]),
    ("higher-class-only-when-lower-cannot-cure", [("prod", 9000, 0, "prod"), ("b1", 3000, 0, "batch")],
     (5000, 0, 0), ["prod"]),
    ("both-resources", [("cpu", 6000, 1, "none"), ("mem", 100, 9, "none"), ("both", 5500, 6, "none")],
     (5000, 5 * GI, 0), ["both"]),
    ("pods-excess-counts-pods", [("a", 100, 0, "none"), ("b", 200, 0, "none"), ("c", 300, 0, "none")],
     (0, 0, 2), ["a", "b"]),
    ("nothing-cures", [("a", 1000, 0, "none")], (5000, 0, 0), []),
]


@pytest.mark.parametrize(("pods", "excess", "want"), [c[1:] for c in SELECT_CASES],
                         ids=[c[0] for c in SELECT_CASES])
def test_select_victims(pods: list[tuple[str, int, int, str]], excess: tuple[int, int, int],
                        want: list[str]) -> None:
    cands = [Candidate(u, "n", (cpu, mem * GI), priority_class=pc) for u, cpu, mem, pc in pods]  # type: ignore[arg-type]
    got = select_victims(cands, excess, (32_000, 128 * GI, 110))
    assert [p.uid for p in got] == want


def brute_force(pods: list[Candidate], excess: tuple[int, int, int],
                alloc: tuple[int, int, int]) -> tuple[tuple[int, int, int], int, float] | None:
    """(highest tier used, pods, Σ usage / allocatable over resources in excess) of the best curing subset."""
    best = None
    for k in range(1, len(pods) + 1):
        for combo in itertools.combinations(pods, k):
            if not cures(combo, excess):
                continue
            key = (max(tier(p) for p in combo), k,
                   round(sum(usage3(p)[r] / alloc[r] for p in combo for r in range(3) if excess[r] > 0), 9))
            if best is None or key < best:
                best = key
    return best


POD = st.tuples(st.integers(0, 8000), st.integers(0, 16), st.sampled_from(["free", "batch", "none", "prod"]),
                st.sampled_from([0, 100]))


@settings(max_examples=300, deadline=None)
@given(st.lists(POD, min_size=0, max_size=8), st.integers(0, 12_000), st.integers(0, 24), st.integers(0, 3))
def test_selection_matches_brute_force(pods: list[tuple[int, int, str, int]], cpu_excess: int, mem_excess: int,
                                       pods_excess: int) -> None:
    """On random nodes of ≤ 8 pods and 2 resources (plus the pod count), the selection has the brute-force
    optimum's key: the lowest highest-tier, then fewest pods, then least usage."""
    alloc = (32_000, 64 * GI, 110)
    excess = (cpu_excess, mem_excess * GI, pods_excess)
    cands = [Candidate(f"p{i}", "n", (cpu, mem * GI), priority_class=pc, priority=prio)  # type: ignore[arg-type]
             for i, (cpu, mem, pc, prio) in enumerate(pods)]
    got = select_victims(cands, excess, alloc)
    best = brute_force(cands, excess, alloc) if any(e > 0 for e in excess) else None
    if best is None:
        assert got == []
        return
    assert cures(got, excess)
    key = (max(tier(p) for p in got), len(got),
           round(sum(usage3(p)[r] / alloc[r] for p in got for r in range(3) if excess[r] > 0), 9))
    assert key == best


def test_greedy_cover_past_the_search_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the budget the greedy cover still cures, without redundant pods, ending on the smallest fit."""
    import colo_descheduler.victims as victims

    monkeypatch.setattr(victims, "SEARCH_BUDGET", 0)
    cands = [Candidate(f"p{i}", "n", (cpu, GI)) for i, cpu in enumerate((3000, 2500, 2000, 1200, 900))]
    got = select_victims(cands, (4000, 0, 0), (32_000, 128 * GI, 110))
    assert [p.uid for p in got] == ["p0", "p3"]  # 3000 + the smallest that completes 4000
