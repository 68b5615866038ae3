"""Rebuilding bindings from what a node really runs (:class:`colo.store.Store`; docs/operations.md "Recovery").

After a store loss (an empty Redis) or a rollback (an AOF cut back by ``appendfsync everysec``), a pod may run
on a node with no binding in the store: the bind script would then place a second copy elsewhere, and the node
would look emptier than it is. :meth:`RestoreOps.restore_binding` writes the binding back from the node
agent's truth, in one script (atomic): the binding (node, time, requests), the node's allocation and pod set,
the pod's record (spec, phase ``Running``) — unless the record says the pod ended (it was released: the agent is
to stop it, not the store to bring it back). It never checks fit: the pod already runs there, so the store must
count it even when the node is then over-committed (the scheduler sees it and binds nothing more there).
Quota usage is not charged again: the agent does not know the pod's quota chain, and a binding without a
``quotas`` field gives nothing back at release, so usage stays consistent (it under-counts until the pod ends).
"""

from __future__ import annotations

from collections.abc import Sequence

import redis.asyncio as aioredis

from colo import codec
from colo.keys import Keys
from colo.messages import PodSpec

RESTORE_BINDING_LUA = """#!lua flags=no-cluster
local bound = redis.call('HGET', KEYS[1], 'node')
if bound then return bound end
local phase = redis.call('HGET', KEYS[5], 'phase')
if phase == 'Succeeded' or phase == 'Failed' then return ARGV[12] .. phase end
local names = {'cpu', 'memory', 'batch_cpu', 'batch_memory', 'mid_cpu', 'mid_memory'}
for r = 1, 6 do
  if tonumber(ARGV[4 + r]) > 0 then redis.call('HINCRBY', KEYS[2], names[r], ARGV[4 + r]) end
end
redis.call('HINCRBY', KEYS[2], 'pods', 1)
redis.call('HSET', KEYS[1], 'node', ARGV[1], 'at', ARGV[2], 'cpu', ARGV[5], 'memory', ARGV[6],
           'batch_cpu', ARGV[7], 'batch_memory', ARGV[8], 'mid_cpu', ARGV[9], 'mid_memory', ARGV[10])
redis.call('SADD', KEYS[3], ARGV[4])
if redis.call('EXISTS', KEYS[4]) == 0 then redis.call('SET', KEYS[4], ARGV[11]) end
redis.call('HSET', KEYS[5], 'phase', 'Running', 'node', ARGV[1], 'reason', '', 'bound_at', ARGV[2],
           'updated_at', ARGV[3])
redis.call('SADD', KEYS[6], ARGV[4])
return ''
"""
"""KEYS: binding, node allocation, node pod set, pod spec, pod state, pods set; ARGV: node, bound at, now, uid,
the six requests (decimal strings), spec JSON, :data:`ENDED`. Returns '' when restored, else the node the pod is
bound to, or :data:`ENDED` and the phase of a pod that ended (its binding released: nothing is written)."""

ENDED = "ended:"
"""What :meth:`RestoreOps.restore_binding` returns, followed by the phase, for a pod the store records as ended
(``Succeeded``/``Failed``: released, e.g. ended by a forced deletion of it or its node before its node agent
stopped it). Not a node name: ``:`` is no subject token character."""


class RestoreOps:
    """The restore method of :class:`colo.store.Store` (which provides client and keys)."""

    redis: aioredis.Redis
    keys: Keys

    async def restore_binding(self, spec: PodSpec, node: str, bound_at: float, at: float) -> str:
        """Record that ``spec`` runs on ``node`` (bound at clock ``bound_at``, seen at ``at``; seconds) unless the
        pod has a binding or has ended. Returns '' when the binding was restored, else the node it is bound to (the
        same node: nothing to do; another: a double bind), or :data:`ENDED` and the phase when the store records the
        pod as ended (to stop here: it must not run again). Raises RedisError on I/O failure."""
        k = self.keys
        uid = spec.uid
        r = spec.requests
        req = [str(max(int(v), 0)) for v in (r.cpu, r.memory, r.batch_cpu, r.batch_memory, r.mid_cpu, r.mid_memory)]
        script = self.redis.register_script(RESTORE_BINDING_LUA)
        out = await script(keys=[k.binding(uid), k.allocated(node), k.node_pods(node), k.pod(uid), k.pod_state(uid),
                                 k.pods],
                           args=[node, repr(float(bound_at)), repr(float(at)), uid, *req, codec.encode(spec), ENDED])
        return out.decode() if isinstance(out, bytes) else str(out)

    async def loaded_marker(self, name: str) -> bool:
        """Whether the scheduler replica ``name`` has loaded this store before (:meth:`colo.keys.Keys.loaded`):
        False on a new or lost store. Raises RedisError on I/O failure."""
        return bool(await self.redis.exists(self.keys.loaded(name)))

    async def data_epoch(self) -> str:
        """The server's replication ID (``INFO replication`` ``master_replid``, 40 hex digits): Redis draws a
        new one when a server starts (restarted, maybe on an older AOF or none) and when a replica is promoted
        to primary (a Sentinel failover), so a changed value means the data may have lost recent writes
        (redis.io/docs/management/replication, "Replication ID explained"). Raises RedisError on I/O failure."""
        info = await self.redis.info("replication")
        return str(info.get("master_replid", ""))

    async def mark_loaded(self, name: str, at: float) -> None:
        """Record that the scheduler replica ``name`` loaded this store (clock ``at``, seconds)."""
        await self.redis.set(self.keys.loaded(name), repr(float(at)))

    async def missing_nodes(self, names: Sequence[str]) -> list[str]:
        """Those of ``names`` the store has no NodeSpec of (one pipeline), in input order."""
        pipe = self.redis.pipeline(transaction=False)
        for name in names:
            pipe.exists(self.keys.node(name))
        return [name for name, n in zip(names, await pipe.execute()) if not n]

    async def node_pods_many(self, names: Sequence[str]) -> dict[str, set[str]]:
        """Uids bound to each of ``names`` (one pipeline; a node with none maps to an empty set)."""
        pipe = self.redis.pipeline(transaction=False)
        for name in names:
            pipe.smembers(self.keys.node_pods(name))
        return {name: {u.decode() if isinstance(u, bytes) else str(u) for u in uids}
                for name, uids in zip(names, await pipe.execute())}
