"""The per-class cache gives exactly the decisions of full recomputation; records, permit, sampling,
post-filter and plugin arguments of the framework."""

from __future__ import annotations

import random

import msgspec
import numpy as np
import pytest
from sched_helpers import GI, metric, node, node_resource, pod

from colo.messages import PodSpec, Taint, Toleration
from colo_scheduler.core import Scheduler
from colo_scheduler.framework.interface import UNSCHEDULABLE, WAIT, CycleState, Status
from colo_scheduler.framework.registry import ProfileConfig, Registry, build_profile
from colo_scheduler.plugins import default_profile_config, new_in_tree_registry
from colo_scheduler.podinfo import PodInfo
from colo_scheduler.settings import SchedulerSettings


def _cluster(core: Scheduler, rng: random.Random, n: int, now: float) -> None:
    for i in range(n):
        labels = {"zone": rng.choice("ab"), "disk": rng.choice(["ssd", "hdd"])}
        taints = [Taint(key="gpu", value="true", effect="NoSchedule")] if rng.random() < 0.2 else []
        core.on_node(node(f"n{i}", cpu=rng.choice([8_000, 16_000, 32_000]), memory=rng.choice([16, 32, 64]) * GI,
                          pods=rng.choice([0, 6, 10]), labels=labels, taints=taints), now)
        core.on_node_resource(node_resource(f"n{i}", batch_cpu=rng.randrange(0, 8_000),
                                            batch_memory=rng.randrange(0, 8) * GI), now)
        r = rng.random()
        if r < 0.8:  # fresh, expired (≥ 180 s old) or missing metrics
            at = now - (10 if r < 0.65 else 400)
            core.on_metric(metric(f"n{i}", at, cpu=rng.randrange(0, 6_000), memory=rng.randrange(0, 12) * GI), now)


def _pods(rng: random.Random, k: int) -> list[PodSpec]:
    shapes = [(500, 1 * GI), (1000, 2 * GI), (2000, 4 * GI), (4000, 8 * GI)]
    out = []
    for i in range(k):
        cpu, mem = rng.choice(shapes)
        app = rng.choice(["web", "db", "cache", ""])
        if rng.random() < 0.3:
            out.append(pod(f"p{i}", batch_cpu=cpu, batch_memory=mem, app=app))
        else:
            sel = {"zone": "a"} if rng.random() < 0.2 else None
            tol = [Toleration(key="gpu", operator="Exists")] if rng.random() < 0.3 else None
            out.append(pod(f"p{i}", cpu=cpu, memory=mem, lim_cpu=cpu * rng.choice([1, 2]), app=app,
                           max_per_node=rng.choice([-1, 1, 2]), selector=sel, tolerations=tol))
    return out


NOW0 = 1000.0

LEAN = ProfileConfig(filter=("NodeSelector", "TaintToleration", "NodeResourcesFit", "MaxInstancePerNode",
                             "LoadAware"),
                     score={"LoadAware": 1, "NodeResourcesLeastAllocated": 1},
                     reserve=("NodeResourcesFit", "LoadAware", "MaxInstancePerNode"))
"""Only plugins with one-row scalar methods: the cache re-syncs single rows with them."""


@pytest.mark.parametrize("lean", [False, True], ids=["default-profile", "scalar-rows"])
@pytest.mark.parametrize("seed", range(8))
def test_cache_places_every_pod_as_full_recomputation(seed: int, lean: bool) -> None:
    """Same seed, same pods: the cached framework picks the same node for every pod in every cycle,
    over several cycles with releases and fresh metrics between them."""
    outcomes = []
    for use_cache in (True, False):
        rng = random.Random(seed)
        settings = SchedulerSettings(seed=seed, max_pods_per_cycle=60)
        core = Scheduler(settings, LEAN if lean else None, use_class_cache=use_cache)
        if use_cache and lean:
            assert core.framework.cache._scalar is not None
        _cluster(core, rng, 40, 1000.0)
        for p in _pods(rng, 200):
            core.add_pod(p, 1000.0)
        trace = []
        for cycle in range(4):
            now = 1000.0 + cycle
            out = core.schedule_cycle(now)
            trace.append([(p.pod.uid, p.node) for p in out.placements] + [(f.pod.uid, None) for f in out.failures])
            for p in out.placements[::5]:
                core.release(p.pod.uid, now)
            core.on_metric(metric("n3", now, cpu=1000, memory=GI), now)
        outcomes.append(trace)
        if use_cache:
            assert core.framework.cache.stats["incremental"] > 0  # the cached path was exercised
    assert outcomes[0] == outcomes[1]


def test_bounded_class_cache_drops_least_recently_used_classes_and_decides_the_same(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With room for three class entries only, the cache holds three, builds dropped classes again
    when their pods come back, and every decision equals full recomputation's."""
    from colo_scheduler.framework import classcache

    monkeypatch.setattr(classcache, "CACHE_BYTES", 3 * 40 * classcache.ENTRY_BYTES_PER_ROW)
    outcomes = []
    for use_cache in (True, False):
        rng = random.Random(3)
        core = Scheduler(SchedulerSettings(seed=3, max_pods_per_cycle=200), use_class_cache=use_cache)
        _cluster(core, rng, 40, 1000.0)
        for p in _pods(rng, 200):
            core.add_pod(p, 1000.0)
        out = core.schedule_cycle(1000.0)
        outcomes.append([(p.pod.uid, p.node) for p in out.placements] + [(f.pod.uid, None) for f in out.failures])
        if use_cache:
            cache = core.framework.cache
            assert len(cache.entries) == 3
            classes = {classcache.class_key(p.pod) for p in out.placements}
            assert cache.stats["full"] > len(classes)  # dropped classes were built again
            assert classcache.class_key(out.placements[-1].pod) in cache.entries or out.failures
    assert outcomes[0] == outcomes[1]


@pytest.mark.parametrize("detail", ["nodes", "summary"])
def test_decision_record_names_rejecting_plugin_per_node_and_scores(detail: str) -> None:
    core = Scheduler(SchedulerSettings(decision_detail=detail))
    core.on_node(node("small", cpu=1_000, memory=GI), 0.0)
    core.on_node(node("tainted", taints=[Taint(key="k", value="v", effect="NoSchedule")]), 0.0)
    core.on_node(node("big"), 0.0)
    core.on_node(node("bigger", cpu=192_000, memory=1024 * GI), 0.0)
    core.add_pod(pod("p", cpu=4_000, memory=8 * GI), 0.0)
    out = core.schedule_cycle(0.0)
    assert [p.node for p in out.placements] == ["bigger"]
    rec = core.decision("p")
    assert rec is not None
    js = rec.to_json(core.table.names)
    assert js["node"] == "bigger" and js["runner_up"] == "big"
    assert js["feasible"] == 2 and js["nodes"] == 4
    rejected = js["rejected_nodes"]
    assert isinstance(rejected, dict)
    assert rejected["tainted"]["plugin"] == "TaintToleration"
    assert rejected["small"]["plugin"] == "NodeResourcesFit"
    if detail == "nodes":
        assert "cpu" in rejected["small"]["reason"] and "memory" in rejected["small"]["reason"]
    else:
        assert "reason" not in rejected["small"]
    scores = js["scores"]
    assert isinstance(scores, dict) and set(scores) == {"bigger", "big"}
    assert scores["bigger"]["total"] >= scores["big"]["total"]
    fit = scores["bigger"]["plugins"]["NodeResourcesLeastAllocated"]
    assert fit["weighted"] == fit["weight"] * fit["normalized"]


def test_decision_record_of_unschedulable_pod_and_dry_run() -> None:
    core = Scheduler(SchedulerSettings())
    core.on_node(node("a", cpu=1_000), 0.0)
    core.add_pod(pod("p", cpu=2_000), 0.0)
    out = core.schedule_cycle(0.0)
    assert out.failures and core.decision("p") is not None
    js = core.decision("p").to_json(core.table.names)  # type: ignore[union-attr]
    assert js["status"] == UNSCHEDULABLE and js["node"] is None
    # summary detail: the filter's only reason stands for each node it rejected
    assert js["rejected_nodes"] == {"a": {"plugin": "NodeResourcesFit", "reason": "Insufficient cpu"}}
    assert js["filters"] == {"NodeResourcesFit": {"rejected": 1, "reasons": {"Insufficient cpu": 1}}}
    dry = core.explain("p", 1.0)
    assert dry is not None and dry.node == -1 and dry.feasible == 0
    assert dry.to_json(core.table.names)["rejected_nodes"] == {
        "a": {"plugin": "NodeResourcesFit", "reason": "Insufficient cpu"}}


def test_decision_records_are_bounded() -> None:
    core = Scheduler(SchedulerSettings(decision_records=3))
    core.on_node(node("a"), 0.0)
    for i in range(5):
        core.add_pod(pod(f"p{i}", cpu=100), 0.0)
    core.schedule_cycle(0.0)
    assert len(core.decisions) == 3
    assert core.decision("p0") is None and core.decision("p4") is not None


class _HoldApp:
    """A Permit plugin that holds pods of app "gang" and rejects app "no"."""

    name = "HoldApp"
    events: frozenset[str] = frozenset()

    def permit(self, state: CycleState, pod: PodInfo, node: int) -> Status:
        if pod.spec.app == "gang":
            return Status(WAIT, "waiting for the gang", timeout_s=5.0)
        if pod.spec.app == "no":
            return Status(UNSCHEDULABLE, "not allowed")
        return Status()


def _core_with(extra: object, **config: object) -> Scheduler:
    settings = SchedulerSettings()
    core = Scheduler(settings)
    registry = new_in_tree_registry()
    registry.register(extra.name, lambda a, s: extra)  # type: ignore[attr-defined]
    base = default_profile_config(settings)
    cfg = ProfileConfig(**{**base.__dict__, **config})
    from colo_scheduler.framework.runner import Framework

    core.framework = Framework(build_profile(cfg, registry, settings), core.table)
    return core


def test_permit_wait_allow_timeout_and_reject() -> None:
    core = _core_with(_HoldApp(), permit=("HoldApp",))
    core.on_node(node("a", cpu=4_000), 0.0)
    for uid, app in (("g1", "gang"), ("g2", "gang"), ("x", "no"), ("ok", "")):
        core.add_pod(pod(uid, cpu=1_000, app=app), 0.0)
    out = core.schedule_cycle(0.0)
    assert [p.pod.uid for p in out.placements] == ["ok"]
    assert set(core.waiting) == {"g1", "g2"}
    assert any(f.pod.uid == "x" for f in out.failures)
    assert core.table.free[0, 0] == 4_000 - 3 * 1_000  # waiting pods stay reserved, x was unreserved
    assert core.allow("g1")
    out = core.schedule_cycle(1.0)
    assert [p.pod.uid for p in out.placements] == ["g1"]
    out = core.schedule_cycle(10.0)  # g2 timed out
    assert [f.pod.uid for f in out.failures] == ["g2"] and not core.waiting
    assert core.table.free[0, 0] == 4_000 - 2 * 1_000


class _NominateFirst:
    name = "NominateFirst"
    events: frozenset[str] = frozenset()

    def post_filter(self, state: CycleState, pod: PodInfo, reasons: dict[str, int]) -> int | None:
        return 0


def test_post_filter_nominates_and_pod_backs_off() -> None:
    core = _core_with(_NominateFirst(), post_filter=("NominateFirst",))
    core.on_node(node("a", cpu=1_000), 0.0)
    core.add_pod(pod("p", cpu=2_000), 0.0)
    out = core.schedule_cycle(0.0)
    assert out.failures[0].result.nominated == 0
    assert core.queue.lengths()["backoff"] == 1


def test_sampling_chooses_among_a_rotating_window() -> None:
    settings = SchedulerSettings()
    cfg = ProfileConfig(**{**default_profile_config(settings).__dict__, "percentage_of_nodes_to_score": 10,
                           "min_feasible_nodes_to_find": 5})
    core = Scheduler(settings, cfg)
    for i in range(100):
        core.on_node(node(f"n{i:03}", cpu=64_000 if i == 99 else 8_000), 0.0)
    core.add_pod(pod("p", cpu=100), 0.0)
    out = core.schedule_cycle(0.0)
    # the best node (n099) lies outside the first window of 10 feasible nodes
    assert out.placements[0].node != "n099"
    assert int(out.placements[0].node[1:]) < 10


def test_profile_errors_are_all_listed() -> None:
    settings = SchedulerSettings()
    cfg = ProfileConfig(filter=("NoSuch",), score={"NodeResourcesFit": -1}, plugin_args={"Other": {}},
                        percentage_of_nodes_to_score=0)
    with pytest.raises(ValueError) as err:
        build_profile(cfg, new_in_tree_registry(), settings)
    msg = str(err.value)
    for part in ("unknown plugin 'NoSuch'", "weight of 'NodeResourcesFit' must be >= 0", "'Other'",
                 "percentage_of_nodes_to_score"):
        assert part in msg


def test_typed_plugin_args_validated() -> None:
    import msgspec

    class Args(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
        threshold: int = 5

        def problems(self) -> list[str]:
            return [] if 0 <= self.threshold <= 10 else ["threshold must be within 0..10"]

    class P:
        name = "P"
        events: frozenset[str] = frozenset()

        def __init__(self, args: Args) -> None:
            self.args = args

        def filter(self, state: CycleState, pod: PodInfo) -> None:
            return None

        def explain(self, state: CycleState, pod: PodInfo, rejected: np.ndarray) -> dict[str, int]:
            return {}

    registry = Registry()
    registry.register("P", lambda a, s: P(a), Args)
    settings = SchedulerSettings()
    assert registry.build("P", settings).args.threshold == 5  # type: ignore[attr-defined]
    assert registry.build("P", settings, {"threshold": 7}).args.threshold == 7  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="within 0..10"):
        registry.build("P", settings, {"threshold": 70})
    with pytest.raises(ValueError, match="threshold"):
        registry.build("P", settings, {"threshold": "x"})
    with pytest.raises(ValueError, match="unknown"):
        registry.build("P", settings, {"nope": 1})


@pytest.mark.parametrize("seed", range(6))
def test_one_row_scalar_methods_equal_array_results(seed: int) -> None:
    """filter_node / score_node agree with the full-array filter / score on every row, including the
    exact threshold boundaries (usage placed so that some nodes sit on a LoadAware threshold)."""
    rng = random.Random(seed)
    core = Scheduler(SchedulerSettings(seed=seed), LEAN)
    _cluster(core, rng, 40, 1000.0)
    # boundary rows: round(100 × (usage + 850 m estimate) / 10 CPU) crosses 65 % at usage 5700 m
    for i in range(3):
        core.on_node(node(f"edge{i}", cpu=10_000, memory=10 * GI), 1000.0)
        core.on_metric(metric(f"edge{i}", 999.0, cpu=5_700 + i - 1, memory=GI), 1000.0)
    state = core.framework.begin_cycle(1000.0)
    pods = _pods(rng, 40) + [pod("edge", cpu=1000, memory=GI, lim_cpu=1000)]
    checked = 0
    for spec in pods:
        info = core.pod_info(spec, 1000.0)
        for f in core.framework.profile.filter:
            if not hasattr(f, "filter_node"):
                continue
            full = f.filter(state, info)
            for i in range(core.table.n):
                assert f.filter_node(state, info, i) == (True if full is None else bool(full[i])), (f.name, i)
                checked += 1
        for p, _ in core.framework.profile.score:
            if hasattr(p, "score_node"):
                full_s = p.score(state, info)
                assert [p.score_node(state, info, i) for i in range(core.table.n)] == full_s.tolist(), p.name
    assert checked > 1000


@pytest.mark.parametrize("scalar", [True, False], ids=["scalar-rows", "array-rows"])
def test_records_keep_the_masks_of_their_decision_time(scalar: bool) -> None:
    """Pods of one class fill node "a"; the first pod's record still shows "a" feasible while the third
    one's shows it rejected by NodeResourcesFit (the class entry copies a lent mask before changing it)."""
    core = Scheduler(SchedulerSettings(), LEAN)
    if not scalar:
        core.framework.cache._scalar = None  # re-sync changed rows with filter_rows / score_rows
    core.on_node(node("a", cpu=2_000, memory=64 * GI), 0.0)
    core.on_node(node("tiny", cpu=100, memory=64 * GI), 0.0)
    for k in range(3):
        core.add_pod(pod(f"p{k}", cpu=1_000, memory=GI, created_at=float(k)), 0.0)
    out = core.schedule_cycle(0.0)
    assert [p.node for p in out.placements] == ["a", "a"]
    first = core.decision("p0").to_json(core.table.names)  # type: ignore[union-attr]
    last = core.decision("p2").to_json(core.table.names)  # type: ignore[union-attr]
    assert set(first["rejected_nodes"]) == {"tiny"}  # type: ignore[arg-type]
    assert first["feasible"] == 1 and first["node"] == "a"
    assert set(last["rejected_nodes"]) == {"tiny", "a"}  # type: ignore[arg-type]
    assert core.framework.cache.stats["incremental"] >= 2
    assert last["rejected_nodes"]["a"]["plugin"] == "NodeResourcesFit"  # type: ignore[index]


@pytest.mark.parametrize("seed", range(6))
def test_class_caches_across_cycles_follow_metric_expiry_and_node_changes(seed: int) -> None:
    """Cycles 70 s apart: metrics expire (180 s) between cycles, fresh ones arrive, a node is relabelled,
    another gets a threshold annotation; the caches kept across cycles decide as full recomputation."""
    from colo.messages import NodeSpec

    outcomes = []
    for use_cache in (True, False):
        rng = random.Random(seed)
        settings = SchedulerSettings(seed=seed, max_pods_per_cycle=25)
        core = Scheduler(settings, use_class_cache=use_cache)
        _cluster(core, rng, 30, 1000.0)
        pods = _pods(rng, 150)
        trace = []
        for cycle in range(6):
            now = 1000.0 + 70.0 * cycle
            for p in pods[cycle * 25:(cycle + 1) * 25]:
                core.add_pod(p, now)
            out = core.schedule_cycle(now)
            trace.append([(p.pod.uid, p.node) for p in out.placements] + [(f.pod.uid, None) for f in out.failures])
            k = rng.randrange(30)
            core.on_metric(metric(f"n{k}", now, cpu=rng.randrange(0, 4_000), memory=GI), now)
            if cycle == 2:
                spec = core.table.specs[core.table.index["n5"]]
                core.on_node(NodeSpec(name=spec.name, capacity=spec.capacity, allocatable=spec.allocatable,
                                      labels={**spec.labels, "zone": "a"}, taints=spec.taints), now)
            if cycle == 3:
                spec = core.table.specs[core.table.index["n7"]]
                core.on_node(NodeSpec(name=spec.name, capacity=spec.capacity, allocatable=spec.allocatable,
                                      labels=spec.labels, taints=spec.taints, annotations={
                                          "scheduling.koordinator.sh/custom-usage-thresholds":
                                              '{"usageThresholds": {"cpu": 20, "memory": 90}}'}), now)
        outcomes.append(trace)
    assert outcomes[0] == outcomes[1]


def test_load_aware_incremental_cycle_equals_full_cycle() -> None:
    """After metric expiry, new metrics, placements and releases between cycles, the LoadAware arrays
    carried from cycle to cycle equal those of a LoadAware instance that recomputes everything."""
    rng = random.Random(3)
    core = Scheduler(SchedulerSettings(seed=3))
    _cluster(core, rng, 40, 1000.0)
    for p in _pods(rng, 80):
        core.add_pod(p, 1000.0)
    la = core.framework.profile.plugins["LoadAware"]
    for cycle in range(5):
        now = 1000.0 + 60.0 * cycle
        out = core.schedule_cycle(now)
        for p in out.placements[::3]:
            core.release(p.pod.uid, now)
        for k in rng.sample(range(40), 5):
            core.on_metric(metric(f"n{k}", now, cpu=rng.randrange(0, 6_000), memory=rng.randrange(1, 12) * GI), now)
        k = rng.randrange(40)  # an allocatable change, labels kept (no new table version)
        spec = core.table.specs[core.table.index[f"n{k}"]]
        core.on_node(node(f"n{k}", cpu=rng.choice([4_000, 64_000]), memory=rng.choice([8, 128]) * GI,
                          pods=spec.allocatable.pods, labels=spec.labels, taints=spec.taints), now)
        state = core.framework.begin_cycle(now + 30.0)
        carried = state.data["LoadAware"]
        fresh_plugin = type(la)(core.settings, la.args)
        from colo_scheduler.framework.interface import CycleState

        ref_state = CycleState(now=now + 30.0, table=core.table)
        fresh_plugin.begin_cycle(ref_state)
        ref = ref_state.data["LoadAware"]
        for name in ("fresh", "expired", "unchecked", "alloc", "divisor", "fdiv", "cap_all", "slack_all", "room_all",
                     "slack_prod", "room_prod"):
            assert np.array_equal(getattr(carried, name), getattr(ref, name)), (cycle, name)


def test_metric_expiry_between_cycles_reaches_a_kept_class_cache() -> None:
    """Big node n1 is over the load threshold while its metric is fresh; its metric expires between two
    cycles (expired metrics pass unchecked here) without any other change to n1. The class cache kept
    from the first cycle must see n1 feasible again (LoadAware touches rows whose freshness flipped)."""
    core = Scheduler(SchedulerSettings(filter_expired_metrics=False, load_aware_weight=0))
    core.on_node(node("n1", cpu=64_000, memory=128 * GI), 1000.0)
    core.on_metric(metric("n1", 1000.0, cpu=50_000, memory=GI), 1000.0)  # 79 % > 65 %: rejected
    for i in (0, 2, 3, 4, 5, 6, 7, 8, 9):
        core.on_node(node(f"n{i}", cpu=4_000, memory=64 * GI), 1000.0)
        core.on_metric(metric(f"n{i}", 1100.0, cpu=1_000, memory=GI), 1100.0)
    core.add_pod(pod("p1", cpu=1_000, memory=GI), 1100.0)
    first = core.schedule_cycle(1100.0).placements
    assert len(first) == 1 and first[0].node != "n1"
    core.add_pod(pod("p2", cpu=1_000, memory=GI), 1190.0)
    out = core.schedule_cycle(1190.0)  # n1's metric is 190 s old: expired (180 s), passes unchecked
    assert [p.node for p in out.placements] == ["n1"]  # the most free room wins
    assert core.framework.cache.stats["incremental"] >= 1  # the class entry was kept and re-synced


class _BadScore:
    """Scores 50 everywhere, 150 on row ``bad_row`` once ``armed`` (after the class cache has its arrays)."""

    name = "BadScore"
    events: frozenset[str] = frozenset()

    def __init__(self) -> None:
        self.armed = False
        self.bad_row = 0

    def _value(self, i: int) -> int:
        return 150 if self.armed and i == self.bad_row else 50

    def score(self, state: CycleState, pod: PodInfo) -> np.ndarray:
        return np.array([self._value(i) for i in range(state.table.n)], np.int64)

    def score_rows(self, state: CycleState, pod: PodInfo, rows: np.ndarray) -> np.ndarray:
        return np.array([self._value(int(i)) for i in rows], np.int64)


@pytest.mark.parametrize("when", ["full", "re-sync"])
def test_out_of_range_score_is_refused_naming_the_plugin(when: str) -> None:
    bad = _BadScore()
    core = _core_with(bad, score={"BadScore": 1})
    for i in range(3):
        core.on_node(node(f"n{i}", cpu=8_000), 0.0)
    if when == "full":
        bad.armed = True
        core.add_pod(pod("p0", cpu=100), 0.0)
        with pytest.raises(ValueError, match="BadScore"):
            core.schedule_cycle(0.0)
        return
    core.add_pod(pod("p0", cpu=100, created_at=0.0), 0.0)
    core.add_pod(pod("p1", cpu=100, created_at=1.0), 0.0)
    out = core.schedule_cycle(0.0)  # p0 builds the class arrays, p1 re-syncs p0's row
    assert len(out.placements) == 2
    bad.armed, bad.bad_row = True, core.table.index[out.placements[1].node]
    core.add_pod(pod("p2", cpu=100, created_at=2.0), 1.0)
    with pytest.raises(ValueError, match="BadScore"):
        core.schedule_cycle(1.0)  # the re-synced row now scores 150 and wins


@pytest.mark.parametrize("scalar", [True, False], ids=["scalar-rows", "array-rows"])
def test_a_row_turning_feasible_gets_its_scores_in_a_class_first_scored_on_feasible_rows(scalar: bool) -> None:
    """A class whose first computation found fewer than half the rows feasible scores those rows only;
    when a full node is freed, the re-synced row carries its full scores and wins the next pick, as in
    full recomputation."""
    picks = []
    for use_cache in (True, False):
        core = Scheduler(SchedulerSettings(seed=1), LEAN if scalar else None, use_class_cache=use_cache)
        for i in range(6):  # n0..n4 full after one big pod each; n5 half free
            core.on_node(node(f"n{i}", cpu=8_000, memory=16 * GI), 1000.0)
            core.on_metric(metric(f"n{i}", 999.0, cpu=500, memory=GI), 1000.0)
        for i in range(5):
            assert core.adopt(pod(f"big{i}", cpu=7_500, memory=15 * GI), f"n{i}", 1000.0)
        assert core.adopt(pod("half", cpu=4_000, memory=8 * GI), "n5", 1000.0)
        state = core.framework.begin_cycle(1000.0)
        first = core.pod_info(pod("w0", cpu=1000, memory=GI, app="web"), 1000.0)
        result = core.framework.schedule_one(state, first)
        assert core.table.names[result.node] == "n5"
        if use_cache:
            entry = core.framework.cache.get(state, first, first.extra["class"])  # type: ignore[arg-type]
            assert entry.feasible_count == 1
            full = core.framework.profile.score[0][0].score(state, first)
            assert entry.raw[0][0] == 0 < full[0]  # the infeasible row was not scored
        core.framework.reserve(first, result.node, 1000.0)
        core.release("big2", 1000.0)  # n2 now nearly empty: the best node
        second = core.pod_info(pod("w1", cpu=1000, memory=GI, app="web"), 1000.0)
        result = core.framework.schedule_one(state, second)
        picks.append(core.table.names[result.node])
        if use_cache:
            entry = core.framework.cache.get(state, second, second.extra["class"])  # type: ignore[arg-type]
            for j, (p, _) in enumerate(core.framework.profile.score):
                if not core.framework.cache.pod_level[j]:  # pod-level raw scores are read per decision
                    assert entry.raw[j][2] == p.score(state, second)[2], p.name
    assert picks == ["n2", "n2"]


def test_a_record_for_another_attempt_keeps_every_other_field() -> None:
    """DecisionRecord.for_attempt (records of equivalent failures) copies every field but uid and attempt,
    including fields added later."""
    import dataclasses

    from colo_scheduler.framework.decision import DecisionRecord, FilterRecord

    rec = DecisionRecord("a", 1, 5.0, 3, 4, 10, 2, "Unschedulable", "0/10 nodes", "summary",
                         [FilterRecord("NodeResourcesFit")], (("LoadAware", 1),), {3: (7,)}, {3: (8,)}, 0.25)
    other = rec.for_attempt("b", 2)
    assert (other.uid, other.attempt) == ("b", 2)
    for f in dataclasses.fields(DecisionRecord):
        if f.name not in ("uid", "attempt"):
            assert getattr(other, f.name) == getattr(rec, f.name), f.name


def test_least_allocated_divisors_follow_an_allocatable_change_between_cycles() -> None:
    """The per-cycle divisors are reused while allocatable is unchanged; a batch allocatable update
    gives the next cycle the scores of a scheduler built with the new values."""
    def build(batch_cpu: int) -> Scheduler:
        core = Scheduler(SchedulerSettings(), LEAN)
        for i in range(3):
            core.on_node(node(f"n{i}", cpu=8_000, memory=16 * GI), 1000.0)
            core.on_node_resource(node_resource(f"n{i}", batch_cpu=4_000 if i else batch_cpu, batch_memory=8 * GI),
                                  1000.0)
        return core

    be = pod("b", batch_cpu=1_000, batch_memory=GI)
    core = build(4_000)
    plugin = next(p for p, _ in core.framework.profile.score if p.name == "NodeResourcesLeastAllocated")
    first = plugin.score(core.framework.begin_cycle(1000.0), core.pod_info(be, 1000.0)).tolist()
    again = plugin.score(core.framework.begin_cycle(1001.0), core.pod_info(be, 1001.0)).tolist()
    assert again == first
    core.on_node_resource(node_resource("n0", batch_cpu=2_000, batch_memory=8 * GI), 1002.0)
    after = plugin.score(core.framework.begin_cycle(1002.0), core.pod_info(be, 1002.0)).tolist()
    fresh = build(2_000)
    fresh_plugin = next(p for p, _ in fresh.framework.profile.score if p.name == "NodeResourcesLeastAllocated")
    want = fresh_plugin.score(fresh.framework.begin_cycle(1002.0), fresh.pod_info(be, 1002.0)).tolist()
    assert after == want and after[0] != first[0]


def test_uncapped_workloads_of_one_size_share_a_class_and_still_spread_per_app() -> None:
    """Two apps of one pod size without a per-node cap share one class entry (every class-cached
    plugin ignores the app); SelectorSpread, read per decision, still spreads each app on its own:
    a second pod of app a avoids a's node, the first pod of app b takes it. A capped app keeps a
    class of its own."""
    picks = []
    for use_cache in (True, False):
        core = Scheduler(SchedulerSettings(seed=2), use_class_cache=use_cache)
        core.on_node(node("big", cpu=32_000, memory=64 * GI), NOW0)
        for i in range(2):
            core.on_node(node(f"small{i}", cpu=16_000, memory=32 * GI), NOW0)
        assert core.framework.cache.ignores_app
        specs = [pod("a0", cpu=1_000, memory=GI, app="a"), pod("a1", cpu=1_000, memory=GI, app="a"),
                 pod("b0", cpu=1_000, memory=GI, app="b"), pod("c0", cpu=1_000, memory=GI, app="c", max_per_node=1)]
        for k, spec in enumerate(specs):
            core.add_pod(msgspec.structs.replace(spec, created_at=float(k)), NOW0)
        out = core.schedule_cycle(NOW0)
        picks.append({p.pod.uid: p.node for p in out.placements})
        if use_cache:
            assert len(core.framework.cache.entries) == 2  # a and b share one; c (capped) has its own
    assert picks[0] == picks[1]
    assert picks[0]["a0"] == "big" and picks[0]["a1"] != "big" and picks[0]["b0"] == "big"
