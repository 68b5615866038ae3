"""Safe pod migration: the :class:`PodMigrationJob` the descheduler runs and keeps in the store
(docs/descheduler.md)."""

from __future__ import annotations

from typing import Literal

from colo.messages.base import Message

MigrationPhase = Literal["Pending", "Running", "Succeeded", "Failed", "Aborted"]
"""Phases of a :class:`PodMigrationJob` (Koordinator's PodMigrationJob phases, docs/descheduler.md)."""


class PodMigrationJob(Message, frozen=True, kw_only=True):
    """A safe migration of pod ``uid`` off ``source`` onto ``target`` (subject ``migration.<phase>``; the
    descheduler keeps it in the store, ``colo get migrations`` reads it there).

    ``id`` is ``mig-<uid>-<created_at>``. ``phase``: Pending (waits for arbitration and a reservation;
    nothing done to the pod), Running (room reserved on ``target`` as ``reservation``, then the eviction
    sent: ``evicted_at`` > 0), Succeeded (a replacement ``replacement`` was bound on the reservation),
    Failed (evicted, but no replacement bound on the reservation in time, or bound elsewhere; the
    reservation released), Aborted (stopped before any eviction: reservation refused until the pending
    timeout, or the pod went away). ``reason`` says why the phase was entered. ``usage_cpu`` (milli-cores)
    and ``usage_memory`` (bytes) are the pod's measured usage the descheduler books on ``target``; times
    in clock seconds (``phase_at``: when ``phase`` was entered)."""

    id: str
    uid: str
    name: str = ""
    namespace: str = "default"
    workload: str = ""
    source: str
    target: str
    phase: MigrationPhase
    reason: str = ""
    reservation: str = ""
    replacement: str = ""
    usage_cpu: int = 0
    usage_memory: int = 0
    created_at: float = 0.0
    phase_at: float = 0.0
    evicted_at: float = 0.0
    bound_at: float = 0.0
    """When the pod was bound on ``source`` (its eviction's message id names that binding)."""
