"""The killer of the chaos soak (docs/operations.md "Chaos soak"): SIGKILL of a service process, a NATS
cluster member or the Redis primary on a seeded random wall-clock schedule, independent of the sim's steps.

:func:`plan_kills` draws the schedule: one kill every ``min_gap_s``–``max_gap_s`` wall seconds (20–60 s by
default, the rhythm of issue 15 item 7), each of one of :data:`KINDS` with its victim drawn from the same
seeded generator. :class:`Killer` carries the plan out in its own asyncio task on wall time, so a kill lands
in the middle of a tick, a settle or a publish as often as between steps:

- ``service``: ``Supervisor.restart(name, crash=True)`` (SIGKILL, spawn, wait for ``/readyz``);
- ``nats``: SIGKILL of one cluster member, started again after ``nats_down_s`` on the same ports and
  JetStream store (:class:`colo.testing.clusters.NatsCluster`);
- ``redis``: SIGKILL of the primary Sentinel names; once a Sentinel names the promoted replica the old server
  starts again, empty, and Sentinel makes it a replica (:class:`colo.testing.clusters.RedisSentinelGroup`).

Every kill is recorded as a :class:`KillRecord` (wall times from ``time.monotonic()``). Servers are started
from the event loop's thread: their parent-death signal belongs to the thread that spawned them.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from dataclasses import dataclass, field

from colo.sim.services import TICK_ORDER, Supervisor
from colo.testing.clusters import NatsCluster, RedisSentinelGroup

log = logging.getLogger(__name__)

KINDS: tuple[str, ...] = ("service", "nats", "redis")
"""What a kill strikes: a service process, a NATS cluster member, the Redis primary."""


@dataclass(frozen=True)
class PlannedKill:
    """One kill of the plan: ``at_s`` wall seconds after the killer starts, its ``kind`` and ``victim``
    (a service name, a NATS member name; ``"primary"`` for Redis, resolved when it strikes)."""

    at_s: float
    kind: str
    victim: str


@dataclass
class KillRecord:
    """A kill carried out: ``at`` (monotonic seconds), what was struck, ``back_s`` seconds until the victim
    served again (service ready, member healthy, a primary named by Sentinel), ``error`` when it did not."""

    kind: str
    victim: str
    at: float
    back_s: float = 0.0
    error: str = ""


def plan_kills(seed: int, duration_s: float, nats_members: list[str], min_gap_s: float = 20.0,
               max_gap_s: float = 60.0, services: tuple[str, ...] = TICK_ORDER,
               kinds: tuple[str, ...] = KINDS) -> list[PlannedKill]:
    """The kills of a soak of ``duration_s`` wall seconds: gaps uniform in [``min_gap_s``, ``max_gap_s``],
    kinds uniform over ``kinds``, victims uniform over ``services`` / ``nats_members``; the same ``seed``
    gives the same plan. Raises ValueError for an empty ``kinds``, an unknown kind or a bad gap range."""
    unknown = sorted(set(kinds) - set(KINDS))
    problems = [f"unknown kill kinds {unknown} (known: {list(KINDS)})"] if unknown else []
    if not kinds:
        problems.append("kinds is empty")
    if not 0 < min_gap_s <= max_gap_s:
        problems.append(f"gaps must satisfy 0 < min_gap_s <= max_gap_s, got {min_gap_s}, {max_gap_s}")
    if "nats" in kinds and not nats_members:
        problems.append("nats kills need nats_members")
    if problems:
        raise ValueError("; ".join(problems))
    rng = random.Random(seed)
    out: list[PlannedKill] = []
    t = rng.uniform(min_gap_s, max_gap_s)
    while t < duration_s:
        kind = rng.choice(kinds)
        if kind == "service":
            victim = rng.choice(services)
        elif kind == "nats":
            victim = rng.choice(nats_members)
        else:
            victim = "primary"
        out.append(PlannedKill(round(t, 2), kind, victim))
        t += rng.uniform(min_gap_s, max_gap_s)
    return out


@dataclass
class Killer:
    """Carries out ``plan`` against a run's supervisor and servers (:meth:`run` in its own task).

    ``nats_down_s`` is how long a killed NATS member stays down (drawn per kill, seeded); ``records`` grows
    as kills strike. A kill that fails (a member that does not come back) is recorded with its error and the
    killer goes on: the run's invariants, not the killer, decide whether the system survived.
    """

    plan: list[PlannedKill]
    sup: Supervisor
    cluster: NatsCluster
    redis: RedisSentinelGroup
    seed: int = 0
    nats_down_s: tuple[float, float] = (2.0, 6.0)
    records: list[KillRecord] = field(default_factory=list)
    current: PlannedKill | None = None
    """The kill in progress (its victim is down or coming back), None between kills."""

    async def run(self) -> None:
        """Strike each planned kill at its time (relative to the call); returns when the plan is done."""
        rng = random.Random(self.seed + 1)
        started = time.monotonic()
        for kill in self.plan:
            await asyncio.sleep(max(0.0, started + kill.at_s - time.monotonic()))
            self.current = kill
            try:
                self.records.append(await self.strike(kill, rng))
            finally:
                self.current = None

    async def strike(self, kill: PlannedKill, rng: random.Random) -> KillRecord:
        """One kill and the victim's return; never raises (the error goes in the record)."""
        at = time.monotonic()
        rec = KillRecord(kill.kind, kill.victim, at)
        try:
            if kill.kind == "service":
                await self.sup.restart(kill.victim, crash=True)
            elif kill.kind == "nats":
                await self._kill_nats(kill.victim, rng.uniform(*self.nats_down_s))
            else:
                rec.victim = await self._kill_primary()
        except Exception as exc:  # recorded: the soak goes on and reports it
            log.exception("chaos: %s %s did not come back", kill.kind, kill.victim)
            rec.error = f"{type(exc).__name__}: {exc}"
        rec.back_s = time.monotonic() - at
        log.info("chaos: killed %s %s; back after %.1f s%s", rec.kind, rec.victim, rec.back_s,
                 f" ({rec.error})" if rec.error else "")
        return rec

    async def _kill_nats(self, name: str, down_s: float) -> None:
        member = self.cluster.member(name)
        member.kill()
        await asyncio.sleep(down_s)
        member.start()
        await asyncio.to_thread(self.cluster.wait_healthy, member, 60.0)

    async def _kill_primary(self) -> str:
        port = await asyncio.to_thread(self.redis.primary_port)
        server = self.redis.server(port)
        server.kill()
        deadline = time.monotonic() + 60.0
        # down after 1 s, quorum, promotion; every Sentinel must agree and the promoted server be primary before
        # the old one comes back empty, or Sentinel may keep it primary and the replica copy its empty data set
        while not await asyncio.to_thread(self.redis.failover_done, port):
            if time.monotonic() > deadline:
                server.start()
                raise TimeoutError(f"no replica promoted within 60 s after :{port} was killed")
            await asyncio.sleep(0.1)
        await asyncio.to_thread(self.redis.restart_as_replica, port)  # back empty, a replica of the promoted one
        await asyncio.to_thread(self.redis.wait_replica, port, 60.0)
        return f"{server.name}:{port}"
