"""ElasticQuota plugin, table-driven: PreFilter verdicts and reasons, Reserve/Unreserve accounting, the
preemption rule hook (victim_allowed) and reclaim's choice of victims; then the core: borrowing idle min and
reclaiming it."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sched_helpers import node, pod, scheduler

from colo.messages import PREEMPTIBLE_LABEL, QUOTA_NAME_LABEL, ElasticQuota, PodSpec
from colo_scheduler.framework.interface import CycleState
from colo_scheduler.plugins.elasticquota import ElasticQuota as ElasticQuotaPlugin
from colo_scheduler.podinfo import PodInfo, make_pod_info
from colo_scheduler.table import NodeTable

N7 = 7
TOTAL = (20_000, 100 << 30, 0, 0, 0, 0, 110)  # cpu, memory, batch, mid, pods (the cluster's allocatable Σ)


def member(uid: str, quota: str, cpu: int = 1000, priority: int | None = None, memory: int = 0,
           preemptible: bool = True, namespace: str = "default") -> PodInfo:
    labels = {QUOTA_NAME_LABEL: quota} if quota else {}
    if not preemptible:
        labels[PREEMPTIBLE_LABEL] = "false"
    spec = msgspec.structs.replace(pod(uid, cpu=cpu, memory=memory, priority=priority), labels=labels,
                                   namespace=namespace)
    return make_pod_info(spec)


def plugin(*specs: ElasticQuota) -> ElasticQuotaPlugin:
    p = ElasticQuotaPlugin()
    for s in specs:
        assert p.apply(s) == []
    return p


TEAMS = (ElasticQuota(name="org", min={"cpu": 20_000}, max={"cpu": 20_000}),
         ElasticQuota(name="team-a", parent="org", min={"cpu": 10_000}, max={"cpu": 20_000}),
         ElasticQuota(name="team-b", parent="org", min={"cpu": 10_000}, max={"cpu": 15_000}))


def _state() -> CycleState:
    return CycleState(now=0.0, table=NodeTable())


# (case, pods already placed [(uid, quota, cpu)], pods pending [(uid, quota, cpu)], the pod, expected reason)
PREFILTER = [
    ("a pod of no quota passes", [], [], member("p", ""), None),
    ("within its runtime", [("a1", "team-a", 5000)], [("p", "team-a", 2000)], member("p", "team-a", 2000), None),
    ("idle min of a sibling is borrowed", [("b1", "team-b", 12_000)], [("p", "team-b", 2000)],
     member("p", "team-b", 2000), None),
    ("over its runtime: the sibling wants its min", [("a1", "team-a", 9000)],
     [("b", "team-b", 10_000), ("p", "team-a", 2000)], member("p", "team-a", 2000),
     "quota team-a: insufficient runtime quota cpu (used 9000 + 2000 > runtime 10000)"),
    ("over its max", [("b1", "team-b", 14_000)], [("p", "team-b", 2000)], member("p", "team-b", 2000),
     "quota team-b: exceeds max quota cpu (used 14000 + 2000 > max 15000)"),
    ("an ancestor's max (team-b borrowed before team-a asked)", [("a1", "team-a", 7000), ("b1", "team-b", 13_000)],
     [("p", "team-a", 1000)],
     member("p", "team-a", 1000), "quota org: exceeds max quota cpu (used 20000 + 1000 > max 20000)"),
    ("an unconstrained resource is not checked", [], [], member("p", "team-a", 0, memory=1 << 40), None),
    ("a label naming an unknown quota", [], [], member("p", "nope"), "quota nope: not found"),
    ("a label naming a parent quota", [], [], member("p", "org"),
     "quota org: has child quotas; pods belong to leaf quotas"),
]


@pytest.mark.parametrize(("case", "placed", "pending", "the_pod", "reason"), PREFILTER, ids=[c[0] for c in PREFILTER])
def test_pre_filter(case: str, placed: list[tuple[str, str, int]], pending: list[tuple[str, str, int]],
                    the_pod: PodInfo, reason: str | None) -> None:
    p = plugin(*TEAMS)
    table = NodeTable()
    for uid, quota, cpu in placed:
        p.reserve(table, member(uid, quota, cpu), 0, 0.0)
    for uid, quota, cpu in pending:
        p.add_pending(member(uid, quota, cpu))
    p.refresh(TOTAL)
    st = p.pre_filter(_state(), the_pod)
    assert (st.reason if st is not None else None) == reason


def test_reserve_unreserve_move_between_used_and_pending() -> None:
    p = plugin(*TEAMS)
    a = member("a1", "team-a", 3000)
    p.add_pending(a)
    book = p.book
    assert book.pending["team-a"][0] == 3000 and book.pending["org"][0] == 3000 and book.pending_pods["org"] == 1
    p.reserve(NodeTable(), a, 0, 1.0)
    assert book.pending["team-a"][0] == 0 and book.used["team-a"][0] == 3000 and book.used["org"][0] == 3000
    assert book.pods["team-a"] == 1 and p.chain_of(a) == ("team-a", "org")
    p.unreserve(NodeTable(), a, 0)  # back to the queue: pending again
    assert book.used["team-a"][0] == 0 and book.pending["team-a"][0] == 3000
    p.drop_pending("a1")
    assert book.pending["team-a"] == [0] * N7 and book.pending_pods["team-a"] == 0


def test_pods_of_no_quota_leave_no_trace() -> None:
    p = plugin(*TEAMS)
    x = member("x", "")
    p.add_pending(x)
    p.reserve(NodeTable(), x, 0, 0.0)
    assert not p.book.members and not p.book.waiting
    empty = ElasticQuotaPlugin()
    assert empty.pre_filter(_state(), x) is None and empty.statuses(0.0) == []


# (case, placed [(uid, quota, cpu)], pending, preemptor, victim, allowed)
VICTIMS = [
    ("a non-preemptible pod never", [], [], member("p", ""), member("v", "", preemptible=False), False),
    ("no quotas at all: the priority rules alone", [], [], member("p", ""), member("v", ""), True),
    ("another quota within its min: never", [("v", "team-b", 5000)], [], member("p", "team-a"),
     member("v", "team-b", 5000), False),
    ("another quota above its min, staying at it: allowed", [("v", "team-b", 2000), ("b1", "team-b", 10_000)], [],
     member("p", "team-a"), member("v", "team-b", 2000), True),
    ("another quota above its min that the eviction takes below it: never", [("v", "team-b", 12_000)], [],
     member("p", "team-a"), member("v", "team-b", 12_000), False),
    ("its own quota: allowed", [("v", "team-a", 5000)], [], member("p", "team-a"), member("v", "team-a", 5000),
     True),
    ("a preemptor whose quota is over its runtime: never", [("a1", "team-a", 15_000), ("v", "team-b", 5000)],
     [("b2", "team-b", 5000)], member("p", "team-a"), member("v", "team-b", 5000), False),
]


@pytest.mark.parametrize(("case", "placed", "pending", "preemptor", "victim", "allowed"), VICTIMS,
                         ids=[c[0] for c in VICTIMS])
def test_victim_allowed(case: str, placed: list[tuple[str, str, int]], pending: list[tuple[str, str, int]],
                        preemptor: PodInfo, victim: PodInfo, allowed: bool) -> None:
    p = plugin(*TEAMS)
    for uid, quota, cpu in placed:
        p.reserve(NodeTable(), member(uid, quota, cpu), 0, 0.0)
    for uid, quota, cpu in pending:
        p.add_pending(member(uid, quota, cpu))
    p.refresh(TOTAL)
    assert p.victim_allowed(_state(), preemptor, victim) is allowed


def test_reclaim_order_lowest_priority_latest_first_never_non_preemptible_never_below_min() -> None:
    two = (ElasticQuota(name="team-a", min={"cpu": 10_000}, max={"cpu": 20_000}),
           ElasticQuota(name="team-b", min={"cpu": 10_000}, max={"cpu": 20_000}))
    p = plugin(*two)
    t = NodeTable()
    # team-b borrowed: 14 pods of 1000 m; priorities and start times differ
    for k in range(14):
        prio = 10 if k < 4 else 5
        p.reserve(t, member(f"b{k}", "team-b", 1000, priority=prio, preemptible=k != 13), 0, float(k))
    p.add_pending(member("a-big", "team-a", 10_000))  # team-a wants its min back: b's runtime → 10000
    p.refresh((20_000, 0, 0, 0, 0, 0, 100))
    assert p.book.runtime["team-b"][0] == 10_000
    got = p.reclaim()
    # priority 5 first (b4..b13), latest first, b13 non-preemptible: b12, b11, b10, b9
    assert [r.member.pod.uid for r in got] == ["b12", "b11", "b10", "b9"]
    assert all(r.reason == "quota team-b: reclaiming lent quota cpu (used 14000 > runtime 10000)" for r in got[:1])
    assert p.reclaim() == []  # already ordered out: nothing more
    for r in got:
        p.unreserve(t, r.member.pod, 0)
        p.drop_pending(r.member.pod.uid)
    assert p.book.used["team-b"][0] == 10_000 and not p.book.evicting


def test_reclaim_never_below_min() -> None:
    two = (ElasticQuota(name="team-a", min={"cpu": 10_000}, max={"cpu": 20_000}),
           ElasticQuota(name="team-b", min={"cpu": 9_000}, max={"cpu": 20_000}))
    p = plugin(*two)
    t = NodeTable()
    p.reserve(t, member("b-big", "team-b", 6000), 0, 0.0)
    p.reserve(t, member("b-small", "team-b", 5000), 0, 1.0)
    p.add_pending(member("a", "team-a", 20_000))
    p.refresh((19_000, 0, 0, 0, 0, 0, 100))
    assert p.book.runtime["team-b"][0] == 9000
    # evicting either leaves 5000 or 6000 < min 9000: neither is taken
    assert p.reclaim() == []


def test_reclaim_over_used_memory_while_under_cpu_min() -> None:
    # team-b borrowed memory (used 48 GiB > runtime 32 GiB) while under its cpu min (6000 m < 10000 m): the
    # memory goes back although each eviction lowers its cpu further below min (the demo's colo run: team-a)
    gi = 1 << 30
    two = (ElasticQuota(name="team-a", min={"cpu": 10_000, "memory": 32 * gi}, max={"cpu": 20_000, "memory": 64 * gi}),
           ElasticQuota(name="team-b", min={"cpu": 10_000, "memory": 32 * gi}, max={"cpu": 20_000, "memory": 64 * gi}))
    p = plugin(*two)
    t = NodeTable()
    for k in range(6):
        p.reserve(t, member(f"b{k}", "team-b", 1000, memory=8 * gi), 0, float(k))
    p.add_pending(member("a", "team-a", 1000, memory=32 * gi))
    p.refresh((20_000, 64 * gi, 0, 0, 0, 0, 100))
    assert p.book.runtime["team-b"][1] == 32 * gi
    got = p.reclaim()
    assert [r.member.pod.uid for r in got] == ["b5", "b4"]
    assert got[0].reason.startswith("quota team-b: reclaiming lent quota memory")


# ------------------------------------------------------------------ the core


def _labelled(spec: PodSpec, quota: str, preemptible: bool = True) -> PodSpec:
    labels = {QUOTA_NAME_LABEL: quota}
    if not preemptible:
        labels[PREEMPTIBLE_LABEL] = "false"
    return msgspec.structs.replace(spec, labels=labels)


def test_core_borrows_idle_min_and_reclaims_it() -> None:
    s = scheduler()
    for k in range(2):
        s.on_node(node(f"n{k}", cpu=10_000, memory=64 << 30, pods=110), 0.0)
    for spec in (ElasticQuota(name="team-a", min={"cpu": 10_000}, max={"cpu": 20_000}),
                 ElasticQuota(name="team-b", min={"cpu": 10_000}, max={"cpu": 20_000})):
        assert s.on_quota(spec) == []
    for k in range(20):
        s.add_pod(_labelled(pod(f"b{k}", cpu=1000, priority=5, created_at=k), "team-b", preemptible=k != 0), 0.0)
    out = s.schedule_cycle(1.0)
    assert len(out.placements) == 20 and not out.evictions  # team-a idle: its min is lent to team-b
    for k in range(10):
        s.add_pod(_labelled(pod(f"a{k}", cpu=1000, priority=5), "team-a"), 2.0)
    out = s.schedule_cycle(3.0)
    assert not out.placements  # no room until team-b gives back
    victims = {e.pod.uid for e in out.evictions}
    assert len(victims) == 10 and "b0" not in victims
    assert all(e.reason.startswith("quota team-b: reclaiming lent quota cpu") for e in out.evictions)
    assert s.schedule_cycle(4.0).evictions == []  # ordered once
    for e in out.evictions:  # the node agents evict; the pods come back to the queue
        s.release(e.pod.uid, 5.0)
        s.add_pod(e.pod.spec, 5.0)
    out = s.schedule_cycle(6.0)
    assert {p.pod.uid for p in out.placements} == {f"a{k}" for k in range(10)}
    out = s.schedule_cycle(60.0)
    assert not out.placements and not out.evictions
    reasons = {r for u in s.queue.unschedulable.values() for r in u.reasons}
    assert any(r.startswith("quota team-b: insufficient runtime quota cpu") for r in reasons), reasons
    status = {st.name: st for st in s.quota.statuses(60.0)} if s.quota else {}
    assert status["team-a"].used == {"cpu": 10_000} and status["team-b"].used == {"cpu": 10_000}
    assert status["team-b"].pending == 10 and status["team-b"].runtime == {"cpu": 10_000}
    assert s.quota is not None and s.quota.statuses(61.0) == []  # unchanged: nothing to publish


def test_a_quota_arriving_after_its_pods_counts_them() -> None:
    s = scheduler()
    s.on_node(node("n0", cpu=10_000, memory=64 << 30, pods=110), 0.0)
    for k in range(3):
        s.add_pod(_labelled(pod(f"b{k}", cpu=1000), "team-b"), 0.0)
    assert len(s.schedule_cycle(1.0).placements) == 3  # no quota yet: nothing counted
    s.add_pod(_labelled(pod("b-queued", cpu=1000), "team-b"), 2.0)
    assert s.on_quota(ElasticQuota(name="team-b", max={"cpu": 3000})) == []
    assert s.quota is not None
    book = s.quota.book
    assert book.used["team-b"][0] == 3000 and book.pods["team-b"] == 3
    assert book.pending["team-b"][0] == 1000 and book.pending_pods["team-b"] == 1
    out = s.schedule_cycle(3.0)
    assert not out.placements
    assert out.failures[0].result.reasons == {"quota team-b: exceeds max quota cpu (used 3000 + 1000 > max 3000)": 1}


# ------------------------------------------------------------------ the book's accounting, property


_OPS = st.lists(st.tuples(st.sampled_from(["queue", "place", "back", "drop", "release", "requota"]),
                          st.integers(0, 11), st.sampled_from(["team-a", "team-b", "solo", "", "org"]),
                          st.integers(1, 4000)), max_size=60)


@settings(max_examples=150, deadline=None)
@given(ops=_OPS)
def test_book_used_and_pending_equal_a_recount(ops: list[tuple[str, int, str, int]]) -> None:
    """After any sequence of queueing, placing, unreserving, dropping, releasing and quota changes, each
    quota's used and pending equal the sums recounted from scratch over its subtree."""
    p = plugin(*TEAMS, ElasticQuota(name="solo", min={"cpu": 1000}))
    table = NodeTable()
    queued: dict[str, PodInfo] = {}
    placed: dict[str, PodInfo] = {}
    for op, k, quota, cpu in ops:
        uid = f"p{k}"
        if op == "queue" and uid not in queued and uid not in placed:
            queued[uid] = member(uid, quota, cpu)
            p.add_pending(queued[uid])
        elif op == "place" and uid in queued:
            placed[uid] = queued.pop(uid)
            p.reserve(table, placed[uid], 0, 0.0)
        elif op == "back" and uid in placed:  # bind failed or Permit refused: unreserved, queued again
            queued[uid] = placed.pop(uid)
            p.unreserve(table, queued[uid], 0)
        elif op == "drop" and uid in queued:
            del queued[uid]
            p.drop_pending(uid)
        elif op == "release" and uid in placed:
            p.unreserve(table, placed.pop(uid), 0)
            p.drop_pending(uid)
        elif op == "requota":  # team-b's max changes: the book is rebuilt from what the core holds
            assert p.apply(ElasticQuota(name="team-b", parent="org", min={"cpu": 10_000},
                                        max={"cpu": 15_000 + cpu})) == []
            p.book.rebuild([(x, 0) for x in placed.values()], list(queued.values()))
    subtree = {"org": {"team-a", "team-b"}, "team-a": {"team-a"}, "team-b": {"team-b"}, "solo": {"solo"}}
    for q, leaves in subtree.items():
        want_used = sum(x.spec.requests.cpu for x in placed.values() if x.spec.labels.get(QUOTA_NAME_LABEL) in leaves)
        want_pending = sum(x.spec.requests.cpu for x in queued.values()
                           if x.spec.labels.get(QUOTA_NAME_LABEL) in leaves)
        assert p.book.used.get(q, [0])[0] == want_used, q
        assert p.book.pending.get(q, [0])[0] == want_pending, q
        assert p.book.pods.get(q, 0) == sum(1 for x in placed.values()
                                            if x.spec.labels.get(QUOTA_NAME_LABEL) in leaves)


def test_a_reclaimed_pod_held_at_permit_is_sent_back_not_evicted() -> None:
    s = scheduler()
    s.on_node(node("n0", cpu=20_000, memory=64 << 30, pods=110), 0.0)
    for spec in (ElasticQuota(name="team-a", min={"cpu": 10_000}), ElasticQuota(name="team-b", min={"cpu": 10_000})):
        assert s.on_quota(spec) == []
    for k in range(12):  # b11 the lowest priority: the first victim
        s.add_pod(_labelled(pod(f"b{k}", cpu=1000, priority=4 if k == 11 else 5), "team-b"), 0.0)
    out = s.schedule_cycle(1.0)
    assert len(out.placements) == 12
    held = next(p.pod for p in out.placements if p.pod.uid == "b11")  # as if a Permit plugin held it
    s.waiting[held.uid] = (held, 0, 1e9)
    s.add_pod(_labelled(pod("a0", cpu=10_000, priority=5), "team-a"), 2.0)
    out = s.schedule_cycle(3.0)
    evicted = {e.pod.uid for e in out.evictions}
    assert held.uid not in evicted and held.uid not in s.waiting and held.uid not in s.framework.placed
    assert len(evicted) == 1  # with the held pod given back, one more eviction brings team-b to 10000
