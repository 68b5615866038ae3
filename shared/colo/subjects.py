"""The subject registry: every NATS subject, its message type and its stream.

Nothing else in Colo writes subject strings. An integrator can subscribe to
``colo.v1.>`` and read everything; each :class:`Subject` names the message type to
decode with. Routing keys (``{node}``, ``{service}``…) are subject tokens.

Streams (JetStream) hold what must not be lost: pod lifecycle, bindings,
evictions, node registrations and deletions, batch resources, NodeSLOs and dead letters; node
metrics, QoS events and profiles go to streams with short retention so that a
restarted service catches up. Simulation ticks use core NATS request/reply.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from colo import messages as m

T = TypeVar("T")

PREFIX = "colo.v1"
_TOKEN = re.compile(r"[A-Za-z0-9_\-]+")


@dataclass(frozen=True)
class Stream:
    """A JetStream stream: ``name``, its subject filters, and retention limits."""

    name: str
    subjects: tuple[str, ...]
    max_age_s: float = 0.0
    max_msgs_per_subject: int = -1
    duplicate_window_s: float = 120.0


@dataclass(frozen=True)
class Subject(Generic[T]):
    """One subject pattern with ``{key}`` tokens, its message type and its stream.

    ``stream`` is None for core-NATS subjects (no persistence).
    """

    pattern: str
    type: type[T]
    stream: str | None
    doc: str = ""
    keys: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "keys", tuple(re.findall(r"\{(\w+)\}", self.pattern)))

    def format(self, **keys: str) -> str:
        """The concrete subject for ``keys``.

        Raises ValueError when a key is missing, unknown, or not a single subject token.
        """
        if set(keys) != set(self.keys):
            raise ValueError(f"{self.pattern}: keys {sorted(keys)} != {sorted(self.keys)}")
        for k, v in keys.items():
            if not _TOKEN.fullmatch(v):
                raise ValueError(f"{self.pattern}: {k}={v!r} is not a subject token")
        return self.pattern.format(**keys)

    @property
    def wildcard(self) -> str:
        """The pattern with every key replaced by ``*``."""
        return re.sub(r"\{\w+\}", "*", self.pattern)


def _s(pattern: str, type_: type[T], stream: str | None, doc: str) -> Subject[T]:
    return Subject(f"{PREFIX}.{pattern}", type_, stream, doc)


PODS = "COLO_PODS"
NODES = "COLO_NODES"
METRICS = "COLO_METRICS"
EVENTS = "COLO_EVENTS"
PROFILES = "COLO_PROFILES"
DLQ = "COLO_DLQ"
CONFIG = "COLO_CONFIG"
MIGRATIONS = "COLO_MIGRATIONS"
JOBS = "COLO_JOBS"
QUOTAS = "COLO_QUOTAS"

POD_SUBMITTED = _s("pod.submitted", m.PodSpec, PODS, "pods as submitted, before admission")
POD_ADMITTED = _s("pod.admitted", m.PodAdmitted, PODS, "pods after admission (profiles applied)")
POD_REJECTED = _s("pod.rejected", m.PodRejected, PODS, "pods refused by admission, with reason")
POD_BOUND = _s("pod.bound.{node}", m.PodBound, PODS, "pods bound to a node")
POD_UNSCHEDULABLE = _s("pod.unschedulable", m.PodUnschedulable, PODS, "failed scheduling attempts")
POD_STATUS = _s("pod.status.{node}", m.PodStatus, PODS, "pod lifecycle reported by node agents")
POD_EVICT = _s("pod.evict.{node}", m.EvictionCommand, PODS, "eviction orders to a node agent")
POD_DELETED = _s("pod.deleted", m.PodDeleted, PODS, "pod deletions (colo delete): the scheduler drops or evicts")

NODE_REGISTERED = _s("node.registered.{node}", m.NodeSpec, NODES, "node registrations")
NODE_DELETED = _s("node.deleted.{node}", m.NodeDeleted, NODES,
                  "node deletions (colo delete node): the scheduler removes the node (and with force its pods)")
NODE_RESOURCE = _s("node.resource.{node}", m.NodeResource, NODES, "batch/mid allocatable")
NODE_SLO = _s("node.slo.{node}", m.NodeSLO, NODES, "per-node QoS policy")
NODE_METRIC = _s("node.metric.{node}", m.NodeMetric, METRICS, "node metric reports")
NODE_QOS = _s("node.qos.{node}", m.QoSEvent, EVENTS, "node agent QoS actions")

PROFILE_NODE = _s("profile.node.{node}", m.NodeProfile, PROFILES, "per-node predictions")
PROFILE_WORKLOAD = _s("profile.workload.{namespace}", m.WorkloadProfile, PROFILES,
                      "per-workload (namespace/app) replica predictions")

DEAD_LETTER = _s("dlq.{service}", m.DeadLetter, DLQ, "undecodable or failed messages")

CONFIG_APPLIED = _s("config.applied.{service}", m.ConfigApplied, CONFIG,
                    "a service put a new configuration in force (version, sources)")
CONFIG_REJECTED = _s("config.rejected.{service}", m.ConfigRejected, CONFIG,
                     "a new configuration refused, with every error; the old one stays")

MIGRATION = _s("migration.{phase}", m.PodMigrationJob, MIGRATIONS,
                "descheduler migration jobs, one event per phase change (Pending, Running, Succeeded, Failed, "
                "Aborted)")

WORKLOAD_SUBMITTED = _s("workload.submitted", m.WorkloadSpec, JOBS,
                        "Deployments, StatefulSets and Jobs as submitted, before admission expands them into pods")
PODGROUP_SUBMITTED = _s("podgroup.submitted", m.PodGroupSpec, JOBS, "PodGroups (gangs) as submitted")
WORKLOAD_ADMITTED = _s("workload.admitted", m.WorkloadAdmitted, JOBS,
                       "workloads and PodGroups accepted by admission, with the uids of their pods")
WORKLOAD_REJECTED = _s("workload.rejected", m.WorkloadRejected, JOBS,
                       "workloads and PodGroups refused by admission, with every problem; none of their pods admitted")
RESERVATION_SUBMITTED = _s("reservation.submitted", m.ReservationSpec, JOBS,
                           "Reservations as submitted (room held ahead of time for an owner's pods)")

QUOTA_SPEC = _s("quota.spec.{name}", m.ElasticQuota, QUOTAS, "elastic quotas as submitted (the latest per quota)")
QUOTA_STATUS = _s("quota.status.{name}", m.QuotaStatus, QUOTAS,
                  "per-quota min, max, used, request and runtime as the scheduler computes them")

SIM_TICK = _s("sim.tick.{service}", m.Tick, None, "virtual-time tick (request/reply)")

STREAMS: tuple[Stream, ...] = (
    Stream(PODS, (f"{PREFIX}.pod.>",), max_age_s=7 * 86400),
    Stream(NODES, (f"{PREFIX}.node.registered.>", f"{PREFIX}.node.resource.>",
                   f"{PREFIX}.node.slo.>", f"{PREFIX}.node.deleted.>"), max_msgs_per_subject=16),
    Stream(METRICS, (f"{PREFIX}.node.metric.>",), max_age_s=3600),
    Stream(EVENTS, (f"{PREFIX}.node.qos.>",), max_age_s=86400),
    Stream(PROFILES, (f"{PREFIX}.profile.>",), max_msgs_per_subject=4),
    Stream(DLQ, (f"{PREFIX}.dlq.>",), max_age_s=7 * 86400),
    Stream(CONFIG, (f"{PREFIX}.config.>",), max_msgs_per_subject=16),
    Stream(MIGRATIONS, (f"{PREFIX}.migration.>",), max_age_s=7 * 86400),
    Stream(JOBS, (f"{PREFIX}.workload.>", f"{PREFIX}.podgroup.>", f"{PREFIX}.reservation.>"), max_age_s=7 * 86400),
    Stream(QUOTAS, (f"{PREFIX}.quota.spec.>", f"{PREFIX}.quota.status.>"), max_msgs_per_subject=1),
)
"""Every JetStream stream Colo uses; created by :meth:`colo.bus.Bus.ensure_streams`."""

ALL: tuple[Subject[object], ...] = tuple(
    v for v in globals().values() if isinstance(v, Subject)
)
"""Every registered subject, for documentation and the AsyncAPI generator."""


def is_token(value: str) -> bool:
    """True when ``value`` can fill a ``{key}`` of a pattern (letters, digits, ``_`` and ``-``): a node name,
    service or quota name that is not one could never be published on."""
    return _TOKEN.fullmatch(value) is not None


def by_subject(subject: str) -> Subject[object] | None:
    """The registered :class:`Subject` a concrete subject string belongs to, or None."""
    parts = subject.split(".")
    for s in ALL:
        pat = s.pattern.split(".")
        if len(pat) == len(parts) and all(
            p == q or (p.startswith("{") and p.endswith("}")) for p, q in zip(pat, parts)
        ):
            return s
    return None
