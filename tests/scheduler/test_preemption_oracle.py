"""DefaultPreemption against a brute-force oracle (hypothesis): small clusters of bound pods, one preemptor.

The oracle enumerates every subset of every node's pods: a preemption happens exactly when some node has
a subset of allowed victims whose removal makes room; the chosen victims are allowed (priority below the
preemptor's, no protection), make room, are minimal (none could be spared) and, where no disruption budget
reorders the reprieve, their highest priority is the lowest any sufficient subset on that node has. The node and the exact victims also match a plain
re-implementation of the Kubernetes reprieve and node order written with Python ints.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import msgspec
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sched_helpers import GI, node, pod, scheduler

from colo.messages import OwnerReference, PodSpec
from colo.messages.quotas import PREEMPTIBLE_LABEL
from colo_scheduler.plugins.preemption.index import PriorityIndex, threshold
from colo_scheduler.plugins.preemption.victims import select_victims, select_victims_fit
from colo_scheduler.podinfo import PodInfo

NOW = 100.0


@dataclass(frozen=True)
class P:
    uid: str
    node: int
    cpu: int
    priority: int
    at: float
    protected: str  # "", "label", "daemonset", "prod"
    owner: str  # "" or an owner with max_unavailable 0/1
    budget: int


def spec(p: P) -> PodSpec:
    s = pod(p.uid, p.cpu, GI, priority=p.priority)
    kw: dict[str, object] = {}
    if p.protected == "label":
        kw["labels"] = {PREEMPTIBLE_LABEL: "false"}
    elif p.protected == "daemonset":
        kw["daemonset"] = True
    elif p.protected == "prod":
        kw["priority_class"] = "prod"
    if p.owner:
        kw["owner"] = OwnerReference(kind="Job", name=p.owner, uid=p.owner)
        kw["max_unavailable"] = p.budget
    return msgspec.structs.replace(s, **kw) if kw else s


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[int], list[P], tuple[int, int]]:
    caps = draw(st.lists(st.sampled_from([1000, 2000, 3000, 4000]), min_size=1, max_size=3))
    pods: list[P] = []
    for i, cap in enumerate(caps):
        used = 0
        for k in range(draw(st.integers(0, 4))):
            cpu = draw(st.sampled_from([500, 1000, 1500]))
            if used + cpu > cap:
                break
            used += cpu
            owner = draw(st.sampled_from(["", "", "job-a", "job-b"]))
            pods.append(P(f"n{i}-{k}", i, cpu, draw(st.sampled_from([3500, 5100, 5500, 5900, 9500])),
                          float(draw(st.integers(0, 3))), draw(st.sampled_from(["", "", "", "label", "daemonset",
                                                                                "prod"])),
                          owner, {"job-a": 0, "job-b": 1}.get(owner, -1)))
    preemptor = (draw(st.sampled_from([1000, 2000, 3000, 4000])), draw(st.sampled_from([5500, 5900, 9500])))
    return caps, pods, preemptor


def allowed(v: P, prio: int) -> bool:
    prio_class = "prod" if prio >= 9000 else "batch"
    return v.priority < prio and v.protected in ("", "prod") and not (v.protected == "prod" and prio_class == "batch")


def reprieve(free: int, req: int, eligible: list[P]) -> tuple[list[P], int] | None:
    order = sorted(eligible, key=lambda v: (-v.priority, v.at, v.uid))
    if free + sum(v.cpu for v in order) < req:
        return None
    spent: dict[str, int] = {}
    breaks = {}
    for v in order:
        if v.budget >= 0 and v.owner:
            left = spent.get(v.owner, v.budget)
            spent[v.owner] = left - 1
            breaks[v.uid] = left <= 0
        else:
            breaks[v.uid] = False
    room = free + sum(v.cpu for v in order)
    victims: list[P] = []
    violations = 0
    for flag in (True, False):
        for v in order:
            if breaks[v.uid] is not flag:
                continue
            if room - v.cpu >= req:
                room -= v.cpu
            else:
                victims.append(v)
                violations += flag
    return victims, violations


def order_key(row: int, victims: list[P], violations: int) -> tuple[float, ...]:
    top = max(v.priority for v in victims)
    earliest = min(v.at for v in victims if v.priority == top)
    return (violations, top, sum(v.priority for v in victims), len(victims), -earliest, row)


@pytest.mark.parametrize("arithmetic", [True, False], ids=["arithmetic", "row-simulation"])
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=clusters())
def test_preemption_matches_the_oracle(arithmetic: bool, case: tuple[list[int], list[P], tuple[int, int]]) -> None:
    caps, pods, (req, prio) = case
    s = scheduler(seed=1)
    s.framework.profile.post_filter[0].fit_arithmetic = arithmetic  # type: ignore[attr-defined]
    for i, cap in enumerate(caps):
        s.on_node(node(f"n{i}", cpu=cap, memory=64 * GI), 0.0)
    for p in pods:
        assert s.adopt(spec(p), f"n{p.node}", p.at)
    free = [cap - sum(p.cpu for p in pods if p.node == i) for i, cap in enumerate(caps)]
    s.add_pod(pod("pre", req, GI, priority=prio), NOW)
    out = s.schedule_cycle(NOW)
    if any(f >= req for f in free):
        assert [p.pod.uid for p in out.placements] == ["pre"] and not out.evictions
        return
    # brute force: nodes with a sufficient subset of allowed victims
    feasible: dict[int, list[tuple[P, ...]]] = {}
    for i in range(len(caps)):
        eligible = [p for p in pods if p.node == i and allowed(p, prio)]
        subsets = [c for k in range(1, len(eligible) + 1) for c in combinations(eligible, k)
                   if free[i] + sum(v.cpu for v in c) >= req]
        if subsets:
            feasible[i] = subsets
    result = out.failures[0].result
    if not feasible:
        assert result.nominated < 0 and not out.evictions
        return
    row = result.nominated
    assert row in feasible
    victims = [p for p in pods if p.uid in {e.pod.uid for e in out.evictions}]
    assert len(victims) == len(out.evictions) and all(e.node == f"n{row}" for e in out.evictions)
    assert all(v.node == row and allowed(v, prio) for v in victims)
    room = free[row] + sum(v.cpu for v in victims)
    assert room >= req
    assert all(room - v.cpu < req for v in victims)  # minimal: none could be spared
    if not any(p.owner for p in pods if p.node == row):  # budgets reprieve breaking victims first
        assert max(v.priority for v in victims) == min(max(v.priority for v in c) for c in feasible[row])
    # the exact choice: the plain reprieve per node and the Kubernetes order over nodes
    options = []
    for i in feasible:
        got = reprieve(free[i], req, [p for p in pods if p.node == i and allowed(p, prio)])
        assert got is not None
        options.append((order_key(i, *got), i, got[0]))
    _, want_row, want_victims = min(options)
    assert row == want_row
    assert {v.uid for v in victims} == {v.uid for v in want_victims}


@st.composite
def app_rows(draw: st.DrawFn) -> tuple[list[tuple[int, int, str, int, float]], int, str, int, int, int]:
    """One node's pods (cpu, priority, app, cap, start) and a preemptor (cpu, app, cap), a pod limit."""
    pods = draw(st.lists(st.tuples(st.sampled_from([0, 250, 500]), st.sampled_from([3500, 5100, 5500, 9500]),
                                   st.sampled_from(["web", "web", "etl", ""]), st.sampled_from([-1, 2]),
                                   st.sampled_from([0.0, 1.0, 2.0])), max_size=6))
    return (pods, draw(st.sampled_from([0, 500, 1000])), draw(st.sampled_from(["web", ""])),
            draw(st.integers(-1, 4)), draw(st.sampled_from([0, 3, 5, 6])), draw(st.sampled_from([1000, 2000])))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(app_rows())
def test_arithmetic_reprieve_equals_the_row_simulation(
        case: tuple[list[tuple[int, int, str, int, float]], int, str, int, int, int]) -> None:
    """select_victims_fit (Python ints) against select_victims (the row written, the filters re-run):
    pods of apps with a per-node cap, a pod-count limit, cpu and memory requests."""
    pods, cpu, app, cap, pod_limit, node_cpu = case
    s = scheduler(seed=1)
    s.on_node(node("n0", cpu=node_cpu, memory=4 * GI, pods=pod_limit), 0.0)
    for k, (c, prio, a, c_app, at) in enumerate(pods):
        s.adopt(pod(f"v{k}", c, GI // 2, priority=prio, app=a, max_per_node=c_app), "n0", at)
    pre = pod("pre", cpu, GI, priority=9999, app=app, max_per_node=cap)
    info = s.pod_info(pre, NOW)
    state = s.framework.begin_cycle(NOW)
    dependent = [f for f in s.framework.profile.filter if f.name in ("NodeResourcesFit", "MaxInstancePerNode")]
    potential = [ap for ap in s.table.node_pods[0].values() if allowed_spec(ap.pod, 9999)]
    before = s.table.free[0].copy(), {a: c.copy() for a, c in s.table.app_counts.items()}
    fast = select_victims_fit(state, info, 0, potential, {})
    slow = select_victims(state, info, 0, potential, dependent, {})
    assert (s.table.free[0] == before[0]).all()  # the simulation restored the row
    assert all((s.table.app_counts[a] == c).all() for a, c in before[1].items())
    if fast is None or slow is None:
        assert fast is None and slow is None
        return
    assert [ap.pod.uid for ap in fast.victims] == [ap.pod.uid for ap in slow.victims]
    assert (fast.row, fast.violations) == (slow.row, slow.violations)


def allowed_spec(victim: PodInfo, prio: int) -> bool:
    return victim.priority < prio and not victim.spec.daemonset and \
        victim.spec.labels.get(PREEMPTIBLE_LABEL) != "false"


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(["add", "release", "cycle", "node"]), st.integers(0, 30),
                          st.sampled_from([3500, 5450, 5500, 9500]), st.sampled_from([0, 500, 1000])), max_size=40),
       st.lists(st.integers(3000, 9999), min_size=1, max_size=4))
def test_priority_index_follows_the_table(ops: list[tuple[str, int, int, int]], asks: list[int]) -> None:
    """The incremental index equals the sums over the assigned pods after any sequence of placements,
    releases and new nodes, rebuilt in full only when the table grew."""
    s = scheduler(seed=1)
    for i in range(3):
        s.on_node(node(f"n{i}", cpu=4000, memory=64 * GI), 0.0)
    index = PriorityIndex(s.table)
    now = 1.0
    grown, seen_n = 0, -1
    for op, k, prio, cpu in ops:
        if op == "add":
            s.add_pod(pod(f"p{k}-{now}", cpu, GI // 4, priority=prio), now)
        elif op == "release" and s.table.assigned:
            s.release(sorted(s.table.assigned)[k % len(s.table.assigned)], now)
        elif op == "cycle":
            s.schedule_cycle(now)
        elif op == "node":
            s.on_node(node(f"m{k}", cpu=2000, memory=64 * GI), now)
        now += 1.0
        grown, seen_n = grown + (s.table.n != seen_n), s.table.n
        asked = asks[k % len(asks)]
        got = index.removable(asked)
        want = np.zeros((s.table.n, 7), np.int64)
        exact = np.zeros((s.table.n, 7), np.int64)
        for ap in s.table.assigned.values():
            if ap.pod.priority < threshold(asked):
                want[ap.node] += ap.pod.request
            if ap.pod.priority < asked:
                exact[ap.node] += ap.pod.request
        assert (got == want).all() and (got >= exact).all()
    assert index.rebuilds == grown  # incremental but for the first call and a grown table
