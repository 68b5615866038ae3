"""When a victim of the curing set may not go: re-select among the pods allowed, or evict nothing.

On the 2-hour audited run a node 1.6 % of memory over its high threshold, whose batch pods (12–23 % each)
would each cure it, had them refused (no low node with room) and lost its two prod LS pods instead (0.6 % and
0.1 %: nothing cured, the node stayed high and the pods were moved again later). The rule
(:func:`colo_descheduler.victims.curing_set`): a refused victim is replaced by a pod of the same or a lower
tier, in a set no larger than the node's best one, else nothing goes this round.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from colo.messages import PriorityClass
from colo_descheduler.lownodeload import Candidate, LowNodeLoad, NodeLoad
from colo_descheduler.settings import DeschedulerSettings
from colo_descheduler.victims import cures, select_victims, tier

GI = 1 << 30
ALLOC = (10_000, 100 * GI)


def node(name: str, cpu_pct: int, mem_pct: int) -> NodeLoad:
    return NodeLoad(name, ALLOC, (ALLOC[0] * cpu_pct // 100, ALLOC[1] * mem_pct // 100))


def pod(uid: str, cpu: int, priority_class: PriorityClass = "batch", workload: str = "") -> Candidate:
    return Candidate(uid, "hot", (cpu, GI), priority_class, 0, "BE" if priority_class == "batch" else "LS", workload)


# hot at 90 % CPU of 10 cores: 1500 m over 75 %. cold at 20 %: room for 5500 m before crossing 75 %.
NODES = [node("hot", 90, 20), node("cold", 20, 20)]
CASES = [
    # (id, pods, workloads at their max unavailable, evicted uids)
    ("refused-batch-not-replaced-by-prod", [pod("big", 6000), pod("prod", 1600, "prod")], set(), []),
    ("refused-batch-not-replaced-by-pods-that-do-not-cure",
     [pod("big", 6000), pod("s1", 400), pod("s2", 300)], set(), []),
    ("refused-batch-replaced-by-an-equal-batch-pod", [pod("big", 6000), pod("b2", 1800)], set(), ["b2"]),
    ("refused-by-workload-not-replaced-by-two-pods",
     [pod("w", 1600, workload="ns/w"), pod("b1", 900), pod("b2", 800)], {"ns/w"}, []),
    ("refused-by-workload-replaced-by-the-next-single-pod",
     [pod("w", 1600, workload="ns/w"), pod("b1", 1700), pod("b2", 800)], {"ns/w"}, ["b1"]),
    ("nothing-refused-best-set", [pod("b1", 1700), pod("prod", 1600, "prod")], set(), ["b1"]),
]


@pytest.mark.parametrize(("pods", "capped", "evicted"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_refused_victim_replaced_only_by_an_equal_cure(pods: list[Candidate], capped: set[str],
                                                       evicted: list[str]) -> None:
    lnl = LowNodeLoad(DeschedulerSettings(consecutive_high_rounds=1, max_migrating_per_node=5))
    res = lnl.run(NODES, {"hot": pods}, {}, {w: 1 for w in capped}, {w: 1 for w in capped}, lambda: True)
    assert [e.uid for e in res.evictions] == evicted, res.skipped
    if not evicted:
        assert all(p.uid in res.skipped for p in pods)


CLASSES: list[PriorityClass] = ["free", "batch", "none", "prod"]
POD = st.tuples(st.integers(1, 4000), st.sampled_from(CLASSES), st.booleans())


@settings(max_examples=300, deadline=None)
@given(st.lists(POD, min_size=1, max_size=7), st.integers(76, 100), st.integers(20, 60))
def test_a_round_never_evicts_more_or_higher_than_the_best_set(pods: list[tuple[int, PriorityClass, bool]],
                                                               hot_pct: int, cold_pct: int) -> None:
    """Random pods on a hot node, some of them refused (their workload at its max unavailable), one low node
    of random room: the round's evictions cure the excess, or there are none; never more pods nor a higher
    tier than the node's best set over all its pods (victims.select_victims)."""
    cands = [Candidate(f"p{i}", "hot", (cpu, GI), pc, 0, "LS", f"ns/w{i}" if capped else "")
             for i, (cpu, pc, capped) in enumerate(pods)]
    at_max = {c.workload: 1 for c in cands if c.workload}
    nodes = [node("hot", hot_pct, 20), node("cold", min(cold_pct, 45), 20)]
    lnl = LowNodeLoad(DeschedulerSettings(consecutive_high_rounds=1, max_migrating_per_node=10))
    res = lnl.run(nodes, {"hot": cands}, {}, at_max, at_max, lambda: True)
    excess = (ALLOC[0] * hot_pct // 100 - ALLOC[0] * 75 // 100, 0, 0)
    best = select_victims(cands, excess, (ALLOC[0], ALLOC[1], 0))
    gone = [c for c in cands if c.uid in {e.uid for e in res.evictions}]
    assert not any(c.workload for c in gone)
    if gone:
        assert cures(gone, excess)
        assert len(gone) <= len(best) and max(tier(c) for c in gone) <= max(tier(c) for c in best)
