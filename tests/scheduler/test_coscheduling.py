"""Coscheduling (gang scheduling) in the scheduler core: PreFilter, Permit, Unreserve/PostFilter per
mode, gang groups, timeouts, queue sorting, whole-gang batches, and the 255-member gang."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from gang_helpers import add_members, allocated_cpu, cluster, gang, member
from sched_helpers import GI, metric, node

from colo.store import BindResult
from colo_scheduler.core import Placement
from colo_scheduler.gangbind import settle
from colo_scheduler.plugins.coscheduling import MEMBERS_REJECTOR, NAME, Coscheduling
from colo_scheduler.plugins.prioritysort import PrioritySort

# ---------------------------------------------------------------- PreFilter: too few members


def test_gang_short_of_members_waits_parked_until_members_arrive() -> None:
    s = cluster(4)
    g = gang("g", 8)
    uids = add_members(s, g, 3, 1.0)
    out = s.schedule_cycle(2.0)
    assert not out.placements and len(out.failures) == 3
    assert out.failures[0].result.message == "0/4 nodes are available: 4 gang default/g has 3 of 8 members."
    parked = s.queue.unschedulable
    assert set(parked) == set(uids) and all(parked[u].rejectors == {MEMBERS_REJECTOR} for u in uids)
    # no busy retry: cluster events (a new node, metrics) do not wake a gang that lacks members
    s.on_node(node("n9", cpu=4000, memory=64 * GI), 3.0)
    s.on_metric(metric("n0", 3.0, cpu=10), 3.0)
    for t in (3.0, 4.0, 5.0):
        assert not s.schedule_cycle(t).failures
    assert all(s.queue.unschedulable[u].pod.attempts == 1 for u in uids)
    # the rest arrives: one cycle takes the parked members back with them and places all 8
    add_members(s, g, 5, 6.0, start=3)
    out = s.schedule_cycle(6.0)
    assert sorted(p.pod.uid for p in out.placements) == sorted(uids + [f"g-{k:04d}" for k in range(3, 8)])
    assert not s.waiting and len(s.queue) == 0


# ---------------------------------------------------------------- Permit / Unreserve per mode


@dataclass(frozen=True)
class Case:
    id: str
    mode: str
    min_member: int
    members: int
    room: int  # pods of 1 CPU the cluster holds
    placed: int  # placements of the first cycle
    waiting: int  # members held at Permit after it
    held_cpu: int  # milli-cores reserved after it


CASES = [
    Case("strict-fits", "Strict", 8, 8, 16, 8, 0, 8000),
    Case("strict-short-of-room-sends-gang-back", "Strict", 8, 8, 5, 0, 0, 0),
    Case("strict-min-below-total", "Strict", 5, 8, 5, 5, 0, 5000),
    Case("nonstrict-fits", "NonStrict", 8, 8, 16, 8, 0, 8000),
    Case("nonstrict-short-of-room-keeps-waiting", "NonStrict", 8, 8, 5, 0, 5, 5000),
    Case("nonstrict-min-below-total", "NonStrict", 5, 8, 5, 5, 0, 5000),
    Case("min-one", "Strict", 1, 3, 2, 2, 0, 2000),
]


@pytest.mark.parametrize("c", CASES, ids=[c.id for c in CASES])
def test_permit_and_unreserve_per_mode(c: Case) -> None:
    s = cluster(1, cpu=1000 * c.room)
    g = gang("g", c.min_member, c.mode, timeout_s=30.0)
    add_members(s, g, c.members, 1.0)
    out = s.schedule_cycle(2.0)
    assert len(out.placements) == c.placed
    assert len(s.waiting) == c.waiting
    assert allocated_cpu(s) == c.held_cpu
    if c.waiting:  # NonStrict: released at the gang's deadline (first wait + 30 s), not before
        assert not s.schedule_cycle(31.9).placements and len(s.waiting) == c.waiting
        s.schedule_cycle(32.0)
        assert not s.waiting and allocated_cpu(s) == 0
        assert all(u.rejectors == {"Permit"} or u.rejectors == {NAME} for u in s.queue.unschedulable.values())


def test_strict_member_failure_frees_what_the_gang_held_and_gang_retries_whole() -> None:
    s = cluster(1, cpu=5000)
    g = gang("g", 8, "Strict")
    add_members(s, g, 8, 1.0)
    out = s.schedule_cycle(2.0)
    assert not out.placements and allocated_cpu(s) == 0
    assert all(u.rejectors == {NAME} for u in s.queue.unschedulable.values())
    assert {next(iter(u.reasons)) for u in s.queue.unschedulable.values()} == {
        "gang default/g: member g-0005 fits no node; the gang was sent back"}
    s.on_node(node("n1", cpu=4000, memory=64 * GI), 3.0)  # room for all: one cycle places all 8
    assert len(s.schedule_cycle(3.0).placements) == 8


# ---------------------------------------------------------------- gang groups (PS / worker)


@pytest.mark.parametrize(("room", "ps", "workers", "placed", "held"), [
    (16, 2, 6, 8, 8000),     # both gangs satisfied: all bound together
    (16, 0, 6, 0, 0),        # the PS gang has no members yet: workers wait, hold nothing
    (5, 2, 6, 0, 0),         # room for the PS gang, not the workers (Strict): the group is sent back
], ids=["both-fit", "ps-missing", "workers-do-not-fit"])
def test_gang_group_ps_worker(room: int, ps: int, workers: int, placed: int, held: int) -> None:
    s = cluster(1, cpu=1000 * room)
    gps = gang("ps", 2, groups=("ps", "worker"), created_at=1.0)
    gw = gang("worker", 6, groups=("ps", "worker"), created_at=1.0)
    add_members(s, gps, ps, 1.0)
    add_members(s, gw, workers, 1.0)
    out = s.schedule_cycle(2.0)
    assert len(out.placements) == placed and not s.waiting and allocated_cpu(s) == held
    if ps == 0:
        assert out.failures[0].result.reasons == {"gang default/worker: gang default/ps of its group has no members yet": 1}


def test_gang_group_waits_for_the_other_gang_then_binds_both() -> None:
    s = cluster(1, cpu=16_000)
    gps = gang("ps", 1, "NonStrict", groups=("ps", "worker"))
    gw = gang("worker", 2, "NonStrict", groups=("ps", "worker"))
    add_members(s, gw, 2, 1.0)
    add_members(s, gps, 1, 1.0)
    out = s.schedule_cycle(2.0)
    assert len(out.placements) == 3


# ---------------------------------------------------------------- timeouts of any length


@pytest.mark.parametrize("timeout_s", [1.0, 6 * 3600.0], ids=["1s", "6h"])
def test_gang_wait_timeout_is_honoured_not_capped(timeout_s: float) -> None:
    """REFERENCE.md §11: the reference caps gang wait timeouts far below what users ask for."""
    s = cluster(1, cpu=3000)
    g = gang("g", 4, "NonStrict", timeout_s=timeout_s)
    add_members(s, g, 4, 0.0)
    s.schedule_cycle(10.0)
    assert len(s.waiting) == 3 and allocated_cpu(s) == 3000
    assert {d for _, _, d in s.waiting.values()} == {10.0 + timeout_s}
    assert s.decision("g-0000") is not None and s.decision("g-0000").status == "Wait"  # type: ignore[union-attr]
    assert "waiting for gang default/g" in s.decision("g-0000").message  # type: ignore[union-attr]
    s.schedule_cycle(10.0 + timeout_s - 0.5)
    assert len(s.waiting) == 3
    out = s.schedule_cycle(10.0 + timeout_s)
    assert not s.waiting and not out.placements and allocated_cpu(s) == 0


# ---------------------------------------------------------------- queue sorting and batches


def test_members_sort_adjacently_and_batch_takes_whole_gangs() -> None:
    s = cluster(8, cpu=64_000, max_pods_per_cycle=10)
    ga, gb = gang("a", 25, created_at=5.0), gang("b", 4, created_at=3.0)
    for k in range(25):  # arrivals interleaved with lone pods and gang b
        s.add_pod(member(f"a-{k:02d}", ga, created_at=5.0 + k), 5.0)
        if k < 4:
            s.add_pod(member(f"b-{k}", gb, created_at=9.0 - k), 5.0)
        s.add_pod(member(f"x-{k:02d}", None, created_at=4.0 + k), 5.0)
    keys = sorted((s.queue._key(p), p.uid) for p in s.queue.pods())
    order = [u for _, u in keys]
    assert order[:4] == ["b-3", "b-2", "b-1", "b-0"]  # gang b (created 3.0) first, members together
    a_pos = [order.index(f"a-{k:02d}") for k in range(25)]
    assert a_pos == list(range(a_pos[0], a_pos[0] + 25))  # gang a's 25 members adjacent
    placed: list[str] = []
    for t in range(2, 12):
        placed.extend(p.pod.uid for p in s.schedule_cycle(float(t)).placements)
        if "a-00" in placed:
            break
    assert all(f"a-{k:02d}" in placed for k in range(25))  # batch of 10 raised to the whole gang


def test_pods_without_gang_keep_priority_sort_order() -> None:
    plugin, reference = Coscheduling(), PrioritySort()
    s = cluster(1)
    pods = [s.pod_info(member(f"p{k}", None, priority=prio, created_at=float(t)), 0.0)
            for k, (prio, t) in enumerate([(9000, 5), (100, 1), (9000, 2), (5000, 2), (100, 0), (9000, 5)])]
    assert sorted(pods, key=plugin.sort_key) == sorted(pods, key=reference.sort_key)
    assert plugin.pre_filter(s.framework.begin_cycle(0.0), pods[0]) is None


# ---------------------------------------------------------------- the 255-member gang


def test_255_member_gang_larger_than_cluster_waits_without_looping_then_places_in_one_cycle() -> None:
    """REFERENCE.md §11: large gangs looping after capacity arrives."""
    s = cluster(10, cpu=20_000)  # room for 200 pods of 1 CPU
    g = gang("big", 255)
    uids = add_members(s, g, 255, 1.0)
    out = s.schedule_cycle(2.0)
    assert not out.placements and not s.waiting and allocated_cpu(s) == 0
    assert len(s.queue.unschedulable) == 255
    for t in range(3, 20):  # metrics keep arriving: the parked gang is not retried
        s.on_metric(metric(f"n{t % 10}", float(t), cpu=100), float(t))
        out = s.schedule_cycle(float(t))
        assert not out.placements and not out.failures
    assert max(u.pod.attempts for u in s.queue.unschedulable.values()) == 1
    for i in range(10, 18):  # capacity arrives (LoadAware keeps the measured nodes at 65 % of their estimate)
        s.on_node(node(f"n{i}", cpu=20_000, memory=64 * GI), 20.0)
    out = s.schedule_cycle(21.0)
    assert sorted(p.pod.uid for p in out.placements) == uids  # all 255 placed and allowed in ONE cycle
    assert not s.waiting and len(s.queue) == 0 and allocated_cpu(s) == 255_000
    for t in range(22, 25):  # and nothing loops afterwards
        out = s.schedule_cycle(float(t))
        assert not out.placements and not out.failures


# ---------------------------------------------------------------- binding all together


def _placements(s_uids: list[str]) -> list[Placement]:
    s = cluster(1)
    g = gang("g", len(s_uids))
    return [Placement(s.pod_info(member(u, g), 0.0), "n0", 0.0) for u in s_uids] + [
        Placement(s.pod_info(member("lone", None), 0.0), "n0", 0.0)]


def test_settle_refuses_the_whole_gang_when_one_member_is_refused() -> None:
    ps = _placements(["a", "b", "c"])
    results, undo = settle(ps, [BindResult(True), BindResult(False, "Insufficient cpu"), BindResult(True),
                                BindResult(True)])
    assert [r.ok for r in results] == [False, False, False, True]
    assert undo == [0, 2]
    assert results[0].reason == "gang default/g: member b refused (Insufficient cpu); no member bound"
    assert results[1].reason == "Insufficient cpu"
    ok, none = settle(ps, [BindResult(True)] * 4)
    assert all(r.ok for r in ok) and none == []


def test_refused_gang_goes_back_whole_and_retries_as_a_unit() -> None:
    s = cluster(2)
    g = gang("g", 4)
    add_members(s, g, 4, 1.0)
    out = s.schedule_cycle(2.0)
    assert len(out.placements) == 4
    results, _ = settle(out.placements, [BindResult(True)] * 3 + [BindResult(False, "Insufficient cpu")])
    for p, r in zip(out.placements, results):
        assert not r.ok
        s.bind_failed(p.pod)
    assert allocated_cpu(s) == 0 and s.queue.lengths()["backoff"] == 4
    out = s.schedule_cycle(2.0 + s.settings.backoff_initial_s)
    assert len(out.placements) == 4


# ---------------------------------------------------------------- replicas


@pytest.mark.parametrize("replicas", [2, 3, 5])
def test_one_replica_owns_a_whole_gang_and_its_group(replicas: int) -> None:
    from colo_scheduler.replicas import Replica, shard_key

    shards = [Replica(i, replicas) for i in range(replicas)]
    for name in ("a", "b", "c", "train", "etl"):
        g = gang(name, 4)
        owners = {i for k in range(64) for i, r in enumerate(shards) if r.owns_pod(member(f"{name}-{k}", g))}
        assert len(owners) == 1, (name, owners)
    gps, gw = gang("ps", 1, groups=("ps", "worker")), gang("worker", 4, groups=("ps", "worker"))
    assert shard_key(member("p", gps)) == shard_key(member("w", gw)) == "default/ps"
    lone = [member(f"x{k}", None) for k in range(64)]  # pods without a gang still spread by uid
    assert len({i for p in lone for i, r in enumerate(shards) if r.owns_pod(p)}) == replicas


def test_room_held_at_permit_survives_a_resync_of_the_stores_sums() -> None:
    from colo.messages import Resources

    s = cluster(1, cpu=3000, unschedulable_retry_s=10_000.0)
    g = gang("g", 4, "NonStrict")
    add_members(s, g, 4, 0.0)
    s.schedule_cycle(1.0)
    assert len(s.waiting) == 3 and allocated_cpu(s) == 3000
    s.set_allocated("n0", Resources(), 0)  # the store holds no binding of a waiting member
    assert allocated_cpu(s) == 3000
    s.add_pod(member("other", None, 1000), 2.0)
    assert not s.schedule_cycle(2.0).placements  # the held room is not handed to another pod
    s.schedule_cycle(1.0 + 600.0)  # released at the deadline: the room is free again
    assert allocated_cpu(s) == 0


def test_strict_member_refused_by_another_prefilter_sends_the_gang_back() -> None:
    """A member another PreFilter rejects (here QoSAdmission: batch-cpu asked by a prod pod; a quota
    would do the same) runs no PostFilter: the cycle's end still sends a Strict gang back."""
    import msgspec

    s = cluster(1, cpu=8000)
    g = gang("g", 4, "Strict")
    add_members(s, g, 3, 1.0)
    bad = msgspec.structs.replace(member("g-bad", g), priority_class="prod",
                                  requests=msgspec.structs.replace(member("x", None).requests, batch_cpu=100))
    s.add_pod(bad, 1.0)
    out = s.schedule_cycle(2.0)
    assert not out.placements and not s.waiting and allocated_cpu(s) == 0
    assert {next(iter(u.reasons)) for uid, u in s.queue.unschedulable.items() if uid != "g-bad"} == {
        "gang default/g: member g-bad was not placed; the gang was sent back"}
