"""The API's response bodies: msgspec structs built from the store's records and the bus's last messages, so
that the OpenAPI document (:mod:`colo_api.openapi`) and the wire come from the same types.

Units as everywhere in Colo: CPU in milli-cores, memory in bytes, times in seconds (the clock of the
services: wall-clock epoch seconds, or simulated seconds under ``COLO_SIM``).
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from colo.classes import qos_class_of
from colo.cli.get import pod_reason, pod_status
from colo.messages import (
    ElasticQuota,
    NodeMetric,
    NodeResource,
    NodeSpec,
    PodRecord,
    PodSpec,
    QuotaStatus,
    Resources,
)
from colo.messages.base import QoSClass
from colo.store_rejected import DELETED_REASON, REJECTED_REASON


class ErrorBody(msgspec.Struct, frozen=True, kw_only=True):
    """An error answer: ``error`` says what went wrong; ``problems`` lists every problem of an invalid
    manifest, each ``<field path>: <what is wrong>`` (422), empty otherwise."""

    error: str
    problems: list[str] = []


class NodeDeletion(msgspec.Struct, frozen=True, kw_only=True):
    """The answer to ``DELETE /v1/nodes/{name}``: the deletion was sent for ``node``; ``pods`` lists
    ``namespace/name`` of the pods that were bound to it, which the scheduler ends (``Failed``, reason
    ``Deleted: node <node> deleted by api``) since the deletion was forced (empty when none were)."""

    node: str
    force: bool
    pods: list[str] = []


class SubmittedObject(msgspec.Struct, frozen=True, kw_only=True):
    """One object ``POST /v1/submit`` published: its ``kind``, ``namespace`` ("" for cluster-scoped quotas),
    ``name``, ``uid`` ("" for kinds without one), the ``subject`` it went to and the ``pods`` it creates at
    once (1 for a Pod, a workload's initial pods, 0 for other kinds)."""

    kind: str
    namespace: str
    name: str
    uid: str
    subject: str
    pods: int = 0
    admission: str = ""
    """Admission's answer: ``admitted``, ``rejected`` or ``unknown`` (none within the wait); "" for kinds it does
    not answer (quotas, reservations) and when not waited for."""
    reason: str = ""
    """Why admission refused it (every problem, ``"; "``-separated)."""


class SubmitResult(msgspec.Struct, frozen=True, kw_only=True):
    """The answer of ``POST /v1/submit``: every object in publishing order; ``dry_run`` True when nothing was
    published (``?dryRun=All``, as kubectl's ``--dry-run=server``)."""

    objects: list[SubmittedObject]
    dry_run: bool = False
    rejected: int = 0
    """Objects admission refused (the answer is then 422)."""


ENDED_WORDS = (REJECTED_REASON, DELETED_REASON)
"""Reason prefixes (``<word>: …``) of the ``Failed`` records of pods admission refused or that were deleted while
pending (:mod:`colo.store_rejected`): such a pod's ``state`` is the word (as ``colo get pods`` shows it)."""


class PodView(msgspec.Struct, frozen=True, kw_only=True):
    """A pod as the store holds it (:class:`~colo.messages.PodRecord`) with the fields a client would
    otherwise derive: ``qos`` the effective QoS class (field, label, else derived from requests and limits,
    REFERENCE.md §1), ``state`` the phase, or ``Bound`` for a pending pod with a node and ``Waiting`` for one
    without, ``Rejected`` / ``Deleted`` for a failed pod whose reason starts with that word and a colon (a pod
    admission refused, one deleted while pending); ``reason`` the scheduler's message for a waiting pod it found no node for (``Unschedulable: 0/3 nodes
    are available: …``, as ``colo get pods``), else the store's (``Evicted``, ``OOMKilled``, ``Completed`` …)."""

    namespace: str
    name: str
    uid: str
    phase: str
    state: Literal["Waiting", "Bound", "Running", "Succeeded", "Failed", "Rejected", "Deleted"]
    node: str
    reason: str
    qos: QoSClass
    requests: Resources
    limits: Resources
    updated_at: float
    bound_at: float
    spec: PodSpec


def _reason(record: PodRecord, messages: dict[str, str]) -> str:
    reason = pod_reason(record, messages)
    return "" if reason == "-" and record.reason in ("", pod_status(record)) else reason


def pod_view(record: PodRecord, messages: dict[str, str] | None = None) -> PodView:
    """The view of one store record; ``messages`` uid → the scheduler's last message (:func:`pod_reason`)."""
    s = record.spec
    state: Any = record.phase
    if record.phase == "Pending":
        state = "Bound" if record.node else "Waiting"
    elif record.phase == "Failed":
        state = pod_status(record)
    return PodView(namespace=s.namespace, name=s.name, uid=s.uid, phase=record.phase, state=state,
                   node=record.node, reason=_reason(record, messages or {}), qos=qos_class_of(s), requests=s.requests,
                   limits=s.limits, updated_at=record.updated_at, bound_at=record.bound_at, spec=s)


class PodList(msgspec.Struct, frozen=True, kw_only=True):
    """``GET /v1/pods``: the pods matching the filters, sorted by namespace, name and uid."""

    items: list[PodView]


class NodeUsage(msgspec.Struct, frozen=True, kw_only=True):
    """A node's usage from its last :class:`~colo.messages.NodeMetric` (``node.metric.{node}``): ``ls_cpu`` /
    ``ls_memory`` Σ usage of its non-BE pods, ``be_cpu`` / ``be_memory`` Σ of its BE pods, ``cpu`` /
    ``memory`` the node's total (milli-cores, bytes); ``be_cpu_allowed`` the BE suppress budget (−1 = off);
    ``at`` the report's time, ``pods`` the pods it covers."""

    at: float
    cpu: int
    memory: int
    ls_cpu: int
    ls_memory: int
    be_cpu: int
    be_memory: int
    be_cpu_allowed: int
    pods: int


def node_usage(metric: NodeMetric) -> NodeUsage:
    """Split a node report into LS and BE use (BE = pods whose ``qos_class`` is BE)."""
    be = [p for p in metric.pods if p.qos_class == "BE"]
    ls = [p for p in metric.pods if p.qos_class != "BE"]
    return NodeUsage(at=metric.at, cpu=metric.node_usage.cpu, memory=metric.node_usage.memory,
                     ls_cpu=sum(p.cpu for p in ls), ls_memory=sum(p.memory for p in ls),
                     be_cpu=sum(p.cpu for p in be), be_memory=sum(p.memory for p in be),
                     be_cpu_allowed=metric.be_cpu_allowed, pods=len(metric.pods))


class NodeView(msgspec.Struct, frozen=True, kw_only=True):
    """A node: its registration (``spec``), ``allocated`` Σ requests of the pods bound there (the store's
    sums, kubectl's "Allocated resources"), ``offered`` the batch and mid allocatable the slo-manager
    computed (None before its first :class:`~colo.messages.NodeResource`), ``usage`` its last report (None
    when it has none in the metrics stream)."""

    name: str
    spec: NodeSpec
    allocated: Resources
    offered: NodeResource | None = None
    usage: NodeUsage | None = None


class NodeList(msgspec.Struct, frozen=True, kw_only=True):
    """``GET /v1/nodes``: every registered node, sorted by name."""

    items: list[NodeView]


class QuotaView(msgspec.Struct, frozen=True, kw_only=True):
    """An elastic quota: ``spec`` as last submitted (``quota.spec.{name}``; None for a quota known only from
    the store), ``status`` as the scheduler last published it (``quota.status.{name}``; None before its first),
    ``max`` the hard max the store's bind script enforces and ``used`` what it charged (Resources field names:
    milli-cores, bytes, ``pods`` a count); ``in_force`` True when the scheduler applies the spec last submitted
    (its status carries that spec's ``created_at``, or there is no spec), False for a quota it refused (dead-lettered:
    the reason is on ``colo.v1.dlq.>``) or has not accepted yet (a child waiting for its parent)."""

    name: str
    spec: ElasticQuota | None = None
    status: QuotaStatus | None = None
    max: dict[str, int] = {}
    used: dict[str, int] = {}
    in_force: bool = False


class QuotaList(msgspec.Struct, frozen=True, kw_only=True):
    """``GET /v1/quotas``: every quota, sorted by name."""

    items: list[QuotaView]


class Event(msgspec.Struct, frozen=True, kw_only=True):
    """One bus message as ``GET /v1/events`` sends it (the ``data:`` of one Server-Sent Event): ``subject``
    without the ``colo.v1.`` prefix, ``type`` the registered message type, ``message`` the decoded message
    (None with ``error`` set when it does not decode), ``received_at`` the API's wall clock (epoch seconds)."""

    subject: str
    type: str
    message: Any = None
    error: str = ""
    received_at: float = 0.0


class EventList(msgspec.Struct, frozen=True, kw_only=True):
    """``GET /v1/qos-events``: the last node QoS actions the bus keeps, oldest first."""

    items: list[Event]
