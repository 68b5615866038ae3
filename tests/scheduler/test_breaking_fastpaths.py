"""The scheduler's fast paths against their reference paths, on hand-built and random clusters.

Fast paths under test: pod classes that leave out the app of uncapped pods (classcache.py), raw
SelectorSpread counts read per decision, the sparse pick in the score buckets (runner.py), class
entries bounded by bytes, LoadAware's per-cycle rows following the node change log, float64
quotients of LeastAllocated and LoadAware, and the decision log. References: a scheduler without the
class cache (full recomputation per pod), one without score buckets (array pick), a fresh LoadAware,
and Python integer arithmetic.

Found broken:
* a profile giving SelectorSpread weight 0 (legal: weights ≥ 0) crashed every cycle that placed a
  pod while decision records were on (IndexError: the record read the class entry's raw scores of a
  plugin whose raw scores are not kept per class).
"""

from __future__ import annotations

import random
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sched_helpers import GI, metric, node, pod

from colo.messages import (
    Affinity,
    NodeAffinity,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PreferredSchedulingTerm,
)
from colo_scheduler.core import Scheduler
from colo_scheduler.settings import ProfileSettings, SchedulerSettings

PROFILES: dict[str, ProfileSettings | None] = {
    "default": None,
    "balanced": ProfileSettings(score={"LoadAware": 1, "NodeResourcesLeastAllocated": 1,
                                       "NodeResourcesBalancedAllocation": 2, "NodeAffinity": 2,
                                       "SelectorSpread": 3}),
    "most": ProfileSettings(score={"NodeResourcesFit": 1, "SelectorSpread": 1},
                            plugin_args={"NodeResourcesFit": {"scoring_strategy": {"type": "MostAllocated"}}}),
    "spread_only": ProfileSettings(score={"SelectorSpread": 5}),
    "spread_zero": ProfileSettings(score={"LoadAware": 1, "NodeResourcesLeastAllocated": 1, "SelectorSpread": 0}),
}


def _settings(profile: str, detail: str, seed: int) -> SchedulerSettings:
    p = PROFILES[profile]
    kw: dict[str, Any] = {"seed": seed, "decision_detail": detail}
    if p is not None:
        kw["profile"] = p
    return SchedulerSettings(**kw)


def _cores(profile: str, detail: str, seed: int) -> list[Scheduler]:
    s = _settings(profile, detail, seed)
    return [Scheduler(s, use_class_cache=False), Scheduler(s, use_score_buckets=False), Scheduler(s)]


def _preferred(zone: str) -> Affinity:
    term = NodeSelectorTerm(match_expressions=[NodeSelectorRequirement(key="zone", operator="In", values=[zone])])
    return Affinity(node_affinity=NodeAffinity(preferred=[PreferredSchedulingTerm(weight=5, preference=term)]))


def _json(core: Scheduler, uid: str) -> dict[str, object] | None:
    rec = core.decisions.get(uid)
    if rec is None:
        return None
    out = rec.to_json(core.table.names)
    out.pop("decision_ms")
    return out


def _state(core: Scheduler, out: Any) -> tuple[object, ...]:
    placed = [(p.pod.uid, p.node) for p in out.placements]
    failed = [(f.pod.uid, f.result.message) for f in out.failures]
    uids = [p.pod.uid for p in out.placements] + [f.pod.uid for f in out.failures]
    return placed, failed, [_json(core, u) for u in uids], core.framework.rng.getstate()


ops_st = st.lists(st.tuples(st.sampled_from(("pods", "pods", "cycle", "release", "metric", "node")),
                            st.integers(0, 10**6)), min_size=3, max_size=14)


@settings(max_examples=int(__import__("os").environ.get("BRK_N", "40")), deadline=None, suppress_health_check=list(HealthCheck))
@given(profile=st.sampled_from(sorted(PROFILES)), detail=st.sampled_from(("summary", "nodes")),
       n=st.integers(2, 90), seed=st.integers(0, 3), ops=ops_st)
def test_fast_paths_equal_reference_paths_with_apps_sharing_a_class(
        profile: str, detail: str, n: int, seed: int, ops: list[tuple[str, int]]) -> None:
    """Pods of a few sizes and several apps (uncapped ones share a class; capped ones, selectors,
    tolerations, priorities and preferred affinity split it) over cycles, releases, metrics and node
    changes: every decision, record and tie-break draw of the class cache with score buckets, and of
    the class cache with the array pick, equals full recomputation."""
    cores = _cores(profile, detail, seed)
    rng = random.Random(seed * 7919 + n)
    for k in range(n):
        spec = node(f"n{k}", cpu=rng.choice((8_000, 16_000, 32_000)), memory=rng.choice((16, 32, 64)) * GI,
                    pods=rng.choice((0, 4, 110)), labels={"zone": rng.choice("ab")})
        for c in cores:
            c.on_node(spec, 0.0)
    now = 100.0
    uid = 0
    for kind, x in ops:
        r = random.Random(x)
        now += 10.0
        if kind == "pods":
            shape = r.choice(((500, GI), (1000, 2 * GI), (250, GI // 2)))
            for _ in range(r.randrange(1, 30)):
                uid += 1
                app = r.choice(("", "web", "db", "cache", "api"))
                cap = r.choice((-1, -1, -1, 1, 2)) if app else -1
                extra: dict[str, Any] = {}
                if r.random() < 0.1:
                    extra["selector"] = {"zone": r.choice("ab")}
                if r.random() < 0.1:
                    extra["priority"] = r.choice((0, 9000))
                spec = pod(f"p{uid}", cpu=shape[0], memory=shape[1], app=app, max_per_node=cap, **extra)
                if r.random() < 0.15:
                    import msgspec
                    spec = msgspec.structs.replace(spec, affinity=_preferred(r.choice("ab")))
                for c in cores:
                    c.add_pod(spec, now)
        elif kind == "cycle":
            got = [_state(c, c.schedule_cycle(now)) for c in cores]
            assert got[1] == got[0]
            assert got[2] == got[0]
        elif kind == "release":
            placed = sorted(cores[0].framework.placed)
            for u in r.sample(placed, min(len(placed), r.randrange(0, 8))):
                for c in cores:
                    c.release(u, now)
        elif kind == "metric":
            for k in r.sample(range(n), min(n, 5)):
                m = metric(f"n{k}", now, cpu=r.randrange(0, 6_000), memory=r.randrange(1, 12) * GI)
                for c in cores:
                    c.on_metric(m, now)
        else:
            k = r.randrange(n)
            spec = node(f"n{k}", cpu=r.choice((8_000, 64_000)), memory=r.choice((16, 128)) * GI,
                        labels={"zone": r.choice("ab")})
            for c in cores:
                c.on_node(spec, now)
    got = [_state(c, c.schedule_cycle(now + 1.0)) for c in cores]
    assert got[1] == got[0]
    assert got[2] == got[0]


def test_selector_spread_of_weight_zero_with_decision_records() -> None:
    """Weight 0 is a legal weight; the record of a placed pod must hold SelectorSpread's raw 0 (as for
    any plugin of weight 0) instead of crashing the cycle."""
    for cache in (True, False):
        core = Scheduler(_settings("spread_zero", "summary", 0), use_class_cache=cache)
        core.on_node(node("a"), 0.0)
        core.on_node(node("b"), 0.0)
        core.add_pod(pod("p", cpu=100, app="web"), 0.0)
        out = core.schedule_cycle(0.0)
        assert len(out.placements) == 1
        rec = core.decisions.get("p")
        assert rec is not None
        assert rec.score_table(rec.node)["SelectorSpread"] == {"raw": 0, "normalized": 0, "weight": 0, "weighted": 0}
