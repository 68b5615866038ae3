"""Pods refused by admission and pods deleted before they ran, kept visible in the store
(:class:`colo.store.Store`; docs/cli.md "Pods that never disappear").

A refused pod is stored as phase ``Failed`` with reason ``Rejected: <every problem>`` (kubelet's admission
refusals end a pod the same way: ``Failed`` with a reason), a pending pod deleted by ``colo delete`` as
``Failed`` with reason ``Deleted: <by whom>``. Neither ever had a binding, so nothing is freed. Such a record is
*replaceable*, as is a bound pod a deletion stopped (``Failed``/``Deleted``, reported by its node agent): a later
admission of the same uid (a corrected manifest, a resubmission) writes it as ``Pending`` again
(:data:`colo.store_lua.ADMIT_LUA` checks :data:`REPLACEABLE_PREFIXES`), and a later refusal replaces an
earlier refusal, never a pod that is queued, bound, running or finished.
"""

from __future__ import annotations

import redis.asyncio as aioredis

from colo import codec
from colo.keys import Keys
from colo.messages import PodSpec

REJECTED_REASON = "Rejected"
"""Reason prefix of a pod admission refused: ``Rejected: <problems>``."""
DELETED_REASON = "Deleted"
"""Reason prefix of a pod deleted while pending: ``Deleted: <by>``."""
REPLACEABLE_PREFIXES = (REJECTED_REASON + ":", DELETED_REASON + ":")
"""Reasons of ``Failed`` records a new admission of the same uid replaces, besides exactly ``Deleted`` (what the
node agent reports for a bound pod stopped by a deletion): deleted and submitted again, a pod runs again, as
after ``kubectl delete`` and ``apply``."""

RECORD_REJECTED_LUA = """#!lua flags=no-cluster
if redis.call('EXISTS', KEYS[3]) == 1 then return 0 end
local st = redis.call('HMGET', KEYS[2], 'phase', 'reason')
if st[1] and not (st[1] == 'Failed' and string.sub(st[2] or '', 1, 9) == 'Rejected:') then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('HSET', KEYS[2], 'phase', 'Failed', 'node', '', 'reason', ARGV[2], 'updated_at', ARGV[3],
           'bound_at', '0.0')
redis.call('SADD', KEYS[4], ARGV[4])
return 1
"""
"""KEYS: pod spec, pod state, binding, pods set; ARGV: spec JSON, reason, time, uid. Writes the refused pod
unless a record other than an earlier refusal exists (or a binding). Returns 1 written, 0 not."""

DELETE_PENDING_LUA = """#!lua flags=no-cluster
if redis.call('EXISTS', KEYS[2]) == 1 then return -1 end
local st = redis.call('HMGET', KEYS[1], 'phase', 'node')
if not st[1] then return 0 end
if st[1] ~= 'Pending' or (st[2] and st[2] ~= '') then return -1 end
redis.call('HSET', KEYS[1], 'phase', 'Failed', 'reason', ARGV[1], 'updated_at', ARGV[2])
return 1
"""
"""KEYS: pod state, binding; ARGV: reason, time. Marks a pending, unbound pod deleted. Returns 1 done, 0 no such
pod, -1 bound (or no longer pending)."""


class RejectionOps:
    """The refused/deleted-pod methods of :class:`colo.store.Store` (which provides client and keys)."""

    redis: aioredis.Redis
    keys: Keys

    async def record_rejected(self, spec: PodSpec, reason: str, at: float) -> bool:
        """Store ``spec`` as ``Failed`` with reason ``Rejected: <reason>`` at clock time ``at`` (seconds), unless
        the uid already has a record other than an earlier refusal (a queued, bound or finished pod of that uid
        is never overwritten by a refused resubmission). Returns whether it was written."""
        k = self.keys
        uid = spec.uid
        script = self.redis.register_script(RECORD_REJECTED_LUA)
        done = await script(keys=[k.pod(uid), k.pod_state(uid), k.binding(uid), k.pods],
                            args=[codec.encode(spec), f"{REJECTED_REASON}: {reason}", repr(float(at)), uid])
        return int(done) == 1

    async def delete_pending(self, uid: str, by: str, at: float) -> int:
        """Mark the pending, unbound pod ``uid`` ``Failed`` with reason ``Deleted: <by>``. Returns 1 when done,
        0 when the pod is unknown, -1 when it is bound or not pending (delete it through its node instead)."""
        k = self.keys
        script = self.redis.register_script(DELETE_PENDING_LUA)
        return int(await script(keys=[k.pod_state(uid), k.binding(uid)],
                                args=[f"{DELETED_REASON}: {by}", repr(float(at))]))
