"""The scheduler's Prometheus metrics (docs/metrics.md "Scheduler"), defined at import time.

Names follow kube-scheduler's (``scheduler_schedule_attempts_total``, ``scheduler_scheduling_attempt_duration_seconds``,
``scheduler_pending_pods``, ``scheduler_preemption_attempts_total``, ``scheduler_preemption_victims``) with the
``colo_scheduler_`` prefix. Every update is made once per cycle or per bind pipeline from what the cycle already
computed (:class:`~colo_scheduler.outcome.CycleOutcome`, the store's bind results): nothing is counted per node,
and the per-pod durations are observed after the cycle, never inside the filter/score path. The pending-pods gauge
is read from the queue when scraped (:func:`watch_queue`), so the hot path never updates it.

Labels are bounded enumerations only (no pod, uid or node): ``result`` (:data:`ATTEMPT_RESULTS`,
:data:`BIND_RESULTS`) and ``queue`` (:data:`QUEUES`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from colo import telemetry
from colo.store import REASON_ALREADY_BOUND, REASON_LEASE_LOST
from colo_scheduler.framework.interface import ERROR
from colo_scheduler.outcome import CycleOutcome, Placement

ATTEMPT_RESULTS = ("scheduled", "unschedulable", "error")
"""``result`` of an attempt (kube-scheduler's): bound; no node fits (a preemption that nominated a node included);
placed but its bind failed, or a plugin error."""
BIND_RESULTS = ("bound", "conflict", "refused")
"""``result`` of a bind: written; the store refused the room (another scheduler or a release changed the node
since the cycle's view: stale allocation, a gang member's failure); refused for ownership (already bound elsewhere,
the lease lost before or during the bind)."""
QUEUES = ("active", "backoff", "unschedulable", "gated")
"""``queue`` of a pending pod (Kubernetes PriorityQueue pools); ``gated``: reserved and held at Permit, waiting
for the rest of its gang (Coscheduling)."""

ATTEMPT_BUCKETS_S = (0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                     0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
"""Histogram buckets of an attempt, seconds: a decision takes tens of microseconds on the class cache
(bench/scheduler_inprocess.py), a bind pipeline milliseconds, a decision over a cold class of 10,000 nodes up to
about a second."""
CYCLE_BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
"""Histogram buckets of a whole cycle (refresh, decisions, bind pipeline, publishing), seconds."""

SCHEDULE_ATTEMPTS = telemetry.counter(
    "colo_scheduler_schedule_attempts_total",
    "Scheduling attempts by result (scheduled: bound; unschedulable: no node fits; error: bind failed or "
    "plugin error)", ("result",))
ATTEMPT_DURATION = telemetry.histogram(
    "colo_scheduler_scheduling_attempt_duration_seconds",
    "Scheduling attempt latency in seconds: the pod's filter/score decision plus, when placed, the cycle's "
    "bind pipeline", ("result",), buckets=ATTEMPT_BUCKETS_S)
PENDING_PODS = telemetry.gauge(
    "colo_scheduler_pending_pods",
    "Pending pods by queue (active, backoff, unschedulable; gated: held at Permit for their gang)", ("queue",))
BINDS = telemetry.counter(
    "colo_scheduler_binds_total",
    "Binds by result (bound; conflict: the store refused the room, stale view or race; refused: already bound "
    "elsewhere or lease lost)", ("result",))
PREEMPTION_ATTEMPTS = telemetry.counter(
    "colo_scheduler_preemption_attempts_total",
    "Attempts in which DefaultPreemption nominated a node for the pod (victims chosen, or a nomination kept)")
PREEMPTION_VICTIMS = telemetry.counter(
    "colo_scheduler_preemption_victims_total", "Pods ordered evicted as preemption victims")
QUOTA_RECLAIMS = telemetry.counter(
    "colo_scheduler_quota_reclaim_evictions_total",
    "Pods ordered evicted to give an elastic quota its lent min back (docs/quota.md)")
CYCLE_DURATION = telemetry.histogram(
    "colo_scheduler_cycle_duration_seconds",
    "Duration of a scheduling cycle in seconds (leader cycles that attempted at least one pod)",
    buckets=CYCLE_BUCKETS_S)

_attempts = {r: SCHEDULE_ATTEMPTS.labels(r) for r in ATTEMPT_RESULTS}
_durations = {r: ATTEMPT_DURATION.labels(r) for r in ATTEMPT_RESULTS}
_binds = {r: BINDS.labels(r) for r in BIND_RESULTS}
_pending = {q: PENDING_PODS.labels(q) for q in QUEUES}
_PREEMPTED = "Preempted by "


def bind_result(ok: bool, reason: str) -> str:
    """The :data:`BIND_RESULTS` value of one store answer (``ok``, ``reason`` of :class:`colo.store.BindResult`)."""
    if ok:
        return "bound"
    if reason.startswith(REASON_ALREADY_BOUND) or reason == REASON_LEASE_LOST:
        return "refused"
    return "conflict"


def observe_binds(placements: Sequence[Placement], results: Sequence[Any] | None, bind_s: float) -> None:
    """Count one bind pipeline: per placement its bind result and its attempt (``scheduled`` when bound, else
    ``error``) with duration decision + ``bind_s`` (seconds the pipeline took). ``results`` (the store's
    :class:`~colo.store.BindResult` per placement, in order) None: nothing was tried, the lease was lost first
    (all ``refused``). A handful of increments per call, whatever the number of placements."""
    counts = dict.fromkeys(BIND_RESULTS, 0)
    scheduled: list[float] = []
    failed: list[float] = []
    for k, p in enumerate(placements):
        res = bind_result(results[k].ok, results[k].reason) if results is not None else "refused"
        counts[res] += 1
        (scheduled if res == "bound" else failed).append(p.decision_ms / 1e3 + bind_s)
    for res, n in counts.items():
        if n:
            _binds[res].inc(n)
    if scheduled:
        _attempts["scheduled"].inc(len(scheduled))
        telemetry.observe_many(_durations["scheduled"], scheduled)
    if failed:
        _attempts["error"].inc(len(failed))
        telemetry.observe_many(_durations["error"], failed)


def observe_cycle(out: CycleOutcome, cycle_s: float) -> None:
    """Count one cycle's failures (``unschedulable``, or ``error`` for a plugin error), its preemption
    nominations, victims and quota reclaims, and its duration (``cycle_s`` seconds; only cycles that attempted
    a pod). Placements are counted by :func:`observe_binds`."""
    if out.failures:
        unsched: list[float] = []
        errors: list[float] = []
        nominated = 0
        for f in out.failures:
            (errors if f.result.code == ERROR else unsched).append(f.decision_ms / 1e3)
            if f.result.nominated >= 0:
                nominated += 1
        for result, amounts in (("unschedulable", unsched), ("error", errors)):
            if amounts:
                _attempts[result].inc(len(amounts))
                telemetry.observe_many(_durations[result], amounts)
        if nominated:
            PREEMPTION_ATTEMPTS.inc(nominated)
    if out.evictions:
        victims = sum(1 for e in out.evictions if e.reason.startswith(_PREEMPTED))
        if victims:
            PREEMPTION_VICTIMS.inc(victims)
        if victims < len(out.evictions):
            QUOTA_RECLAIMS.inc(len(out.evictions) - victims)
    if out.placements or out.failures:
        CYCLE_DURATION.observe(cycle_s)


def watch_queue(lengths: Callable[[], dict[str, int]], gated: Callable[[], int]) -> None:
    """Read the pending-pods gauge from ``lengths`` (the queue's pools: ``active``, ``backoff``,
    ``unschedulable``) and ``gated`` (pods held at Permit) at every scrape. One process schedules with one queue;
    a later call (a service constructed again, in tests) replaces the earlier."""
    for q in ("active", "backoff", "unschedulable"):
        _pending[q].set_function(lambda q=q: float(lengths()[q]))  # type: ignore[misc]
    _pending["gated"].set_function(lambda: float(gated()))
