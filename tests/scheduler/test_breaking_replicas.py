"""Two scheduler processes started with the same ``replica_index``.

They share their durable consumers, so NATS splits every stream between them: each saw about half of
the node registrations, metrics, statuses and admissions, scheduled on a partial picture, and nothing
said so. Now a replica claims its shard in Redis (a lease, renewed) and a second process with the same
index refuses to start (exit 2) once the claim has outlived a crashed holder's lease.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time

import pytest
from sched_helpers import GI, node

from colo.clock import VirtualClock
from colo.runtime import StartRefused
from colo.settings import RuntimeSettings
from colo.store import Store
from colo.testing.fixtures import BusFactory, service_context
from colo_scheduler.service import SchedulerService
from colo_scheduler.settings import SchedulerSettings

pytestmark = pytest.mark.integration

FAST = {"lease_duration_s": 1.0, "lease_renew_deadline_s": 0.6, "lease_retry_period_s": 0.2}


async def _replica(bus_factory: BusFactory, store: Store, index: int, instance: str = "") -> SchedulerService:
    clock = VirtualClock(100.0)
    bus = await bus_factory("scheduler", clock, autostart=False)
    svc = SchedulerService(SchedulerSettings(replicas=2, replica_index=index, **FAST))  # type: ignore[arg-type]
    await svc.start(service_context(bus, store, clock, RuntimeSettings(instance=instance)))
    await bus.start_consumers()
    return svc


async def test_a_second_replica_with_the_same_index_is_refused(bus_factory: BusFactory, store: Store) -> None:
    await store.put_node(node("n1", cpu=4_000, memory=8 * GI))
    first = await _replica(bus_factory, store, 0, "a")
    other = await _replica(bus_factory, store, 1, "c")  # another shard is fine
    try:
        started = time.monotonic()
        with pytest.raises(StartRefused, match=r"replica 0 of 2 is already running.*a@"):
            await _replica(bus_factory, store, 0, "b")
        assert time.monotonic() - started < 5
        await asyncio.sleep(1.5)  # the first keeps renewing its claim meanwhile
        with pytest.raises(StartRefused):
            await _replica(bus_factory, store, 0, "b")
    finally:
        await first.stop()  # releases the claim: a replacement starts at once
    again = await _replica(bus_factory, store, 0, "b")
    await again.stop()
    await other.stop()


async def test_a_crashed_replica_can_be_replaced_once_its_claim_expires(bus_factory: BusFactory,
                                                                        store: Store) -> None:
    first = await _replica(bus_factory, store, 0, "a")
    for task in first._tasks:  # the process dies: no renewal, no release
        task.cancel()
    started = time.monotonic()
    second = await _replica(bus_factory, store, 0, "b")
    waited = time.monotonic() - started
    assert waited <= FAST["lease_duration_s"] + 2 * FAST["lease_retry_period_s"] + 0.5
    await second.stop()


async def test_the_process_exits_2(nats_url: str, redis_url: str, store: Store) -> None:
    assert await store.acquire_lease("scheduler-r1-claim", "someone@elsewhere:1", 60_000) is not None
    env = {k: v for k, v in os.environ.items() if not k.startswith("COLO_")}
    env.update(COLO_NATS_URL=nats_url, COLO_REDIS_URL=redis_url, COLO_STORE_PREFIX=store.keys.prefix,
               COLO_SCHEDULER_REPLICAS="2", COLO_SCHEDULER_REPLICA_INDEX="1",
               COLO_SCHEDULER_LEASE_DURATION_S="1", COLO_SCHEDULER_LEASE_RENEW_DEADLINE_S="0.6",
               COLO_SCHEDULER_LEASE_RETRY_PERIOD_S="0.2", COLO_HTTP_PORT="0")
    proc = await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "colo_scheduler"], env=env,
                                   capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert "replica 1 of 2 is already running" in proc.stderr and "someone@elsewhere" in proc.stderr
