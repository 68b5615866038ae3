"""Scheduling queue: QueueSort order, exponential backoff, unschedulable move-back."""

from __future__ import annotations

import pytest
from sched_helpers import pod, scheduler

from colo_scheduler.framework.interface import NODE_ADD, NODE_METRIC
from colo_scheduler.plugins.prioritysort import PrioritySort
from colo_scheduler.queue import SchedulingQueue


def _queue() -> SchedulingQueue:
    return SchedulingQueue(PrioritySort().sort_key, 1.0, 10.0, 60.0)


def test_priority_then_created_at() -> None:
    s = scheduler()
    q = _queue()
    for uid, prio, created in [("low", 5000, 0.0), ("high-late", 9500, 5.0), ("high-early", 9500, 1.0),
                               ("mid", 7500, 0.0)]:
        q.add(s.pod_info(pod(uid, priority=prio, created_at=created), 0.0))
    assert [p.uid for p in q.pop_batch(10)] == ["high-early", "high-late", "mid", "low"]


@pytest.mark.parametrize(("attempts", "backoff"), [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (5, 10.0), (9, 10.0)],
                         ids=["1st", "2nd", "3rd", "4th", "capped-5th", "capped-9th"])
def test_backoff_doubles_and_caps(attempts: int, backoff: float) -> None:
    q = _queue()
    info = scheduler().pod_info(pod("p"), 0.0)
    info.attempts, info.last_attempt_at = attempts, 100.0
    q.add_backoff(info)
    q.flush(100.0 + backoff - 0.01)
    assert q.pop_batch(1) == []
    q.flush(100.0 + backoff)
    assert [p.uid for p in q.pop_batch(1)] == ["p"]


@pytest.mark.parametrize(
    ("rejectors", "event", "moved"),
    [(frozenset({"LoadAware"}), NODE_METRIC, 1), (frozenset({"NodeResourcesFit"}), NODE_METRIC, 0),
     (frozenset({"NodeResourcesFit"}), NODE_ADD, 1), (frozenset({"TaintToleration"}), NODE_ADD, 1)],
    ids=["load-rejected-wakes-on-metric", "fit-rejected-ignores-metric", "fit-wakes-on-node",
         "taint-wakes-on-node"],
)
def test_unschedulable_moves_back_on_helpful_events(rejectors: frozenset[str], event: str, moved: int) -> None:
    s = scheduler()
    info = s.pod_info(pod("p"), 0.0)
    info.attempts, info.last_attempt_at = 1, 0.0
    s.queue.add_unschedulable(info, 0.0, rejectors, {})
    assert s.queue.move_on_event(event, 5.0, s.interest) == moved
    assert s.queue.lengths()["unschedulable"] == 1 - moved


def test_unschedulable_retried_after_interval_and_backoff_respected() -> None:
    q = _queue()
    info = scheduler().pod_info(pod("p"), 0.0)
    info.attempts, info.last_attempt_at = 1, 0.0
    q.add_unschedulable(info, 0.0, frozenset({"NodeResourcesFit"}), {})
    q.flush(59.0)
    assert q.lengths()["unschedulable"] == 1
    q.flush(60.0)
    assert q.lengths() == {"active": 1, "backoff": 0, "unschedulable": 0}
    # Moved by an event while still backing off → backoff pool, not active.
    info2 = scheduler().pod_info(pod("r"), 0.0)
    info2.attempts, info2.last_attempt_at = 3, 100.0
    q.add_unschedulable(info2, 100.0, frozenset(), {})
    q.move_on_event(NODE_ADD, 101.0, {})
    assert q.lengths()["backoff"] == 1


def test_duplicate_add_is_ignored() -> None:
    q = _queue()
    s = scheduler()
    assert q.add(s.pod_info(pod("p"), 0.0)) is True
    assert q.add(s.pod_info(pod("p"), 1.0)) is False
    assert len(q.pop_batch(10)) == 1
