"""Queueing hints: a change of node n wakes exactly the unschedulable pods that now fit n.

Table-driven: every helpful change must wake its pod before the timed retry (no
starvation), every irrelevant change must leave it parked without an attempt, and a
randomized event sequence must place the same pods on the same nodes as waking every
pod a rejecting plugin registered the event for (the rule before hints).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from sched_helpers import GI, MI, metric, node, node_resource, pod, scheduler

from colo.messages import Resources, Taint, Toleration
from colo_scheduler.core import Scheduler
from colo_scheduler.framework.interface import CycleState

NOW = 1000.0
SOON = NOW + 5.0  # well before the timed retry (60 s)

Setup = Callable[[Scheduler], None]


def _park(s: Scheduler, uid: str) -> None:
    """Run a cycle in which pod ``uid`` finds no node; it must end up unschedulable."""
    out = s.schedule_cycle(NOW)
    assert uid in {f.pod.uid for f in out.failures}
    assert uid in s.queue.unschedulable


def _full_node(s: Scheduler) -> None:
    """Node n1 (1000m) fully taken by pod "big"; n2 too small for a 600m pod."""
    s.on_node(node("n1", cpu=1000), NOW)
    s.on_node(node("n2", cpu=500), NOW)
    s.add_pod(pod("big", 1000, MI), NOW)
    assert [p.node for p in s.schedule_cycle(NOW).placements] == ["n1"]
    s.add_pod(pod("w", 600, MI, created_at=1.0), NOW)
    _park(s, "w")


def _batch_short(s: Scheduler) -> None:
    """A batch pod needing 4000m batch-cpu on nodes offering 1000m."""
    for name in ("n1", "n2"):
        s.on_node(node(name), NOW)
        s.on_node_resource(node_resource(name, batch_cpu=1000, batch_memory=64 * GI), NOW)
    s.add_pod(pod("w", batch_cpu=4000, batch_memory=GI), NOW)
    _park(s, "w")


def _loaded(s: Scheduler) -> None:
    """Both nodes report 90 % cpu usage (LoadAware threshold 65 %)."""
    for name in ("n1", "n2"):
        s.on_node(node(name, cpu=10_000, memory=64 * GI), NOW)
        s.on_metric(metric(name, NOW, cpu=9000, memory=GI), NOW)
    s.add_pod(pod("w", 500, MI), NOW)
    _park(s, "w")


def _selector(s: Scheduler) -> None:
    """A pod selecting zone=b while every node is zone=a."""
    s.on_node(node("n1", labels={"zone": "a"}), NOW)
    s.add_pod(pod("w", 100, MI, selector={"zone": "b"}), NOW)
    _park(s, "w")


def _capped(s: Scheduler) -> None:
    """App "web" capped at one pod per node on a single node that holds one."""
    s.on_node(node("n1"), NOW)
    s.add_pod(pod("web-0", 100, MI, app="web", max_per_node=1), NOW)
    assert len(s.schedule_cycle(NOW).placements) == 1
    s.add_pod(pod("w", 100, MI, app="web", max_per_node=1, created_at=1.0), NOW)
    _park(s, "w")


TAINT = Taint(key="dedicated", value="x", effect="NoSchedule")

HELPFUL: list[tuple[Setup, Setup, str]] = [
    (_full_node, lambda s: s.release("big", SOON), "n1"),
    (_full_node, lambda s: s.on_node(node("n3", cpu=2000), SOON), "n3"),
    (_full_node, lambda s: s.on_node(node("n2", cpu=800), SOON), "n2"),
    (_full_node, lambda s: s.set_allocated("n1", Resources(), 0), "n1"),
    (_batch_short, lambda s: s.on_node_resource(node_resource("n2", batch_cpu=8000, batch_memory=64 * GI),
                                                SOON), "n2"),
    (_loaded, lambda s: s.on_metric(metric("n2", SOON, cpu=1000, memory=GI), SOON), "n2"),
    (_selector, lambda s: s.on_node(node("n1", labels={"zone": "b"}), SOON), "n1"),
    (_capped, lambda s: s.release("web-0", SOON), "n1"),
]


@pytest.mark.parametrize(("setup", "event", "expect_node"), HELPFUL,
                         ids=["release-on-full-node", "node-added", "node-grown", "store-allocation-dropped",
                              "batch-allocatable-grew", "load-dropped", "labels-now-match",
                              "app-instance-released"])
def test_helpful_change_wakes_and_places_before_retry(setup: Setup, event: Setup, expect_node: str) -> None:
    s = scheduler()
    setup(s)
    event(s)
    out = s.schedule_cycle(SOON)
    assert [(p.pod.uid, p.node) for p in out.placements] == [("w", expect_node)]
    assert s.hint_stats["woken"] == 1


IRRELEVANT: list[tuple[Setup, Setup]] = [
    (_full_node, lambda s: s.on_node(node("n3", cpu=500), SOON)),
    (_full_node, lambda s: s.on_node(node("n2", cpu=500, labels={"x": "y"}), SOON)),
    (_full_node, lambda s: s.on_metric(metric("n1", SOON, cpu=10), SOON)),
    (_full_node, lambda s: s.on_node_resource(node_resource("n1", batch_cpu=9000, batch_memory=GI), SOON)),
    (_batch_short, lambda s: s.on_node_resource(node_resource("n2", batch_cpu=2000, batch_memory=64 * GI),
                                                SOON)),
    (_loaded, lambda s: s.on_metric(metric("n2", SOON, cpu=9500, memory=GI), SOON)),
    (_loaded, lambda s: s.on_node(node("n3", cpu=10_000, memory=64 * GI, taints=[TAINT]), SOON)),
    (_selector, lambda s: s.on_node(node("n1", labels={"zone": "c"}), SOON)),
    (_capped, lambda s: s.on_metric(metric("n1", SOON, cpu=1), SOON)),
]


@pytest.mark.parametrize(("setup", "event"), IRRELEVANT,
                         ids=["small-node-added", "labels-changed-node-still-small", "metric-on-full-node",
                              "batch-resource-for-native-pod", "batch-allocatable-still-short",
                              "load-rose", "tainted-node-added", "labels-still-mismatch",
                              "metric-on-capped-node"])
def test_irrelevant_change_leaves_pod_parked_without_attempt(setup: Setup, event: Setup) -> None:
    s = scheduler()
    setup(s)
    attempts = s.queue.unschedulable["w"].pod.attempts
    event(s)
    out = s.schedule_cycle(SOON)
    assert out.placements == [] and out.failures == []
    assert s.queue.unschedulable["w"].pod.attempts == attempts
    assert s.hint_stats["woken"] == 0


def test_timed_retry_still_reevaluates_without_events() -> None:
    s = scheduler()
    _full_node(s)
    retry = s.settings.unschedulable_retry_s
    assert s.schedule_cycle(NOW + retry - 1.0).failures == []
    out = s.schedule_cycle(NOW + retry)
    assert [f.pod.uid for f in out.failures] == ["w"]


def test_equivalent_pods_fail_once_per_cycle_and_others_still_place() -> None:
    s = scheduler()
    s.on_node(node("n1", cpu=1000), NOW)
    for k in range(4):
        s.add_pod(pod(f"same-{k}", 600, MI, created_at=float(k)), NOW)
    s.add_pod(pod("small", 300, MI, created_at=9.0), NOW)
    s.add_pod(pod("tolerant", 600, MI, created_at=10.0,
                  tolerations=[Toleration(key="k", operator="Exists", effect="NoSchedule")]), NOW)
    out = s.schedule_cycle(NOW)
    assert [(p.pod.uid, p.node) for p in out.placements] == [("same-0", "n1"), ("small", "n1")]
    assert sorted(f.pod.uid for f in out.failures) == ["same-1", "same-2", "same-3", "tolerant"]
    # same-1 and tolerant are evaluated; same-2 and same-3 reuse same-1's verdict.
    assert s.hint_stats["equivalent_failures"] == 2
    reasons = {f.pod.uid: f.result.reasons for f in out.failures}
    assert reasons["same-3"] == reasons["same-1"] == {"Insufficient cpu": 1}


class _WakeAll(Scheduler):
    """The rule before hints: wake every pod whose rejecting plugin registered an event seen."""

    def wake_helped(self, state: CycleState, now: float) -> int:
        events, self._events, self._dirty_rows = self._events, set(), set()
        uids = [uid for uid, u in self.queue.unschedulable.items()
                if not u.rejectors or any(e in self.interest.get(r, frozenset())
                                          for r in u.rejectors for e in events)]
        return self.queue.wake(uids, now)


def _run(s: Scheduler, seed: int, equivalence: bool) -> list[tuple[float, str, str]]:
    s._equivalence = equivalence
    rng = np.random.default_rng(seed)
    placed: list[tuple[float, str, str]] = []
    names = [f"n{i}" for i in range(6)]
    for name in names:
        s.on_node(node(name, cpu=8000, memory=32 * GI), 0.0)
        s.on_node_resource(node_resource(name, batch_cpu=6000, batch_memory=16 * GI), 0.0)
    shapes = [(1000, GI, 0), (2500, 4 * GI, 0), (0, 0, 1500), (0, 0, 4000)]
    running: list[str] = []
    k = 0
    for step in range(40):
        now = 20.0 * step
        for _ in range(int(rng.integers(0, 6))):
            cpu, mem, batch = shapes[int(rng.integers(len(shapes)))]
            spec = (pod(f"p{k}", cpu, mem, created_at=float(k)) if not batch
                    else pod(f"p{k}", batch_cpu=batch, batch_memory=GI, created_at=float(k)))
            s.add_pod(spec, now)
            k += 1
        for _ in range(int(rng.integers(0, 3))):
            if running:
                s.release(running.pop(int(rng.integers(len(running)))), now)
        name = names[int(rng.integers(len(names)))]
        s.on_metric(metric(name, now, cpu=int(rng.integers(0, 7000)), memory=GI), now)
        name = names[int(rng.integers(len(names)))]
        s.on_node_resource(node_resource(name, batch_cpu=int(rng.integers(0, 9000)), batch_memory=16 * GI), now)
        out = s.schedule_cycle(now)
        for p in out.placements:
            placed.append((now, p.pod.uid, p.node))
            running.append(p.pod.uid)
    return placed


@pytest.mark.parametrize("seed", [1, 2, 3, 4], ids=["seed-1", "seed-2", "seed-3", "seed-4"])
def test_hints_and_equivalence_place_like_waking_everything(seed: int) -> None:
    settings = {"unschedulable_retry_s": 600.0}
    reference = _run(_WakeAll(scheduler(**settings).settings), seed, equivalence=False)
    hinted_sched = scheduler(**settings)
    hinted = _run(hinted_sched, seed, equivalence=True)
    assert len(reference) > 20
    assert hinted == reference
    assert hinted_sched.hint_stats["skipped"] > 0  # the hints did skip work
