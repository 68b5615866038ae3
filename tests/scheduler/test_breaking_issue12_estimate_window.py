"""A NodeMetric whose aggregation window is negative must not reach the load estimate.

LoadAware's estimate counts a reported pod as held by the node figure once it ran the whole window before
the metric (colo_scheduler/estimation.py). With ``window_s`` negative every freshly bound, reported pod
counts as fully held at once: the burst of placements issue 12 item 4/5 removed comes back through one bad
report. The scheduler's metric check promised to reject "a negative window" but only looked at the
aggregated statistics' windows.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from sched_helpers import GI, node

from colo import subjects
from colo.clock import VirtualClock
from colo.messages import DeadLetter, NodeMetric, Usage
from colo.testing.fixtures import service_context
from colo_scheduler.service import SchedulerService
from colo_scheduler.settings import SchedulerSettings
from colo_scheduler.validation import metric_problem

WINDOWS = [
    pytest.param(-300.0, "window", id="negative"),
    pytest.param(-1e-3, "window", id="just-below-zero"),
    pytest.param(0.0, "", id="zero-instantaneous-ok"),
    pytest.param(300.0, "", id="default-ok"),
]


@pytest.mark.parametrize(("window_s", "problem"), WINDOWS)
def test_metric_window_checked(window_s: float, problem: str) -> None:
    m = NodeMetric(node="n0", at=100.0, window_s=window_s, node_usage=Usage(cpu=1000, memory=GI))
    got = metric_problem(m, 100.0, 60.0)
    assert (problem in got) if problem else got == ""
    if problem:
        assert got != ""


@pytest.mark.integration
async def test_negative_window_metric_dead_lettered(bus_factory: Any, store: Any) -> None:
    clock = VirtualClock(100.0)
    await store.put_node(node("n0", cpu=4000, memory=8 * GI, pods=10))
    bus = await bus_factory("scheduler", clock, autostart=False)
    svc = SchedulerService(SchedulerSettings(seed=1))
    await svc.start(service_context(bus, store, clock))
    await bus.start_consumers()
    tester = await bus_factory("tester")
    dead: list[DeadLetter] = []

    async def on_dead(m: DeadLetter) -> None:
        dead.append(m)

    await tester.subscribe(subjects.DEAD_LETTER, on_dead, durable="dlq")
    body = {"node": "n0", "at": 99.0, "window_s": -300.0, "node_usage": {"cpu": 1000, "memory": GI}}
    await tester.js.publish(f"{subjects.PREFIX}.node.metric.n0", json.dumps(body).encode())
    await svc.ctx.bus.settle(timeout_s=10)  # type: ignore[union-attr]
    await tester.settle()
    assert len(dead) == 1 and "window" in dead[0].reason, dead
    assert svc.core.table.metrics[svc.core.table.index["n0"]] is None
