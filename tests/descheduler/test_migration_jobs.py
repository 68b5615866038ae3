"""PodMigrationJob state machine and arbitration (pure): every transition, every timeout, running-only counting."""

from __future__ import annotations

from dataclasses import dataclass

import msgspec
import pytest

from colo.messages import MigrationPhase, PodMigrationJob, Resources
from colo.reservations import Reservation, ReservationState
from colo_descheduler import migration as mj

T0 = 100.0
TIMEOUTS = mj.JobTimeouts(pending_s=60.0, running_s=300.0)


def job(phase: MigrationPhase = "Pending", uid: str = "p1", source: str = "hot", workload: str = "shop/web",
        created_at: float = T0, evicted_at: float = 0.0, reservation: str = "") -> PodMigrationJob:
    return PodMigrationJob(id=mj.job_id(uid, created_at), uid=uid, source=source, target="cold",
                           workload=workload, phase=phase, created_at=created_at, phase_at=created_at,
                           bound_at=10.0, evicted_at=evicted_at, reservation=reservation)


def rsv(state: ReservationState, consumed_by: str = "") -> Reservation:
    return Reservation(name="rsv-1", node="cold", owner_uid="p1", held=Resources(), state=state,
                       consumed_by=consumed_by)


RUNNING = job("Running", evicted_at=T0 + 1, reservation="rsv-1")
RUNNING_NOT_EVICTED = job("Running", reservation="rsv-1")


@dataclass(frozen=True)
class Case:
    name: str
    job: PodMigrationJob
    obs: mj.Observation
    phase: MigrationPhase | None  # None: no transition
    reason: str = ""


OBSERVE_CASES = [
    Case("pending-pod-still-on-source", job(), mj.Observation(None, ("hot", 10.0)), None),
    Case("pending-pod-gone", job(), mj.Observation(None, None), "Aborted", "left hot before the migration"),
    Case("pending-pod-rebound-elsewhere", job(), mj.Observation(None, ("n3", 50.0)), "Aborted", "left hot"),
    Case("pending-pod-rebound-on-source", job(), mj.Observation(None, ("hot", 50.0)), "Aborted", "left hot"),
    Case("running-not-evicted-waits", RUNNING_NOT_EVICTED, mj.Observation(rsv("Available"), ("hot", 10.0)), None),
    Case("running-eviction-not-done-yet", RUNNING, mj.Observation(rsv("Available"), ("hot", 10.0)), None),
    Case("running-pod-queued", RUNNING, mj.Observation(rsv("Available"), None), None),
    Case("running-consumed-by-pod", RUNNING, mj.Observation(rsv("Succeeded", "p1"), ("cold", 200.0)),
         "Succeeded", "replacement p1 bound on the reservation"),
    Case("running-consumed-by-new-replica", RUNNING, mj.Observation(rsv("Succeeded", "p9"), None),
         "Succeeded", "replacement p9"),
    Case("running-reservation-expired", RUNNING, mj.Observation(rsv("Expired"), None), "Failed", "Expired"),
    Case("running-reservation-aborted", RUNNING, mj.Observation(rsv("Aborted"), None), "Failed", "Aborted"),
    Case("running-reservation-gone", RUNNING, mj.Observation(None, None), "Failed", "gone"),
    Case("running-bound-elsewhere", RUNNING, mj.Observation(rsv("Available"), ("n3", 200.0)),
         "Failed", "bound on n3, not on the reservation"),
    Case("running-rebound-on-source", RUNNING, mj.Observation(rsv("Available"), ("hot", 200.0)),
         "Failed", "bound on hot"),
    Case("running-bound-on-target-beside-reservation", RUNNING, mj.Observation(rsv("Available"), ("cold", 200.0)),
         "Succeeded", "beside the reservation"),
    Case("succeeded-is-final", job("Succeeded"), mj.Observation(None, None), None),
    Case("failed-is-final", job("Failed"), mj.Observation(None, None), None),
    Case("aborted-is-final", job("Aborted"), mj.Observation(None, None), None),
]


@pytest.mark.parametrize("case", OBSERVE_CASES, ids=[c.name for c in OBSERVE_CASES])
def test_observe(case: Case) -> None:
    got = mj.observe(case.job, case.obs, T0 + 50)
    if case.phase is None:
        assert got is None
        return
    assert got is not None and got.phase == case.phase and case.reason in got.reason
    assert got.phase_at == T0 + 50


TIMEOUT_CASES = [
    ("pending-before-timeout", job(), T0 + 60, None),
    ("pending-after-timeout", job(), T0 + 60.5, "Aborted"),
    ("running-before-timeout", RUNNING, T0 + 300, None),
    ("running-after-timeout", RUNNING, T0 + 300.5, "Failed"),
    ("running-not-evicted-after-timeout", RUNNING_NOT_EVICTED, T0 + 301, "Failed"),
    ("succeeded-never-times-out", job("Succeeded"), T0 + 1e6, None),
    ("failed-never-times-out", job("Failed"), T0 + 1e6, None),
    ("aborted-never-times-out", job("Aborted"), T0 + 1e6, None),
]


@pytest.mark.parametrize(("name", "j", "now", "phase"), TIMEOUT_CASES, ids=[c[0] for c in TIMEOUT_CASES])
def test_timeouts(name: str, j: PodMigrationJob, now: float, phase: str | None) -> None:
    got = mj.timed_out(j, now, TIMEOUTS)
    assert (got.phase if got is not None else None) == phase


def test_start_evict_refuse() -> None:
    pending = job()
    refused = mj.refuse(pending, "Insufficient cpu")
    assert refused.phase == "Pending" and refused.reason == "reservation refused on cold: Insufficient cpu"
    assert refused.phase_at == pending.phase_at  # a refusal does not restart the pending timeout
    running = mj.start(refused, "rsv-x", T0 + 5)
    assert (running.phase, running.reservation, running.phase_at, running.evicted_at) == ("Running", "rsv-x",
                                                                                       T0 + 5, 0.0)
    evicted = mj.mark_evicted(running, T0 + 5)
    assert evicted.evicted_at == T0 + 5 and evicted.phase == "Running"
    with pytest.raises(ValueError):
        mj.start(running, "rsv-y", T0 + 6)
    with pytest.raises(ValueError):
        mj.mark_evicted(pending, T0 + 6)


def naive_arbitrate(jobs: list[PodMigrationJob], limits: mj.JobLimits) -> list[str]:
    """The reference's fault: every non-final job counts as migrating, the Pending ones included."""
    per_node: dict[str, int] = {}
    for j in jobs:
        if mj.is_active(j):
            per_node[j.source] = per_node.get(j.source, 0) + 1
    return [j.id for j in jobs if j.phase == "Pending" and per_node[j.source] <= limits.per_node - 1]


@pytest.mark.parametrize("arbitrate", [mj.arbitrate, pytest.param(
    naive_arbitrate, marks=pytest.mark.xfail(strict=True, reason="REFERENCE.md §11: pending jobs deadlock"))],
    ids=["running-only", "naive-pending-counted"])
def test_pending_jobs_never_deadlock_a_node(arbitrate: object) -> None:
    """Three pods to move off one node with the cap at 2: run the controller's loop (arbitrate, start,
    the replacement binds, succeed) until every job is final. Counting pending jobs as migrating
    (the naive version) starts none, ever."""
    limits = mj.JobLimits(per_node=2, per_workload=10, total=10)
    jobs = {j.id: j for j in (job(uid=f"p{i}", created_at=T0 + i) for i in range(3))}
    now = T0 + 10
    for _ in range(10):
        for jid in arbitrate(list(jobs.values()), limits):  # type: ignore[operator]
            jobs[jid] = mj.mark_evicted(mj.start(jobs[jid], f"rsv-{jid}", now), now)
        running = [j for j in jobs.values() if j.phase == "Running"]
        assert len(running) <= limits.per_node
        for j in running:  # the replacement binds on the reservation
            jobs[j.id] = mj.observe(j, mj.Observation(rsv("Succeeded", j.uid), ("cold", now)), now + 1) or j
        now += 5
    assert sorted(j.phase for j in jobs.values()) == ["Succeeded"] * 3


ARBITRATION_CASES = [
    ("empty", [], mj.JobLimits(), []),
    ("pending-only-start-up-to-node-cap", [job(uid=f"p{i}", created_at=T0 + i) for i in range(3)],
     mj.JobLimits(per_node=2, per_workload=10), ["p0", "p1"]),
    ("running-fills-node-cap", [job("Running", uid="r0"), job("Running", uid="r1"), job(uid="p0")],
     mj.JobLimits(per_node=2, per_workload=10), []),
    ("other-node-still-starts", [job("Running", uid="r0"), job("Running", uid="r1"),
                                 job(uid="p0", source="warm")], mj.JobLimits(per_node=2, per_workload=10), ["p0"]),
    ("workload-cap", [job("Running", uid="r0"), job(uid="p0", source="warm"),
                      job(uid="p1", source="warm", workload="shop/db")],
     mj.JobLimits(per_node=5, per_workload=1), ["p1"]),
    ("standalone-pods-skip-workload-cap", [job("Running", uid="r0", workload=""),
                                           job(uid="p0", workload="")], mj.JobLimits(per_workload=1), ["p0"]),
    ("global-cap", [job("Running", uid="r0"), job(uid="p0", source="a"), job(uid="p1", source="b")],
     mj.JobLimits(per_node=5, per_workload=5, total=2), ["p0"]),
    ("final-jobs-do-not-count", [job("Succeeded", uid="s0"), job("Failed", uid="f0"), job("Aborted", uid="a0"),
                                 job(uid="p0")], mj.JobLimits(per_node=1, per_workload=1, total=1), ["p0"]),
    ("oldest-first", [job(uid="late", created_at=T0 + 9), job(uid="early", created_at=T0)],
     mj.JobLimits(per_node=1), ["early"]),
    ("zero-cap-starts-nothing", [job(uid="p0")], mj.JobLimits(per_node=0), []),
]


@pytest.mark.parametrize(("name", "jobs", "limits", "started"), ARBITRATION_CASES,
                         ids=[c[0] for c in ARBITRATION_CASES])
def test_arbitrate(name: str, jobs: list[PodMigrationJob], limits: mj.JobLimits, started: list[str]) -> None:
    by_id = {j.id: j.uid for j in jobs}
    assert [by_id[i] for i in mj.arbitrate(jobs, limits)] == started


def test_admissible_one_active_job_per_pod_and_a_bounded_queue() -> None:
    jobs = [job(uid="p0"), job("Failed", uid="p1")]
    assert not mj.admissible(jobs, "p0", "hot", 5)  # already has an active job
    assert mj.admissible(jobs, "p1", "hot", 5)  # its last job ended
    assert not mj.admissible(jobs, "p2", "hot", 1)  # the node's pending queue is full
    assert mj.admissible(jobs, "p2", "warm", 1)


def test_job_roundtrips_as_json() -> None:
    j = mj.mark_evicted(mj.start(job(), "rsv-a", T0), T0)
    assert msgspec.json.decode(msgspec.json.encode(j), type=PodMigrationJob) == j
    assert mj.reservation_name(j) == f"rsv-{j.id}" and j.id == "mig-p1-100.000"
