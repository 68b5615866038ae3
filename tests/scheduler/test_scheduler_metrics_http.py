"""The scheduler's Prometheus metrics read over HTTP from a running service (real nats-server, redis-server)."""

from __future__ import annotations

import pytest
from sched_helpers import GI, MI, node, pod

from colo import subjects
from colo.messages import PodAdmitted, Resources
from colo.runtime import ServiceRunner
from colo.settings import RuntimeSettings
from colo.store import Store
from colo.testing.fixtures import BusFactory
from colo.testing.scrape import delta, scrape, value
from colo_scheduler.service import SchedulerService
from colo_scheduler.settings import SchedulerSettings

pytestmark = pytest.mark.integration

ATTEMPTS = "colo_scheduler_schedule_attempts_total"
DURATION = "colo_scheduler_scheduling_attempt_duration_seconds"
BINDS = "colo_scheduler_binds_total"
PENDING = "colo_scheduler_pending_pods"


async def test_attempts_latency_binds_and_pending_move_by_what_was_scheduled(
        nats_url: str, redis_url: str, bus_factory: BusFactory, store: Store) -> None:
    runner = ServiceRunner(SchedulerService(SchedulerSettings(seed=1)),
                           RuntimeSettings(nats_url=nats_url, redis_url=redis_url, sim=True,
                                           store_prefix=store.keys.prefix))
    await runner.start()
    try:
        svc = runner.service
        assert isinstance(svc, SchedulerService)
        tester = await bus_factory("tester")
        spec = node("n1", cpu=4000, memory=8 * GI)
        await store.put_node(spec)
        await tester.publish(subjects.NODE_REGISTERED, spec, node="n1")
        before = await scrape(runner.http_port)
        # 3 pods of 1 CPU fit the node's 4; two of 3 CPU then find no room
        for uid, milli in (("a", 1000), ("b", 1000), ("c", 1000), ("big0", 3000), ("big1", 3000)):
            await tester.publish(subjects.POD_ADMITTED, PodAdmitted(spec=pod(uid, milli, MI), at=10.0))
        await runner.ctx.bus.settle()  # type: ignore[union-attr]
        assert (await svc.tick(10.0))["pods_bound"] == 3
        first = await scrape(runner.http_port)
        assert delta(before, first, ATTEMPTS, result="scheduled") == 3
        assert delta(before, first, ATTEMPTS, result="unschedulable") == 2
        assert delta(before, first, ATTEMPTS, result="error") == 0
        assert delta(before, first, f"{DURATION}_count", result="scheduled") == 3
        assert delta(before, first, f"{DURATION}_count", result="unschedulable") == 2
        assert delta(before, first, f"{DURATION}_bucket", result="scheduled", le="+Inf") == 3
        assert delta(before, first, f"{DURATION}_sum", result="scheduled") > 0
        assert delta(before, first, BINDS, result="bound") == 3
        assert delta(before, first, BINDS, result="conflict") == 0
        assert {q: value(first, PENDING, queue=q) for q in ("active", "backoff", "unschedulable", "gated")} == {
            "active": 0, "backoff": 0, "unschedulable": 2, "gated": 0}
        # Another writer takes the last CPU in the store behind the scheduler's back: its next bind on n1 is
        # refused by the store (stale view) — a conflict, an attempt in error, the pod backs off.
        assert (await store.bind("foreign", "n1", Resources(cpu=1000, memory=MI), 10.5)).ok
        await tester.publish(subjects.POD_ADMITTED, PodAdmitted(spec=pod("d", 1000, MI), at=11.0))
        await runner.ctx.bus.settle()  # type: ignore[union-attr]
        assert (await svc.tick(11.0))["pods_bound"] == 0
        second = await scrape(runner.http_port)
        assert delta(first, second, BINDS, result="conflict") == 1
        assert delta(first, second, BINDS, result="bound") == 0
        assert delta(first, second, ATTEMPTS, result="error") == 1
        assert delta(first, second, f"{DURATION}_count", result="error") == 1
        assert delta(first, second, ATTEMPTS, result="scheduled") == 0
        assert value(second, PENDING, queue="backoff") == 1
        assert value(second, PENDING, queue="unschedulable") == 2
        # the bus counters are labelled by subject pattern, never by a node's concrete subject
        bus_subjects = {dict(labels).get("subject", "") for name, labels in second if name.startswith("colo_bus_")}
        assert "colo.v1.node.registered.*" in bus_subjects or "colo.v1.pod.bound.*" in bus_subjects
        assert not any(s.endswith(".n1") for s in bus_subjects), bus_subjects
    finally:
        await runner.stop()
