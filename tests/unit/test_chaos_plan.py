"""The chaos soak's kill plan and its bind-stall and double-bind bookkeeping (no servers)."""

from __future__ import annotations

import pytest

from colo.messages import PodBound, PodSpec, PodStatus, PodUnschedulable
from colo.sim.chaos import KINDS, KillRecord, plan_kills
from colo.sim.chaos_checks import ChaosMetrics
from colo.sim.chaos_soak import bind_delay, stalls
from colo.sim.services import TICK_ORDER

MEMBERS = ["nats-0", "nats-1", "nats-2"]


def test_plan_is_seeded_and_spaced() -> None:
    plan = plan_kills(7, 600.0, MEMBERS)
    assert plan == plan_kills(7, 600.0, MEMBERS)
    assert plan != plan_kills(8, 600.0, MEMBERS)
    gaps = [b.at_s - a.at_s for a, b in zip(plan, plan[1:])]
    assert 20.0 <= plan[0].at_s <= 60.0 and all(20.0 - 0.02 <= g <= 60.0 + 0.02 for g in gaps)
    assert plan[-1].at_s < 600.0 and 9 <= len(plan) <= 30
    for k in plan:
        assert k.kind in KINDS
        assert k.victim in {"service": TICK_ORDER, "nats": MEMBERS, "redis": ("primary",)}[k.kind]


@pytest.mark.parametrize(("kwargs", "problem"), [
    ({"kinds": ()}, "kinds is empty"),
    ({"kinds": ("disk",)}, "unknown kill kinds ['disk']"),
    ({"min_gap_s": 30.0, "max_gap_s": 10.0}, "0 < min_gap_s <= max_gap_s"),
    ({"min_gap_s": 0.0}, "0 < min_gap_s <= max_gap_s"),
])
def test_plan_refuses_bad_arguments(kwargs: dict[str, object], problem: str) -> None:
    with pytest.raises(ValueError, match=problem.replace("[", r"\[").replace("]", r"\]")):
        plan_kills(1, 100.0, MEMBERS, **kwargs)  # type: ignore[arg-type]


def test_plan_without_members_refuses_nats_kills() -> None:
    with pytest.raises(ValueError, match="nats kills need nats_members"):
        plan_kills(1, 100.0, [])
    assert all(k.kind != "nats" for k in plan_kills(1, 300.0, [], kinds=("service", "redis")))


def _bound(uid: str, node: str) -> PodBound:
    return PodBound(spec=PodSpec(uid=uid, name=uid), node=node, at=0.0)


@pytest.mark.parametrize(("events", "moved", "repeated"), [
    ("bind-a", {}, 0),
    ("bind-a bind-a", {}, 1),  # a retried bind repeating its node is no double bind
    ("bind-a bind-b", {"p": ["a", "b"]}, 0),
    ("bind-a fail bind-b", {}, 0),  # evicted, then bound elsewhere
    ("bind-a fail bind-b bind-c", {"p": ["a", "b", "c"]}, 0),
], ids=["once", "repeated", "moved", "rebound-after-release", "moved-after-rebind"])
def test_moved_binds(events: str, moved: dict[str, list[str]], repeated: int) -> None:
    m = ChaosMetrics(name="colo")
    for e in events.split():
        if e == "fail":
            m.on_status(PodStatus(uid="p", node="a", phase="Failed", reason="Evicted", at=0.0))
        else:
            m.on_bound(_bound("p", e.removeprefix("bind-")))
    assert m.moved_binds() == moved
    assert m.repeated_binds() == repeated


def test_stalls_measure_the_largest_bind_gap_after_a_kill() -> None:
    kill = KillRecord("nats", "nats-1", at=100.0, back_s=4.0)
    (row,) = stalls([kill], binds=[90.0, 101.0, 109.0, 110.0, 200.0], end=300.0)
    assert row["first_bind_s"] == 1.0
    assert row["max_bind_gap_s"] == 11.0  # 90 (last bind before the kill) → 101
    (later,) = stalls([kill], binds=[95.0, 102.0, 130.0], end=300.0)
    assert later["max_bind_gap_s"] == 28.0  # 102 → 130
    (none,) = stalls([kill], binds=[95.0, 200.0], end=300.0)
    assert none["first_bind_s"] == 100.0 and none["max_bind_gap_s"] == 65.0  # 95 → the window's end at 160
    (cut,) = stalls([kill], binds=[], end=130.0)
    assert cut["first_bind_s"] is None and cut["max_bind_gap_s"] == 30.0


def test_bind_delay_of_the_pods_published_around_a_kill() -> None:
    kill = KillRecord("redis", "redis-0:1", at=100.0, back_s=8.0)
    delays = [(10.0, 0.2, "a"), (96.0, 3.0, "b"), (104.0, 12.5, "c"), (130.0, 1.0, "d"), (300.0, 0.4, "e")]
    per_kill, quiet = bind_delay([kill], delays, pace_s=5.0)
    assert per_kill == [12.5]  # published 95..108
    assert quiet == 0.4  # 10 and 300 are away from the kill; 130 is within its 60 s window
    assert bind_delay([kill], [(10.0, 0.2, "a")], pace_s=5.0) == ([None], 0.2)


def test_bind_delays_leave_out_pods_that_waited_for_room() -> None:
    m = ChaosMetrics(name="colo")
    m.published_wall.update({"p": 1.0, "q": 1.0})
    m.on_unschedulable(PodUnschedulable(uid="q", name="q", reasons={"Insufficient cpu": 3}, message="", at=0.0))
    m.on_bound(_bound("p", "a"))
    m.on_bound(_bound("q", "b"))
    assert [uid for _, _, uid in m.bind_delays()] == ["p"]
