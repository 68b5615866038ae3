"""Crash the migration path end to end (issue 12, item 3): kill what migrations depend on while they run.

The five services run as processes over real NATS and Redis on a shortened demo scenario with the
aggressive descheduler thresholds of test_descheduler_longrun.py, so that PodMigrationJobs run. When the
store holds a job in phase Running (its reservation held, its pod evicted, the replacement not yet bound),
the step hook strikes:

- ``kill9``: SIGKILL the descheduler (at the first step with a running job), then the scheduler (at the
  next such step), each started again at once;
- ``redis``: SIGKILL redis-server and start it again on the same data (append-only file, fsync always).

Afterwards the store is audited (:func:`audit_store`): no reservation held by a finished or unknown job,
every node's allocation equals its bound pods' requests plus the room of its live reservations, no pod
bound twice, no node over-committed, every job final or still legitimately Running (its reservation held,
within its running timeout), no pod lost (bound, finished, or unschedulable with a reason).
"""

from __future__ import annotations

import asyncio
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from colo import subjects as S
from colo.bus import Bus
from colo.embedded import ServerHandle, start_nats, start_redis
from colo.messages import DeadLetter, PodMigrationJob, Resources
from colo.migrations import FINAL_PHASES, list_jobs
from colo.reservations import ReservationStore
from colo.sim import traces as tr
from colo.sim.run import RunResult, run_once
from colo.sim.scenario import ScenarioParams, build_scenario
from colo.sim.services import Supervisor
from colo.store import Store

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not (tr.traces_dir() / tr.NODE_LIST).exists(),
                       reason=f"traces not found in {tr.traces_dir()}: set COLO_TRACES_DIR or run `make traces`"),
]

PARAMS = ScenarioParams(nodes=12, hours=1.5, seed=1)
PREFIX = "colo-colo"
"""The store prefix of run_once's ``colo`` run."""
RUNNING_TIMEOUT_S = 300.0
"""The descheduler's ``migration_running_timeout_s`` default (docs/descheduler.md)."""
DESCHEDULER_ENV = {
    "COLO_DESCHEDULER_LOW_THRESHOLDS__CPU": "20",
    "COLO_DESCHEDULER_LOW_THRESHOLDS__MEMORY": "35",
    "COLO_DESCHEDULER_HIGH_THRESHOLDS__CPU": "40",
    "COLO_DESCHEDULER_HIGH_THRESHOLDS__MEMORY": "55",
    "COLO_DESCHEDULER_CONSECUTIVE_HIGH_ROUNDS": "1",
}
RES_FIELDS = ("cpu", "memory", "batch_cpu", "batch_memory", "mid_cpu", "mid_memory", "pods")


@dataclass
class Chaos:
    """What the hook did: ``strikes`` (step, what, running jobs at that moment)."""

    plan: list[str]
    redis_url: str
    redis: ServerHandle | None = None
    data_dir: str = ""
    strikes: list[tuple[int, str, int]] = field(default_factory=list)

    async def running_jobs(self) -> list[PodMigrationJob]:
        store = await Store.connect(self.redis_url, prefix=PREFIX)
        try:
            return [j for j in await list_jobs(store) if j.phase == "Running"]
        finally:
            await store.close()

    async def hook(self, step: int, now: float, sup: Supervisor) -> None:
        if not self.plan:
            return
        running = await self.running_jobs()
        if not running:
            return
        what = self.plan.pop(0)
        self.strikes.append((step, what, len(running)))
        if what == "redis":
            assert self.redis is not None
            port = self.redis.port
            self.redis.proc.kill()
            self.redis.proc.wait(timeout=10)
            self.redis.stop()
            # from the loop's thread: the server's parent-death signal is tied to the starting thread
            self.redis = start_redis(port, data_dir=self.data_dir)
        else:
            await sup.restart(what, crash=True)


@dataclass
class Audit:
    """The store's state after the run, checked against the invariants of the module doc."""

    leaked: list[str] = field(default_factory=list)
    allocation_mismatch: dict[str, tuple[dict[str, int], dict[str, int]]] = field(default_factory=dict)
    stuck_jobs: list[str] = field(default_factory=list)
    lost_pods: list[str] = field(default_factory=list)
    jobs: list[PodMigrationJob] = field(default_factory=list)
    dead_letters: list[str] = field(default_factory=list)
    """Messages a service refused during the run (``dlq.<service>``): a restart must not make any."""


async def audit_store(redis_url: str, result: RunResult, end: float) -> Audit:
    """Read the store of the finished run (services stopped) and list every broken invariant."""
    store = await Store.connect(redis_url, prefix=PREFIX)
    try:
        rsvs = await ReservationStore(store.redis, store.keys).available()
        jobs = await list_jobs(store)
        pods = await store.list_pods()
        allocated = await store.all_allocated()
    finally:
        await store.close()
    out = Audit(jobs=jobs)
    by_rsv = {j.reservation: j for j in jobs if j.reservation}
    for r in rsvs:
        job = by_rsv.get(r.name)
        if job is None or job.phase in FINAL_PHASES:
            out.leaked.append(f"{r.name} on {r.node}: job {job.id + ' ' + job.phase if job else 'unknown'}")
    for j in jobs:
        if j.phase in FINAL_PHASES:
            continue
        legit = (j.phase == "Running" and any(r.name == j.reservation for r in rsvs)
                 and end - j.phase_at <= RUNNING_TIMEOUT_S)
        if not legit:
            out.stuck_jobs.append(f"{j.id} {j.phase} since {j.phase_at:g}: {j.reason}")
    want: dict[str, dict[str, int]] = {}
    for p in pods:
        if p.node and p.phase in ("Pending", "Running"):
            acc = want.setdefault(p.node, dict.fromkeys(RES_FIELDS, 0))
            for f in RES_FIELDS[:-1]:
                acc[f] += max(int(getattr(p.spec.requests, f)), 0)
            acc["pods"] += 1
    for r in rsvs:
        acc = want.setdefault(r.node, dict.fromkeys(RES_FIELDS, 0))
        for f in RES_FIELDS:
            acc[f] += int(getattr(r.held, f))
    for node in set(want) | set(allocated):
        have = {f: int(getattr(allocated.get(node, Resources()), f)) for f in RES_FIELDS}
        need = want.get(node, dict.fromkeys(RES_FIELDS, 0))
        if have != need:
            out.allocation_mismatch[node] = (have, need)
    m = result.metrics
    for p in pods:
        uid = p.spec.uid
        if p.phase in ("Succeeded", "Failed") or (p.node and p.phase == "Running"):
            continue
        if p.phase == "Pending" and not p.node and m.unschedulable.get(uid):
            continue
        out.lost_pods.append(f"{uid} {p.phase} on {p.node or '-'}: {p.reason}")
    stored = {p.spec.uid for p in pods}
    out.lost_pods += [f"{uid} not in the store" for uid in m.submitted_at
                      if uid not in stored and uid not in m.rejected]
    return out


async def _run(tmp: Path, plan: list[str]) -> tuple[RunResult, Chaos, Audit]:
    scenario = build_scenario(PARAMS)
    data_dir = tempfile.mkdtemp(prefix="colo-chaos-redis-", dir=tmp)
    nats = start_nats()
    redis = start_redis(data_dir=data_dir)
    chaos = Chaos(plan=list(plan), redis_url=redis.url, redis=redis, data_dir=data_dir)
    dead: list[DeadLetter] = []

    async def on_dead(msg: DeadLetter) -> None:
        dead.append(msg)

    bus = await Bus.connect(nats.url, "chaos-audit")
    try:
        await bus.ensure_streams()
        await bus.subscribe(S.DEAD_LETTER, on_dead, durable="chaos-dlq")
        result = await run_once(scenario, "colo", nats.url, redis.url, tmp, hook=chaos.hook,
                                extra_env=DESCHEDULER_ENV)
        await bus.settle()
        audit = await audit_store(redis.url, result, end=scenario.duration_s)
        audit.dead_letters = [f"{d.service}: {d.reason}" for d in dead]
    finally:
        await bus.close()
        if chaos.redis is not None:
            chaos.redis.stop()
        nats.stop()
    return result, chaos, audit


def _check(result: RunResult, chaos: Chaos, audit: Audit) -> None:
    assert chaos.plan == [], f"no running migration to strike at for {chaos.plan} (strikes: {chaos.strikes})"
    m = result.metrics
    assert m.tick_errors == []
    assert result.violations == [], "over-committed nodes or pods bound twice"
    assert m.double_bound() == []
    assert m.unaccounted() == []
    assert audit.leaked == [], "reservations held by a finished or unknown job"
    assert audit.allocation_mismatch == {}, "node: (allocated, bound pods' requests + live reservations)"
    assert audit.stuck_jobs == []
    assert audit.lost_pods == []
    assert audit.dead_letters == []
    assert any(j.phase == "Succeeded" for j in audit.jobs), "migrations still succeed around the crashes"
    assert all(code == 0 for code in result.exit_codes.values()), result.exit_codes


def test_kill9_descheduler_then_scheduler_while_migrating(tmp_path: Path) -> None:
    result, chaos, audit = asyncio.run(_run(tmp_path, ["descheduler", "scheduler"]))
    assert result.restarts == {"descheduler": 1, "scheduler": 1}
    _check(result, chaos, audit)


def test_redis_restart_on_the_same_data_while_migrating(tmp_path: Path) -> None:
    result, chaos, audit = asyncio.run(_run(tmp_path, ["redis"]))
    _check(result, chaos, audit)
