"""A descheduler killed between reserving the target's room and recording its job Running.

The job's reservation is made (``rsv-<job id>``) and then the job is saved Running with its name; a crash
in between leaves a Pending job in the store that names no reservation, and a reservation that holds the
target's room. When the restarted descheduler ends that job without starting it (the pod left its source
meanwhile, or the pending timeout passed), nothing released the reservation: the room stayed held for
nobody until its TTL (the running timeout, 300 s by default), refused to every other pod.
Real NATS and Redis.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from test_migration_integration import REQUEST, seed_cluster, start_descheduler

from colo.clock import VirtualClock
from colo.messages import PodMigrationJob, Resources
from colo.migrations import list_jobs, save_job
from colo.reservations import ReservationStore
from colo.store import Store
from colo.testing.fixtures import BusFactory
from colo_descheduler import migration as mj

pytestmark = pytest.mark.integration


@dataclass(frozen=True)
class Case:
    name: str
    pod_left: bool  # the pod was deleted from its source while the descheduler was down
    restart_at: float  # the job was created at 90 s; pending timeout 20 s


CASES = [
    Case("pod-left-its-source", True, 95.0),
    Case("pending-timeout-passed", False, 200.0),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
async def test_job_ended_after_a_crash_releases_the_reservation_it_made(
        bus_factory: BusFactory, store: Store, case: Case) -> None:
    await seed_cluster(store)
    rs = ReservationStore(store.redis, store.keys)
    job = PodMigrationJob(id="mig-batch-1-90.000", uid="batch-1", name="batch-1", workload="default/batch",
                          source="hot", target="cold", phase="Pending", created_at=90.0, phase_at=90.0,
                          bound_at=0.0, usage_cpu=1500, usage_memory=REQUEST.memory)
    await save_job(store, job, 3600)
    # the crash: the reservation was made, the job was not saved Running
    assert (await rs.reserve(mj.reservation_name(job), "cold", REQUEST, at=90.0, ttl_s=300,
                             owner_uid="batch-1", owner_workload="default/batch")).ok
    if case.pod_left:
        assert await store.release("batch-1", "Succeeded", "deleted", 92.0, node="hot")
    clock = VirtualClock(case.restart_at)
    desched = await start_descheduler(bus_factory, store, clock, enabled=False, migration_pending_timeout_s=20.0)
    await desched.tick(clock.now())
    [stored] = await list_jobs(store)
    assert stored.phase == "Aborted"
    assert await rs.available() == []
    assert await store.allocated("cold") == Resources()  # before: 2000 m, 4 GiB, 1 pod held until 390 s
    await desched.ctx.bus.close()  # type: ignore[union-attr]
