"""Builders for the gang (Coscheduling) tests."""

from __future__ import annotations

import msgspec
from sched_helpers import GI, node, pod

from colo.messages import GangSpec, PodSpec
from colo_scheduler.core import Scheduler
from colo_scheduler.settings import SchedulerSettings


def gang(name: str, min_member: int, mode: str = "Strict", timeout_s: float = 600.0,
         groups: tuple[str, ...] = (), created_at: float = 1.0, total: int = 0) -> GangSpec:
    """A gang ``default/<name>``."""
    return GangSpec(name=f"default/{name}", min_member=min_member, total_member=total or min_member,
                    timeout_s=timeout_s, mode=mode, groups=[f"default/{g}" for g in groups],  # type: ignore[arg-type]
                    created_at=created_at)


def member(uid: str, g: GangSpec | None, cpu: int = 1000, created_at: float = 1.0, priority: int | None = None) -> PodSpec:
    """A pod of ``cpu`` milli-cores and 1 GiB in gang ``g``."""
    return msgspec.structs.replace(pod(uid, cpu, GI, created_at=created_at, priority=priority), gang=g)


def cluster(nodes: int, cpu: int = 4000, **settings: object) -> Scheduler:
    """A core scheduler with ``nodes`` nodes of ``cpu`` milli-cores and 64 GiB."""
    s = Scheduler(SchedulerSettings(**settings))  # type: ignore[arg-type]
    for i in range(nodes):
        s.on_node(node(f"n{i}", cpu=cpu, memory=64 * GI), 0.0)
    return s


def add_members(s: Scheduler, g: GangSpec, n: int, now: float, prefix: str = "", cpu: int = 1000,
                start: int = 0) -> list[str]:
    """Queue ``n`` members of ``g`` (uids ``<prefix or gang name>-<k>``)."""
    base = prefix or g.name.split("/")[1]
    uids = [f"{base}-{k:04d}" for k in range(start, start + n)]
    for uid in uids:
        s.add_pod(member(uid, g, cpu), now)
    return uids


def allocated_cpu(s: Scheduler) -> int:
    """Σ cpu milli-cores reserved on the table."""
    return int(s.table.allocated[:, 0].sum())
