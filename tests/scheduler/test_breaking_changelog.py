"""The node table's row change log stays bounded when no cycle trims it, and trimming it in the
middle of a cycle leaves decisions exact.

A warm follower (leader election) consumes every metric, resource, node and bound event but never
runs a scheduling cycle, and the log was trimmed only at the start of a cycle: it grew by a row per
event for as long as the process followed (~500 rows/s on 5,000 nodes reporting every 10 s).
"""

from __future__ import annotations

import random

import pytest
from sched_helpers import GI, metric, node, pod

from colo import subjects
from colo.clock import VirtualClock
from colo.messages import NodeMetric, Usage
from colo.settings import RuntimeSettings
from colo.store import Store
from colo.testing.fixtures import BusFactory, service_context
from colo_scheduler.core import Scheduler
from colo_scheduler.service import SchedulerService
from colo_scheduler.settings import SchedulerSettings
from colo_scheduler.table import NodeTable


def test_log_stays_bounded_without_cycles() -> None:
    core = Scheduler(SchedulerSettings())
    for i in range(4):
        core.on_node(node(f"n{i}"), 0.0)
    for k in range(3 * NodeTable.MIN_LOG_CAP):
        core.on_metric(metric(f"n{k % 4}", float(k), cpu=k % 1000), float(k))
    assert core.table.log_length <= NodeTable.MIN_LOG_CAP


@pytest.mark.parametrize("seed", range(4))
def test_trimming_the_log_in_the_middle_of_a_cycle_keeps_decisions_exact(seed: int) -> None:
    """With a log cap of a few rows the class cache keeps losing its position mid-cycle and must
    fall back to full passes: the placements equal full recomputation's."""
    traces = []
    for use_cache, cap in ((True, 5), (False, None)):
        rng = random.Random(seed)
        core = Scheduler(SchedulerSettings(seed=seed), use_class_cache=use_cache)
        for i in range(30):
            core.on_node(node(f"n{i}", cpu=rng.choice([4_000, 8_000]), memory=16 * GI, pods=rng.choice([0, 5])), 0.0)
            core.on_metric(metric(f"n{i}", 0.0, cpu=rng.randrange(0, 3_000), memory=GI), 0.0)
        if cap is not None:
            core.table.max_log = cap  # (registering a node raises the cap with the table's size)
        for k in range(150):
            core.add_pod(pod(f"p{k}", cpu=rng.choice([500, 1_000]), memory=GI, app=rng.choice(["a", "b", ""]),
                             max_per_node=rng.choice([-1, 2])), 0.0)
        out = core.schedule_cycle(1.0)
        traces.append([(p.pod.uid, p.node) for p in out.placements] + [(f.pod.uid, "") for f in out.failures])
        if use_cache:
            assert core.table.log_length <= 5
    assert traces[0] == traces[1]


@pytest.mark.integration
async def test_a_follower_does_not_accumulate_the_change_log(bus_factory: BusFactory, store: Store) -> None:
    clock = VirtualClock(100.0)
    tester = await bus_factory("tester")
    for i in range(3):
        spec = node(f"n{i}", cpu=8_000, memory=16 * GI)
        await store.put_node(spec)
        await tester.publish(subjects.NODE_REGISTERED, spec, node=spec.name)
    assert await store.acquire_lease("scheduler", "someone-else", 60_000) is not None  # never leads
    bus = await bus_factory("scheduler", clock, autostart=False)
    svc = SchedulerService(SchedulerSettings(leader_election=True))
    await svc.start(service_context(bus, store, clock, RuntimeSettings(instance="follower")))
    await bus.start_consumers()
    try:
        for k in range(300):
            await tester.publish(subjects.NODE_METRIC, NodeMetric(node=f"n{k % 3}", at=100.0 + k,
                                                                  node_usage=Usage(cpu=k, memory=GI)),
                                 node=f"n{k % 3}")
        await bus.settle()
        assert svc.core.table.n == 3
        stats = await svc.tick(101.0)
        assert stats["leader"] == 0.0
        assert svc.core.table.log_length <= svc.core.table.n
    finally:
        await svc.stop()
