"""LowNodeLoad (REFERENCE.md §6): gating, victim order, limits."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from colo_descheduler.lownodeload import (
    Candidate,
    LowNodeLoad,
    NodeLoad,
    RoundResult,
    max_unavailable,
    victim_order,
)
from colo_descheduler.ratelimit import TokenBucket
from colo_descheduler.settings import DeschedulerSettings

GI = 1 << 30
ALLOC = (10_000, 100 * GI)


def node(name: str, cpu_pct: int, mem_pct: int) -> NodeLoad:
    return NodeLoad(name, ALLOC, (ALLOC[0] * cpu_pct // 100, ALLOC[1] * mem_pct // 100))


def pod(uid: str, node_: str, cpu: int, mem: int = GI, **kw: object) -> Candidate:
    return Candidate(uid, node_, (cpu, mem), **kw)  # type: ignore[arg-type]


def always() -> bool:
    return True


def run(lnl: LowNodeLoad, nodes: list[NodeLoad], pods: list[Candidate], rounds: int = 1,
        migrating: dict[str, int] | None = None, unavailable: dict[str, int] | None = None,
        replicas: dict[str, int] | None = None, allow: Callable[[], bool] = always) -> RoundResult:
    by_node: dict[str, list[Candidate]] = {}
    for p in pods:
        by_node.setdefault(p.node, []).append(p)
    result = RoundResult()
    for _ in range(rounds):
        result = lnl.run(nodes, by_node, migrating or {}, unavailable or {}, replicas or {}, allow)
    return result


HOT = [node("hot", 90, 50), node("cold", 20, 20)]
HOT_PODS = [pod("a", "hot", 1000), pod("b", "hot", 1500)]


@pytest.mark.parametrize(
    ("rounds", "evicts"), [(1, False), (4, False), (5, True), (6, True)],
    ids=["1-round", "4-rounds-below-N", "5-rounds-N-reached", "6-rounds"],
)
def test_consecutive_high_rounds_gate(rounds: int, evicts: bool) -> None:
    res = run(LowNodeLoad(), HOT, HOT_PODS, rounds=rounds)
    assert res.high == ["hot"] and res.low == ["cold"]
    assert bool(res.evictions) is evicts


def test_streak_resets_when_node_cools_or_goes_stale() -> None:
    lnl = LowNodeLoad()
    run(lnl, HOT, HOT_PODS, rounds=4)
    run(lnl, [node("hot", 60, 50), node("cold", 20, 20)], HOT_PODS)  # not high any more
    assert run(lnl, HOT, HOT_PODS, rounds=4).evictions == []
    run(lnl, [node("cold", 20, 20)], HOT_PODS)  # hot's metric went stale
    assert lnl.high_rounds == {}


@pytest.mark.parametrize(
    ("nodes", "low", "high"),
    [
        ([node("a", 45, 55), node("b", 46, 10)], ["a"], []),
        ([node("a", 75, 80), node("b", 76, 10), node("c", 10, 81)], [], ["b", "c"]),
        ([node("a", 50, 50)], [], []),
    ],
    ids=["low-at-threshold-inclusive", "high-strictly-above", "between-is-neither"],
)
def test_classification(nodes: list[NodeLoad], low: list[str], high: list[str]) -> None:
    res = LowNodeLoad().run(nodes, {}, {}, {}, {}, always)
    assert (res.low, res.high) == (low, high)


def test_no_low_nodes_nothing() -> None:
    res = run(LowNodeLoad(), [node("hot", 90, 50), node("mid", 60, 60)], HOT_PODS, rounds=7)
    assert res.sources == ["hot"] and res.evictions == []


def test_evicts_until_not_high() -> None:
    # hot at 90 % CPU of 10 cores: 1500 m over the 75 % line; pods sorted by closeness to the excess
    pods = [pod("small", "hot", 400), pod("exact", "hot", 1500), pod("big", "hot", 3000)]
    res = run(LowNodeLoad(DeschedulerSettings(max_migrating_per_node=5)), HOT, pods, rounds=6)
    assert [e.uid for e in res.evictions] == ["exact"]
    assert res.evictions[0].target == "cold"


VICTIM_ORDER_CASES = [
    ("priority-class", [pod("p", "n", 1, priority_class="prod"), pod("m", "n", 1, priority_class="mid"),
                        pod("b", "n", 1, priority_class="batch"), pod("f", "n", 1, priority_class="free")],
     ["f", "b", "m", "p"]),
    ("priority-within-class", [pod("hi", "n", 1, priority_class="batch", priority=5900),
                               pod("lo", "n", 1, priority_class="batch", priority=5100)], ["lo", "hi"]),
    ("qos-within-priority", [pod("lse", "n", 1, qos_class="LSE"), pod("lsr", "n", 1, qos_class="LSR"),
                             pod("ls", "n", 1, qos_class="LS"), pod("be", "n", 1, qos_class="BE")],
     ["be", "ls", "lsr", "lse"]),
    ("smallest-single-cover-first", [pod("far", "n", 4000), pod("near", "n", 1400), pod("cover", "n", 1600),
                                     pod("mid", "n", 600)],
     ["cover", "far", "near", "mid"]),
    ("class-before-closeness", [pod("near-prod", "n", 1500, priority_class="prod"),
                                pod("far-batch", "n", 9000, priority_class="batch")],
     ["far-batch", "near-prod"]),
]


@pytest.mark.parametrize(("pods", "order"), [c[1:] for c in VICTIM_ORDER_CASES],
                         ids=[c[0] for c in VICTIM_ORDER_CASES])
def test_victim_order(pods: list[Candidate], order: list[str]) -> None:
    assert [p.uid for p in victim_order(pods, (1500, 0), ALLOC)] == order


def test_per_node_migration_cap() -> None:
    pods = [pod(f"p{i}", "hot", 300) for i in range(6)]
    res = run(LowNodeLoad(), HOT, pods, rounds=6)
    assert len(res.evictions) == 2  # cap 2 while the node stays high
    res = run(LowNodeLoad(), HOT, pods, rounds=6, migrating={"hot": 1})
    assert len(res.evictions) == 1
    res = run(LowNodeLoad(), HOT, pods, rounds=6, migrating={"hot": 2})
    assert res.evictions == [] and "migrating" in next(iter(res.skipped.values()))


def test_rate_limit_stops_round() -> None:
    bucket = TokenBucket(rate_per_s=10, burst=1)
    nodes = [node("h1", 90, 50), node("h2", 88, 50), node("cold", 10, 10)]
    pods = [pod("a", "h1", 1500), pod("b", "h2", 1300)]
    res = run(LowNodeLoad(), nodes, pods, rounds=5, allow=lambda: bucket.try_take(0.0))
    assert [e.uid for e in res.evictions] == ["a"]
    assert res.skipped["b"] == "eviction rate limit"


@pytest.mark.parametrize(
    ("replicas", "unavailable", "evicts"),
    [(3, 0, True), (3, 1, False), (10, 1, True), (10, 2, False), (30, 2, True), (30, 3, False)],
    ids=["3-replicas-free", "3-replicas-1-gone", "10-replicas-1-gone", "10-replicas-2-gone",
         "30-replicas-2-gone", "30-replicas-3-gone"],
)
def test_workload_max_unavailable(replicas: int, unavailable: int, evicts: bool) -> None:
    pods = [pod("w1", "hot", 1500, workload="ns/web")]
    res = run(LowNodeLoad(), HOT, pods, rounds=6, unavailable={"ns/web": unavailable},
              replicas={"ns/web": replicas})
    assert bool(res.evictions) is evicts


@pytest.mark.parametrize(("replicas", "allowed"), [(1, 1), (3, 1), (4, 2), (10, 2), (11, 1), (25, 2), (100, 10)],
                         ids=lambda x: str(x))
def test_max_unavailable_table(replicas: int, allowed: int) -> None:
    assert max_unavailable(replicas) == allowed


def test_victim_must_fit_a_low_node() -> None:
    # cold can take 55 % × 10 cores = 5500 m before crossing 75 %; a 6000 m pod fits nowhere. The prod pod
    # would cure too, but the excess needs no prod pod while a free one cures: it stays (test_refusals.py).
    pods = [pod("huge", "hot", 6000, priority_class="free"), pod("ok", "hot", 1500, priority_class="prod")]
    res = run(LowNodeLoad(), HOT, pods, rounds=6)
    assert res.evictions == []
    assert "fits no low node" in res.skipped["huge"]
    assert "higher class" in res.skipped["ok"]


def test_headroom_booked_across_sources() -> None:
    """Two sources compete for one low node's room: the second does not overfill it."""
    nodes = [node("h1", 95, 50), node("h2", 90, 50), node("cold", 45, 10)]  # cold room: 3000 m
    pods = [pod("a", "h1", 2000), pod("b", "h2", 1500)]
    res = run(LowNodeLoad(), nodes, pods, rounds=6)
    assert [(e.uid, e.source) for e in res.evictions] == [("a", "h1")]


def test_pod_without_usage_in_excess_kept() -> None:
    pods = [pod("idle", "hot", 0, priority_class="free"), pod("busy", "hot", 1500, priority_class="prod")]
    res = run(LowNodeLoad(), HOT, pods, rounds=6)
    assert [e.uid for e in res.evictions] == ["busy"]


@pytest.mark.parametrize(
    ("takes", "granted"),
    [([0.0] * 12, 10), ([0.0] * 10 + [0.05, 0.1], 11), ([0.0] * 10 + [1.0] * 11, 20)],
    ids=["burst-10", "refill-half-token-steps", "one-second-refills-10"],
)
def test_token_bucket(takes: list[float], granted: int) -> None:
    bucket = TokenBucket(rate_per_s=10, burst=10)
    assert sum(bucket.try_take(t) for t in takes) == granted
