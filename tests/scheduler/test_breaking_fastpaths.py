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
* LeastAllocated's integer form for columns above 2^55 overflowed 100 × requested (allocated beyond
  ~9.2e16) and scored a column of allocatable 0 as 100; LoadAware's integer form (allocatable at or
  above the float bound) overflowed 100 × room beyond ~9.2e16: scores outside 0..100 (every cycle
  of such a class raised) or unlike ``score_node``, so class-cache re-syncs disagreed with full
  passes. Only reachable through the core API: the service refuses quantities above 2^50.
"""

from __future__ import annotations

import random
from typing import Any

import msgspec
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sched_helpers import GI, metric, node, pod

from colo.messages import (
    Affinity,
    NodeAffinity,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PreferredSchedulingTerm,
    Resources,
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


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
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


# --------------------------------------------------------------------------- quotients

QUOTIENT_PROFILE = ProfileSettings(
    filter=["NodeResourcesFit"], score={"LoadAware": 1, "NodeResourcesLeastAllocated": 1},
    plugin_args={"NodeResourcesLeastAllocated": {"resources": [{"name": "cpu", "weight": 3},
                                                               {"name": "memory", "weight": 1},
                                                               {"name": "pods", "weight": 2}]}})
wide = st.one_of(st.integers(0, 1000), st.integers(0, 2**46), st.integers(2**46 - 4, 2**46 + 4),
                 st.integers(0, 2**56), st.integers(2**55, 2**62), st.sampled_from((0, 1, 2**53, 2**62)))


@settings(max_examples=200, deadline=None)
@given(nodes=st.lists(st.tuples(wide, wide, st.sampled_from((0, 1, 110)), wide, wide, st.integers(0, 200),
                                st.one_of(st.none(), st.tuples(wide, wide))), min_size=1, max_size=5),
       request=st.tuples(wide, wide))
def test_least_allocated_and_load_aware_arrays_equal_python_integers(
        nodes: list[tuple[int, int, int, int, int, int, tuple[int, int] | None]], request: tuple[int, int]) -> None:
    """Allocatable 0, at the float bound, beyond 2^55 (the integer forms); allocations beyond
    allocatable (over-commit) up to 2^62; requests up to 2^62; pods scored: the array scores (full
    passes and row subsets) equal the plugins' Python-integer ``score_node`` on every row."""
    core = Scheduler(SchedulerSettings(profile=QUOTIENT_PROFILE))
    for i, (cpu, mem, pods, used_cpu, used_mem, used_pods, usage) in enumerate(nodes):
        core.on_node(node(f"n{i}", cpu=cpu, memory=mem, pods=pods), 0.0)
        core.table.set_allocated(f"n{i}", Resources(cpu=used_cpu, memory=used_mem), used_pods)
        if usage is not None:
            core.on_metric(metric(f"n{i}", 0.0, cpu=usage[0], memory=usage[1]), 0.0)
    state = core.framework.begin_cycle(0.0)
    info = core.pod_info(pod("p", cpu=request[0], memory=request[1]), 0.0)
    rows = np.arange(core.table.n - 1, -1, -1, dtype=np.intp)
    for name in ("NodeResourcesLeastAllocated", "LoadAware"):
        plugin = core.framework.profile.plugins[name]
        want = [plugin.score_node(state, info, i) for i in range(core.table.n)]
        assert plugin.score(state, info).tolist() == want, name
        assert plugin.score_rows(state, info, rows).tolist() == want[::-1], name
