"""``colo get migrations``: the descheduler's migration jobs, read from the store (docs/cli.md)."""

from __future__ import annotations

from rich.table import Table

from colo.messages import PodMigrationJob


def age(seconds: float) -> str:
    """``42s``, ``7m``, ``3h``, ``2d`` (whole units, rounded down; negative as ``0s``)."""
    s = max(int(seconds), 0)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            return f"{s // size}{unit}"
    return f"{s}s"


def migrations_table(jobs: list[PodMigrationJob], now: float) -> Table:
    """One row per job, oldest first: phase, pod (namespace/name and uid), source → target, reservation,
    age (since the job was created, at clock time ``now``, seconds) and the reason of its phase."""
    t = Table(title=f"{len(jobs)} migrations")
    for col in ("job", "phase", "pod", "source", "target", "reservation", "age", "reason"):
        t.add_column(col, overflow="fold")
    for j in sorted(jobs, key=lambda j: (j.created_at, j.id)):
        t.add_row(j.id, j.phase, f"{j.namespace}/{j.name or j.uid} ({j.uid})", j.source, j.target,
                  j.reservation or "-", age(now - j.created_at), j.reason or "-")
    return t
