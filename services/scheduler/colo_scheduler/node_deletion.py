"""``node.deleted.<node>`` (``colo delete node``, ``DELETE /v1/nodes/{name}``, docs/cli.md "Deleting a node"): the
scheduler forgets a node whose machine is gone (Kubernetes ``kubectl delete node``).

* pods still bound to it and no ``force``: refused, nothing changes (the requester checked before sending; a pod
  bound since then keeps the node);
* with ``force``: each pod of this replica bound to it is ended as a deleted pod is: ``Failed`` with reason
  ``Deleted: node <node> deleted by <by>`` in the store (its room freed), taken out of the node table, and an
  eviction with reason :data:`colo.messages.DELETE_EVICTION_REASON` goes to its node agent in case it still runs;
* then the node leaves the store (:meth:`colo.store.Store.delete_node`) and the node table
  (:meth:`colo_scheduler.table.NodeTable.retire`): it is no longer a candidate;
* unknown: the store entry is deleted all the same (a redelivery is harmless).

A node agent still running registers the node again at its next reconciliation (a kubelet re-registers too); the
node then offers again the batch/mid allocatable of its last :class:`colo.messages.NodeResource` (the scheduler
writes it back to the store), as slo-manager republishes an unchanged offer only after ``max_publish_age_s``.
A message naming no valid node is dead-lettered.
"""

from __future__ import annotations

import logging

from colo import subjects
from colo.bus import MessageInfo
from colo.messages import DELETE_EVICTION_REASON, EvictionCommand, NodeDeleted
from colo.runtime import ServiceContext
from colo_scheduler.core import Scheduler
from colo_scheduler.replicas import Replica
from colo_scheduler.validation import node_problem

log = logging.getLogger("colo.scheduler")


def deleted_pod_reason(node: str, by: str) -> str:
    """The reason of a pod ended because its node was deleted with ``force``."""
    return f"Deleted: node {node} deleted by {by or 'colo delete'}"


class NodeDeletion:
    """Consumes ``node.deleted.*``; :meth:`attach` at the service's start."""

    def __init__(self, core: Scheduler) -> None:
        self.core = core
        self.ctx: ServiceContext | None = None
        self.replica: Replica | None = None
        self.totals = {"nodes_deleted": 0, "node_deletions_refused": 0, "pods_deleted_with_node": 0}

    def attach(self, ctx: ServiceContext, replica: Replica) -> None:
        """Use ``ctx`` (bus, store, clock) for ``replica``'s pods."""
        self.ctx, self.replica = ctx, replica

    async def on_deleted(self, msg: NodeDeleted, info: MessageInfo) -> None:
        """Delete node ``msg.node`` (module doc); an invalid name, or one that is not the subject's, is
        dead-lettered."""
        assert self.ctx is not None and self.replica is not None
        problem = node_problem(msg.node)
        if not problem and not info.subject.endswith(f".{msg.node}"):
            problem = f"node deletion of {msg.node!r} on subject {info.subject}"
        if problem:
            await self.ctx.bus.reject(info, msg, problem)
            return
        store, now = self.ctx.store, self.ctx.clock.now()
        bound = await store.pods_on(msg.node)
        if bound and not msg.force:
            self.totals["node_deletions_refused"] += 1
            log.warning("node %s not deleted: pods still bound to it (%s); delete it with force",
                        msg.node, ", ".join(f"{r.spec.namespace}/{r.spec.name}" for r in bound))
            return
        reason = deleted_pod_reason(msg.node, msg.by)
        for rec in bound:
            if self.replica.owns_pod(rec.spec):
                await self._end(rec.spec.uid, msg, reason, now)
        await store.delete_node(msg.node)
        self.core.remove_node(msg.node)
        self.totals["nodes_deleted"] += 1
        log.info("node %s deleted by %s (%d pods ended)", msg.node, msg.by or "colo delete", len(bound))

    async def _end(self, uid: str, msg: NodeDeleted, reason: str, now: float) -> None:
        assert self.ctx is not None
        order = EvictionCommand(uid=uid, node=msg.node, reason=DELETE_EVICTION_REASON, at=now, by=msg.by)
        await self.ctx.bus.publish(subjects.POD_EVICT, order, msg_id=f"evict-node-deleted-{uid}-{msg.at!r}",
                                   node=msg.node)
        if await self.ctx.store.release(uid, "Failed", reason, now, node=msg.node):
            self.totals["pods_deleted_with_node"] += 1
        self.core.release(uid, now)
