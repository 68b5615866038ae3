"""The slo-manager's workload side: consumes ``workload.submitted`` and ``podgroup.submitted``, fills the gang
of bare pods that name a PodGroup, and runs the Job controller on ``pod.status`` (docs/slo-manager.md
"Workloads").

State: the admitted PodGroups and the workload records (:class:`colo_slo_manager.jobs.WorkloadRecord`), in
memory and in the store (``podgroups`` / ``workloads`` hashes of :mod:`colo.keys`), loaded at start so that
a restart neither forgets a PodGroup nor restarts a Job. Every message id is derived from a uid, so a
redelivery publishes nothing new (JetStream de-duplication) and a resubmitted workload uid changes nothing:
the first admitted spec holds, and its ``workload.admitted`` answer lists the changes of the resubmitted spec
that were not applied (``not_applied``, e.g. ``replicas: 3 → 5``; ``colo submit`` warns with them).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import msgspec

from colo import subjects
from colo.bus import Bus, MessageInfo
from colo.messages import (
    POD_GROUP_LABEL,
    PodAdmitted,
    PodGroupSpec,
    PodRejected,
    PodSpec,
    PodStatus,
    WorkloadAdmitted,
    WorkloadRejected,
    WorkloadSpec,
)
from colo.workloads import (
    WorkloadRecord,
    decode_record,
    encode_record,
    expand,
    gang_key,
    referenced_group,
    spec_changes,
)
from colo_slo_manager.admission import admit
from colo_slo_manager.expansion import admit_workload, pod_group_problems, with_gang
from colo_slo_manager.jobs import on_pod_finished, pods_created
from colo_slo_manager.settings import SloManagerSettings

if TYPE_CHECKING:
    from colo.runtime import ServiceContext

log = logging.getLogger("colo_slo_manager.workloads")

UNKNOWN_GROUP_DELIVERIES = 4
"""Deliveries of a pod or workload naming an unknown PodGroup before it is rejected. A PodGroup submitted
just before its pods travels on another stream and consumer: the first deliveries are retried (nak with the
bus's backoff) so that it can arrive."""

Publish = Callable[[list[PodAdmitted | PodRejected]], Awaitable[None]]


class PodGroupPending(RuntimeError):
    """A pod or workload names a PodGroup not (yet) admitted; raised so that the bus redelivers it later."""


def _msg_id(prefix: str, key: str) -> str:
    if len(key) <= 200:
        return f"{prefix}-{key}"
    return f"{prefix}-h{hashlib.sha256(key.encode()).hexdigest()[:32]}"


class WorkloadAdmission:
    """Workload and PodGroup admission for :class:`colo_slo_manager.service.SloManagerService`.

    ``settings`` returns the configuration in force (hot-reloaded by the service); ``publish_pod`` publishes
    pods' admission results exactly as a bare pod's (``pod.admitted`` / ``pod.rejected``, counted)."""

    def __init__(self, settings: Callable[[], SloManagerSettings], publish_pod: Publish) -> None:
        self._settings = settings
        self._publish_pod = publish_pod
        self._ctx: ServiceContext | None = None
        self.groups: dict[str, PodGroupSpec] = {}
        """Admitted PodGroups by ``namespace/name``."""
        self.records: dict[str, WorkloadRecord] = {}
        """Admitted workloads by uid."""
        self.job_pods: dict[str, str] = {}
        """Pod uid → Job uid of every Job pod not finished."""

    @property
    def ctx(self) -> ServiceContext:
        """The runtime context; raises RuntimeError before :meth:`start`."""
        if self._ctx is None:
            raise RuntimeError("workload admission not started")
        return self._ctx

    async def start(self, ctx: ServiceContext, bus: Bus) -> None:
        """Load PodGroups and workload records from the store, then subscribe (durables ``workloads``,
        ``podgroups``)."""
        self._ctx = ctx
        self.groups.update(await ctx.store.list_pod_groups())
        for uid, blob in (await ctx.store.list_workload_records()).items():
            try:
                record = decode_record(blob)
            except ValueError as exc:  # msgspec errors are ValueErrors
                log.error("workload record %s unreadable, ignored: %s", uid, exc)
                continue
            self.records[uid] = record
            self.job_pods.update((p, uid) for p in record.active)
        bus.subscribe(subjects.WORKLOAD_SUBMITTED, self.on_workload, durable="workloads")
        bus.subscribe(subjects.PODGROUP_SUBMITTED, self.on_pod_group, durable="podgroups")

    # ------------------------------------------------------------------ PodGroups

    async def on_pod_group(self, group: PodGroupSpec, info: MessageInfo) -> None:
        """Validate and keep (store, then memory) a PodGroup; announce it on ``workload.admitted`` (kind
        PodGroup, no pods) or ``workload.rejected``. A resubmitted PodGroup replaces the old one."""
        now = self.ctx.clock.now()
        problems = pod_group_problems(group)
        if problems:
            log.info("rejected PodGroup %s/%s: %s", group.namespace, group.name, "; ".join(problems))
            await self.ctx.bus.publish(subjects.WORKLOAD_REJECTED, WorkloadRejected(
                kind="PodGroup", uid=group.uid, name=group.name, namespace=group.namespace, errors=problems, at=now),
                msg_id=_msg_id("wrejected", f"{group.uid}-{group.created_at!r}"))
            return
        await self.ctx.store.put_pod_group(group)
        self.groups[gang_key(group.namespace, group.name)] = group
        await self.ctx.bus.publish(subjects.WORKLOAD_ADMITTED, WorkloadAdmitted(
            kind="PodGroup", uid=group.uid, name=group.name, namespace=group.namespace, pods=[], at=now),
            msg_id=_msg_id("wadmitted", f"{group.uid}-{group.created_at!r}"))

    async def _known(self, key: str, info: MessageInfo) -> None:
        """Make sure the PodGroup ``key`` is in :attr:`groups` when it is admitted at all (the store is read
        on a miss); raises PodGroupPending on the first :data:`UNKNOWN_GROUP_DELIVERIES` − 1 deliveries."""
        if not key or key in self.groups:
            return
        group = await self.ctx.store.get_pod_group(key)
        if group is not None:
            self.groups[key] = group
        elif info.num_delivered < UNKNOWN_GROUP_DELIVERIES:
            raise PodGroupPending(f"PodGroup {key!r} not admitted yet (delivery {info.num_delivered})")

    async def pod_with_gang(self, pod: PodSpec, info: MessageInfo) -> PodSpec | PodRejected:
        """A bare pod with the gang of the PodGroup it names (:func:`colo_slo_manager.expansion.with_gang`).
        Raises PodGroupPending while an unknown group may still arrive."""
        await self._known(referenced_group(pod), info)
        return with_gang(pod, self.groups, self.ctx.clock.now())

    # ------------------------------------------------------------------ workloads

    async def on_workload(self, w: WorkloadSpec, info: MessageInfo) -> None:
        """Admit a workload all-or-nothing (:func:`colo_slo_manager.expansion.admit_workload`): its pods on
        ``pod.admitted`` then its record in the store, then ``workload.admitted`` with the pod uids; or one
        ``workload.rejected`` and nothing else. A known uid only repeats its ``workload.admitted``, listing the
        changes of the resubmitted spec that were not applied."""
        now = self.ctx.clock.now()
        record = self.records.get(w.uid)
        if record is None:
            blob = await self.ctx.store.get_workload_record(w.uid)
            record = decode_record(blob) if blob is not None else None
        if record is not None:  # the first admitted spec holds: say what of this one was not applied
            changes = spec_changes(record.spec, w)
            if changes:
                log.warning("%s %s/%s resubmitted with a changed spec, not applied: %s", w.kind, w.namespace,
                            w.name, "; ".join(changes))
            await self._announce(record, now, changes, w.created_at)
            return
        name = w.template.labels.get(POD_GROUP_LABEL, "")
        await self._known(gang_key(w.namespace, name) if name else "", info)
        result = admit_workload(w, self._settings(), self.groups, now)
        if isinstance(result, WorkloadRejected):
            log.info("rejected %s %s/%s: %s", w.kind, w.namespace, w.name, "; ".join(result.errors))
            await self.ctx.bus.publish(subjects.WORKLOAD_REJECTED, result,
                                       msg_id=_msg_id("wrejected", f"{w.uid}-{w.created_at!r}"))
            return
        admitted, gang = result
        await self._publish_pod(list(admitted))
        record = WorkloadRecord(spec=w, gang=gang)
        uids = [a.spec.uid for a in admitted]
        if w.kind == "Job":
            pods_created(record, uids, len(uids))
        else:
            record.pods, record.next_index = uids, len(uids)
        await self._save(record)
        await self._announce(record, now)

    async def _save(self, record: WorkloadRecord) -> None:
        uid = record.spec.uid
        await self.ctx.store.put_workload_record(uid, encode_record(record))
        self.records[uid] = record
        self.job_pods.update((p, uid) for p in record.active)

    async def _announce(self, record: WorkloadRecord, now: float, not_applied: list[str] | None = None,
                        resubmitted_at: float | None = None) -> None:
        """``workload.admitted`` for ``record``; for a resubmission (``resubmitted_at``, its ``created_at``) one
        of its own, with the spec changes ``not_applied``."""
        w = record.spec
        key = f"{w.uid}-{len(record.pods)}" + (f"-{resubmitted_at!r}" if resubmitted_at is not None else "")
        await self.ctx.bus.publish(subjects.WORKLOAD_ADMITTED, WorkloadAdmitted(
            kind=w.kind, uid=w.uid, name=w.name, namespace=w.namespace, pods=list(record.pods), at=now,
            not_applied=list(not_applied or ())), msg_id=_msg_id("wadmitted", key))

    # ------------------------------------------------------------------ Job controller

    async def on_pod_status(self, st: PodStatus) -> None:
        """The Job controller: when a pod of a Job ends, create the pods that replace it
        (:func:`colo_slo_manager.jobs.on_pod_finished`), each admitted as a bare pod; save the record; announce
        the pods so far. A rejected new pod stops the Job."""
        job_uid = self.job_pods.get(st.uid)
        if job_uid is None:
            return
        # a copy: when a publish or the save fails, the redelivered status finds the record as it was
        record = msgspec.structs.replace(self.records[job_uid])
        indices = on_pod_finished(record, st.uid, st.phase, st.reason)
        if record == self.records[job_uid]:
            return  # Running, a redelivery, a requeued eviction
        now = self.ctx.clock.now()
        created: list[str] = []
        results: list[PodAdmitted | PodRejected] = []
        for pod in expand(record.spec, indices, record.gang):
            results.append(admit(pod, self._settings(), now))
            if isinstance(results[-1], PodRejected):
                record.stopped = f"pod {pod.name} rejected: {results[-1].reason}"
                break
            created.append(pod.uid)
        if results:
            await self._publish_pod(results)
        if indices:
            pods_created(record, created, indices[0] + len(created))
        await self._save(record)
        if st.uid not in record.active:
            self.job_pods.pop(st.uid, None)
        if created:
            await self._announce(record, now)
        if record.complete:
            log.info("job %s/%s complete: %d succeeded", record.spec.namespace, record.spec.name, record.succeeded)
