"""``node.deleted.<node>`` (``colo delete node``, ``DELETE /v1/nodes/{name}``, docs/cli.md "Deleting a node"): the
scheduler forgets a node whose machine is gone (Kubernetes ``kubectl delete node``).

* pods still bound to it and no ``force``: refused, nothing changes (the requester checked before sending; a pod
  bound since then keeps the node);
* with ``force``: each pod of this replica bound to it is ended as a deleted pod is: ``Failed`` with reason
  ``Deleted: node <node> deleted by <by>`` in the store (its room freed), taken out of the node table, and an
  eviction with reason :data:`colo.messages.DELETE_EVICTION_REASON` goes to its node agent in case it still runs;
* then the node leaves the store (:meth:`colo.store.Store.delete_node` with ``if_idle``: only once no pod is bound
  to it, checked in the same atomic step as the removal, since a cycle may bind a pod to it meanwhile: forced,
  such a pod is ended too and the removal tried again) and the node table
  (:meth:`colo_scheduler.table.NodeTable.retire`): it is no longer a candidate. Pods left that other replicas
  own do not hold the node: those replicas end them when they apply the same order;
* unknown: the store entry is deleted all the same (a redelivery is harmless);
* older than the node's last ``node.registered`` (the same stream, COLO_NODES, orders the two): not applied. The
  stream keeps the orders (16 a node) and a new durable consumer (a replica added, a consumer lost) reads it from
  the start: an old order must not delete a node that registered again since.

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
        self.totals = {"nodes_deleted": 0, "node_deletions_refused": 0, "node_deletions_superseded": 0,
                       "pods_deleted_with_node": 0}

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
        if await self._superseded(msg, info):
            return
        # checking for bound pods and removing the node are one atomic step: a cycle of this event loop may bind
        # to the node while this handler waits on the store
        refused = await self.ctx.store.delete_node(msg.node, if_idle=True)
        if refused and not msg.force:
            self.totals["node_deletions_refused"] += 1
            log.warning("node %s not deleted: pods still bound to it (%s); delete it with force",
                        msg.node, ", ".join(refused))
            return
        ended = await self._end_pods_and_delete(msg) if refused else set()
        self.core.remove_node(msg.node)
        self.totals["nodes_deleted"] += 1
        log.info("node %s deleted by %s (%d pods ended)", msg.node, msg.by or "colo delete", len(ended))

    async def _superseded(self, msg: NodeDeleted, info: MessageInfo) -> bool:
        """Whether node ``msg.node`` registered after the order was published (module doc)."""
        assert self.ctx is not None
        registered = await self.ctx.bus.last_seq(subjects.NODE_REGISTERED, node=msg.node)
        if registered <= info.stream_seq:  # one stream, COLO_NODES: its sequence orders the two
            return False
        self.totals["node_deletions_superseded"] += 1
        log.info("node %s not deleted: it registered again after the order (%s, stream sequence %d > %d)",
                 msg.node, msg.by or "colo delete", registered, info.stream_seq)
        return True

    async def _end_pods_and_delete(self, msg: NodeDeleted) -> set[str]:
        """End this replica's pods on node ``msg.node`` until it is removed from the store; their uids."""
        assert self.ctx is not None
        store, now = self.ctx.store, self.ctx.clock.now()
        ended: set[str] = set()
        while True:
            own = [uid for uid in await self._own_pods(msg.node) if uid not in ended]
            if not own:  # the rest is other replicas' to end (they get this order too), or will not leave
                await store.delete_node(msg.node)
                own = [uid for uid in await self._own_pods(msg.node) if uid not in ended]  # bound meanwhile
                await self._end_all(own, msg, now)
                return ended | set(own)
            await self._end_all(own, msg, now)
            ended.update(own)
            if not await store.delete_node(msg.node, if_idle=True):
                return ended

    async def _own_pods(self, node: str) -> list[str]:
        assert self.ctx is not None and self.replica is not None
        return [r.spec.uid for r in await self.ctx.store.pods_on(node) if self.replica.owns_pod(r.spec)]

    async def _end_all(self, uids: list[str], msg: NodeDeleted, now: float) -> None:
        reason = deleted_pod_reason(msg.node, msg.by)
        for uid in uids:
            await self._end(uid, msg, reason, now)

    async def _end(self, uid: str, msg: NodeDeleted, reason: str, now: float) -> None:
        assert self.ctx is not None
        order = EvictionCommand(uid=uid, node=msg.node, reason=DELETE_EVICTION_REASON, at=now, by=msg.by)
        await self.ctx.bus.publish(subjects.POD_EVICT, order, msg_id=f"evict-node-deleted-{uid}-{msg.at!r}",
                                   node=msg.node)
        if await self.ctx.store.release(uid, "Failed", reason, now, node=msg.node):
            self.totals["pods_deleted_with_node"] += 1
        self.core.release(uid, now)
