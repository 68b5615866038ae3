"""The Redis cluster snapshot: nodes, node resources, pods, allocations, quota usage, atomic bind/release.

Records are stored as :mod:`colo.codec` JSON; key names come from :mod:`colo.keys`.
Binding is one Lua script (DESIGN.md §5): two schedulers racing can never over-commit a
node or bind a pod twice; a bind may also be *fenced* by a lease (:meth:`Store.acquire_lease`),
so that a scheduler which lost its lease can no longer bind. Units: milli-cores and bytes;
times in clock seconds; lease durations in milliseconds, as Redis ``PX``.

The bind check follows Kubernetes ``NodeResourcesFit``: a resource is checked only when
the pod requests it (> 0), ``allocated + request > allocatable`` refuses; every pod counts
one against ``allocatable.pods`` when that is > 0. cpu, memory and pods are checked
against the NodeSpec's allocatable; batch-* and mid-* against the node's NodeResource
(0 when none was published).

Quota charges (REFERENCE.md §8; the store's max is the hard cap shared by every scheduler replica, the
runtime quota is each scheduler's own check): a bind naming quotas (:attr:`BindRequest.quotas`: the pod's
leaf quota and its ancestors, the root excluded) is refused with :data:`REASON_QUOTA_EXCEEDED` when, for a
resource the pod requests (every pod requests one ``pods``) and the quota has a max for
(:meth:`Store.set_quota_max`; absent = unlimited), ``used + request > max``; a bind adds its requests to
each quota's usage and :meth:`Store.release` takes them off exactly once. Gang groups
(:attr:`BindRequest.group`): the binds of one :meth:`Store.bind_many` call with the same group are bound
all together or not at all (Koordinator Coscheduling, REFERENCE.md §9). The scripts: :mod:`colo.store_lua`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import msgspec
import redis.asyncio as aioredis
import redis.exceptions as redis_exc

from colo import codec
from colo.connections import redis_client
from colo.keys import Keys
from colo.messages import NodeResource, NodeSpec, PodPhase, PodRecord, PodSpec, Resources
from colo.settings import RuntimeSettings
from colo.store_binds import (
    BIND_CHUNK,
    REASON_ALREADY_BOUND,
    REASON_GANG_MEMBER_REFUSED,
    REASON_LEASE_LOST,
    REASON_NODE_UNKNOWN,
    REASON_QUOTA_EXCEEDED,
    REASON_TOO_MANY_PODS,
    BindRequest,
    BindResult,
    Fence,
    Lease,
    bind_arg,
    bind_chunks,
    bind_units,
)
from colo.store_checkpoints import CheckpointOps
from colo.store_leases import LeaseOps
from colo.store_lua import (
    ACQUIRE_LUA,
    ADMIT_LUA,
    ALLOCATED_LUA,
    BIND_LUA,
    DELETE_NODE_LUA,
    DELETE_QUOTA_LUA,
    DROP_LEASE_LUA,
    RELEASE_LUA,
    RENEW_LUA,
)
from colo.store_quota import QuotaOps
from colo.store_rejected import RejectionOps
from colo.store_restore import RestoreOps
from colo.store_retry import RECONNECT_BACKOFF_S, store_retry
from colo.store_wait import WaitPolicy, replicated
from colo.store_workloads import WorkloadOps

__all__ = ["BIND_CHUNK", "REASON_ALREADY_BOUND", "REASON_GANG_MEMBER_REFUSED", "REASON_LEASE_LOST",
           "REASON_NODE_UNKNOWN", "REASON_QUOTA_EXCEEDED", "REASON_TOO_MANY_PODS", "RECONNECT_BACKOFF_S",
           "RECONNECT_RETRIES", "BindRequest", "BindResult", "Fence", "Lease", "Store"]

_json = msgspec.json.Encoder()
_ALLOC_ROWS = msgspec.json.Decoder(list[list[int]], strict=False)


def _s(v: bytes | str | None) -> str:
    if v is None:
        return ""
    return v.decode() if isinstance(v, bytes) else v


def _resources(h: dict[Any, Any]) -> Resources:
    vals = {_s(k): int(_s(v) or 0) for k, v in h.items()}
    return Resources(**{k: vals.get(k, 0) for k in ("cpu", "memory", "batch_cpu", "batch_memory",
                                                     "mid_cpu", "mid_memory", "pods")})


class Store(LeaseOps, QuotaOps, WorkloadOps, RejectionOps, RestoreOps, CheckpointOps):
    """Async access to the cluster snapshot in Redis under ``prefix``.

    Create with ``await Store.connect(url, prefix="colo")``; ``await store.close()`` at the end.
    Redis errors (``redis.exceptions.RedisError``) propagate; decode errors of stored records
    raise :class:`colo.codec.DecodeError`.
    """

    def __init__(self, client: aioredis.Redis, prefix: str = "colo", wait: WaitPolicy | None = None) -> None:
        self.redis = client
        self.keys = Keys(prefix)
        self.wait = wait or WaitPolicy()
        self._bind = client.register_script(BIND_LUA)
        self._release = client.register_script(RELEASE_LUA)
        self._admit = client.register_script(ADMIT_LUA)
        self._acquire = client.register_script(ACQUIRE_LUA)
        self._renew = client.register_script(RENEW_LUA)
        self._drop_lease = client.register_script(DROP_LEASE_LUA)
        self._allocated = client.register_script(ALLOCATED_LUA)
        self._delete_quota = client.register_script(DELETE_QUOTA_LUA)
        self._delete_node = client.register_script(DELETE_NODE_LUA)
        self._stems = self._stems_for("")

    def _stems_for(self, lease: str) -> str:
        """Key name stems (a key = stem + node name or uid) for the scripts that build key names, as JSON;
        ``lease`` names the lease a fenced bind checks."""
        k = self.keys
        return _json.encode({"binding": k.binding(""), "node": k.node(""), "limits": k.limits(""),
                             "alloc": k.allocated(""), "podstate": k.pod_state(""), "nodepods": k.node_pods(""),
                             "pod": k.pod(""), "pods": k.pods, "lease": k.lease(lease),
                             "quotamax": k.quota_max(""), "quotaused": k.quota_used(""),
                             "quotas": k.quotas}).decode()

    @classmethod
    async def connect(cls, url: str, prefix: str = "colo", settings: RuntimeSettings | None = None) -> Store:
        """Connect to Redis at ``url`` (``redis://host:port/db``) and check it answers.

        ``settings.redis_wait_replicas`` > 0: every bind/release call returns only after ``WAIT replicas
        redis_wait_timeout_ms`` on its connection, sent again until the replicas ack or ``redis_failover_window_s``
        passes (:mod:`colo.store_wait`: a broken connection meanwhile raises BindUnknown, the bind's fate unknown;
        still short after the window: kept and reported).

        Raises redis.exceptions.ConnectionError when Redis is unreachable; ValueError for a bad prefix.
        A command that meets a dead connection (Redis restarted: every pooled connection is closed)
        reconnects and is sent again, up to :data:`RECONNECT_RETRIES` times with backoff
        (:data:`RECONNECT_BACKOFF_S`); redis-py's ``from_url`` default is no retry, so each stale
        connection failed one command after a restart. Behind Sentinel it is sent again until
        ``settings.redis_failover_window_s`` has passed (:mod:`colo.store_retry`).

        ``settings`` gives the link's ACL user, TLS and Sentinels (:func:`colo.connections.redis_client`;
        LinkError when a file named there cannot be read).
        """
        client = redis_client(url, settings, store_retry(settings, RECONNECT_RETRIES),
                              [redis_exc.ConnectionError, redis_exc.TimeoutError])
        try:
            await client.ping()
        except BaseException:
            await client.aclose()
            raise
        wait = WaitPolicy(settings.redis_wait_replicas, settings.redis_wait_timeout_ms,
                          window_s=settings.redis_failover_window_s) if settings else None
        return cls(client, prefix, wait)

    async def close(self) -> None:
        """Close the connection pool."""
        await self.redis.aclose()

    async def ping(self) -> None:
        """One PING (readiness, :mod:`colo.readiness`). Raises redis.exceptions.RedisError when Redis does not
        answer after the resends of :meth:`connect`."""
        await self.redis.ping()

    # ------------------------------------------------------------------ nodes

    async def put_node(self, spec: NodeSpec) -> None:
        """Store (or replace) a node; its allocatable cpu/memory/pods become bind limits."""
        k = self.keys
        a = spec.allocatable
        pipe = self.redis.pipeline(transaction=True)
        pipe.set(k.node(spec.name), codec.encode(spec))
        pipe.sadd(k.nodes, spec.name)
        pipe.hset(k.limits(spec.name), mapping={"cpu": a.cpu, "memory": a.memory, "pods": a.pods})
        await pipe.execute()

    async def get_node(self, name: str) -> NodeSpec | None:
        """The node ``name`` or None."""
        raw = await self.redis.get(self.keys.node(name))
        return None if raw is None else codec.decode(raw, NodeSpec)

    async def list_nodes(self) -> list[NodeSpec]:
        """Every node, sorted by name."""
        names = sorted(_s(n) for n in await self.redis.smembers(self.keys.nodes))
        if not names:
            return []
        raws = await self.redis.mget([self.keys.node(n) for n in names])
        return [codec.decode(r, NodeSpec) for r in raws if r is not None]

    async def delete_node(self, name: str, *, if_idle: bool = False) -> list[str]:
        """Forget a node: spec, resources, limits (allocations and bindings stay until released); from then on
        no pod binds to it. With ``if_idle`` only when no pod is bound to it, checked atomically with the
        binds: else nothing changes and the bound uids are returned (sorted). Returns [] when deleted."""
        k = self.keys
        keys = [k.nodes, k.node(name), k.node_resource(name), k.limits(name), k.node_pods(name)]
        bound = await self._delete_node(keys=keys, args=[name, "0" if if_idle else "1"])
        return sorted(_s(u) for u in bound)

    async def put_node_resource(self, res: NodeResource) -> None:
        """Store a node's batch/mid allocatable; its values become bind limits for batch-*/mid-*."""
        k = self.keys
        pipe = self.redis.pipeline(transaction=True)
        pipe.set(k.node_resource(res.node), codec.encode(res))
        pipe.hset(k.limits(res.node), mapping={
            "batch_cpu": res.batch_cpu, "batch_memory": res.batch_memory,
            "mid_cpu": res.mid_cpu, "mid_memory": res.mid_memory,
        })
        await pipe.execute()

    async def put_node_resources(self, resources: Sequence[NodeResource], chunk: int = 1000) -> None:
        """Store many nodes' batch/mid allocatable, as :meth:`put_node_resource` each, in pipelines of
        ``chunk`` nodes: one connection, one round trip and one MULTI/EXEC per chunk, so a reader sees
        each node's value and bind limits change together. Empty ``resources`` does nothing."""
        k = self.keys
        for start in range(0, len(resources), chunk):
            pipe = self.redis.pipeline(transaction=True)
            for res in resources[start:start + chunk]:
                pipe.set(k.node_resource(res.node), codec.encode(res))
                pipe.hset(k.limits(res.node), mapping={
                    "batch_cpu": res.batch_cpu, "batch_memory": res.batch_memory,
                    "mid_cpu": res.mid_cpu, "mid_memory": res.mid_memory,
                })
            await pipe.execute()

    async def get_node_resource(self, node: str) -> NodeResource | None:
        """The node's last NodeResource or None."""
        raw = await self.redis.get(self.keys.node_resource(node))
        return None if raw is None else codec.decode(raw, NodeResource)

    async def list_node_resources(self) -> dict[str, NodeResource]:
        """NodeResource per node name, for nodes that have one."""
        names = sorted(_s(n) for n in await self.redis.smembers(self.keys.nodes))
        if not names:
            return {}
        raws = await self.redis.mget([self.keys.node_resource(n) for n in names])
        return {n: codec.decode(r, NodeResource) for n, r in zip(names, raws) if r is not None}

    # ------------------------------------------------------------------ pods

    async def put_pod(self, record: PodRecord) -> None:
        """Store (or replace) a pod record. While the pod has a binding, reads report the
        binding's node and time regardless of ``record.node``."""
        k = self.keys
        uid = record.spec.uid
        pipe = self.redis.pipeline(transaction=True)
        pipe.set(k.pod(uid), codec.encode(record.spec))
        pipe.hset(k.pod_state(uid), mapping={
            "phase": record.phase, "node": record.node, "reason": record.reason,
            "updated_at": repr(record.updated_at), "bound_at": repr(record.bound_at),
        })
        pipe.sadd(k.pods, uid)
        await pipe.execute()

    async def put_pods(self, records: Iterable[PodRecord]) -> None:
        """:meth:`put_pod` for many records in one pipeline."""
        k = self.keys
        pipe = self.redis.pipeline(transaction=False)
        n = 0
        for record in records:
            uid = record.spec.uid
            pipe.set(k.pod(uid), codec.encode(record.spec))
            pipe.hset(k.pod_state(uid), mapping={
                "phase": record.phase, "node": record.node, "reason": record.reason,
                "updated_at": repr(record.updated_at), "bound_at": repr(record.bound_at),
            })
            pipe.sadd(k.pods, uid)
            n += 1
        if n:
            await pipe.execute()

    async def admit_pending(self, specs: Sequence[PodSpec], at: float) -> list[bool]:
        """Store each pod as ``Pending`` (reason and node empty, ``updated_at = at``) unless it is
        bound or its record says it ran or finished; one script call (atomic) per :data:`BIND_CHUNK` pods.

        Returns, in input order, True where the pod was (re)written as Pending and so should be
        queued, False for a replayed admission of a pod already bound or done. Raises RedisError
        on I/O failure (nothing is acknowledged then, so the admissions are redelivered).
        """
        if not specs:
            return []
        stamp = repr(float(at))
        out: list[bool] = []
        for start in range(0, len(specs), BIND_CHUNK):  # direct calls: a pipeline with a script costs
            chunk = specs[start:start + BIND_CHUNK]     # an extra SCRIPT EXISTS round trip in redis-py
            flags = await self._admit(args=[self._stems, stamp, _json.encode([s.uid for s in chunk]),
                                            *(codec.encode(s) for s in chunk)])
            out += (c == "1" for c in _s(flags))
        return out

    async def set_phase(self, uid: str, phase: PodPhase, reason: str, at: float) -> bool:
        """Update a stored pod's phase/reason/time; False when the pod is unknown."""
        k = self.keys
        if not await self.redis.exists(k.pod(uid)):
            return False
        await self.redis.hset(k.pod_state(uid), mapping={"phase": phase, "reason": reason,
                                                          "updated_at": repr(at)})
        return True

    async def get_pod(self, uid: str) -> PodRecord | None:
        """The pod record of ``uid`` or None."""
        recs = await self._get_pods([uid])
        return recs[0] if recs else None

    async def list_pods(self) -> list[PodRecord]:
        """Every pod record (unordered)."""
        uids = [_s(u) for u in await self.redis.smembers(self.keys.pods)]
        return await self._get_pods(uids)

    async def bound_uids(self, node: str) -> set[str]:
        """Uids of the pods currently bound to ``node`` (with or without a pod record)."""
        return {_s(u) for u in await self.redis.smembers(self.keys.node_pods(node))}

    async def pods_on(self, node: str) -> list[PodRecord]:
        """Records of the pods currently bound to ``node`` (bound pods without a record are skipped)."""
        return await self._get_pods(sorted(await self.bound_uids(node)))

    async def _get_pods(self, uids: Sequence[str]) -> list[PodRecord]:
        out: list[PodRecord] = []
        k = self.keys
        for start in range(0, len(uids), 1000):
            chunk = uids[start:start + 1000]
            pipe = self.redis.pipeline(transaction=False)
            for uid in chunk:
                pipe.get(k.pod(uid))
                pipe.hgetall(k.pod_state(uid))
                pipe.hmget(k.binding(uid), "node", "at", "cpuset", "devices")
            res = await pipe.execute()
            for i in range(len(chunk)):
                raw, state, (bnode, bat, bcpus, bdevs) = res[3 * i], res[3 * i + 1], res[3 * i + 2]
                if raw is None:
                    continue
                st = {_s(a): _s(b) for a, b in state.items()}
                node = _s(bnode) if bnode is not None else st.get("node", "")
                bound_at = float(_s(bat)) if bat is not None else float(st.get("bound_at") or 0.0)
                out.append(PodRecord(
                    spec=codec.decode(raw, PodSpec),
                    phase=st.get("phase", "Pending"),  # type: ignore[arg-type]
                    node=node,
                    reason=st.get("reason", ""),
                    updated_at=float(st.get("updated_at") or 0.0),
                    bound_at=bound_at,
                    cpuset=_s(bcpus) if bnode is not None and bcpus is not None else "",
                    devices=_s(bdevs) if bnode is not None and bdevs is not None else "",
                ))
        return out

    async def bound_node(self, uid: str) -> str | None:
        """The node ``uid`` is bound to, or None."""
        v = await self.redis.hget(self.keys.binding(uid), "node")
        return None if v is None else _s(v)

    async def bound_nodes(self, uids: Sequence[str]) -> dict[str, tuple[str, float]]:
        """``(node, bound at)`` of every pod of ``uids`` that has a binding (one pipeline)."""
        out: dict[str, tuple[str, float]] = {}
        for start in range(0, len(uids), 1000):
            chunk = uids[start:start + 1000]
            pipe = self.redis.pipeline(transaction=False)
            for uid in chunk:
                pipe.hmget(self.keys.binding(uid), "node", "at")
            for uid, (node, at) in zip(chunk, await pipe.execute()):
                if node is not None:
                    out[uid] = (_s(node), float(_s(at) or 0.0))
        return out

    async def bound_devices(self, uids: Sequence[str]) -> dict[str, str]:
        """The GPUs kept with the binding of every pod of ``uids`` that has some (``"index:milli,..."``; one
        pipeline; docs/gpu.md)."""
        return await self._binding_field(uids, "devices")

    async def bound_cpusets(self, uids: Sequence[str]) -> dict[str, str]:
        """The cpuset kept with the binding of every pod of ``uids`` that has one (kernel list format; one
        pipeline; docs/topology.md)."""
        return await self._binding_field(uids, "cpuset")

    async def _binding_field(self, uids: Sequence[str], name: str) -> dict[str, str]:
        """Field ``name`` of the binding of every pod of ``uids`` where it is set and not empty, pipelined in
        chunks of 1,000."""
        out: dict[str, str] = {}
        for start in range(0, len(uids), 1000):
            chunk = uids[start:start + 1000]
            pipe = self.redis.pipeline(transaction=False)
            for uid in chunk:
                pipe.hget(self.keys.binding(uid), name)
            for uid, value in zip(chunk, await pipe.execute()):
                if value:
                    out[uid] = _s(value)
        return out

    # ------------------------------------------------------------------ bind / release

    async def bind(self, uid: str, node: str, requests: Resources, at: float,
                   fence: Fence | None = None) -> BindResult:
        """Atomically bind pod ``uid`` to ``node`` reserving ``requests`` (milli-cores, bytes).

        Refuses (ok=False with a reason) when ``fence`` is given and its lease is not held with
        that value (:data:`REASON_LEASE_LOST`), the pod is already bound, the node is unknown,
        or a requested resource does not fit (see module doc). Raises RedisError on I/O failure.
        """
        return (await self.bind_many([BindRequest(uid, node, requests, at)], fence))[0]

    async def bind_many(self, requests: Sequence[BindRequest] | Sequence[tuple[str, str, Resources, float]],
                        fence: Fence | None = None) -> list[BindResult]:
        """:meth:`bind` for many pods, one script call (round trip) per :data:`BIND_CHUNK` binds;
        results in input order.

        Each element is a :class:`BindRequest` or a ``(uid, node, requests, at)`` tuple. Each
        bind is atomic on its own, checks ``fence`` and its quotas (module doc); earlier binds in the
        list are seen by later ones. The binds with the same non-empty ``group`` are one atomic unit,
        checked at the place of the group's first member (each member seeing the earlier ones, quotas
        included) and bound only when every one fits; otherwise none is, the refused members carry
        their reason and the others :data:`REASON_GANG_MEMBER_REFUSED` naming the first refused one.
        A group is never split across script calls, however large. With :attr:`wait` the call returns once
        that many replicas hold the binds (``WAIT``, :class:`colo.store_wait.WaitPolicy`). Raises
        RedisError on I/O failure.
        """
        if not requests:
            return []
        args = [bind_arg(item) for item in requests]
        stems = self._stems if fence is None else self._stems_for(fence.name)
        value = fence.value if fence is not None else ""
        async with replicated(self.redis, self.wait, "bind", f"of {len(args)} pods") as conn:
            if not any(isinstance(item, BindRequest) and item.group for item in requests):
                out: list[BindResult] = []
                for start in range(0, len(args), BIND_CHUNK):  # direct calls, as in admit_pending
                    reasons = await self._bind(args=[stems, value, _json.encode(args[start:start + BIND_CHUNK])],
                                               client=conn)
                    out += (BindResult(not r, r) for r in _s(reasons).split("\n"))
                return out
            results: list[BindResult] = [BindResult(False)] * len(args)
            for chunk in bind_chunks(bind_units(requests), BIND_CHUNK):
                reasons = await self._bind(args=[stems, value, _json.encode([args[i] for i in chunk])], client=conn)
                for i, r in zip(chunk, _s(reasons).split("\n")):
                    results[i] = BindResult(not r, r)
            return results

    async def release(self, uid: str, phase: PodPhase, reason: str, at: float, node: str = "") -> bool:
        """Free a bound pod's allocation exactly once and set its phase/reason.

        With ``node`` (where the status says the pod ran) a binding on another node is left alone: the
        status is stale, from a binding before the pod was evicted and bound again elsewhere.
        Returns False when the pod had no binding (already released or never bound) or, with
        ``node``, a binding elsewhere. The pod record keeps ``node`` (where it ran) for history.
        """
        k = self.keys
        for _ in range(8):
            bound = await self.bound_node(uid)
            if bound is None or (node and bound != node):
                return False
            async with replicated(self.redis, self.wait, "release", f"of {uid}") as conn:
                res = await self._release(
                    keys=[k.binding(uid), k.pod_state(uid), k.allocated(bound), k.node_pods(bound)],
                    args=[bound, phase, reason, repr(float(at)), uid, k.quota_used(""), k.reservation("")],
                    client=conn,
                )
            if int(res) == 1:
                return True
            if int(res) == 0:
                return False
        raise RuntimeError(f"release of {uid} kept racing with rebinds")

    # ------------------------------------------------------------------ allocation

    async def allocated(self, node: str) -> Resources:
        """Σ requests bound to ``node`` (``pods`` = number of bound pods)."""
        return _resources(await self.redis.hgetall(self.keys.allocated(node)))

    async def all_allocated(self) -> dict[str, Resources]:
        """:meth:`allocated` for every registered node."""
        return await self.allocated_many(sorted(_s(n) for n in await self.redis.smembers(self.keys.nodes)))

    async def allocated_many(self, nodes: Iterable[str]) -> dict[str, Resources]:
        """:meth:`allocated` for each of ``nodes`` (unknown nodes: all zero), in one script call
        per 1,000 nodes whose reply is one JSON document (a hash reply per node cost ~0.1 ms to parse)."""
        names = list(nodes)
        out: dict[str, Resources] = {}
        for start in range(0, len(names), 1000):
            chunk = names[start:start + 1000]
            raw = await self._allocated(args=[self._stems, _json.encode(chunk)])
            for name, v in zip(chunk, _ALLOC_ROWS.decode(raw)):
                out[name] = Resources(cpu=v[0], memory=v[1], batch_cpu=v[2], batch_memory=v[3], mid_cpu=v[4],
                                      mid_memory=v[5], pods=v[6])
        return out

    async def delete_all(self) -> int:
        """Delete every key under the prefix; returns how many were deleted."""
        n = 0
        batch: list[bytes] = []
        async for key in self.redis.scan_iter(match=self.keys.pattern, count=1000):
            batch.append(key)
            if len(batch) >= 1000:
                n += await self.redis.unlink(*batch)
                batch = []
        if batch:
            n += await self.redis.unlink(*batch)
        return n


RECONNECT_RETRIES = 8
"""Times a Store command is sent again after a connection error on a single server (see :meth:`Store.connect`;
behind Sentinel a time window applies instead, :mod:`colo.store_retry`)."""
