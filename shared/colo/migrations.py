"""Migration jobs in the store: the descheduler writes them, ``colo get migrations`` reads them.

``{p}:migjob:{id}`` holds a :class:`colo.messages.PodMigrationJob` as JSON and ``{p}:migjobs`` the
ids (:mod:`colo.keys`). An active job's record has no expiry; a finished one expires after the
history time given to :func:`save_job` (its id leaves the index at the next :func:`list_jobs`).
"""

from __future__ import annotations

import logging

import msgspec

from colo import codec
from colo.messages import PodMigrationJob
from colo.store import Store

log = logging.getLogger("colo.migrations")

FINAL_PHASES = frozenset({"Succeeded", "Failed", "Aborted"})
"""Phases a job never leaves."""


async def save_job(store: Store, job: PodMigrationJob, history_s: int) -> None:
    """Write ``job`` (one MULTI/EXEC); a job in a final phase expires after ``history_s`` seconds."""
    k = store.keys
    pipe = store.redis.pipeline(transaction=True)
    pipe.set(k.migration_job(job.id), codec.encode(job))
    pipe.sadd(k.migration_jobs, job.id)
    if job.phase in FINAL_PHASES:
        pipe.expire(k.migration_job(job.id), history_s)
    await pipe.execute()


async def list_jobs(store: Store) -> list[PodMigrationJob]:
    """Every migration job in the store (active, and finished ones within their history), oldest
    first; ids whose record expired are dropped from the index, undecodable records skipped (logged)."""
    k = store.keys
    ids = sorted(_s(i) for i in await store.redis.smembers(k.migration_jobs))
    if not ids:
        return []
    raws = await store.redis.mget([k.migration_job(i) for i in ids])
    gone = [i for i, r in zip(ids, raws) if r is None]
    if gone:
        await store.redis.srem(k.migration_jobs, *gone)
    jobs = []
    for raw in raws:
        if raw is None:
            continue
        try:
            jobs.append(codec.decode(raw, PodMigrationJob))
        except (codec.DecodeError, msgspec.ValidationError) as exc:
            log.error("skipping a stored migration job: %s", exc)
    return sorted(jobs, key=lambda j: (j.created_at, j.id))


def _s(v: bytes | str) -> str:
    return v.decode() if isinstance(v, bytes) else v
