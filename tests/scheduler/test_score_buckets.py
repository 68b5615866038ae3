"""Score buckets (framework/buckets.py) against the array pick they replace.

The pick over a class entry's buckets must choose the same node with the same draws of the
tie-break generator, and name the same runner-up, as the passes over the entry's ``masked``
array (``Framework(use_score_buckets=False)``): unit checks of :class:`ScoreBuckets` under random
moves, targeted cases (ties, a row leaving and rejoining the best bucket, a row becoming
infeasible, the runner-up of records) and whole runs of random clusters through both paths.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import msgspec
import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from random_cluster import NOW, Cluster, cluster_st, pod_st
from sched_helpers import GI, metric, node, pod

from colo.messages import PodSpec, Taint, Toleration
from colo_scheduler.core import Scheduler
from colo_scheduler.framework import buckets as buckets_mod
from colo_scheduler.framework.buckets import ScoreBuckets
from colo_scheduler.framework.registry import ProfileConfig
from colo_scheduler.settings import SchedulerSettings

LEAN = ProfileConfig(filter=("NodeSelector", "TaintToleration", "NodeResourcesFit", "MaxInstancePerNode",
                             "LoadAware"),
                     score={"LoadAware": 1, "NodeResourcesLeastAllocated": 1},
                     reserve=("NodeResourcesFit", "LoadAware", "MaxInstancePerNode"))
"""The in-process bench's profile: no NormalizeScore plugin, every pick can use the buckets."""


@contextmanager
def _top_rows(k: int) -> Iterator[None]:
    """Keep only ``k`` rows at build time: floors above 0, stale buckets and runner-ups below the
    floor on small clusters."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(buckets_mod, "TOP_ROWS", k)
        yield


# ---------------------------------------------------------------------------------------- unit


def _array_pick(masked: np.ndarray, rng: random.Random) -> tuple[int, int]:
    """The array path of Framework.schedule_one: (pick, runner-up), −1 when none."""
    pick = int(masked.argmax())
    best = masked[pick]
    if best < 0:
        return -1, -1
    ties = np.flatnonzero(masked == best)
    if len(ties) > 1:
        pick = int(ties[rng.randrange(len(ties))])
    if len(masked) == 1:
        return pick, -1
    other = masked.copy()
    other[pick] = -1
    runner_up = int(other.argmax())
    return pick, runner_up if other[runner_up] >= 0 else -1


def _check(b: ScoreBuckets, masked: np.ndarray, seed: int) -> str:
    """Assert the invariant and the pick against the array; returns what was checked."""
    kept = {i: s for s, rows in b.rows.items() for i in rows}
    assert all(rows == sorted(rows) and rows for rows in b.rows.values())
    expected = {i: int(s) for i, s in enumerate(masked.tolist()) if s >= b.floor}
    assert kept == expected  # every row at or above the floor, with its score, nowhere else
    assert b.top == (max(b.rows) if b.rows else -1)
    if b.stale:
        return "stale"
    reference = random.Random(seed)
    want = _array_pick(masked, reference)
    rng = random.Random(seed)
    pick = b.pick(rng)
    assert pick == want[0]
    assert rng.getstate() == reference.getstate()  # as many draws, over as many rows
    if pick < 0:
        return "empty"
    runner_up = b.runner_up(pick)
    if runner_up is None:
        assert b.floor > 0 and (want[1] < 0 or masked[want[1]] < b.floor)
        return "runner-up below floor"
    assert runner_up == want[1]
    return "picked"


@settings(max_examples=300, deadline=None)
@given(n=st.integers(1, 120), top_rows=st.sampled_from((1, 3, 8, 64)), spread=st.integers(0, 12),
       data=st.data(), seed=st.integers(0, 2**32))
def test_buckets_follow_moves_and_pick_as_the_array(n: int, top_rows: int, spread: int, data: st.DataObject,
                                                    seed: int) -> None:
    """Random score arrays (few distinct scores: ties everywhere) and random moves of rows between
    scores and infeasibility, half of them of a best row; after every move the buckets hold exactly the rows at or above the
    floor and pick, draw and name the runner-up as the array does (a stale set is rebuilt)."""
    values = st.integers(-1, spread)
    masked = np.array(data.draw(st.lists(values, min_size=n, max_size=n), label="masked"), np.int64)
    with _top_rows(top_rows):
        b = ScoreBuckets(masked)
        moves = st.lists(st.tuples(st.booleans(), st.integers(0, n - 1), values), max_size=40)
        for step, (placed, i, new) in enumerate(data.draw(moves, label="moves")):
            if placed and b.top >= 0:  # a row of the best bucket, as a placement moves its row
                best = b.rows[b.top]
                i = best[i % len(best)]
            old = int(masked[i])
            masked[i] = new
            if old != new:
                b.move(i, old, new)
            what = _check(b, masked, seed + step)
            event(what)
            if what == "stale":
                b = ScoreBuckets(masked)
                assert not b.stale
                _check(b, masked, seed + step)


def test_ties_draw_over_the_tied_rows_in_row_order() -> None:
    masked = np.array([5, 7, -1, 7, 3, 7], np.int64)
    b = ScoreBuckets(masked)
    assert b.rows[7] == [1, 3, 5] and b.top == 7
    for seed in range(20):
        assert b.pick(random.Random(seed)) == _array_pick(masked, random.Random(seed))[0]
    assert b.runner_up(1) == 3 and b.runner_up(3) == 1  # the lowest other tied row
    solo = ScoreBuckets(np.array([5, 9, 5], np.int64))
    rng = random.Random(0)
    state = rng.getstate()
    assert solo.pick(rng) == 1 and rng.getstate() == state  # no tie: no draw, as the array path


def test_row_leaving_and_rejoining_the_best_bucket() -> None:
    masked = np.array([9, 4, 6, 9], np.int64)
    b = ScoreBuckets(masked)
    b.move(0, 9, 5)  # row 0 placed on: its score drops below row 2's
    assert b.rows[9] == [3] and b.top == 9
    b.move(3, 9, 2)  # the best bucket empties: the next score below leads
    assert b.top == 6 and b.pick(random.Random(0)) == 2 and b.runner_up(2) == 0
    b.move(3, 2, 11)  # released and better than ever
    assert b.top == 11 and b.runner_up(3) == 2
    b.move(0, 5, 11)  # joins the best bucket before row 3
    assert b.rows[11] == [0, 3] and b.runner_up(3) == 0


def test_row_becoming_infeasible_leaves_the_buckets() -> None:
    masked = np.array([8, 8, 3], np.int64)
    b = ScoreBuckets(masked)
    b.move(1, 8, -1)
    assert b.rows == {8: [0], 3: [2]} and b.runner_up(0) == 2
    b.move(0, 8, -1)
    b.move(2, 3, -1)
    assert b.top == -1 and not b.stale and b.pick(random.Random(0)) == -1  # floor 0: no feasible row


def test_floor_above_zero_goes_stale_and_hands_the_runner_up_to_the_array() -> None:
    masked = np.arange(10, dtype=np.int64) * 10  # scores 0, 10, … 90
    with _top_rows(2):
        b = ScoreBuckets(masked)
    assert b.floor == 80 and set(b.rows) == {80, 90}
    b.move(9, 90, 5)
    assert b.top == 80 and b.runner_up(8) is None  # the runner-up (row 7, 70) is below the floor
    b.move(8, 80, 50)
    assert b.stale  # every kept row fell below the floor: rebuild from the array


# ---------------------------------------------------------------------------------------- framework


def _core(buckets: bool, seed: int, profile: ProfileConfig | None, scalar: bool = True,
          detail: str = "summary", cycle_pods: int = 500) -> Scheduler:
    s = SchedulerSettings(seed=seed, max_pods_per_cycle=cycle_pods, decision_detail=detail)
    core = Scheduler(s, profile, use_score_buckets=buckets)
    if not scalar:
        core.framework.cache._scalar = None  # re-sync changed rows with filter_rows / score_rows
    return core


def _cycle(core: Scheduler, now: float) -> list[tuple[str, str | None, int | None]]:
    """Placements and failures of one cycle with each pod's recorded runner-up row."""
    out = core.schedule_cycle(now)
    got: list[tuple[str, str | None, int | None]] = []
    for uid, name in [(p.pod.uid, p.node) for p in out.placements] + [(f.pod.uid, None) for f in out.failures]:
        rec = core.decision(uid)
        got.append((uid, name, rec.runner_up if rec is not None else None))
    return got


def _both(seed: int, profile: ProfileConfig | None, drive: Any, **kw: Any) -> list[Any]:
    """Run ``drive(core)`` on a core per path; assert equal traces and tie-break states."""
    traces, states = [], []
    for buckets in (True, False):
        core = _core(buckets, seed, profile, **kw)
        traces.append(drive(core))
        states.append(core.framework.rng.getstate())
        assert core.framework.use_score_buckets is buckets
    assert traces[0] == traces[1]
    assert states[0] == states[1]
    return traces[0]  # type: ignore[no-any-return]


def test_identical_nodes_tie_and_both_paths_draw_the_same_nodes() -> None:
    def drive(core: Scheduler) -> list[Any]:
        for i in range(6):
            core.on_node(node(f"n{i}", cpu=16_000, memory=64 * GI), NOW)
        for k in range(12):
            core.add_pod(pod(f"p{k:02}", cpu=1_000, memory=GI), NOW)
        return _cycle(core, NOW)

    trace = _both(3, LEAN, drive)
    assert len({name for _, name, _ in trace}) == 6  # ties broken over every node
    assert all(ru is not None and ru >= 0 for _, _, ru in trace)


def test_rows_leave_rejoin_and_become_infeasible_over_cycles() -> None:
    """A node filled until it no longer fits, releases that bring rows back above the best, fresh
    metrics: both paths place, fail and name runner-ups alike."""
    def drive(core: Scheduler) -> list[Any]:
        core.on_node(node("big", cpu=8_000, memory=32 * GI), NOW)
        for i in range(3):
            core.on_node(node(f"m{i}", cpu=4_000, memory=16 * GI), NOW)
            core.on_metric(metric(f"m{i}", NOW, cpu=500 * i, memory=GI), NOW)
        trace = []
        for cycle in range(5):
            now = NOW + cycle
            for k in range(6):
                core.add_pod(pod(f"p{cycle}-{k}", cpu=1_500, memory=2 * GI), now)
            trace.append(_cycle(core, now))
            for uid in sorted(core.framework.placed)[::2]:
                core.release(uid, now)
            core.on_metric(metric("big", now, cpu=1_000 * cycle, memory=GI), now)
        return trace

    trace = _both(0, LEAN, drive)
    flat = [t for cycle in trace for t in cycle]
    assert any(name is None for _, name, _ in flat)  # nodes filled up: failures
    assert any(ru == -1 for _, name, ru in flat if name is not None)  # a pick with no other feasible node


def _random_cluster(core: Scheduler, rng: random.Random, n: int) -> None:
    for i in range(n):
        taints = [Taint(key="gpu", value="present", effect="NoSchedule")] if rng.random() < 0.15 else []
        core.on_node(node(f"n{i:04}", cpu=rng.choice((8_000, 16_000, 32_000, 64_000)),
                          memory=rng.choice((32, 64, 128, 256)) * GI, pods=rng.choice((0, 20, 110)),
                          labels={"zone": "abcd"[i % 4]}, taints=taints), NOW)
        if rng.random() < 0.9:
            core.on_metric(metric(f"n{i:04}", NOW - rng.choice((10, 30, 400)), cpu=rng.randrange(0, 8_000),
                                  memory=rng.randrange(0, 24) * GI), NOW)


def _workloads(rng: random.Random, count: int) -> list[PodSpec]:
    """Workloads of up to 20 replicas (some pinned to a zone, capped per node, GPU-tolerating),
    interleaved: consecutive pods are of different classes, as in the in-process bench."""
    out: list[PodSpec] = []
    w = 0
    while len(out) < count:
        cpu, mem = rng.choice((250, 500, 1_000, 2_000, 4_000)), rng.choice((1, 2, 4, 8)) * GI
        app = f"svc-{w}"
        sel = {"zone": "abcd"[w % 4]} if rng.random() < 0.2 else None
        tol = [Toleration(key="gpu", operator="Exists")] if rng.random() < 0.2 else None
        cap = rng.choice((-1, -1, 1, 2))
        for k in range(min(rng.choice((1, 5, 20)), count - len(out))):
            out.append(pod(f"{app}-{k}", cpu=cpu, memory=mem, lim_cpu=cpu, lim_memory=mem, app=app,
                           max_per_node=cap, selector=sel, tolerations=tol))
        w += 1
    rng.shuffle(out)
    return out


@pytest.mark.parametrize(("seed", "top_rows", "profile", "scalar"), [
    (0, 64, "lean", True), (1, 64, "lean", True), (2, 4, "lean", True), (3, 1, "lean", True),
    (4, 4, "lean", False), (5, 64, "default", True), (6, 2, "default", False),
])
def test_busy_cluster_places_every_pod_as_the_array_pick(seed: int, top_rows: int, profile: str,
                                                          scalar: bool) -> None:
    """Hundreds of nodes and interleaved workloads over cycles with releases and fresh metrics: the
    same node for every pod, the same runner-up in every record, the same tie-break state."""
    def drive(core: Scheduler) -> list[Any]:
        rng = random.Random(seed)
        _random_cluster(core, rng, 300)
        pods = _workloads(rng, 1_500)
        trace = []
        for cycle in range(5):
            now = NOW + cycle
            for p in pods[cycle * 300:(cycle + 1) * 300]:
                core.add_pod(p, now)
            trace.append(_cycle(core, now))
            placed = sorted(core.framework.placed)
            for uid in rng.sample(placed, min(len(placed), 40)):
                core.release(uid, now)
            for i in rng.sample(range(300), 20):
                core.on_metric(metric(f"n{i:04}", now, cpu=rng.randrange(0, 8_000), memory=GI), now)
        return trace

    with _top_rows(top_rows):
        trace = _both(seed, LEAN if profile == "lean" else None, drive, scalar=scalar)
    flat = [t for cycle in trace for t in cycle]
    assert sum(1 for _, name, _ in flat if name is not None) > 500


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(cluster=cluster_st(min_nodes=2, max_nodes=24), data=st.data(), seed=st.integers(0, 3),
       top_rows=st.sampled_from((1, 3, 64)), lean=st.booleans(), scalar=st.booleans())
def test_random_clusters_place_as_the_array_pick(cluster: Cluster, data: st.DataObject, seed: int, top_rows: int,
                                                 lean: bool, scalar: bool) -> None:
    """Random clusters of random_cluster.py (labels, taints, thresholds, metrics fresh or expired,
    assigned pods) and random pod classes of several replicas each, interleaved, over three cycles
    with releases between them: both paths decide alike."""
    specs = data.draw(st.lists(st.booleans().flatmap(lambda small: pod_st("c", small=small)), min_size=1,
                               max_size=6), label="classes")
    replicas = data.draw(st.lists(st.integers(1, 8), min_size=len(specs), max_size=len(specs)), label="replicas")
    order = random.Random(seed)
    pods = [msgspec.structs.replace(s, uid=f"c{j}-{r}", name=f"c{j}-{r}")
            for j, (s, k) in enumerate(zip(specs, replicas)) for r in range(k)]
    order.shuffle(pods)

    def drive(core: Scheduler) -> list[Any]:
        for spec in cluster.nodes:
            core.on_node(spec, NOW)
        for nr in cluster.resources:
            if nr is not None:
                core.on_node_resource(nr, NOW)
        for m in cluster.metrics:
            if m is not None:
                core.on_metric(m, NOW)
        for spec, i, at in cluster.assigned:
            core.adopt(spec, cluster.nodes[i].name, at)
        trace = []
        third = len(pods) // 3 + 1
        for cycle in range(3):
            for p in pods[cycle * third:(cycle + 1) * third]:
                core.add_pod(p, NOW + cycle)
            trace.append(_cycle(core, NOW + cycle))
            placed = sorted(core.framework.placed)
            for uid in placed[::3]:
                core.release(uid, NOW + cycle)
        return trace

    with _top_rows(top_rows):
        trace = _both(seed, LEAN if lean else None, drive, scalar=scalar)
    event(f"placed: {min(sum(1 for c in trace for _, name, _ in c if name), 20) // 5 * 5}+")


@settings(max_examples=400, deadline=None)
@given(top_rows=st.sampled_from((1, 3, 8, 64)),
       blocks=st.lists(st.tuples(st.integers(-1, 300), st.integers(1, 150)), min_size=1, max_size=6),
       data=st.data())
def test_a_build_keeps_every_row_at_or_above_the_top_rows_th_best_score(
        top_rows: int, blocks: list[tuple[int, int]], data: st.DataObject) -> None:
    """The build's three ways of grouping (the best rows all tied, a few rows, many rows of several
    scores) against the definition: floor = the top_rows-th best score (0 with few feasible rows),
    every row scoring at least it in its score's bucket, rows ascending. Scores come in blocks of
    equal ones, shuffled: ties of every size, at the best score and at the floor."""
    scores = [score for score, count in blocks for _ in range(count)]
    masked = np.array(data.draw(st.permutations(scores), label="masked"), np.int64)
    n = len(masked)
    with _top_rows(top_rows):
        b = ScoreBuckets(masked)
    floor = 0 if n <= top_rows else max(int(np.sort(masked)[n - top_rows]), 0)
    want: dict[int, list[int]] = {}
    for i, s in enumerate(masked.tolist()):
        if s >= floor:
            want.setdefault(s, []).append(i)
    assert b.floor == floor and b.rows == want
    assert b.top == (max(want) if want else -1)
    event("tied best" if len(want) == 1 and len(want[b.top]) >= top_rows else
          "few rows" if sum(map(len, want.values())) <= 2 * top_rows else "many rows")
