"""Submitting a validated manifest and waiting for admission's answer, for ``colo submit`` and the API.

:func:`publications` lists what a :class:`colo.manifests.Manifest` becomes on the bus, :func:`submit` publishes
it and, unless told not to wait, collects the admission outcome of every pod, workload and PodGroup it holds
from ``pod.admitted`` / ``pod.rejected`` / ``workload.admitted`` / ``workload.rejected`` (subscribed before
anything is published, so that no answer is missed). An ElasticQuota is answered by the scheduler, which owns
the quota tree: accepted when a :class:`~colo.messages.QuotaStatus` on ``quota.status.<name>`` carries the
submission's ``created_at`` as ``spec_created_at`` (the scheduler publishes one at its next cycle), refused when
a :class:`~colo.messages.DeadLetter` on ``dlq.scheduler`` holds that submission (subject ``quota.spec.<name>``,
same ``created_at``) — its reason lists every problem. Reservations have no answer (``colo get reservations``).

=================  =================================  ======================================
object             subject                            message id
=================  =================================  ======================================
ElasticQuota       ``quota.spec.{name}``              ``quota-<name>-<at>``
PodGroup           ``podgroup.submitted``             ``podgroup-<uid>-<at>``
Reservation        ``reservation.submitted``          ``reservation-<ns>-<name>-<at>``
Deployment, …      ``workload.submitted``             ``workload-<uid>-<at>``
Pod                ``pod.submitted``                  ``<uid>-<at>``
=================  =================================  ======================================

Every id carries the submission time ``at`` (the objects' ``created_at``): a corrected manifest resubmitted
under the same names is not dropped by JetStream's de-duplication window (120 s) as a repeat.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from colo import subjects as S
from colo.codec import DecodeError, decode
from colo.manifests import Manifest
from colo.messages import (
    DeadLetter,
    ElasticQuota,
    PodAdmitted,
    PodGroupSpec,
    PodRejected,
    PodSpec,
    QuotaStatus,
    ReservationSpec,
    WorkloadAdmitted,
    WorkloadRejected,
    WorkloadSpec,
)

if TYPE_CHECKING:
    from colo.bus import Bus
    from colo.settings import RuntimeSettings

Item = tuple[Any, Any, str | None, dict[str, str]]

DEFAULT_WAIT_S = 5.0
"""How long :func:`submit` waits for admission's answers by default (seconds); admission answers in
milliseconds when the slo-manager runs, so a timeout means it does not (or is far behind)."""


def publications(manifest: Manifest) -> list[Item]:
    """``(subject, message, msg id, subject keys)`` of every object, in publishing order (quotas, PodGroups and
    reservations before the workloads and pods that use them)."""
    out: list[Item] = []
    for obj in manifest.ordered():
        if isinstance(obj, ElasticQuota):
            out.append((S.QUOTA_SPEC, obj, f"quota-{obj.name}-{obj.created_at!r}", {"name": obj.name}))
        elif isinstance(obj, PodGroupSpec):
            out.append((S.PODGROUP_SUBMITTED, obj, f"podgroup-{obj.uid}-{obj.created_at!r}", {}))
        elif isinstance(obj, ReservationSpec):
            out.append((S.RESERVATION_SUBMITTED, obj, f"reservation-{obj.namespace}-{obj.name}-{obj.created_at!r}", {}))
        elif isinstance(obj, WorkloadSpec):
            out.append((S.WORKLOAD_SUBMITTED, obj, f"workload-{obj.uid}-{obj.created_at!r}", {}))
        elif isinstance(obj, PodSpec):
            out.append((S.POD_SUBMITTED, obj, f"{obj.uid}-{obj.created_at!r}", {}))
    return out


@dataclass
class Outcome:
    """Admission's answer for one submitted object: ``kind`` (``Pod``, ``Job``, ``PodGroup`` …), ``namespace``,
    ``name``, ``uid``; ``state`` ``admitted``, ``rejected`` or ``unknown`` (no answer within the wait);
    ``reason`` the rejection's problems (``"; "``-separated) and ``pods`` the uids a workload became."""

    kind: str
    namespace: str
    name: str
    uid: str
    state: str = "unknown"
    reason: str = ""
    pods: tuple[str, ...] = ()
    not_applied: tuple[str, ...] = ()
    """For a workload admitted earlier: the changes of this submission admission did not apply."""

    @property
    def rejected(self) -> bool:
        """Whether admission refused it."""
        return self.state == "rejected"


def expected_outcomes(manifest: Manifest) -> dict[tuple[str, str], Outcome]:
    """The objects of ``manifest`` admission (or, for a quota, the scheduler) answers for, by
    ``("pod" | "workload" | "podgroup", uid)`` and ``("quota", name)``."""
    out: dict[tuple[str, str], Outcome] = {}
    for pod in manifest.pods:
        out[("pod", pod.uid)] = Outcome("Pod", pod.namespace, pod.name, pod.uid)
    for w in manifest.workloads:
        out[("workload", w.uid)] = Outcome(w.kind, w.namespace, w.name, w.uid)
    for g in manifest.pod_groups:  # a PodGroup may share its uid (namespace-name) with a workload of the file
        out[("podgroup", g.uid)] = Outcome("PodGroup", g.namespace, g.name, g.uid)
    for q in manifest.quotas:
        if not q.deleted:
            out[("quota", q.name)] = Outcome("ElasticQuota", "", q.name, "")
    return out


def _family(kind: str) -> str:
    return "podgroup" if kind == "PodGroup" else "workload"


def _dead_quota(msg: DeadLetter) -> ElasticQuota | None:
    """The ElasticQuota a dead letter holds when it is one refused on ``quota.spec.<name>``, else None."""
    if not msg.subject.startswith(S.QUOTA_SPEC.wildcard.removesuffix("*")):
        return None
    try:
        return decode(msg.data.encode(), ElasticQuota)
    except DecodeError:
        return None


def apply_answer(expected: dict[tuple[str, str], Outcome], msg: object, created_at: dict[str, float],
                 quota_created_at: dict[str, float] | None = None) -> bool:
    """Record ``msg`` (a PodAdmitted, PodRejected, WorkloadAdmitted, WorkloadRejected, QuotaStatus or DeadLetter)
    in ``expected`` when it answers one of its objects still unknown (a pod's answer must be for this
    submission: same ``created_at`` as in ``created_at`` by uid, when the answer carries it; a quota's must carry
    the ``created_at`` in ``quota_created_at`` by name, always). Returns whether it did."""
    quota_created_at = quota_created_at or {}
    pods: tuple[str, ...] = ()
    not_applied: tuple[str, ...] = ()
    if isinstance(msg, PodAdmitted):
        key, state, reason = ("pod", msg.spec.uid), "admitted", ""
        if created_at.get(msg.spec.uid, msg.spec.created_at) != msg.spec.created_at:
            return False
    elif isinstance(msg, PodRejected):
        key, state, reason = ("pod", msg.uid), "rejected", msg.reason
        if msg.created_at and created_at.get(msg.uid, msg.created_at) != msg.created_at:
            return False
    elif isinstance(msg, WorkloadAdmitted):
        key, state, reason, pods = (_family(msg.kind), msg.uid), "admitted", "", tuple(msg.pods)
        not_applied = tuple(msg.not_applied)
    elif isinstance(msg, WorkloadRejected):
        key, state, reason = (_family(msg.kind), msg.uid), "rejected", "; ".join(msg.errors)
    elif isinstance(msg, QuotaStatus):
        key, state, reason = ("quota", msg.name), "admitted", ""
        if quota_created_at.get(msg.name) != msg.spec_created_at:
            return False
    elif isinstance(msg, DeadLetter):
        quota = _dead_quota(msg)
        if quota is None or quota_created_at.get(quota.name) != quota.created_at:
            return False
        key, state, reason = ("quota", quota.name), "rejected", msg.reason
    else:
        return False
    outcome = expected.get(key)
    if outcome is None or outcome.state != "unknown":
        return False
    outcome.state, outcome.reason, outcome.pods, outcome.not_applied = state, reason, pods, not_applied
    return True


ANSWERS: tuple[tuple[S.Subject[Any], type[Any]], ...] = ((S.POD_ADMITTED, PodAdmitted), (S.POD_REJECTED, PodRejected), (S.WORKLOAD_ADMITTED, WorkloadAdmitted),
           (S.WORKLOAD_REJECTED, WorkloadRejected))
"""The subjects admission answers on and their types."""

QUOTA_ANSWERS: tuple[tuple[S.Subject[Any], type[Any]], ...] = ((S.QUOTA_STATUS, QuotaStatus), (S.DEAD_LETTER, DeadLetter))
"""The subjects the scheduler answers a quota on (module doc) and their types."""


async def submit(manifest: Manifest, nats_url: str, connect_attempts: int = 3,
                 wait_s: float | None = DEFAULT_WAIT_S, settings: RuntimeSettings | None = None) -> list[Outcome]:
    """:func:`publish_and_wait` on a connection of its own to ``nats_url`` (closed at the end), with the
    credentials and TLS of ``settings`` (:mod:`colo.connections`). Raises what
    :meth:`colo.bus.Bus.connect` and :func:`publish_and_wait` raise."""
    from colo.bus import Bus

    bus = await Bus.connect(nats_url, "cli", connect_attempts=connect_attempts, settings=settings)
    try:
        await bus.ensure_streams()
        return await publish_and_wait(bus, manifest, wait_s)
    finally:
        await bus.close()


async def publish_and_wait(bus: Bus, manifest: Manifest, wait_s: float | None = DEFAULT_WAIT_S) -> list[Outcome]:
    """Publish every object of ``manifest`` on ``bus`` (a connected :class:`colo.bus.Bus` whose streams exist;
    each object acknowledged by JetStream before the next) and, with ``wait_s`` (seconds; None = do not wait),
    wait until admission answered for each pod, workload and PodGroup (the scheduler for each quota) or ``wait_s``
    passed. Returns the outcomes
    in manifest order (``unknown`` where no answer came; [] without waiting). Raises what
    :meth:`colo.bus.Bus.publish_many` raises (BusError when a stream refuses a message or acks time out)."""
    expected = expected_outcomes(manifest) if wait_s is not None else {}
    created_at = {p.uid: p.created_at for p in manifest.pods}
    quota_created_at = {q.name: q.created_at for q in manifest.quotas}
    done = asyncio.Event()
    subs = []
    try:
        if expected:
            async def on_answer(raw: Any, type_: type[Any]) -> None:
                try:
                    msg: object = decode(raw.data, type_)
                except DecodeError:
                    return
                if apply_answer(expected, msg, created_at, quota_created_at) and all(o.state != "unknown" for o in expected.values()):
                    done.set()

            def handler(type_: type[Any]) -> Any:
                async def cb(raw: Any) -> None:
                    await on_answer(raw, type_)
                return cb

            answers = ANSWERS + (QUOTA_ANSWERS if any(k[0] == "quota" for k in expected) else ())
            for subject, type_ in answers:
                subs.append(await bus.nc.subscribe(subject.wildcard, cb=handler(type_)))
            await bus.nc.flush()
        await bus.publish_many(publications(manifest))
        if expected and wait_s is not None:
            try:
                await asyncio.wait_for(done.wait(), wait_s)
            except asyncio.TimeoutError:
                pass
    finally:
        for sub in subs:
            await sub.unsubscribe()
    return list(expected.values())
