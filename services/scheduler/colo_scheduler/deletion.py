"""``pod.deleted`` (``colo delete pod``, docs/cli.md "Deleting a pod"): the scheduler owning the uid ends the pod.

* queued or waiting at Permit (a gang member): dropped from the queue / the waiting set (its reserved room
  goes back), then marked ``Failed`` with reason ``Deleted: <by>`` in the store
  (:meth:`colo.store.Store.delete_pending`, atomic: only while it is pending and unbound);
* bound: an :class:`~colo.messages.EvictionCommand` with reason :data:`colo.messages.DELETE_EVICTION_REASON` to
  its node agent, which stops it and reports ``Failed``/``Deleted`` on ``pod.status``; the status handler then
  frees its room and, the reason not being Evicted/Descheduled, does not requeue it;
* unknown or already finished: nothing (a redelivery is harmless).

A deletion that lands while a cycle is binding that very pod finds it neither queued nor bound: the store
marks it deleted and the bind that follows leaves a bound ``Failed`` record; deleting it again evicts it.
"""

from __future__ import annotations

import asyncio

from colo import subjects
from colo.bus import MessageInfo
from colo.messages import DELETE_EVICTION_REASON, EvictionCommand, PodDeleted
from colo.runtime import ServiceContext
from colo_scheduler.core import Scheduler
from colo_scheduler.replicas import Replica


class PodDeletion:
    """Consumes ``pod.deleted`` for the pods of ``replica``; :meth:`attach` at the service's start."""

    def __init__(self, core: Scheduler) -> None:
        self.core = core
        self.ctx: ServiceContext | None = None
        self.replica: Replica | None = None
        self._wake: asyncio.Event | None = None
        self.totals = {"pods_deleted_pending": 0, "pods_deleted_bound": 0}

    def attach(self, ctx: ServiceContext, replica: Replica, wake: asyncio.Event) -> None:
        """Use ``ctx`` (bus, store, clock) for ``replica``'s pods; ``wake`` is set when room was freed."""
        self.ctx, self.replica, self._wake = ctx, replica, wake

    async def on_deleted(self, msg: PodDeleted, info: MessageInfo) -> None:
        """End pod ``msg.uid`` (module doc); a deletion without uid is dead-lettered."""
        assert self.ctx is not None and self.replica is not None
        if not msg.uid:
            await self.ctx.bus.reject(info, msg, "pod deletion without uid")
            return
        if not self.replica.owns(msg.uid):
            return
        now = self.ctx.clock.now()
        by = msg.by or "colo delete"
        self.core.forget(msg.uid)
        if msg.uid in self.core.waiting:
            self.core.release(msg.uid, now)
            if self._wake is not None:
                self._wake.set()
        store = self.ctx.store
        done = await store.delete_pending(msg.uid, by, now)
        if done == 1:
            self.totals["pods_deleted_pending"] += 1
            return
        node = await store.bound_node(msg.uid) if done == -1 else None
        if node:
            order = EvictionCommand(uid=msg.uid, node=node, reason=DELETE_EVICTION_REASON, at=now, by=by)
            # its own id: the deletion's (colo delete's ``delete-<uid>-<at>``) is on the same stream, and a shared
            # id would make JetStream drop the order as a duplicate
            await self.ctx.bus.publish(subjects.POD_EVICT, order, msg_id=f"evict-deleted-{msg.uid}-{msg.at!r}",
                                       node=node)
            self.totals["pods_deleted_bound"] += 1
