"""Admission's record of each workload and the Job controller (Kubernetes ``batch/v1`` Job semantics).

A Job with ``completions`` > ``parallelism`` starts ``parallelism`` pods (indices 0…); each time one of its
pods Succeeds the next index is created, until ``completions`` pods have succeeded, with at most
``parallelism`` running at once. A pod that Fails (other than an eviction, which the scheduler requeues
itself) is replaced by the next index up to :data:`BACKOFF_LIMIT` failures, Kubernetes' default
``backoffLimit``; then the Job stops creating pods. :func:`on_pod_finished` is pure; the record is kept in the
store (:class:`colo.workloads.WorkloadRecord`, ``workloads`` hash of :mod:`colo.keys`) so that the progress survives a restart.
"""

from __future__ import annotations

from colo.messages import PodPhase
from colo.workloads import WorkloadRecord

BACKOFF_LIMIT = 6
"""Failed pods after which a Job creates no more (Kubernetes ``spec.backoffLimit`` default)."""
REQUEUED_REASONS = frozenset({"Evicted", "Descheduled"})
"""Failure reasons after which the scheduler queues the same pod again: not a Job failure."""


def on_pod_finished(record: WorkloadRecord, uid: str, phase: PodPhase, reason: str) -> list[int]:
    """Apply "pod ``uid`` of the Job ended in ``phase``" to ``record`` (in place); returns the indices of the
    pods to create now (the caller adds them with :func:`pods_created`). A uid not active (a redelivered
    status, a pod of another workload) or a requeued failure changes nothing."""
    if record.spec.kind != "Job" or uid not in record.active:
        return []
    if phase == "Failed" and reason in REQUEUED_REASONS:
        return []
    if phase == "Succeeded":
        record.succeeded += 1
    elif phase == "Failed":
        record.failed += 1
        if record.failed > BACKOFF_LIMIT and not record.stopped:
            record.stopped = f"BackoffLimitExceeded: {record.failed} pods failed"
    else:
        return []
    record.active = [u for u in record.active if u != uid]
    if record.stopped:
        return []
    w = record.spec
    # pods still to run: completions not yet succeeded, less those running
    wanted = min(w.parallelism, w.completions - record.succeeded) - len(record.active)
    return list(range(record.next_index, record.next_index + max(0, wanted)))


def pods_created(record: WorkloadRecord, uids: list[str], next_index: int) -> None:
    """Note that pods ``uids`` were created and the next index is ``next_index`` (in place)."""
    record.pods = [*record.pods, *uids]
    record.active = [*record.active, *uids]
    record.next_index = next_index
