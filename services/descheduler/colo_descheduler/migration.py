"""PodMigrationJob: the pure state machine and the arbitration of migration jobs (no I/O).

A job moves one pod off its source node onto a target (REFERENCE.md §6 "reserve room on the target
first, then evict"; Koordinator's PodMigrationJob)::

    Pending ──reserve ok──▶ Running ──replacement bound on the reservation──▶ Succeeded
       │                       │
       │ pending timeout,      │ running timeout, reservation expired or aborted,
       │ pod gone              │ replacement bound elsewhere
       ▼                       ▼
    Aborted                  Failed

*Pending*: waits for arbitration (:func:`arbitrate`) and a reservation; nothing has been done to the
pod, and a reservation the store refuses leaves it Pending with the store's reason. It never evicts
without a reservation. *Running*: the reservation is held; the eviction is sent right after
(``evicted_at``). *Succeeded*: the reservation was consumed by a bind of its owner on the target.
*Failed*: evicted, but no replacement was bound on the reservation (timeout, expiry, bound
elsewhere). *Aborted*: stopped before any eviction. Each phase has a timeout
(:class:`JobTimeouts`). A job that ends Failed or Aborted with a reservation still available
releases it (the runner does, :mod:`colo_descheduler.migration_runner`).

Arbitration counts **running** jobs only: a pending job never counts as migrating, else pending jobs
would hold the node's cap against each other and none would ever start (REFERENCE.md §11,
"Migration jobs that count pending jobs as migrating deadlock a node").
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import msgspec

from colo.messages import MigrationPhase, PodMigrationJob
from colo.reservations import Reservation

PENDING: MigrationPhase = "Pending"
RUNNING: MigrationPhase = "Running"
SUCCEEDED: MigrationPhase = "Succeeded"
FAILED: MigrationPhase = "Failed"
ABORTED: MigrationPhase = "Aborted"
TERMINAL: frozenset[str] = frozenset({SUCCEEDED, FAILED, ABORTED})
"""Phases a job never leaves."""


@dataclass(frozen=True)
class JobLimits:
    """At most this many **running** jobs per source node, per workload (``namespace/app``; pods
    without one are not limited by it) and in all; 0 = no job starts. Defaults: docs/descheduler.md."""

    per_node: int = 2
    per_workload: int = 2
    total: int = 10


@dataclass(frozen=True)
class JobTimeouts:
    """Seconds a job may stay Pending (then Aborted) and Running (then Failed)."""

    pending_s: float = 60.0
    running_s: float = 300.0


@dataclass(frozen=True)
class Observation:
    """What the store says about a job's pod and reservation: ``reservation`` (None when unknown or
    gone), ``binding`` the pod's ``(node, bound_at)`` or None when it has no binding."""

    reservation: Reservation | None
    binding: tuple[str, float] | None


def job_id(uid: str, created_at: float) -> str:
    """``mig-<uid>-<created_at with 3 decimals>``."""
    return f"mig-{uid}-{created_at:.3f}"


def reservation_name(job: PodMigrationJob) -> str:
    """Name of the job's reservation: ``rsv-`` + the job id."""
    return f"rsv-{job.id}"


def is_active(job: PodMigrationJob) -> bool:
    """Not in a terminal phase."""
    return job.phase not in TERMINAL


def _to(job: PodMigrationJob, phase: MigrationPhase, reason: str, now: float, **fields: object) -> PodMigrationJob:
    return msgspec.structs.replace(job, phase=phase, reason=reason, phase_at=now, **fields)


def start(job: PodMigrationJob, reservation: str, now: float) -> PodMigrationJob:
    """Pending → Running once ``reservation`` holds the room on the target."""
    if job.phase != PENDING:
        raise ValueError(f"job {job.id} is {job.phase}, only a Pending job starts")
    return _to(job, RUNNING, f"room reserved on {job.target} as {reservation}", now, reservation=reservation)


def mark_evicted(job: PodMigrationJob, now: float) -> PodMigrationJob:
    """The eviction of a Running job was sent at ``now`` (phase unchanged)."""
    if job.phase != RUNNING:
        raise ValueError(f"job {job.id} is {job.phase}, only a Running job evicts")
    return msgspec.structs.replace(job, evicted_at=now, reason=f"evicted from {job.source}, waiting for the "
                                   f"replacement on {job.target}")


def refuse(job: PodMigrationJob, reason: str) -> PodMigrationJob:
    """The store refused the reservation: the job stays Pending with the reason."""
    return msgspec.structs.replace(job, reason=f"reservation refused on {job.target}: {reason}")


def timed_out(job: PodMigrationJob, now: float, timeouts: JobTimeouts) -> PodMigrationJob | None:
    """The job after its phase's timeout at ``now``, or None when it has not passed (or is final)."""
    age = now - job.phase_at
    if job.phase == PENDING and age > timeouts.pending_s:
        return _to(job, ABORTED, f"not started within {timeouts.pending_s:g} s ({job.reason or 'waiting'})", now)
    if job.phase == RUNNING and age > timeouts.running_s:
        return _to(job, FAILED, f"no replacement bound on the reservation within {timeouts.running_s:g} s", now)
    return None


def observe(job: PodMigrationJob, obs: Observation, now: float) -> PodMigrationJob | None:
    """The job after what the store shows (:class:`Observation`), or None when nothing changes.

    Pending: the pod no longer bound on the source with the binding it had → Aborted. Running and
    evicted: the reservation consumed (by ``consumed_by``) → Succeeded; expired, aborted or gone →
    Failed; the pod bound again on the target without it → Succeeded (the runner releases the
    reservation), on any other node (the source included) → Failed."""
    if job.phase == PENDING:
        if obs.binding is None or obs.binding[0] != job.source or obs.binding[1] != job.bound_at:
            return _to(job, ABORTED, f"pod {job.uid} left {job.source} before the migration started", now)
        return None
    if job.phase != RUNNING or job.evicted_at <= 0:
        return None
    rsv = obs.reservation
    if rsv is not None and rsv.state == "Succeeded":
        who = rsv.consumed_by or job.uid
        return _to(job, SUCCEEDED, f"replacement {who} bound on the reservation on {job.target}", now,
                   replacement=who)
    if rsv is None or rsv.state in ("Expired", "Aborted"):
        state = "gone" if rsv is None else rsv.state
        return _to(job, FAILED, f"reservation {job.reservation} {state} before a replacement was bound", now)
    if obs.binding is None or obs.binding == (job.source, job.bound_at):
        return None  # not evicted yet, or waiting in the queue
    node = obs.binding[0]
    if node == job.target:  # bound there without the reservation (it is released)
        return _to(job, SUCCEEDED, f"pod {job.uid} bound on {job.target} beside the reservation", now,
                   replacement=job.uid)
    return _to(job, FAILED, f"pod {job.uid} bound on {node}, not on the reservation on {job.target}", now)


def arbitrate(jobs: Iterable[PodMigrationJob], limits: JobLimits) -> list[str]:
    """Ids of the Pending jobs that may start now, oldest first, such that the running jobs plus the
    started ones stay within ``limits`` per source node, per workload and in total. Only Running jobs
    count (module doc); a Pending job that does not fit is skipped, later ones may still start."""
    running_node: dict[str, int] = {}
    running_workload: dict[str, int] = {}
    total = 0
    pending: list[PodMigrationJob] = []
    for job in jobs:
        if job.phase == RUNNING:
            running_node[job.source] = running_node.get(job.source, 0) + 1
            if job.workload:
                running_workload[job.workload] = running_workload.get(job.workload, 0) + 1
            total += 1
        elif job.phase == PENDING:
            pending.append(job)
    out: list[str] = []
    for job in sorted(pending, key=lambda j: (j.created_at, j.id)):
        if total >= limits.total or running_node.get(job.source, 0) >= limits.per_node:
            continue
        if job.workload and running_workload.get(job.workload, 0) >= limits.per_workload:
            continue
        out.append(job.id)
        total += 1
        running_node[job.source] = running_node.get(job.source, 0) + 1
        if job.workload:
            running_workload[job.workload] = running_workload.get(job.workload, 0) + 1
    return out


def admissible(jobs: Sequence[PodMigrationJob], uid: str, source: str, max_pending_per_node: int) -> bool:
    """Whether a new job for pod ``uid`` off ``source`` may be created: no active job for the pod,
    and fewer than ``max_pending_per_node`` Pending jobs off that node (a bound on the queue, not
    a count of migrations)."""
    if any(j.uid == uid and is_active(j) for j in jobs):
        return False
    return sum(1 for j in jobs if j.phase == PENDING and j.source == source) < max_pending_per_node
