"""The descheduler's Prometheus metrics (docs/metrics.md "Descheduler"), defined at import time.

Updated once per tick by :func:`observe_tick` from the counters the service and its migration-job controller
already keep (no per-pod or per-node work). Labels are bounded enumerations: ``strategy`` (:data:`STRATEGIES`),
``result`` (:data:`EVICTION_RESULTS`, :data:`JOB_RESULTS`).
"""

from __future__ import annotations

from collections.abc import Mapping

from colo import telemetry

STRATEGIES = ("LowNodeLoad",)
"""``strategy`` values: the descheduler's balance plugins (Koordinator's LowNodeLoad is the only one)."""
EVICTION_RESULTS = ("ordered", "refused")
"""``result`` of a planned eviction: ``ordered`` (an EvictionCommand published on ``pod.evict.<node>``);
``refused`` (its migration job could not reserve room on the target: the pod stays)."""
JOB_RESULTS = ("succeeded", "failed", "aborted")
"""``result`` of a finished PodMigrationJob (its final phase, lower case)."""

EVICTIONS = telemetry.counter(
    "colo_descheduler_evictions_total",
    "Planned evictions by strategy and result (ordered: EvictionCommand published; refused: the target's "
    "reservation was refused)", ("strategy", "result"))
MIGRATION_JOBS = telemetry.counter(
    "colo_descheduler_migration_jobs_total", "Finished PodMigrationJobs by final phase", ("result",))
ROUNDS = telemetry.counter("colo_descheduler_rounds_total", "Balance rounds run", ("strategy",))
MIGRATING = telemetry.gauge(
    "colo_descheduler_migrating_pods", "Pods whose migration is under way (evicted or ordered, replacement not "
                                       "running yet)")

for _strategy in STRATEGIES:  # every bounded combination exported from the start, at 0 until it fires
    ROUNDS.labels(_strategy)
    for _result in EVICTION_RESULTS:
        EVICTIONS.labels(_strategy, _result)
for _result in JOB_RESULTS:
    MIGRATION_JOBS.labels(_result)


class TickCounters:
    """The service's running totals at the last :func:`observe_tick` (the metrics add the differences)."""

    def __init__(self) -> None:
        self.rounds = 0
        self.evictions = 0
        self.jobs: dict[str, int] = {}


def observe_tick(last: TickCounters, rounds: int, evictions: int, jobs: Mapping[str, int] | None,
                 migrating: int, strategy: str = "LowNodeLoad") -> None:
    """Add what changed since ``last`` (updated in place): ``rounds`` run, ``evictions`` ordered (running
    totals), the migration-job controller's ``counts`` (``jobs_succeeded|failed|aborted``,
    ``reservations_refused``; None without jobs), and set the ``migrating`` pods gauge."""
    if rounds > last.rounds:
        ROUNDS.labels(strategy).inc(rounds - last.rounds)
    if evictions > last.evictions:
        EVICTIONS.labels(strategy, "ordered").inc(evictions - last.evictions)
    last.rounds, last.evictions = rounds, evictions
    if jobs is not None:
        deltas = {k: v - last.jobs.get(k, 0) for k, v in jobs.items()}
        if deltas.get("reservations_refused", 0) > 0:
            EVICTIONS.labels(strategy, "refused").inc(deltas["reservations_refused"])
        for result in JOB_RESULTS:
            if deltas.get(f"jobs_{result}", 0) > 0:
                MIGRATION_JOBS.labels(result).inc(deltas[f"jobs_{result}"])
        last.jobs = dict(jobs)
    MIGRATING.set(migrating)
