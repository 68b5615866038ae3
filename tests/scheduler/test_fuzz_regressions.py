"""Scheduler inputs the fuzz run (tests/fuzz) found mishandled, each a regression test (real servers)."""

from __future__ import annotations

from typing import Any

import pytest

from colo import codec, subjects
from colo.clock import VirtualClock
from colo.messages import DeadLetter, ElasticQuota
from colo.testing.fixtures import service_context
from colo_scheduler.service import SchedulerService
from colo_scheduler.settings import SchedulerSettings

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(("name", "subject_name"), [
    pytest.param("\t\n", "q1", id="not-a-subject-token"),
    pytest.param("q2", "q1", id="other-quota-than-subject"),
])
async def test_a_quota_named_unusably_is_refused_and_quota_handling_goes_on(
        bus_factory: Any, store: Any, name: str, subject_name: str) -> None:
    """Found by the fuzz run: an ElasticQuota named ``"\\t\\n"`` (on ``quota.spec.q1``) was accepted, then its
    deletion raised ``ValueError: … is not a subject token`` purging its status five times running, and
    it was dead-lettered as a handler failure; its status could never be published either."""
    clock = VirtualClock(1000.0)
    bus = await bus_factory("scheduler", clock, autostart=False, retry_delay_s=0.01)
    svc = SchedulerService(SchedulerSettings(seed=1))
    await svc.start(service_context(bus, store, clock))
    await bus.start_consumers()
    tester = await bus_factory("tester")
    dead: list[DeadLetter] = []

    async def on_dead(m: DeadLetter) -> None:
        dead.append(m)

    await tester.subscribe(subjects.DEAD_LETTER, on_dead, durable="dlq")
    for quota in (ElasticQuota(name=name, max={"cpu": 1000}), ElasticQuota(name=name, deleted=True),
                  ElasticQuota(name="ok", max={"cpu": 1000})):
        await tester.js.publish(subjects.QUOTA_SPEC.format(name=subject_name if quota.name == name else "ok"),
                                codec.encode(quota))
    await bus.settle()
    await svc.tick(1000.0)
    await bus.settle()
    await tester.settle()
    assert svc.debug()["totals"].get("dead_letters") == 2
    assert [d.reason for d in dead if d.reason.startswith("handler failed")] == []
    assert len(dead) == 2 and all("quota name" in d.reason for d in dead)
    assert await store.quota_max("ok") == {"cpu": 1000}
