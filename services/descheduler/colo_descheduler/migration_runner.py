"""The migration job controller: drives :mod:`colo_descheduler.migration` against the store and the bus.

Every tick (:meth:`MigrationController.tick`), in this order:

1. turn the round's evictions (:class:`colo_descheduler.lownodeload.Eviction`) into Pending jobs
   (one active job per pod; at most ``max_migrating_per_node`` Pending jobs per source);
2. observe every active job in the store (its reservation, the pod's binding) and apply the
   transitions and timeouts; a job ending Failed or Aborted releases its reservation;
3. sweep the store's expired reservations (:meth:`colo.reservations.ReservationStore.sweep`; the
   scheduler sweeps too, at each resync, so room never waits for a live descheduler): a job's own
   timeout, equal to the reservation's TTL, releases it first with the job's reason;
4. arbitrate (running jobs only count) and start the admitted Pending jobs: reserve the pod's
   requests on the target for its owner (the pod uid and its workload), then — only when the store
   held the room — persist the job Running, send the :class:`EvictionCommand` and book the migration
   in the :class:`ClusterView` (:meth:`ClusterView.start_migration`).

Jobs live in the store (``{p}:migjob:{id}``, JSON :class:`PodMigrationJob`; ``{p}:migjobs`` the
ids): :meth:`MigrationController.load` resumes them after a restart. A Running job whose eviction
was not recorded as sent is sent again only while the pod still has the binding the eviction names;
the command's message id (``evict-<uid>-<node>-<bound_at>``) is the one the first try used, so
JetStream drops a duplicate within its window and the node agent ignores an eviction of a pod it no
longer runs. Each phase change is published on ``migration.<phase>``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from colo import subjects
from colo.messages import EvictionCommand, PodMigrationJob, Resources
from colo.migrations import list_jobs, save_job
from colo.reservations import ReservationStore, owner_workload
from colo.store import Store
from colo_descheduler import migration as mj
from colo_descheduler.cluster import ClusterView
from colo_descheduler.lownodeload import Eviction
from colo_descheduler.settings import DeschedulerSettings

Event = tuple[Any, Any, str | None, dict[str, str]]


def eviction_msg_id(uid: str, node: str, bound_at: float) -> str:
    """Message id of the eviction of ``uid``'s binding on ``node`` at ``bound_at`` (one per binding)."""
    return f"evict-{uid}-{node}-{bound_at:.3f}"


class MigrationController:
    """Migration jobs of one descheduler; see the module docstring. ``publish`` sends the eviction orders;
    ``by`` and ``reason`` go into them. Redis and NATS errors propagate (the next tick retries from the
    store: an eviction whose sending failed is sent again, with the same message id)."""

    def __init__(self, settings: DeschedulerSettings, store: Store, cluster: ClusterView,
                 publish: Callable[[list[Event]], Awaitable[object]], by: str = "descheduler",
                 reason: str = "LowNodeLoad") -> None:
        self.settings = settings
        self.store = store
        self.reservations = ReservationStore(store.redis, store.keys, settings.migration_history_s)
        self.cluster = cluster
        self.publish = publish
        """Sends events at once (:meth:`colo.bus.Bus.publish_many`): an eviction goes out before the job
        records it as sent."""
        self.by = by
        self.reason = reason
        self.jobs: dict[str, PodMigrationJob] = {}
        """Active jobs by id."""
        self.limits = mj.JobLimits(settings.max_migrating_per_node, settings.max_running_per_workload,
                                   settings.max_running_total)
        self.timeouts = mj.JobTimeouts(settings.migration_pending_timeout_s, settings.migration_running_timeout_s)
        self.counts = {"jobs_created": 0, "jobs_succeeded": 0, "jobs_failed": 0, "jobs_aborted": 0,
                       "evictions": 0, "reservations_refused": 0}

    # ------------------------------------------------------------------ store

    async def load(self) -> list[PodMigrationJob]:
        """Resume the active jobs from the store (Running ones are booked in the cluster view again);
        returns them."""
        for job in await list_jobs(self.store):
            if mj.is_active(job):
                self.jobs[job.id] = job
                if job.phase == mj.RUNNING and job.evicted_at > 0:
                    self._book(job, job.evicted_at)
        return list(self.jobs.values())

    async def _save(self, job: PodMigrationJob) -> None:
        await save_job(self.store, job, self.settings.migration_history_s)
        if mj.is_active(job):
            self.jobs[job.id] = job
        else:
            self.jobs.pop(job.id, None)

    # ------------------------------------------------------------------ tick

    async def tick(self, now: float, evictions: Sequence[Eviction]) -> list[Event]:
        """One pass (module doc) at clock time ``now``; eviction orders are published during it, the
        returned migration events (in order) are for the caller to publish."""
        events: list[Event] = []
        for ev in evictions:
            await self._create(ev, now, events)
        await self._observe(now, events)
        await self.reservations.sweep(now)  # after the jobs' own timeouts, which release with their reason
        for jid in mj.arbitrate(self.jobs.values(), self.limits):
            await self._start(self.jobs[jid], now, events)
        for job in list(self.jobs.values()):  # resumed Running jobs whose eviction was not recorded
            if job.phase == mj.RUNNING and job.evicted_at <= 0:
                await self._evict(job, now, events)
        return events

    async def _create(self, ev: Eviction, now: float, events: list[Event]) -> None:
        entry = self.cluster.pods.get(ev.uid)
        if entry is None or not mj.admissible(list(self.jobs.values()), ev.uid, ev.source,
                                              max(1, self.settings.max_migrating_per_node)):
            return
        spec = entry.spec
        job = PodMigrationJob(id=mj.job_id(ev.uid, now), uid=ev.uid, name=spec.name, namespace=spec.namespace,
                              workload=ev.workload, source=ev.source, target=ev.target, phase=mj.PENDING,
                              usage_cpu=int(ev.usage[0]), usage_memory=int(ev.usage[1]), created_at=now,
                              phase_at=now, bound_at=entry.bound_at, reason="waiting for arbitration")
        await self._save(job)
        self.counts["jobs_created"] += 1
        events.append(self._event(job))

    async def _observe(self, now: float, events: list[Event]) -> None:
        jobs = list(self.jobs.values())
        if not jobs:
            return
        bindings = await self.store.bound_nodes([j.uid for j in jobs])
        for job in jobs:
            rsv = await self.reservations.get(job.reservation) if job.reservation else None
            nxt = mj.observe(job, mj.Observation(rsv, bindings.get(job.uid)), now)
            nxt = nxt or mj.timed_out(job, now, self.timeouts)
            if nxt is not None:
                await self._finish(nxt, now, events)

    async def _finish(self, job: PodMigrationJob, now: float, events: list[Event]) -> None:
        """Persist a transition; a final job releases its reservation if still held. A Pending job names
        none, but may have made it (``rsv-<id>``) before a crash kept it from being saved Running."""
        if not mj.is_active(job):
            await self.reservations.release(job.reservation or mj.reservation_name(job), now,
                                            f"job {job.id} {job.phase}: {job.reason}")
            if job.phase != mj.SUCCEEDED:
                self.cluster.end_job(job.uid, now)  # no replacement comes on the target: its booking ends
        await self._save(job)
        if not mj.is_active(job):
            self.counts[f"jobs_{job.phase.lower()}"] += 1
        events.append(self._event(job))

    async def _start(self, job: PodMigrationJob, now: float, events: list[Event]) -> None:
        entry = self.cluster.pods.get(job.uid)
        if entry is None:
            return  # the pod left the view: the next observation aborts the job
        requests = entry.spec.requests
        name = mj.reservation_name(job)
        held = Resources(cpu=requests.cpu, memory=requests.memory, batch_cpu=requests.batch_cpu,
                         batch_memory=requests.batch_memory, mid_cpu=requests.mid_cpu, mid_memory=requests.mid_memory)
        res = await self.reservations.reserve(
            name, job.target, held, at=now, ttl_s=self.settings.migration_running_timeout_s, owner_uid=job.uid,
            owner_workload=owner_workload(entry.spec), allocate_once=True, reason=f"migration {job.id}")
        if not res.ok:
            self.counts["reservations_refused"] += 1
            refused = mj.refuse(job, res.reason)
            if refused.reason != job.reason:
                await self._save(refused)
            return
        running = mj.start(job, name, now)
        await self._save(running)  # before the eviction: a restart finds the reservation
        await self._evict(running, now, events)

    async def _evict(self, job: PodMigrationJob, now: float, events: list[Event]) -> None:
        """Send the eviction of a Running job, unless the pod's binding on the source is gone."""
        binding = (await self.store.bound_nodes([job.uid])).get(job.uid)
        evicted = mj.mark_evicted(job, now)
        # Booked before the order goes out: the node agent's Failed status may be handled while this tick still
        # awaits the store, and must find the booking (else it is taken for a pod that left by itself).
        self._book(evicted, now)
        if binding == (job.source, job.bound_at):
            cmd = EvictionCommand(uid=job.uid, node=job.source, reason=self.reason, at=now, by=self.by)
            await self.publish([(subjects.POD_EVICT, cmd, eviction_msg_id(job.uid, job.source, job.bound_at),
                                 {"node": job.source})])
            self.counts["evictions"] += 1
        await self._save(evicted)
        events.append(self._event(evicted))

    def _book(self, job: PodMigrationJob, now: float) -> None:
        self.cluster.start_migration(Eviction(job.uid, job.source, job.target, job.workload,
                                              (job.usage_cpu, job.usage_memory)), now)

    def _event(self, job: PodMigrationJob) -> Event:
        return (subjects.MIGRATION, job, f"{job.id}-{job.phase}-{job.evicted_at > 0:d}", {"phase": job.phase})

    def stats(self) -> dict[str, float]:
        """Counters (``jobs_created``, ``jobs_succeeded|failed|aborted``, ``reservations_refused``) and
        the ``jobs_running`` / ``jobs_pending`` now."""
        out = {k: float(v) for k, v in self.counts.items() if k != "evictions"}
        out["jobs_running"] = float(sum(1 for j in self.jobs.values() if j.phase == mj.RUNNING))
        out["jobs_pending"] = float(sum(1 for j in self.jobs.values() if j.phase == mj.PENDING))
        return out

