"""The descheduling audit's definitions on small hand-made runs (one row per case)."""

from __future__ import annotations

import pytest

from colo.messages import EvictionCommand, NodeMetric, PodMetric, Usage
from colo.sim.migration_audit import MigrationAudit, classify, fewest_pods_to_cure

ALLOC = (10_000, 10_000)
LOW = (30, 30)
HIGH = (50, 50)


@pytest.mark.parametrize(
    ("usage", "pods", "expected"),
    [
        pytest.param((4000, 1000), [(3000, 0)], 0, id="not-high"),
        pytest.param((10_000, 1000), [(3000, 0), (8000, 0)], 1, id="one-big-pod-covers-5-cores"),
        pytest.param((10_000, 1000), [(2000, 0), (2000, 0)], 3, id="cannot-cure"),
        pytest.param((8000, 8000), [(3000, 0), (0, 3000), (1000, 1000)], 2, id="both-resources-two-pods"),
        pytest.param((8000, 8000), [(3000, 3000), (0, 3000)], 1, id="one-pod-cures-both"),
        pytest.param((6000, 1000), [(500, 0)] * 13 + [(600, 0)], 2, id="greedy-above-exact-limit"),
    ],
)
def test_fewest_pods_to_cure(usage: tuple[int, int], pods: list[tuple[int, int]], expected: int) -> None:
    assert fewest_pods_to_cure(usage, ALLOC, HIGH, pods) == expected


@pytest.mark.parametrize(
    ("usage", "expected"),
    [((3000, 3000), "low"), ((3001, 100), "mid"), ((5000, 5000), "mid"), ((100, 5001), "high")],
)
def test_classify(usage: tuple[int, int], expected: str) -> None:
    assert classify(usage, ALLOC, LOW, HIGH) == expected


def metric(node: str, at: float, pods: list[tuple[str, int]], system: int = 0) -> NodeMetric:
    return NodeMetric(node=node, at=at, system_usage=Usage(cpu=system, memory=0),
                      pods=[PodMetric(uid=u, cpu=c, memory=0) for u, c in pods])


def evict(uid: str, node: str, at: float) -> EvictionCommand:
    return EvictionCommand(uid=uid, node=node, reason="LowNodeLoad", at=at, by="descheduler")


def audit(series: list[NodeMetric], evictions: list[EvictionCommand]) -> MigrationAudit:
    a = MigrationAudit(allocatable={"n1": ALLOC}, low=LOW, high=HIGH)
    for m in series:
        a.add_metric(m)
    for e in evictions:
        a.add_eviction(e)
    return a


def test_cascade_is_reported() -> None:
    """An 80 % node that one 4-core pod cures, stays high in the lagging metrics and loses three pods."""
    hot = [("a", 4000), ("b", 2000), ("c", 2000)]
    series = [metric("n1", t, hot) for t in (0.0, 60.0, 120.0)] + [metric("n1", 180.0, [("c", 2000)])]
    a = audit(series, [evict("a", "n1", 0.0), evict("b", "n1", 60.0), evict("c", "n1", 120.0)])
    (over,) = a.over_evictions()
    assert (over.evicted, over.required, over.start, over.end) == (3, 1, 0.0, 120.0)
    assert a.migrations_per_pod() == {"a": 1, "b": 1, "c": 1}


def test_a_node_still_high_once_its_metrics_caught_up_may_lose_another_pod() -> None:
    """After window + one report the metrics show what the first eviction did: a new excess is a new group."""
    series = [metric("n1", 60.0 * i, [("a", 5000), ("b", 2000), ("c", 2000)]) for i in range(8)]
    ok = audit(series, [evict("a", "n1", 0.0), evict("b", "n1", 360.0)])
    assert ok.over_evictions() == []
    (over,) = audit(series, [evict("a", "n1", 0.0), evict("b", "n1", 300.0)]).over_evictions()
    assert (over.evicted, over.required) == (2, 1)


def test_enough_evictions_pass_and_unjustified_ones_are_reported() -> None:
    series = [metric("n1", 0.0, [("a", 6000)]), metric("n1", 60.0, [("b", 1000)])]
    assert audit(series, [evict("a", "n1", 0.0)]).over_evictions() == []
    (bad,) = audit(series, [evict("b", "n1", 61.0)]).over_evictions()
    assert (bad.evicted, bad.required) == (1, 0)


def test_oscillations_skip_mid() -> None:
    usages = [6000, 4000, 2000, 6000, 4000, 6000, 1000]  # high mid low high mid high low
    a = audit([metric("n1", 60.0 * i, [("p", u)]) for i, u in enumerate(usages)], [])
    assert a.oscillations() == {"n1": 3}


SWING_USAGES = [6000, 4000, 2000, 6000, 4000, 6000, 1000]  # high mid low high mid high low, a metric a minute
SWING_CASES = [
    # (id, evictions off n1 (uid, at), pods arriving on n1 from elsewhere (uid, first listed at), swings counted)
    ("own-load-only-counts-none", [], [], 0),
    ("eviction-before-high-to-low", [("p", 60.0)], [], 1),
    ("eviction-long-before-counts-none", [("p", -400.0)], [], 0),
    ("arrival-of-a-migrated-pod-low-to-high", [], [("m", 180.0)], 1),
    ("eviction-and-arrival-every-swing", [("p", 60.0), ("p2", 300.0)], [("m", 180.0)], 3),
    ("evicted-pod-back-on-its-source-low-to-high", [("b", 90.0)], [], 2),
]


@pytest.mark.parametrize(("evictions", "arrivals", "swings"), [c[1:] for c in SWING_CASES],
                         ids=[c[0] for c in SWING_CASES])
def test_migration_oscillations_count_swings_a_migration_took_part_in(
        evictions: list[tuple[str, float]], arrivals: list[tuple[str, float]], swings: int) -> None:
    """All swings stay in ``oscillations`` (3 here); ``migration_oscillations`` counts those within one window
    plus one report after an eviction off the node or the arrival of an evicted pod."""
    series = []
    for i, u in enumerate(SWING_USAGES):
        at = 60.0 * i
        pods = [("p", u)] + [(uid, 0) for uid, first in arrivals if at >= first]
        pods += [("b", 0)] if any(uid == "b" for uid, _ in evictions) and not 90.0 < at < 180.0 else []
        series.append(NodeMetric(node="n1", at=at, window_s=60.0, system_usage=Usage(),
                                 pods=[PodMetric(uid=uid, cpu=c, memory=0) for uid, c in pods]))
    a = audit(series, [evict(uid, "n1", at) for uid, at in evictions]
              + [evict(uid, "n2", first - 30.0) for uid, first in arrivals])
    assert a.oscillations() == {"n1": 3}
    assert a.migration_oscillations().get("n1", 0) == swings


def test_migration_bounces_count_a_target_relieved_after_taking_evicted_pods() -> None:
    """n2 takes pod a (evicted off n1 at 0 s, listed on n2 from 60 s) and loses b to a migration at 600 s: one
    bounce; the eviction off n1 itself comes before anything arrived there, and one 40 min later is outside."""
    a = MigrationAudit(allocatable={"n1": ALLOC, "n2": ALLOC}, low=LOW, high=HIGH)
    for t in (0.0, 60.0, 120.0):
        a.add_metric(metric("n1", t, [("a", 6000)] if t == 0.0 else []))
        a.add_metric(metric("n2", t, [("b", 1000)] + ([("a", 6000)] if t >= 60.0 else [])))
    a.add_eviction(evict("a", "n1", 0.0))
    a.add_eviction(evict("b", "n2", 600.0))
    a.add_eviction(evict("x", "n2", 60.0 + 2400.0))
    assert a.migration_bounces() == {"n2": 1}
    assert a.migration_bounces(within_s=3000.0) == {"n2": 2}
