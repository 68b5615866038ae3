"""What the API reads: records from the Redis store and the last message per subject from the bus's streams
(JetStream keeps the latest NodeMetric, ElasticQuota and QuotaStatus of each node or quota), joined into the
views of :mod:`colo_api.views`. Nothing is cached: every answer is read when asked."""

from __future__ import annotations

import asyncio
from typing import Any, TypeVar

from nats.js.errors import NotFoundError

from colo import codec
from colo import subjects as S
from colo.bus import Bus
from colo.codec import DecodeError
from colo.messages import ElasticQuota, NodeMetric, PodRecord, QuotaStatus, Resources
from colo.store import Store
from colo_api.events import event_of
from colo_api.views import Event, NodeView, QuotaView, node_usage

T = TypeVar("T")

LAST_MESSAGE_CONCURRENCY = 32
"""Stream reads (one per node or quota) in flight at once."""


async def last_message(bus: Bus, subject: S.Subject[T], **keys: str) -> T | None:
    """The newest message on ``subject`` (with ``keys``) its stream holds, decoded; None when the stream holds
    none or it does not decode (a malformed message is the dead-letter path's business, not a reader's)."""
    assert subject.stream is not None
    try:
        raw = await bus.js.get_last_msg(subject.stream, subject.format(**keys))
    except NotFoundError:
        return None
    if raw.data is None:
        return None
    try:
        return codec.decode(raw.data, subject.type)
    except DecodeError:
        return None


async def _gather_limited(coros: list[Any]) -> list[Any]:
    sem = asyncio.Semaphore(LAST_MESSAGE_CONCURRENCY)

    async def one(c: Any) -> Any:
        async with sem:
            return await c

    return list(await asyncio.gather(*(one(c) for c in coros)))


async def subjects_held(bus: Bus, stream: str, pattern: str) -> list[str]:
    """The concrete subjects matching ``pattern`` that ``stream`` holds messages on (sorted)."""
    info = await bus.js.stream_info(stream, subjects_filter=pattern)
    return sorted((info.state.subjects or {}).keys())


def _token(name: str) -> bool:
    return S._TOKEN.fullmatch(name) is not None


async def node_views(store: Store, bus: Bus, names: list[str] | None = None) -> list[NodeView]:
    """Views of the registered nodes (all, or those of ``names`` that exist), sorted by name: spec, allocated
    sums, the slo-manager's offer and the usage of the node's last metric report."""
    if names is None:
        specs = await store.list_nodes()
    else:
        found = [await store.get_node(n) for n in names]
        specs = [s for s in found if s is not None]
    specs.sort(key=lambda s: s.name)
    allocated = await store.allocated_many([s.name for s in specs])
    offers = await store.list_node_resources() if names is None else {
        s.name: r for s in specs if (r := await store.get_node_resource(s.name)) is not None}
    with_metrics = set(m.removeprefix(f"{S.PREFIX}.node.metric.")
                       for m in await subjects_held(bus, S.METRICS, S.NODE_METRIC.wildcard))
    metric_nodes = [s.name for s in specs if s.name in with_metrics and _token(s.name)]
    metrics: list[NodeMetric | None] = await _gather_limited(
        [last_message(bus, S.NODE_METRIC, node=n) for n in metric_nodes])
    by_node = {n: m for n, m in zip(metric_nodes, metrics) if m is not None}
    out = []
    for s in specs:
        m = by_node.get(s.name)
        out.append(NodeView(name=s.name, spec=s, allocated=allocated.get(s.name) or Resources(),
                            offered=offers.get(s.name), usage=node_usage(m) if m is not None else None))
    return out


async def quota_views(store: Store, bus: Bus) -> list[QuotaView]:
    """Every quota that was submitted (``quota.spec``), has a published status or has a max or usage in the
    store, sorted by name."""
    prefix_spec, prefix_status = f"{S.PREFIX}.quota.spec.", f"{S.PREFIX}.quota.status."
    held = await subjects_held(bus, S.QUOTAS, f"{S.PREFIX}.quota.>")
    names = {s.removeprefix(prefix_spec) for s in held if s.startswith(prefix_spec)}
    names |= {s.removeprefix(prefix_status) for s in held if s.startswith(prefix_status)}
    names |= {n.decode() if isinstance(n, bytes) else str(n)
              for n in await store.redis.smembers(store.keys.quotas)}
    ordered = sorted(n for n in names if n)
    specs: list[ElasticQuota | None] = await _gather_limited(
        [last_message(bus, S.QUOTA_SPEC, name=n) if _token(n) else _none() for n in ordered])
    statuses: list[QuotaStatus | None] = await _gather_limited(
        [last_message(bus, S.QUOTA_STATUS, name=n) if _token(n) else _none() for n in ordered])
    out = []
    for name, spec, status in zip(ordered, specs, statuses):
        in_force = status is not None and (spec is None or status.spec_created_at == spec.created_at)
        out.append(QuotaView(name=name, spec=spec, status=status, max=await store.quota_max(name),
                             used=await store.quota_used(name), in_force=in_force))
    return out


async def recent_qos_events(bus: Bus, limit: int, now: float) -> list[Event]:
    """The last ``limit`` node QoS actions (``node.qos.*``, the ``COLO_EVENTS`` stream, kept a day), oldest first,
    as :func:`colo_api.events.event_of` makes them."""
    stream = S.NODE_QOS.stream
    assert stream is not None
    state = (await bus.js.stream_info(stream)).state
    if not state.messages or limit <= 0:
        return []
    start = max(state.first_seq, state.last_seq - limit + 1)

    async def one(seq: int) -> Event | None:
        try:
            raw = await bus.js.get_msg(stream, seq)
        except NotFoundError:  # removed since (age limit)
            return None
        return event_of(raw.subject or "", raw.data or b"", now)

    found: list[Event | None] = await _gather_limited([one(q) for q in range(start, state.last_seq + 1)])
    return [e for e in found if e is not None]


async def _none() -> None:
    return None


async def find_pod(store: Store, namespace: str, name: str) -> PodRecord | None:
    """The record of pod ``namespace/name``: first by the uid ``colo submit`` gives such a pod
    (``NAMESPACE-NAME``, one read), else by a scan of every record (a manifest that set its own uid), the newest
    by ``updated_at`` when several uids share the name."""
    rec = await store.get_pod(f"{namespace}-{name}")
    if rec is not None and rec.spec.namespace == namespace and rec.spec.name == name:
        return rec
    matches = [r for r in await store.list_pods() if r.spec.namespace == namespace and r.spec.name == name]
    return max(matches, key=lambda r: r.updated_at) if matches else None
