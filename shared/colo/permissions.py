"""Who may do what on the bus: per service, the subjects it publishes and consumes, and the NATS
permissions that follow from them (docs/security.md).

The declaration sits next to the subject registry (:mod:`colo.subjects`) and names its
:class:`~colo.subjects.Subject` objects, never strings, so the two cannot drift:
``tests/unit/test_permissions.py`` fails when a service's code names a subject its declaration
leaves out, and ``tests/integration/test_security.py`` runs the services against a nats-server
configured with :func:`nats_permissions` and fails on any permission violation the server logs.

Routing tokens narrow the grants: ``{service}`` subjects (dead letters, config events, sim ticks)
are granted with the service's own name, and a node agent's ``{node}`` subjects only with the
names of the nodes it serves. JetStream needs its API subjects (NATS "JetStream API reference"):
stream create/update/info for the streams of :data:`colo.subjects.STREAMS` (every service ensures
them at start), consumer create/info/next and ``$JS.ACK`` for the streams it consumes, and
``_INBOX.>`` for the replies; the KV API of its buckets (``$KV.<bucket>.>``, stream ``KV_<bucket>``).

Consumers are granted by their exact names (``{service}-{durable}``, :attr:`BusGrant.durables`): a
service may create, pull from, ack for and delete only its own consumers, never another service's
(pulling from the scheduler's consumer and acking would take its admitted pods). Only the scheduler
gets ``STREAM.UPDATE`` (:attr:`BusGrant.updates_streams`): an update can seal a stream, cut its
retention, or add a subject transform or republish that rewrites a message's subject, e.g. one
node's metric into another's (issue 15). A service's own consumer may still be created with any filter of
the stream, so a service can read all of a stream it consumes; publishing, which is what changes the
cluster, is narrowed to exactly the declared subjects.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from colo import subjects as S
from colo.subjects import Subject

JS_API = "$JS.API"


@dataclass(frozen=True)
class BusGrant:
    """What one service does on the bus.

    ``publishes``: subjects it publishes (JetStream or core); ``consumes``: subjects it reads with durable
    JetStream consumers (:meth:`colo.bus.Bus.subscribe`); ``listens``: subjects it reads with core
    subscriptions; ``reads_streams``: streams it reads single messages from (``STREAM.MSG.GET``);
    ``kv_buckets``: JetStream KV buckets it opens, creates and watches; ``listens_everything``: it reads
    every Colo subject with core subscriptions (``colo.v1.>``: the API's event stream); ``node_scoped``: its ``{node}``
    subjects are granted only for the nodes the user is generated for (a node agent); ``durables``: the names
    of its durable consumers without the ``{service}-`` prefix, ``{agent}`` standing for
    :func:`node_agent_id` of the user's nodes (None: any consumer of the streams it consumes: the scheduler,
    whose names carry its replica index and instance); ``updates_streams``: it may update a stream's
    configuration (``ensure_streams`` after an upgrade changed it).
    Every service also publishes its own dead letters and answers sim ticks on its own subject.
    """

    publishes: tuple[Subject[Any], ...]
    consumes: tuple[Subject[Any], ...]
    listens: tuple[Subject[Any], ...] = ()
    reads_streams: tuple[str, ...] = ()
    kv_buckets: tuple[str, ...] = ()
    listens_everything: bool = False
    node_scoped: bool = False
    durables: tuple[str, ...] | None = ()
    updates_streams: bool = False


SUBMISSIONS: tuple[Subject[Any], ...] = (S.POD_SUBMITTED, S.WORKLOAD_SUBMITTED, S.PODGROUP_SUBMITTED,
                                         S.QUOTA_SPEC, S.RESERVATION_SUBMITTED)
"""What a submission publishes (:func:`colo.submission.publications`)."""

KV_CONFIG_BUCKET = "colo-config"
"""The slo-manager's configuration bucket (``COLO_SLO_CONFIG_RELOAD__KV_BUCKET`` default)."""

GRANTS: dict[str, BusGrant] = {
    "scheduler": BusGrant(
        publishes=(S.POD_BOUND, S.POD_UNSCHEDULABLE, S.POD_EVICT, S.QUOTA_STATUS),
        consumes=(S.POD_ADMITTED, S.POD_BOUND, S.POD_STATUS, S.POD_DELETED, S.NODE_REGISTERED, S.NODE_DELETED,
                  S.NODE_RESOURCE, S.NODE_METRIC, S.MIGRATION, S.QUOTA_SPEC, S.RESERVATION_SUBMITTED),
        reads_streams=(S.NODES,),  # the last node.registered of a node to delete (colo_scheduler.node_deletion)
        durables=None, updates_streams=True),
    "descheduler": BusGrant(
        publishes=(S.MIGRATION, S.POD_EVICT),
        consumes=(S.NODE_METRIC, S.NODE_REGISTERED, S.NODE_RESOURCE, S.POD_BOUND, S.POD_STATUS),
        durables=("nodes", "pod-bound", "pod-status", "metrics", "node-resource")),
    "slo-manager": BusGrant(
        publishes=(S.POD_ADMITTED, S.POD_REJECTED, S.NODE_RESOURCE, S.NODE_SLO, S.WORKLOAD_ADMITTED,
                   S.WORKLOAD_REJECTED, S.CONFIG_APPLIED, S.CONFIG_REJECTED),
        consumes=(S.POD_SUBMITTED, S.WORKLOAD_SUBMITTED, S.PODGROUP_SUBMITTED, S.NODE_REGISTERED, S.NODE_METRIC,
                  S.PROFILE_NODE, S.POD_BOUND, S.POD_STATUS),
        kv_buckets=(KV_CONFIG_BUCKET,),
        durables=("submitted", "nodes", "metrics", "profiles", "bound", "status", "workloads", "podgroups")),
    "node-agent": BusGrant(
        publishes=(S.NODE_REGISTERED, S.NODE_METRIC, S.NODE_QOS, S.POD_STATUS),
        consumes=(S.POD_BOUND, S.POD_EVICT, S.NODE_SLO),
        node_scoped=True, durables=("bound-{agent}", "evict-{agent}", "slo-{agent}", "history-{agent}")),
    "profiler": BusGrant(
        publishes=(S.PROFILE_NODE, S.PROFILE_WORKLOAD),
        consumes=(S.NODE_METRIC, S.NODE_REGISTERED, S.POD_BOUND, S.POD_STATUS),
        durables=("nodes", "pod-bound", "pod-status", "metrics")),
    "api": BusGrant(
        publishes=(S.POD_DELETED, S.NODE_DELETED, *SUBMISSIONS),
        consumes=(),
        listens_everything=True,  # the event stream (SSE) and the answers a submission waits for
        reads_streams=tuple(s.name for s in S.STREAMS)),
}
"""The bus grant of each service, by service name (the ``name`` of its :class:`colo.runtime.Service`)."""


def _grant(name: str) -> BusGrant:
    try:
        return GRANTS[name]
    except KeyError:
        raise ValueError(f"unknown service {name!r} (known: {', '.join(sorted(GRANTS))})") from None


def _concrete(subject: Subject[Any], service: str, nodes: Sequence[str] | None) -> list[str]:
    """``subject`` with ``{service}`` set to ``service`` and, when ``nodes`` is given, ``{node}`` to each
    node; other keys become ``*``."""
    values: dict[str, list[str]] = {"service": [service]}
    if nodes is not None:
        values["node"] = list(nodes)
    out = [subject.pattern]
    for key in subject.keys:
        out = [p.replace("{" + key + "}", v) for p in out for v in values.get(key, ["*"])]
    return out


def node_agent_id(node_names: Sequence[str], instance: str = "") -> str:
    """The identity of one node agent in its durable consumer names: ``instance`` (``COLO_INSTANCE``) when
    set, else ``nodes-<first 12 hex digits of the SHA-256 of the sorted node names joined by ",">``."""
    if instance:
        return instance
    digest = hashlib.sha256(",".join(sorted(node_names)).encode()).hexdigest()[:12]
    return f"nodes-{digest}"


def _stream_api(stream: str, update: bool = True) -> list[str]:
    return [f"{JS_API}.STREAM.{op}.{stream}" for op in ("CREATE", "UPDATE", "INFO") if update or op != "UPDATE"]


def _consumer_api(stream: str, names: Sequence[str] | None = None) -> list[str]:
    """The consumer API of ``stream`` for the consumers ``names`` (None: any consumer)."""
    if names is None:
        return [f"{JS_API}.CONSUMER.CREATE.{stream}.>", f"{JS_API}.CONSUMER.DURABLE.CREATE.{stream}.*",
                f"{JS_API}.CONSUMER.INFO.{stream}.*", f"{JS_API}.CONSUMER.DELETE.{stream}.*",
                f"{JS_API}.CONSUMER.MSG.NEXT.{stream}.*", f"$JS.ACK.{stream}.>"]
    return [a for n in names for a in (
        f"{JS_API}.CONSUMER.CREATE.{stream}.{n}", f"{JS_API}.CONSUMER.CREATE.{stream}.{n}.>",
        f"{JS_API}.CONSUMER.DURABLE.CREATE.{stream}.{n}", f"{JS_API}.CONSUMER.INFO.{stream}.{n}",
        f"{JS_API}.CONSUMER.DELETE.{stream}.{n}", f"{JS_API}.CONSUMER.MSG.NEXT.{stream}.{n}",
        f"$JS.ACK.{stream}.{n}.>")]


def consumer_names(service: str, nodes: Sequence[str] | None = None, instance: str = "") -> list[str] | None:
    """The exact names of ``service``'s durable consumers (``{service}-{durable}``; a node agent's for
    ``nodes`` and its ``COLO_INSTANCE`` ``instance``), None when its grant allows any consumer of its streams.
    Raises ValueError for an unknown service."""
    grant = _grant(service)
    if grant.durables is None:
        return None
    agent = node_agent_id(list(nodes or ()), instance)
    return [f"{service}-{d.replace('{agent}', agent)}" for d in grant.durables]


def _kv_api(bucket: str) -> list[str]:
    stream = f"KV_{bucket}"
    return [*_stream_api(stream), *_consumer_api(stream), f"{JS_API}.CONSUMER.CREATE.{stream}",
            f"{JS_API}.STREAM.MSG.GET.{stream}", f"{JS_API}.DIRECT.GET.{stream}.>", f"$KV.{bucket}.>",
            f"$JS.FC.{stream}.>"]


def _ordered(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


def nats_permissions(service: str, nodes: Sequence[str] | None = None, inbox_prefix: str = "_INBOX",
                     instance: str = "") -> dict[str, Any]:
    """The nats-server ``permissions`` block of ``service``'s user: ``{"publish": {"allow": [...]},
    "subscribe": {"allow": [...]}, "allow_responses": True}`` (subject lists, duplicates removed); a service
    that listens to every subject (the API) gets ``"deny"`` for the other services' sim ticks, which it could
    otherwise answer in their place.
    ``inbox_prefix``: the user's reply subjects (``COLO_NATS_INBOX_PREFIX``), the only ``_INBOX`` it may
    subscribe to.

    ``nodes``: for a node-scoped service (the node agent) the names of the nodes the user serves;
    required there, refused elsewhere; ``instance``: the ``COLO_INSTANCE`` it runs with ("" = none), which
    names its consumers (:func:`node_agent_id`). Raises ValueError for an unknown service, a missing or
    unexpected ``nodes`` or a node name that is not a subject token.
    """
    grant = _grant(service)
    if grant.node_scoped and not nodes:
        raise ValueError(f"{service}: give the names of the nodes it serves")
    if nodes and not grant.node_scoped:
        raise ValueError(f"{service}: is not node-scoped, it takes no node names")
    for node in nodes or ():
        S.NODE_METRIC.format(node=node)  # raises ValueError for a bad token
    scoped = list(nodes) if grant.node_scoped and nodes else None
    consumed_streams = _ordered([s.stream for s in grant.consumes if s.stream])
    publish = [p for s in (*grant.publishes, S.DEAD_LETTER) for p in _concrete(s, service, scoped)]
    publish += [f"{JS_API}.INFO"] + [a for st in S.STREAMS for a in _stream_api(st.name, grant.updates_streams)]
    names = consumer_names(service, scoped, instance)
    publish += [a for st in consumed_streams for a in _consumer_api(st, names)]
    publish += [f"{JS_API}.STREAM.MSG.GET.{st}" for st in grant.reads_streams]
    publish += [a for b in grant.kv_buckets for a in _kv_api(b)]
    subscribe = [f"{inbox_prefix}.>", *_concrete(S.SIM_TICK, service, None)]
    subscribe += [p for s in grant.listens for p in _concrete(s, service, None)]
    subscribe += [f"{S.PREFIX}.>"] if grant.listens_everything else []
    sub_perms: dict[str, list[str]] = {"allow": _ordered(subscribe)}
    if grant.listens_everything:  # it could otherwise answer another service's ticks (allow_responses)
        sub_perms["deny"] = [S.SIM_TICK.format(service=s) for s in GRANTS if s != service]
    return {"publish": {"allow": _ordered(publish)}, "subscribe": sub_perms, "allow_responses": True}


def admin_permissions() -> dict[str, Any]:
    """The permissions of the operator's user (the ``colo`` commands, the simulator): publishing every Colo
    subject, the whole JetStream API and replies; subscribing to anything (its commands follow any subject)."""
    every = [f"{S.PREFIX}.>", f"{JS_API}.>", "$JS.ACK.>", "$JS.FC.>", "$KV.>", "_INBOX.>"]
    return {"publish": {"allow": every}, "subscribe": {"allow": [">"]}}
