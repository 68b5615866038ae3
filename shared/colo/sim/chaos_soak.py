"""The chaos soak (issue 15 item 7; docs/operations.md "Chaos soak"): the demo scenario on a 3-server NATS
cluster (every stream and bucket replicated 3 times) and a Redis primary + replica behind 3 Sentinels (binds
acknowledged after ``WAIT 1``), while :class:`colo.sim.chaos.Killer` kills a service, a NATS member or the
Redis primary every 20–60 wall seconds, in the middle of steps as well as between them.

The coordinator steps virtual time as :func:`colo.sim.run.run_once` does, paced so that the run lasts about
``minutes`` wall minutes, and rides out the kills itself: a tick or settle request that is not answered (its
service died, the coordinator's NATS server died) is sent again, a publish is repeated (msg ids make that
safe), a store read is retried while Sentinel promotes a replica. A service restarted mid-step learns the
step's time from a tick sent again before its settle. After every step :class:`colo.sim.chaos_checks.
ChaosChecks` checks the invariants. The summary (:func:`summarize`) counts kills survived by kind, pods lost,
double binds, over-commits and the bind stall after each kind of kill.

Run it with ``make chaos`` (``CHAOS_MINUTES``, ``CHAOS_SEED``) or ``python -m colo.sim.chaos_soak``.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import nats

from colo import subjects as S
from colo.bus import Bus, BusError
from colo.messages import Tick, TickAck
from colo.settings import RuntimeSettings
from colo.sim.chaos import KINDS, Killer, KillRecord, PlannedKill, plan_kills
from colo.sim.chaos_checks import ChaosChecks, ChaosMetrics
from colo.sim.invariants import AllocationWatch
from colo.sim.run import STEP_S, collect, service_env
from colo.sim.scenario import ScenarioParams, build_scenario
from colo.sim.services import TICK_ORDER, Supervisor
from colo.sim.submit import Submissions
from colo.store import Store
from colo.testing.clusters import NatsCluster, RedisSentinelGroup
from colo.testing.ha import BindClock

log = logging.getLogger(__name__)
T = TypeVar("T")

RUN = "colo"
ATTEMPT_S = 15.0
"""Wall seconds one tick or settle request waits for its answer before it is sent again."""
GIVE_UP_S = 300.0
"""Wall seconds a request, publish or check is retried at most before the soak fails."""
STALL_WINDOW_S = 60.0
"""Wall seconds after a kill in which the largest gap between binds is its stall."""
TICK_AGAIN = 3
"""Times a tick answered with a transient error is sent again (:meth:`Coordinator.tick`)."""
TRANSIENT_TICK_ERRORS = ("nats: timeout", "did not settle", "nats: no servers", "nats: connection closed")
"""Parts of a TickAck error that mean the service met NATS failing over, not a fault of its own."""


@dataclass(frozen=True)
class SoakParams:
    """A soak: the scenario (``nodes``, ``hours`` of virtual time, ``seed``), about ``minutes`` of wall
    time, a kill every ``min_gap_s``–``max_gap_s`` wall seconds of ``kinds`` — or exactly ``plan``."""

    nodes: int = 20
    hours: float = 2.0
    seed: int = 1
    minutes: float = 10.0
    min_gap_s: float = 20.0
    max_gap_s: float = 60.0
    kinds: tuple[str, ...] = KINDS
    plan: tuple[PlannedKill, ...] | None = None


@dataclass
class Ridership:
    """How the coordinator rode out the kills: retries per what was retried, service exits it did not cause."""

    retries: dict[str, int] = field(default_factory=dict)
    unexpected_exits: list[str] = field(default_factory=list)
    tick_errors: list[str] = field(default_factory=list)

    def retried(self, what: str) -> None:
        self.retries[what] = self.retries.get(what, 0) + 1


class Coordinator:
    """Ticks, settles, publishes and checks with retries while ``killer`` strikes."""

    def __init__(self, bus: Bus, sup: Supervisor, killer: Killer, ride: Ridership) -> None:
        self.bus = bus
        self.sup = sup
        self.killer = killer
        self.ride = ride

    async def retry(self, what: str, call: Callable[[], Awaitable[T]]) -> T:
        """``await call()`` until it succeeds; raises its last error after :data:`GIVE_UP_S`."""
        deadline = time.monotonic() + GIVE_UP_S
        while True:
            try:
                return await call()
            except Exception as exc:
                if time.monotonic() > deadline:
                    raise
                self.ride.retried(what)
                log.info("chaos: %s failed (%s: %s); again", what, type(exc).__name__, exc)
                await self.revive()
                await asyncio.sleep(0.5)

    async def revive(self) -> None:
        """Start again a service that exited while the killer was not restarting it (a crash of its own)."""
        striking = self.killer.current
        for name, p in list(self.sup.procs.items()):
            if p.proc.poll() is None or (striking is not None and striking.victim == name):
                continue
            self.ride.unexpected_exits.append(f"{name} exited with code {p.proc.returncode}")
            log.warning("chaos: %s exited with code %s by itself; restarting", name, p.proc.returncode)
            self.sup.procs[name] = self.sup._spawn(name, p.module)
            await self.sup._wait_ready(self.sup.procs[name])

    async def tick(self, service: str, tick: Tick) -> TickAck:
        """``tick`` answered by ``service``. An ack whose error is a NATS timeout of the tick's own settle or
        work (a cluster member just died) is recorded and the tick sent again, up to :data:`TICK_AGAIN` times:
        a service ticks in simulation only when told, so a tick lost so would skip a minute of its work."""
        for attempt in range(TICK_AGAIN + 1):
            ack = await self.retry(f"tick {service}",
                                   functools.partial(self.bus.request_tick, service, tick, timeout_s=ATTEMPT_S))
            if not ack.error:
                return ack
            self.ride.tick_errors.append(f"t={tick.now:.0f}s {service}: {ack.error}")
            if not any(t in ack.error for t in TRANSIENT_TICK_ERRORS) or attempt == TICK_AGAIN:
                return ack
            self.ride.retried(f"tick {service} (error)")
            await asyncio.sleep(0.5)
        return ack

    async def settle(self, step: int, now: float) -> None:
        """Every service drains its consumers at ``now`` (as the coordinator of run_once); a service restarted
        during the step, whose clock is not at ``now`` yet, gets the step's tick again first."""
        for service in TICK_ORDER:
            async def once(service: str = service) -> None:
                settle = Tick(seq=step, now=now, step_s=STEP_S, settle_only=True)
                ack = await self.bus.request_tick(service, settle, timeout_s=ATTEMPT_S)
                if ack.error.startswith("settle at"):
                    await self.tick(service, Tick(seq=step, now=now, step_s=STEP_S))
                    ack = await self.bus.request_tick(service, settle, timeout_s=ATTEMPT_S)
                if ack.error:
                    raise BusError(f"{service} could not settle step {step}: {ack.error}")
            await self.retry(f"settle {service}", once)


    async def step(self, step: int, submissions: Submissions, store: Store, checks: ChaosChecks,
                   say: Callable[[str], None]) -> None:
        """One step at ``step`` × :data:`STEP_S`: publish the arrivals, tick every service, settle, check."""
        now = step * STEP_S
        items = submissions.due(now)
        if items:
            await self.retry("publish", functools.partial(self.bus.publish_many, items))
            published = time.monotonic()
            for _subject, _msg, uid, _headers in items:
                checks.metrics.published_wall[uid] = published
        tick = Tick(seq=step, now=now, step_s=STEP_S)
        acks = [await self.tick(service, tick) for service in TICK_ORDER]
        await self.settle(step, now)
        await self.retry("settle coordinator", self.bus.settle)
        checks.metrics.on_ticks(now, acks)
        for v in await self.retry("check", functools.partial(checks.check, store, now)):
            say(f"chaos: VIOLATION {v}")


def bind_delay(records: list[KillRecord], delays: list[tuple[float, float, str]], pace_s: float
               ) -> tuple[list[float | None], float | None]:
    """Per kill, the longest wait from publishing to ``PodBound`` (``delays``: :meth:`ChaosMetrics.bind_delays`)
    of the pods published from one step (``pace_s``) before the kill until the victim was back (None when
    none was bound); and the longest of the pods published away from every kill (from one step before it to
    :data:`STALL_WINDOW_S` after it), the quiet reference. Wall seconds."""
    per_kill: list[float | None] = []
    for r in records:
        hit = [d for at, d, _ in delays if r.at - pace_s <= at <= r.at + r.back_s]
        per_kill.append(round(max(hit), 2) if hit else None)
    quiet = [d for at, d, _ in delays
             if not any(r.at - pace_s <= at <= r.at + STALL_WINDOW_S for r in records)]
    return per_kill, (round(max(quiet), 2) if quiet else None)


def stalls(records: list[KillRecord], binds: list[float], end: float) -> list[dict[str, Any]]:
    """Per kill: ``first_bind_s`` (kill → first bind after it, None when none came) and ``max_bind_gap_s``: the
    largest gap between consecutive binds from the last one before the kill (the kill itself when there was
    none) through those within :data:`STALL_WINDOW_S` after it; with no bind in that window, the gap runs to
    the window's end (capped at ``end``). Seconds, ``time.monotonic()`` clock."""
    out = []
    for r in records:
        stop = min(r.at + STALL_WINDOW_S, end)
        before = [t for t in binds if t <= r.at]
        window = [t for t in binds if r.at < t <= stop]
        after = [t for t in binds if t > r.at]
        times = [before[-1] if before else r.at] + window
        gaps = [b - a for a, b in zip(times, times[1:])] if window else [stop - times[0]]
        out.append({"kind": r.kind, "victim": r.victim, "back_s": round(r.back_s, 2), "error": r.error,
                    "first_bind_s": round(after[0] - r.at, 2) if after else None,
                    "max_bind_gap_s": round(max(gaps), 2) if gaps else 0.0})
    return out


def summarize(params: SoakParams, records: list[KillRecord], started: float, binds: list[float],
              checks: ChaosChecks, lost: dict[str, str], ride: Ridership, sup: Supervisor,
              exit_codes: dict[str, int | None], wall_s: float, steps: int) -> dict[str, Any]:
    """The soak's figures as JSON-ready data (the keys docs/operations.md "Chaos soak" explains)."""
    m = checks.metrics
    per_kill = stalls(records, binds, started + wall_s)
    delays, quiet_delay = bind_delay(records, m.bind_delays(), wall_s / (steps + 1))
    for rec, row, delay in zip(records, per_kill, delays):
        row["at_s"] = round(rec.at - started, 2)
        row["bind_delay_s"] = delay
    moved = m.moved_binds()
    dlq: dict[str, int] = {}
    for d in checks.dead_letters:
        dlq[f"{d.service}: {d.reason[:80]}"] = dlq.get(f"{d.service}: {d.reason[:80]}", 0) + 1
    return {
        "seed": params.seed, "nodes": params.nodes, "hours": params.hours, "steps": steps,
        "wall_s": round(wall_s, 1),
        "kills": {k: sum(1 for r in records if r.kind == k) for k in KINDS},
        "kills_survived": {k: sum(1 for r in records if r.kind == k and not r.error) for k in KINDS},
        "pods_submitted": len(m.submitted_at), "pods_bound": len(m.bind_nodes),
        "pods_lost": len(lost), "lost": lost,
        "pods_unaccounted": len(m.unaccounted()), "unaccounted": m.unaccounted()[:20],
        "double_binds": len(checks.double_bound_store | set(moved)),
        "over_commits": checks.over_commits, "binds_unannounced": len(checks.unannounced),
        "stall_s": {k: max((row["max_bind_gap_s"] for row in per_kill if row["kind"] == k), default=None)
                    for k in KINDS},
        "first_bind_s": {k: max((row["first_bind_s"] or 0.0 for row in per_kill if row["kind"] == k),
                                default=None) for k in KINDS},
        "bind_delay_s": {k: max((row["bind_delay_s"] or 0.0 for row in per_kill if row["kind"] == k),
                                default=None) for k in KINDS},
        "quiet_bind_delay_s": quiet_delay,
        "invariant_checks": checks.checks, "violations": checks.violations[:50],
        "pods_missing_for_a_while": len(checks.missing_reported), "repeated_binds": m.repeated_binds(),
        "dead_letters": dlq, "tick_errors": len(ride.tick_errors), "tick_error_examples": ride.tick_errors[:10],
        "retries": ride.retries, "unexpected_exits": ride.unexpected_exits,
        "restarts": dict(sup.restarts), "exit_codes": exit_codes, "kill_log": per_kill,
    }


async def soak(params: SoakParams, work_dir: Path, say: Callable[[str], None] = print) -> dict[str, Any]:
    """Run one soak in ``work_dir`` (service logs in ``logs/``) and return :func:`summarize`'s figures.
    Raises EmbeddedServerError when a server does not start, ServiceError when a service does not become
    ready at the start, the last error of a request retried for :data:`GIVE_UP_S`."""
    scenario = build_scenario(ScenarioParams(nodes=params.nodes, hours=params.hours, seed=params.seed))
    with NatsCluster(3) as cluster, RedisSentinelGroup() as group:
        redis_url = f"redis://127.0.0.1:{group.primary_port()}/0"
        settings = RuntimeSettings(nats_url=cluster.url, stream_replicas=3, redis_sentinels=group.sentinels_setting,
                                   redis_sentinel_master=group.master, redis_wait_replicas=1,
                                   redis_wait_timeout_ms=500)
        extra = {"COLO_STREAM_REPLICAS": "3", "COLO_REDIS_SENTINELS": group.sentinels_setting,
                 "COLO_REDIS_SENTINEL_MASTER": group.master, "COLO_REDIS_WAIT_REPLICAS": "1",
                 "COLO_REDIS_WAIT_TIMEOUT_MS": "500"}
        env = service_env(scenario, RUN, cluster.url, redis_url, work_dir, extra)
        steps = int(scenario.duration_s // STEP_S)
        wall_s = params.minutes * 60.0
        plan = list(params.plan) if params.plan is not None else plan_kills(
            params.seed, wall_s, [m.name for m in cluster.members], params.min_gap_s, params.max_gap_s,
            kinds=params.kinds)
        say(f"chaos: {params.nodes} nodes, {params.hours:g} h ({steps + 1} steps) in ~{params.minutes:g} min; "
            f"{len(plan)} kills planned (seed {params.seed})")
        metrics = ChaosMetrics(name=RUN)
        checks = ChaosChecks(metrics, AllocationWatch())
        bus = await Bus.connect(cluster.url, f"sim-{RUN}", settings=settings)
        store = await Store.connect(redis_url, prefix=f"colo-{RUN}", settings=settings)
        nc = await nats.connect(servers=cluster.url.split(","), max_reconnect_attempts=-1, reconnect_time_wait=0.2,
                                error_cb=_quiet)
        binds = BindClock()
        sup = Supervisor(RUN, env, work_dir / "logs")
        killer = Killer(plan, sup, cluster, group, seed=params.seed)
        ride = Ridership()
        co = Coordinator(bus, sup, killer, ride)
        started = time.monotonic()
        exit_codes: dict[str, int | None] = {}
        kill_task: asyncio.Task[None] | None = None
        try:
            await nc.subscribe(S.POD_BOUND.wildcard, cb=binds.on_msg)
            await bus.ensure_streams()
            await bus.purge_streams()
            await store.delete_all()
            await collect(bus, metrics, checks.watch, RUN)
            await bus.subscribe(S.DEAD_LETTER, checks.on_dead_letter, durable=f"dlq-{RUN}")
            await sup.start_all()
            submissions = Submissions(scenario, env, metrics)
            await submissions.start(bus)
            pace_s = wall_s / (steps + 1)
            started = time.monotonic()
            kill_task = asyncio.create_task(killer.run(), name="chaos:killer")
            for step in range(steps + 1):
                await co.step(step, submissions, store, checks, say)
                if step % max(1, steps // 10) == 0:
                    say(f"chaos: step {step}/{steps} · {time.monotonic() - started:.0f} s · bound "
                        f"{len(metrics.bind_nodes)} · kills {len(killer.records)}")
                await asyncio.sleep(max(0.0, started + (step + 1) * pace_s - time.monotonic()))
            while killer.current is not None:  # let a kill in progress finish: its victim comes back
                await asyncio.sleep(0.1)
            kill_task.cancel()
            await co.revive()
            await co.settle(steps, steps * STEP_S)
            await co.retry("settle coordinator", bus.settle)
            await co.retry("check", lambda: checks.check(store, steps * STEP_S))
            lost = await co.retry("final check", lambda: checks.final(store))
        finally:
            if kill_task is not None and not kill_task.done():
                kill_task.cancel()
            wall = time.monotonic() - started
            exit_codes = await asyncio.to_thread(sup.stop_all)
            await nc.close()
            await bus.close()
            await store.close()
    return summarize(params, killer.records, started, binds.times, checks, lost, ride, sup, exit_codes, wall, steps)


async def _quiet(exc: Exception) -> None:
    log.info("chaos: bind clock's link: %r", exc)  # a member killed on purpose: expected


def main(argv: list[str] | None = None) -> int:
    """``python -m colo.sim.chaos_soak``: run a soak, print the summary, write ``<out>/summary.json``; exit
    status 1 when a pod was lost, bound twice or a node over-committed, or a kill's victim did not return."""
    ap = argparse.ArgumentParser(prog="python -m colo.sim.chaos_soak", description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=10.0, help="wall minutes (default 10)")
    ap.add_argument("--seed", type=int, default=1, help="seed of the scenario and the kills (default 1)")
    ap.add_argument("--nodes", type=int, default=20)
    ap.add_argument("--hours", type=float, default=2.0, help="virtual hours of the scenario (default 2)")
    ap.add_argument("--out", type=Path, default=Path("out/chaos"))
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    args.out.mkdir(parents=True, exist_ok=True)
    params = SoakParams(nodes=args.nodes, hours=args.hours, seed=args.seed, minutes=args.minutes)
    summary = asyncio.run(soak(params, args.out))
    text = json.dumps(summary, indent=2)
    (args.out / "summary.json").write_text(text + "\n")
    print(text)
    bad = (summary["pods_lost"] or summary["double_binds"] or summary["over_commits"] or summary["binds_unannounced"]
           or summary["kills"] != summary["kills_survived"])
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
