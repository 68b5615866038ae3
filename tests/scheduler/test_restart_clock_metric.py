"""A scheduler restarted in simulation (virtual clock at 0 until its first tick) keeps the node metrics
that reach it before that tick (found by tests/e2e/test_chaos_migration.py: after a kill -9 the new
scheduler dead-lettered every node's metric of that step as "dated 1620 s ahead of the scheduler's clock").

A metric "ahead of the clock" can only be judged by a clock that knows the time: a wall clock always
does, a virtual clock once a tick advanced it (or when created at a given time)."""

from __future__ import annotations

from typing import Any

import pytest
from sched_helpers import GI, node

from colo import subjects
from colo.clock import VirtualClock, knows_time
from colo.messages import DeadLetter, NodeMetric, Usage
from colo.testing.fixtures import service_context
from colo_scheduler.service import SchedulerService
from colo_scheduler.settings import SchedulerSettings

CLOCKS = [
    pytest.param(VirtualClock(), False, id="fresh-virtual-unknown"),
    pytest.param(VirtualClock(100.0), True, id="virtual-at-a-time-known"),
]


@pytest.mark.parametrize(("clock", "known"), CLOCKS)
def test_virtual_clock_knows_the_time_once_set(clock: VirtualClock, known: bool) -> None:
    assert knows_time(clock) is known
    clock.advance_to(1620.0)
    assert knows_time(clock)


@pytest.mark.integration
@pytest.mark.parametrize(("start", "dead_letters"), [
    pytest.param(None, 0, id="restarted-before-first-tick-keeps-metric"),
    pytest.param(0.0, 1, id="known-clock-still-rejects-far-future"),
])
async def test_metric_before_first_tick_not_dead_lettered(bus_factory: Any, store: Any, start: float | None,
                                                          dead_letters: int) -> None:
    clock = VirtualClock() if start is None else VirtualClock(start)
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
    metric = NodeMetric(node="n0", at=1620.0, window_s=300.0, node_usage=Usage(cpu=1000, memory=GI))
    await tester.publish(subjects.NODE_METRIC, metric, node="n0")
    await svc.ctx.bus.settle(timeout_s=10)  # type: ignore[union-attr]
    await tester.settle()
    assert len(dead) == dead_letters, dead
    kept = svc.core.table.metrics[svc.core.table.index["n0"]]
    assert (kept is not None and kept.at == 1620.0) is (dead_letters == 0)
