"""DefaultPreemption (PostFilter): victims per node, the node chosen, the class rules and the nomination.

Cases follow the Kubernetes DefaultPreemption tests (``TestSelectNodesForPreemption``,
``TestPickOneNodeForPreemption``): one row per case, a cluster of bound pods (uid → node, cpu,
priority, start), a preemptor, the node and victims expected.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec
import pytest
from sched_helpers import GI, node, pod, scheduler

from colo.messages import OwnerReference, PodSpec, Resources
from colo.messages.quotas import PREEMPTIBLE_LABEL
from colo_scheduler.core import CycleOutcome, Scheduler

NOW = 100.0


@dataclass(frozen=True)
class Bound:
    """A pod bound on ``node`` at ``at`` with ``cpu`` milli-cores and ``priority``."""

    uid: str
    node: str
    cpu: int
    priority: int
    at: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


def spec_of(b: Bound) -> PodSpec:
    s = pod(b.uid, b.cpu, GI, priority=b.priority)
    return msgspec.structs.replace(s, **b.extra) if b.extra else s


def cluster(nodes: dict[str, int], pods: list[Bound], **settings: Any) -> Scheduler:
    s = scheduler(seed=1, **settings)
    for name, cpu in nodes.items():
        s.on_node(node(name, cpu=cpu, memory=64 * GI), 0.0)
    for b in pods:
        assert s.adopt(spec_of(b), b.node, b.at)
    return s


def preempt(s: Scheduler, spec: PodSpec, now: float = NOW) -> CycleOutcome:
    s.add_pod(spec, now)
    return s.schedule_cycle(now)


def prod(uid: str = "p", cpu: int = 2000, **kw: Any) -> PodSpec:
    s = pod(uid, cpu, GI, priority=9500)
    return msgspec.structs.replace(s, **kw) if kw else s


@dataclass(frozen=True)
class Case:
    name: str
    nodes: dict[str, int]
    pods: list[Bound]
    preemptor: PodSpec
    node: str  # "" = no nomination
    victims: frozenset[str] = frozenset()


def budget(owner: str, max_unavailable: int) -> dict[str, Any]:
    return {"owner": OwnerReference(kind="Job", name=owner, uid=owner), "max_unavailable": max_unavailable}


CASES = [
    Case("one node, the only lower-priority pod goes", {"n1": 4000},
         [Bound("a", "n1", 4000, 5500)], prod(), "n1", frozenset({"a"})),
    Case("minimal set: lowest priorities, higher one reprieved", {"n1": 4000},
         [Bound("low1", "n1", 1000, 5100), Bound("low2", "n1", 1000, 5200), Bound("mid", "n1", 2000, 5300)],
         prod(), "n1", frozenset({"low1", "low2"})),
    Case("only as many victims as needed", {"n1": 4000},
         [Bound("a", "n1", 1000, 5500), Bound("b", "n1", 1000, 5500), Bound("c", "n1", 1000, 5500),
          Bound("d", "n1", 1000, 5500)], prod(cpu=1500), "n1", frozenset({"c", "d"})),
    Case("equal priority: the most recently started go", {"n1": 3000},
         [Bound("old", "n1", 1000, 5500, at=1.0), Bound("mid", "n1", 1000, 5500, at=2.0),
          Bound("new", "n1", 1000, 5500, at=3.0)], prod(cpu=1000), "n1", frozenset({"new"})),
    Case("lower highest-victim priority wins", {"n1": 2000, "n2": 2000},
         [Bound("a", "n1", 2000, 5600), Bound("b", "n2", 2000, 5400)], prod(), "n2", frozenset({"b"})),
    Case("smaller sum of victim priorities wins", {"n1": 2000, "n2": 2000},
         [Bound("a1", "n1", 1000, 5500), Bound("a2", "n1", 1000, 5500),
          Bound("b1", "n2", 1000, 5500), Bound("b2", "n2", 1000, 3500)], prod(), "n2", frozenset({"b1", "b2"})),
    Case("fewest victims wins", {"n1": 2000, "n2": 2000},
         [Bound("a1", "n1", 1000, 5500), Bound("a2", "n1", 1000, 5500), Bound("b", "n2", 2000, 5500)],
         prod(), "n2", frozenset({"b"})),
    Case("latest start of the highest-priority victims wins", {"n1": 2000, "n2": 2000},
         [Bound("a", "n1", 2000, 5500, at=10.0), Bound("b", "n2", 2000, 5500, at=20.0)],
         prod(), "n2", frozenset({"b"})),
    Case("tie: lowest row", {"n1": 2000, "n2": 2000},
         [Bound("a", "n1", 2000, 5500), Bound("b", "n2", 2000, 5500)], prod(), "n1", frozenset({"a"})),
    Case("budget: a node without violation wins over lower priorities", {"n1": 2000, "n2": 2000},
         [Bound("a", "n1", 2000, 3500, extra=budget("job-a", 0)), Bound("b", "n2", 2000, 5500)],
         prod(), "n2", frozenset({"b"})),
    Case("budget: violating victims reprieved first on a node", {"n1": 3000},
         [Bound("a", "n1", 1000, 5500, extra=budget("job-a", 0)), Bound("b", "n1", 1000, 5500),
          Bound("c", "n1", 1000, 5500)], prod(cpu=1000), "n1", frozenset({"c"})),
    Case("budget: violating anyway when nothing else helps", {"n1": 2000},
         [Bound("a", "n1", 2000, 5500, extra=budget("job-a", 0))], prod(), "n1", frozenset({"a"})),
    Case("equal priority is never a victim", {"n1": 2000},
         [Bound("a", "n1", 2000, 9500)], prod(), ""),
    Case("not enough even with every victim gone", {"n1": 2000},
         [Bound("a", "n1", 1000, 5500), Bound("b", "n1", 1000, 9600)], prod(), ""),
    Case("a node the selector refuses is no candidate", {"n1": 2000},
         [Bound("a", "n1", 2000, 5500)], prod(node_selector={"zone": "b"}), ""),
    Case("pod-count limit helped by removing pods", {"n1": 8000},
         [Bound("a", "n1", 100, 5500), Bound("b", "n1", 100, 5600)], prod(cpu=100), "n1", frozenset({"a"})),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_victims_and_node(case: Case) -> None:
    s = cluster(case.nodes, case.pods)
    if case.name.startswith("pod-count"):
        s.on_node(msgspec.structs.replace(node("n1", cpu=8000, memory=64 * GI, pods=2)), 0.0)
    out = preempt(s, case.preemptor)
    assert not out.placements
    result = out.failures[0].result
    if not case.node:
        assert result.nominated < 0 and not out.evictions
        return
    assert s.table.names[result.nominated] == case.node
    assert {e.pod.uid for e in out.evictions} == case.victims
    assert all(e.node == case.node for e in out.evictions)
    assert all(e.reason == f"Preempted by default/{case.preemptor.name}" for e in out.evictions)


RULES = [
    ("prod is never preempted by batch", Bound("v", "n1", 2000, 4000, extra={"priority_class": "prod"}),
     pod("b", 2000, GI, priority=5900)),
    ("preemption_policy Never preempts nothing", Bound("v", "n1", 2000, 5500),
     prod(preemption_policy="Never")),
    ("non-preemptible label", Bound("v", "n1", 2000, 5500, extra={"labels": {PREEMPTIBLE_LABEL: "false"}}), prod()),
    ("daemonset pod", Bound("v", "n1", 2000, 5500, extra={"daemonset": True}), prod()),
    ("static pod", Bound("v", "n1", 2000, 5500, extra={"static": True}), prod()),
    ("mirror pod", Bound("v", "n1", 2000, 5500, extra={"mirror": True}), prod()),
]


@pytest.mark.parametrize("victim,preemptor", [r[1:] for r in RULES], ids=[r[0] for r in RULES])
def test_class_rules_keep_the_victim(victim: Bound, preemptor: PodSpec) -> None:
    s = cluster({"n1": 2000}, [victim])
    out = preempt(s, preemptor)
    assert out.failures and out.failures[0].result.nominated < 0
    assert not out.evictions


def test_same_victim_preemptible_without_the_rule() -> None:
    # the control of the rules above: the same cluster with a plain victim is preempted
    s = cluster({"n1": 2000}, [Bound("v", "n1", 2000, 5500)])
    assert [e.pod.uid for e in preempt(s, prod()).evictions] == ["v"]


class DenyAll:
    """A profile plugin refusing every victim (as the ElasticQuota plugin does within min)."""

    name = "DenyAll"
    events: frozenset[str] = frozenset()

    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []

    def victim_allowed(self, state: Any, preemptor: Any, victim: Any) -> bool:
        self.asked.append((preemptor.uid, victim.uid))
        return False


def test_victim_filter_plugins_are_asked() -> None:
    s = cluster({"n1": 2000}, [Bound("v", "n1", 2000, 5500)])
    deny = DenyAll()
    assert s.nominator is not None
    plugin = next(p for p in s.framework.profile.post_filter)
    plugin.attach(s.table, s.framework.profile.filter, [deny], s.waiting)  # type: ignore[attr-defined]
    s.nominator = plugin.nominator  # type: ignore[attr-defined]
    out = preempt(s, prod())
    assert deny.asked == [("p", "v")] and not out.evictions


def test_record_names_node_victims_and_criteria() -> None:
    s = cluster({"n1": 2000, "n2": 2000}, [Bound("a", "n1", 2000, 5600, at=5.0), Bound("b", "n2", 2000, 5400, at=7.0)])
    out = preempt(s, prod())
    rec = out.failures[0].result.record
    assert rec is not None and rec.preemption is not None
    js = rec.to_json(s.table.names)
    assert js["nominated_node"] == "n2"
    pre = js["preemption"]
    assert isinstance(pre, dict)
    assert pre["victims"] == [{"uid": "b", "name": "b", "priority": 5400, "started_at": 7.0}]
    assert pre["criteria"]["highest_victim_priority"] == 5400
    assert pre["runner_up"] == "n1" and pre["runner_up_criteria"]["highest_victim_priority"] == 5600
    assert s.decision("p") is rec


def nominated_cluster() -> tuple[Scheduler, int]:
    """n1 full of one batch pod, n2 full of a higher batch pod: the prod pod preempts on n1."""
    s = cluster({"n1": 2000, "n2": 2000}, [Bound("a", "n1", 2000, 5100), Bound("b", "n2", 2000, 5500)])
    out = preempt(s, prod())
    assert [e.pod.uid for e in out.evictions] == ["a"]
    return s, out.failures[0].result.nominated


def test_nomination_holds_the_room_against_a_lower_priority_pod() -> None:
    s, row = nominated_cluster()
    s.release("a", NOW + 0.1)  # the victim left
    # a lower-priority pod arrives while the preemptor is in backoff: the room is held
    s.add_pod(pod("late", 2000, GI, priority=5400), NOW + 0.2)
    out = s.schedule_cycle(NOW + 0.2)
    assert not out.placements and [f.pod.uid for f in out.failures] == ["late"]
    assert not out.evictions  # "late" preempts nothing: b's priority is higher, and the held room is no pod
    # the store's sums (without the hold) do not give the room away either
    s.set_allocated("n1", Resources(), 0)
    s.add_pod(pod("later", 2000, GI, priority=5000), NOW + 0.3)
    assert not s.schedule_cycle(NOW + 0.3).placements
    # next cycle after the backoff: the preemptor is placed on its nominated node
    out = s.schedule_cycle(NOW + 2.0)
    assert [(p.pod.uid, p.node) for p in out.placements] == [("p", "n1")]
    assert s.nominator is not None and s.nominator.get("p") is None
    assert s.table.free[row][0] == 0  # the hold released, the pod booked once


def test_no_second_eviction_while_the_victims_leave() -> None:
    s, row = nominated_cluster()
    out = s.schedule_cycle(NOW + 2.0)  # the preemptor retried, its victim still there
    assert not out.evictions and not out.placements
    f = out.failures[0]
    assert f.result.nominated == row
    assert f.result.record is not None and f.result.record.preemption is not None
    assert f.result.record.preemption.kept


def test_nomination_holds_the_room_in_the_same_cycle() -> None:
    # n1: 1000 m free beside a 2000 m victim; the prod pod needs all 3000 m. A smaller, lower-priority pod
    # later in the same cycle must not take the free 1000 m, or the preemptor would not fit once the
    # victim has left.
    s = cluster({"n1": 3000}, [Bound("a", "n1", 2000, 5500)])
    s.add_pod(prod(cpu=3000), NOW)
    s.add_pod(pod("small", 1000, GI, priority=5000), NOW)
    out = s.schedule_cycle(NOW)
    assert [e.pod.uid for e in out.evictions] == ["a"]
    assert not out.placements and {f.pod.uid for f in out.failures} == {"p", "small"}
    s.release("a", NOW + 0.5)
    out = s.schedule_cycle(NOW + 2.0)
    assert [(p.pod.uid, p.node) for p in out.placements] == [("p", "n1")]


def test_lapsed_nomination_releases_the_room() -> None:
    s, row = nominated_cluster()
    assert s.nominator is not None
    held = int(s.table.free[row][0])
    s.queue.remove("p")  # the preemptor is not retried (deleted)
    s.schedule_cycle(NOW + 119.0)
    assert s.nominator.get("p") is not None and int(s.table.free[row][0]) == held
    s.schedule_cycle(NOW + 120.0)  # nomination_timeout_s after it was made
    assert s.nominator.get("p") is None
    assert int(s.table.free[row][0]) == held + 2000


def test_explain_changes_nothing() -> None:
    s = cluster({"n1": 2000}, [Bound("a", "n1", 2000, 5500)])
    s.add_pod(prod(), NOW)
    rec = s.explain("p", NOW)
    assert rec is not None and rec.preemption is not None and rec.nominated == 0
    assert s.nominator is not None and len(s.nominator) == 0
    assert int(s.table.free[0][0]) == 0
    out = s.schedule_cycle(NOW)
    assert [e.pod.uid for e in out.evictions] == ["a"]


def test_pods_that_fit_never_reach_preemption() -> None:
    s = cluster({"n1": 4000}, [Bound("a", "n1", 2000, 5500)])
    out = preempt(s, prod())
    assert [p.pod.uid for p in out.placements] == ["p"] and not out.evictions
    assert s.nominator is not None and len(s.nominator) == 0


def test_equal_pod_failing_first_does_not_unhold_the_room() -> None:
    # an equal pod (same class) that fails earlier in the cycle must not decide for the nominated
    # preemptor: the preemptor's PostFilter runs and holds its room again
    s = cluster({"n1": 2000}, [Bound("a", "n1", 2000, 5100)])
    row = preempt(s, prod()).failures[0].result.nominated  # "p" (created_at 0) nominated, "a" still there
    s.add_pod(msgspec.structs.replace(prod("q"), created_at=-1.0), NOW + 1.0)  # sorts before "p"
    out = s.schedule_cycle(NOW + 2.0)
    assert [f.pod.uid for f in out.failures] == ["q", "p"] and not out.evictions
    assert out.failures[1].result.nominated == row
    s.release("a", NOW + 2.1)
    s.add_pod(pod("late", 2000, GI, priority=5000), NOW + 2.2)
    assert "late" not in {p.pod.uid for p in s.schedule_cycle(NOW + 2.2).placements}


def test_a_preemptor_bound_elsewhere_frees_its_held_room() -> None:
    s, row = nominated_cluster()
    assert s.nominator is not None
    held = int(s.table.free[row][0])
    s.forget("p")  # bound by another replica
    assert s.nominator.get("p") is None and int(s.table.free[row][0]) == held + 2000
