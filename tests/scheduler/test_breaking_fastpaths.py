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
* MostAllocated, RequestedToCapacityRatio and the shared LeastAllocated form (strategy_scores)
  overflowed 100 × requested the same way (MostAllocated scored −34 where Python gives 33).
* class entries exceeded their byte bound once the table grew: entries recomputed at the new node
  count were never dropped, and a new class dropped only one (four entries of 40 rows under a bound
  of one).
"""

from __future__ import annotations

import random
from typing import Any

import msgspec
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sched_helpers import GI, metric, node, pod

from colo.messages import (
    Affinity,
    NodeAffinity,
    NodeResource,
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
    "sampled": ProfileSettings(percentage_of_nodes_to_score=40, min_feasible_nodes_to_find=5),
    "load_prod": ProfileSettings(plugin_args={"LoadAware": {
        "prod_usage_thresholds": {"cpu": 30}, "score_according_prod_usage": True,
        "estimated_scaling_factors": {"cpu": 120, "memory": 50},
        "aggregated": {"usage_thresholds": {"memory": 40}, "usage_aggregation_type": "p90",
                       "score_aggregation_type": "p50"}}}),
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


ops_st = st.lists(st.tuples(st.sampled_from(("pods", "pods", "cycle", "release", "metric", "node", "explain",
                                              "adopt", "store", "wait")),
                            st.integers(0, 10**6)), min_size=3, max_size=14)


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(profile=st.sampled_from(sorted(PROFILES)), detail=st.sampled_from(("summary", "nodes")),
       n=st.integers(2, 90), seed=st.integers(0, 3), ops=ops_st)
def test_fast_paths_equal_reference_paths_with_apps_sharing_a_class(
        profile: str, detail: str, n: int, seed: int, ops: list[tuple[str, int]]) -> None:
    """Pods of a few sizes and several apps (uncapped ones share a class; capped ones, selectors,
    tolerations, priorities and preferred affinity split it) over cycles, releases, metrics and node
    changes: every decision, record and tie-break draw of the class cache with score buckets, and of
    the class cache with the array pick, equals full recomputation."""
    _compare_paths(profile, detail, n, seed, ops)


def _compare_paths(profile: str, detail: str, n: int, seed: int, ops: list[tuple[str, int]]) -> None:
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
        elif kind == "explain":  # a dry run moves no draw and changes no later decision
            queued = sorted(p.uid for p in cores[0].queue.pods())
            for u in r.sample(queued, min(len(queued), 3)):
                recs = [c.explain(u, now) for c in cores]
                got_json = [rec.to_json(c.table.names) if rec is not None else None for rec, c in zip(recs, cores)]
                for g in got_json:
                    if g is not None:
                        g.pop("decision_ms")
                assert got_json[1] == got_json[0] and got_json[2] == got_json[0]
        elif kind == "adopt":  # a bound pod loaded from the store: counts, requests and estimate
            uid += 1
            spec = pod(f"p{uid}", cpu=500, memory=GI, app=r.choice(("web", "db")), max_per_node=r.choice((-1, 1)))
            where = f"n{r.randrange(n)}"
            for c in cores:
                c.adopt(spec, where, now)
        elif kind == "store":  # the store's allocation sums overwrite a node's
            k = r.randrange(n)
            alloc = Resources(cpu=r.randrange(0, 20_000), memory=r.randrange(0, 40) * GI)
            count = r.randrange(0, 6)
            for c in cores:
                c.set_allocated(f"n{k}", alloc, count)
        elif kind == "release":
            placed = sorted(cores[0].framework.placed)
            for u in r.sample(placed, min(len(placed), r.randrange(0, 8))):
                for c in cores:
                    c.release(u, now)
        elif kind == "metric":
            placed = sorted(cores[0].framework.placed)
            for k in r.sample(range(n), min(n, 5)):
                m = _load_metric(r, f"n{k}", now - r.choice((0.0, 100.0)), placed)
                for c in cores:
                    c.on_metric(m, now)
        elif kind == "wait":  # metrics expire
            now += 150.0
        else:
            k = r.randrange(n)
            spec = node(f"n{k}", cpu=r.choice((8_000, 64_000)), memory=r.choice((16, 128)) * GI,
                        labels={"zone": r.choice("ab")})
            for c in cores:
                c.on_node(spec, now)
    got = [_state(c, c.schedule_cycle(now + 1.0)) for c in cores]
    assert got[1] == got[0]
    assert got[2] == got[0]
    for c in cores[1:]:  # kept class entries count their feasible rows right
        for entry in c.framework.cache.entries.values():
            assert entry.feasible_count == int(np.count_nonzero(entry.feasible))


def test_fast_paths_equal_reference_paths_when_the_change_log_is_trimmed_mid_cycle(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A change log capped at a few dozen rows is trimmed inside cycles (class entries and LoadAware's
    node log then read "everything changed"): decisions, records and draws still equal the references."""
    from colo_scheduler.table import NodeTable

    monkeypatch.setattr(NodeTable, "MIN_LOG_CAP", 40)
    monkeypatch.setattr(NodeTable, "LOG_ROWS_PER_NODE", 1)
    kinds = ("pods", "pods", "cycle", "release", "metric", "node", "adopt", "store", "wait", "cycle")
    for seed in range(6):
        r = random.Random(seed)
        ops = [(r.choice(kinds), r.randrange(10**6)) for _ in range(12)] + [("pods", seed), ("cycle", 0)]
        _compare_paths(sorted(PROFILES)[seed % len(PROFILES)], "summary", 8 + 7 * seed, seed, ops)


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

QUOTIENT_RESOURCES = [{"name": "cpu", "weight": 3}, {"name": "memory", "weight": 1}, {"name": "pods", "weight": 2}]
QUOTIENT_PROFILE = ProfileSettings(
    filter=["NodeResourcesFit"], score={"LoadAware": 1, "NodeResourcesLeastAllocated": 1, "NodeResourcesFit": 1},
    plugin_args={"NodeResourcesLeastAllocated": {"resources": QUOTIENT_RESOURCES},
                 "NodeResourcesFit": {"scoring_strategy": {"type": "MostAllocated", "resources": QUOTIENT_RESOURCES}}})
wide = st.one_of(st.integers(0, 1000), st.integers(0, 2**46), st.integers(2**46 - 4, 2**46 + 4),
                 st.integers(0, 2**56), st.integers(2**55, 2**62), st.sampled_from((0, 1, 2**53, 2**62)))
half = wide.map(lambda v: v // 2)  # allocations, usage and requests: their sums stay within int64


@settings(max_examples=200, deadline=None)
@given(nodes=st.lists(st.tuples(wide, wide, st.sampled_from((0, 1, 110)), half, half, st.integers(0, 200),
                                st.one_of(st.none(), st.tuples(half, half))), min_size=1, max_size=5),
       request=st.tuples(half, half), kind=st.sampled_from(("", "batch_", "mid_")), extended=st.tuples(wide, wide))
def test_least_allocated_and_load_aware_arrays_equal_python_integers(
        nodes: list[tuple[int, int, int, int, int, int, tuple[int, int] | None]], request: tuple[int, int],
        kind: str, extended: tuple[int, int]) -> None:
    """Allocatable 0, at the float bound, beyond 2^55 (the integer forms) up to 2^62; allocations beyond
    allocatable (over-commit), usage and requests up to 2^61; pods scored; NodeResourcesLeastAllocated,
    LoadAware and NodeResourcesFit's MostAllocated: the array scores (full passes and row subsets) equal
    the plugins' Python-integer ``score_node`` on every row."""
    core = Scheduler(SchedulerSettings(profile=QUOTIENT_PROFILE))
    for i, (cpu, mem, pods, used_cpu, used_mem, used_pods, usage) in enumerate(nodes):
        core.on_node(node(f"n{i}", cpu=cpu, memory=mem, pods=pods), 0.0)
        core.table.set_allocated(f"n{i}", Resources(cpu=used_cpu, memory=used_mem), used_pods)
        if usage is not None:
            core.on_metric(metric(f"n{i}", 0.0, cpu=usage[0], memory=usage[1]), 0.0)
        if kind and i % 2:  # batch/mid allocatable on every other node (0 on the rest)
            core.on_node_resource(NodeResource(node=f"n{i}", **{f"{kind}cpu": extended[0],
                                                                 f"{kind}memory": extended[1]}), 0.0)
    state = core.framework.begin_cycle(0.0)
    info = core.pod_info(pod("p", **{f"{kind}cpu": request[0], f"{kind}memory": request[1]}), 0.0)
    rows = np.arange(core.table.n - 1, -1, -1, dtype=np.intp)
    for name in ("NodeResourcesLeastAllocated", "LoadAware", "NodeResourcesFit"):
        plugin = core.framework.profile.plugins[name]
        want = [plugin.score_node(state, info, i) for i in range(core.table.n)]
        assert plugin.score(state, info).tolist() == want, name
        assert plugin.score_rows(state, info, rows).tolist() == want[::-1], name


# --------------------------------------------------------------------------- LoadAware per-cycle rows

LOAD_ARGS: dict[str, dict[str, Any]] = {
    "plain": {},
    "prod": {"prod_usage_thresholds": {"cpu": 40, "memory": 60}},
    "prod_score": {"score_according_prod_usage": True},
    "aggregated": {"aggregated": {"usage_thresholds": {"cpu": 50}, "usage_aggregation_type": "p95",
                                  "score_aggregation_type": "p50"}},
    "unfiltered": {"filter_expired_node_metrics": False, "node_metric_expiration_seconds": 90.0},
}
ANNOTATIONS = (None, '{"usageThresholds": {"cpu": 30}}', '{"prodUsageThresholds": {"memory": 20}}',
               '{"aggregatedUsage": {"usageThresholds": {"memory": 40}, "usageAggregationType": "p90"}}', "{bad")
CYCLE_FIELDS = ("fresh", "expired", "unchecked", "alloc", "divisor", "cap_all", "agg_rows", "agg_base", "has_basis",
                "score_base", "prod_rows", "cap_prod", "prod_est", "slack_all", "slack_prod", "room_all", "room_prod")


def _load_metric(r: random.Random, name: str, at: float, placed: list[str]) -> Any:
    from colo.messages import AggregatedUsage, NodeMetric, PodMetric, Usage

    pods = [PodMetric(uid=u, cpu=r.randrange(0, 800), memory=r.randrange(0, 2 * GI),
                      priority_class=r.choice((None, "prod", "batch"))) for u in r.sample(placed, min(3, len(placed)))]
    agg = [AggregatedUsage(window_s=r.choice((300, 900)), stat=r.choice(("p50", "p90", "p95")),
                           cpu=r.randrange(0, 8_000), memory=r.randrange(0, 16 * GI)) for _ in range(r.randrange(0, 3))]
    return NodeMetric(node=name, at=at, node_usage=Usage(cpu=r.randrange(0, 8_000), memory=r.randrange(0, 16 * GI)),
                      pods=pods, aggregated=agg)


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(args=st.sampled_from(sorted(LOAD_ARGS)), seed=st.integers(0, 10**6),
       ops=st.lists(st.sampled_from(("cycle", "release", "adopt", "metric", "alloc", "annotate", "store", "batch",
                                     "wait")), min_size=4, max_size=16))
def test_load_aware_carried_rows_equal_a_fresh_load_aware(args: str, seed: int, ops: list[str]) -> None:
    """Reserve/unreserve/adopt/release, metrics (pod usage with and without class, aggregated
    statistics), allocatable and annotation changes, the store's allocation sums, batch allocatable and
    metric expiry, with plain, prod, prod-scored, aggregated and unfiltered-expiry arguments: after
    each step the arrays LoadAware carries into a cycle equal those of a LoadAware built afresh."""
    from colo.messages import NodeSpec
    from colo_scheduler.framework.interface import CycleState
    from colo_scheduler.plugins.loadaware import CUSTOM_THRESHOLDS_ANNOTATION

    r = random.Random(seed)
    core = Scheduler(SchedulerSettings(profile=ProfileSettings(plugin_args={"LoadAware": LOAD_ARGS[args]})))
    n = 24
    for k in range(n):
        core.on_node(node(f"n{k}", cpu=16_000, memory=32 * GI), 0.0)
    now = 1000.0
    uid = 0
    la = core.framework.profile.plugins["LoadAware"]
    for op in ops:
        now += r.choice((5.0, 30.0, 60.0))
        placed = sorted(core.framework.placed)
        if op == "cycle":
            for _ in range(r.randrange(1, 12)):
                uid += 1
                prio = r.choice((None, 9000, 5000))
                core.add_pod(pod(f"p{uid}", cpu=r.choice((250, 1000)), memory=GI, priority=prio), now)
            core.schedule_cycle(now)
        elif op == "release":
            for u in r.sample(placed, min(len(placed), 3)):
                core.release(u, now)
        elif op == "adopt":
            uid += 1
            core.adopt(pod(f"p{uid}", cpu=500, memory=GI, priority=r.choice((None, 9000))), f"n{r.randrange(n)}", now)
        elif op == "metric":
            for k in r.sample(range(n), 6):
                core.on_metric(_load_metric(r, f"n{k}", now - r.choice((0.0, 100.0)), placed), now)
        elif op in ("alloc", "annotate"):
            k = r.randrange(n)
            old = core.table.specs[k]
            ann = dict(old.annotations)
            if op == "annotate":
                text = r.choice(ANNOTATIONS)
                if text is None:
                    ann.pop(CUSTOM_THRESHOLDS_ANNOTATION, None)
                else:
                    ann[CUSTOM_THRESHOLDS_ANNOTATION] = text
            cpu = r.choice((8_000, 16_000, 64_000)) if op == "alloc" else old.allocatable.cpu
            res = Resources(cpu=cpu, memory=old.allocatable.memory)
            core.on_node(NodeSpec(name=old.name, capacity=res, allocatable=res, labels=old.labels,
                                  annotations=ann), now)
        elif op == "store":
            k = r.randrange(n)
            core.set_allocated(f"n{k}", Resources(cpu=r.randrange(0, 8_000), memory=r.randrange(0, 8) * GI),
                               r.randrange(0, 10))
        elif op == "batch":
            core.on_node_resource(NodeResource(node=f"n{r.randrange(n)}", batch_cpu=r.randrange(0, 9_000),
                                               batch_memory=GI), now)
        else:
            now += r.choice((100.0, 200.0))
        state = core.framework.begin_cycle(now)
        carried = state.data["LoadAware"]
        fresh_plugin = type(la)(core.settings, la.args)
        ref_state = CycleState(now=now, table=core.table)
        fresh_plugin.begin_cycle(ref_state)
        ref = ref_state.data["LoadAware"]
        for name in CYCLE_FIELDS:
            a, b = getattr(carried, name), getattr(ref, name)
            assert (a is None) == (b is None), (op, name)
            assert a is None or np.array_equal(a, b), (op, name)
        if carried.fdiv is not None and ref.fdiv is not None:  # (None: the exact integer form instead)
            assert all(np.array_equal(x, y) for x, y in zip(carried.fdiv, ref.fdiv))


# --------------------------------------------------------------------------- classes, eviction, records


def test_equivalent_failure_of_one_app_does_not_fail_another_app_of_the_same_size() -> None:
    """In one cycle: a capped pod of app A finds every node at A's cap; a pod of the same size of app B
    with the same cap, and an uncapped pod of app A, must still be placed (their classes differ from
    the failed one's), and their records show SelectorSpread's raw count of their own app."""
    for cache in (True, False):
        core = Scheduler(SchedulerSettings(decision_detail="nodes"), use_class_cache=cache)
        for k in range(3):
            core.on_node(node(f"n{k}"), 0.0)
        for k in range(3):
            core.adopt(pod(f"a{k}", cpu=100, memory=GI, app="A", max_per_node=1), f"n{k}", 0.0)
        core.adopt(pod("b0", cpu=100, memory=GI, app="B"), "n0", 0.0)
        core.adopt(pod("b1", cpu=100, memory=GI, app="B"), "n0", 0.0)
        core.add_pod(pod("a9", cpu=100, memory=GI, app="A", max_per_node=1, created_at=1.0), 1.0)
        core.add_pod(pod("a8", cpu=100, memory=GI, app="A", max_per_node=1, created_at=2.0), 1.0)
        core.add_pod(pod("b9", cpu=100, memory=GI, app="B", max_per_node=1, created_at=3.0), 1.0)
        core.add_pod(pod("u9", cpu=100, memory=GI, app="A", created_at=4.0), 1.0)
        core.add_pod(pod("v9", cpu=100, memory=GI, app="B", created_at=5.0), 1.0)
        out = core.schedule_cycle(1.0)
        assert sorted(f.pod.uid for f in out.failures) == ["a8", "a9"]
        placed = {p.pod.uid: p.node for p in out.placements}
        assert placed["b9"] != "n0" and placed["v9"] not in ("n0", placed["b9"])
        rec = core.decisions.get("v9")
        assert rec is not None
        # v9 (app B) sees B's counts: n0 holds 2, b9's node 1, the third node 0 (the chosen one)
        assert rec.score_table(rec.node)["SelectorSpread"]["raw"] == 0
        assert rec.score_table(rec.runner_up)["SelectorSpread"]["raw"] in (1, 2)
        assert core.hint_stats["equivalent_failures"] == 1


def test_class_entries_evicted_by_bytes_and_feasible_only_scoring_keep_decisions(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Class entries bounded to two (least recently used dropped on every third class) and classes with
    fewer than half the nodes feasible (scored on their feasible rows only), over several cycles with
    releases: the decisions, records and draws equal full recomputation."""
    from colo_scheduler.framework import classcache

    n = 40
    monkeypatch.setattr(classcache, "CACHE_BYTES", 2 * n * classcache.ENTRY_BYTES_PER_ROW)
    cores = _cores("balanced", "summary", 1)
    rng = random.Random(5)
    for k in range(n):
        spec = node(f"n{k}", cpu=rng.choice((4_000, 16_000)), memory=32 * GI,
                    labels={"zone": "a" if k % 4 == 0 else "b"})
        for c in cores:
            c.on_node(spec, 0.0)
    uid = 0
    for cycle in range(6):
        now = 10.0 * (cycle + 1)
        for _ in range(40):
            uid += 1
            extra: dict[str, Any] = {"selector": {"zone": "a"}} if rng.random() < 0.5 else {}
            spec = pod(f"p{uid}", cpu=rng.choice((100, 200, 300, 400, 500)), memory=GI,
                       app=rng.choice(("", "x", "y")), **extra)
            for c in cores:
                c.add_pod(spec, now)
        got = [_state(c, c.schedule_cycle(now)) for c in cores]
        assert got[1] == got[0] and got[2] == got[0]
        assert len(cores[2].framework.cache.entries) <= 2
        for u in rng.sample(sorted(cores[0].framework.placed), 10):
            for c in cores:
                c.release(u, now)
    assert cores[2].framework.cache.stats["full"] > 10  # evicted classes came back


def test_decision_log_keeps_the_latest_record_of_the_last_pods() -> None:
    """Capacity 3: a pod decided again moves to the newest end (its record replaced); the oldest goes."""
    from colo_scheduler.framework.decision import DecisionLog, DecisionRecord

    def rec(uid: str, attempt: int) -> DecisionRecord:
        return DecisionRecord(uid, attempt, 0.0, -1, -1, 0, 0, "Unschedulable", "", "summary")

    log = DecisionLog(3)
    for uid in ("a", "b", "c"):
        log.add(rec(uid, 1))
    log.add(rec("a", 2))  # a is now the newest
    log.add(rec("d", 1))  # b, the oldest, goes
    assert log.get("b") is None and len(log) == 3
    got_a = log.get("a")
    assert got_a is not None and got_a.attempt == 2
    log.add(rec("e", 1))  # then c
    assert log.get("c") is None and log.get("a") is not None
    empty = DecisionLog(0)
    empty.add(rec("a", 1))
    assert len(empty) == 0
    copy = rec("a", 1).for_attempt("z", 4)
    assert (copy.uid, copy.attempt, copy.status) == ("z", 4, "Unschedulable")


@settings(max_examples=200, deadline=None)
@given(cols=st.lists(st.tuples(wide, half, st.integers(0, 3)), min_size=1, max_size=4))
def test_strategy_scores_equal_python_integers(cols: list[tuple[int, int, int]]) -> None:
    """strategy_scores (the shared LeastAllocated / MostAllocated form) on one node against the
    Kubernetes formulas in Python integers, allocatable up to 2^62 and 0."""
    from colo_scheduler.plugins.noderesources import strategy_scores

    alloc = np.array([[a for a, _, _ in cols]], np.int64)
    requested = np.array([[r for _, r, _ in cols]], np.int64)
    weights = np.array([w for _, _, w in cols], np.int64)
    for strategy in ("LeastAllocated", "MostAllocated"):
        num = den = 0
        for a, r, w in cols:
            if a <= 0 or not w:
                continue
            s = min(r, a) * 100 // a if strategy == "MostAllocated" else (0 if r > a else (a - r) * 100 // a)
            num, den = num + s * w, den + w
        want = num // den if den else 0
        assert strategy_scores(strategy, (), requested, alloc, weights).tolist() == [want], strategy


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(st.tuples(st.integers(0, 6), st.booleans()), min_size=1, max_size=12))
def test_spread_scores_equal_the_kubernetes_formula(rows: list[tuple[int, bool]]) -> None:
    """SelectorSpread's sparse normalisation against 100 × (max − count) // max with max over the
    feasible nodes (100 everywhere when that max is 0), on every feasible node; every value 0..100."""
    from colo_scheduler.plugins.selectorspread import normalize_spread

    raw = np.array([c for c, _ in rows], np.int64)
    feasible = np.array([f for _, f in rows], np.bool_)
    top = max((c for c, f in rows if f), default=0)
    got = normalize_spread(raw, feasible).tolist()
    for k, (c, f) in enumerate(rows):
        if f:
            assert got[k] == (100 if top == 0 else 100 * (top - c) // top)
        assert 0 <= got[k] <= 100


def test_class_entries_stay_within_the_byte_bound_after_the_table_grows(monkeypatch: pytest.MonkeyPatch) -> None:
    """Room for four classes at 10 nodes; the table grows to 40 nodes (room for one): the classes
    recomputed at the new size, and a new class, must not keep four entries of 40 rows."""
    from colo_scheduler.framework import classcache

    monkeypatch.setattr(classcache, "CACHE_BYTES", 4 * 10 * classcache.ENTRY_BYTES_PER_ROW)
    cores = _cores("default", "summary", 0)
    for k in range(10):
        for c in cores:
            c.on_node(node(f"n{k}"), 0.0)
    sizes = (100, 200, 300, 400)
    for k, cpu in enumerate(sizes):
        for c in cores:
            c.add_pod(pod(f"a{k}", cpu=cpu, memory=GI), 1.0)
    got = [_state(c, c.schedule_cycle(1.0)) for c in cores]
    assert got[1] == got[0] and got[2] == got[0]
    assert len(cores[2].framework.cache.entries) == 4
    for k in range(10, 40):
        for c in cores:
            c.on_node(node(f"n{k}"), 2.0)
    for k, cpu in enumerate(sizes + (500,)):
        for c in cores:
            c.add_pod(pod(f"b{k}", cpu=cpu, memory=GI), 2.0)
    got = [_state(c, c.schedule_cycle(2.0)) for c in cores]
    assert got[1] == got[0] and got[2] == got[0]
    for c in cores[1:]:
        entries = c.framework.cache.entries
        held = sum(len(e.feasible) for e in entries.values()) * classcache.ENTRY_BYTES_PER_ROW
        assert len(entries) == 1 and held <= classcache.CACHE_BYTES
