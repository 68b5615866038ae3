"""Semantically absurd but well-typed messages: dead-lettered at once, never half-applied, never persisted."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sched_helpers import GI, node, pod

from colo import subjects
from colo.clock import VirtualClock
from colo.messages import DeadLetter, PodAdmitted
from colo.testing.fixtures import service_context
from colo_scheduler.service import SchedulerService
from colo_scheduler.settings import SchedulerSettings

pytestmark = pytest.mark.integration

HUGE = 10**30  # decodes as a Python int, does not fit int64

POISON = [
    pytest.param("pod.admitted", {"spec": {"uid": "a-cpu", "name": "a", "requests": {"cpu": HUGE}}, "at": 1},
                 id="admitted-request-overflow"),
    pytest.param("pod.admitted", {"spec": {"uid": "a-lim", "name": "a", "limits": {"memory": 2**62}}, "at": 1},
                 id="admitted-limit-near-int64"),
    pytest.param("pod.admitted", {"spec": {"uid": "a-prio", "name": "a", "priority": HUGE}, "at": 1},
                 id="admitted-priority-overflow"),
    pytest.param("node.registered.n9", {"name": "n9", "capacity": {"cpu": HUGE},
                                        "allocatable": {"cpu": HUGE, "memory": 1, "pods": 1}},
                 id="node-allocatable-overflow"),
    pytest.param("node.resource.n0", {"node": "n0", "batch_cpu": HUGE}, id="node-resource-overflow"),
    pytest.param("node.metric.n0", {"node": "n0", "at": 1, "node_usage": {"cpu": HUGE}},
                 id="metric-usage-overflow"),
]


async def _start(bus_factory: Any, store: Any, clock: VirtualClock) -> SchedulerService:
    bus = await bus_factory("scheduler", clock, autostart=False)
    ctx = service_context(bus, store, clock)
    svc = SchedulerService(SchedulerSettings(seed=1))
    await svc.start(ctx)
    await bus.start_consumers()
    return svc


@pytest.mark.parametrize(("subject", "body"), POISON)
async def test_out_of_range_values_are_dead_lettered_on_first_delivery(
        bus_factory: Any, store: Any, subject: str, body: dict[str, Any]) -> None:
    clock = VirtualClock(100.0)
    spec = node("n0", cpu=4000, memory=8 * GI, pods=10)
    await store.put_node(spec)
    svc = await _start(bus_factory, store, clock)
    tester = await bus_factory("tester")
    dead: list[tuple[DeadLetter, int]] = []

    async def on_dead(m: DeadLetter) -> None:
        dead.append((m, 0))

    await tester.subscribe(subjects.DEAD_LETTER, on_dead, durable="dlq")
    await tester.js.publish(f"{subjects.PREFIX}.{subject}", json.dumps(body).encode())
    await svc.ctx.bus.settle(timeout_s=10)  # type: ignore[union-attr]
    await tester.settle()
    assert len(dead) == 1, dead
    assert "handler failed" not in dead[0][0].reason  # rejected by validation, not by retries
    assert svc.totals["dead_letters"] == 1
    # Nothing was persisted or half-applied: the table is unchanged and a restart loads cleanly.
    assert [r.spec.uid for r in await store.list_pods()] == []
    assert svc.core.table.n == 1
    await tester.publish(subjects.POD_ADMITTED, PodAdmitted(spec=pod("ok", 1000, GI), at=100.0))
    await svc.ctx.bus.settle(timeout_s=10)  # type: ignore[union-attr]
    stats = await svc.tick(100.0)
    assert stats["pods_bound"] == 1


async def test_restart_skips_a_corrupt_pending_record(bus_factory: Any, store: Any) -> None:
    """A record that cannot be scheduled (persisted by an older version) must not stop the scheduler starting."""
    from colo.messages import PodRecord, PodSpec, Resources

    await store.put_node(node("n0", cpu=4000, memory=8 * GI, pods=10))
    await store.put_pod(PodRecord(spec=PodSpec(uid="bad", name="bad", requests=Resources(cpu=HUGE))))
    await store.put_pod(PodRecord(spec=pod("good", 1000, GI)))
    svc = await _start(bus_factory, store, VirtualClock(10.0))
    stats = await svc.tick(10.0)
    assert stats["pods_bound"] == 1
