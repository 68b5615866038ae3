"""Pending pods rebuilt from the streams after a store loss (docs/operations.md "Recovery").

Pods admitted and not yet bound live in the scheduler's memory and the store; after a store loss (a Redis
without persistence restarted, a new one) a restarted scheduler found none of them, and nothing replayed
``pod.admitted`` (its durable consumer had acked them). At a start on a store that this replica has not loaded
before (:meth:`colo.store.Store.loaded_marker`), the scheduler reads the ``COLO_PODS`` stream back
(:func:`colo.bus_history.history`, kept 7 days) and queues again every pod it owns that was admitted, is not in
the store, and that the stream shows neither bound (``pod.bound``: the node agents restore those), nor ended
(``pod.status`` Succeeded/Failed) nor deleted (``pod.deleted``).

Not rebuilt: a pod bound, then evicted and requeued, and not bound again before the loss (its ``pod.bound``
hides the later requeue); its node agent reports it lost (``colo_node_agent.lost``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from colo import subjects
from colo.bus import Bus
from colo.bus_history import history
from colo.messages import PodSpec
from colo_scheduler.validation import pod_problem

ENDED = frozenset({"Succeeded", "Failed"})
"""Phases after which a pod never runs again (a requeued pod is admitted again: docs/architecture.md)."""


async def pending_from_streams(bus: Bus, owns: Callable[[PodSpec], bool], known: Collection[str]) -> list[PodSpec]:
    """Specs of the pods admitted on ``pod.admitted`` that ``owns`` accepts, not in ``known`` (uids the store
    had), never bound, ended or deleted according to the stream; in admission order, the last admission of a
    uid kept. Invalid specs are skipped (they were dead-lettered). Raises BusError when the stream cannot be
    read."""
    admitted = await history(bus, subjects.POD_ADMITTED)
    if not admitted:
        return []
    gone = {m.spec.uid for _, m in await history(bus, subjects.POD_BOUND)}
    gone |= {m.uid for _, m in await history(bus, subjects.POD_STATUS) if m.phase in ENDED}
    gone |= {m.uid for _, m in await history(bus, subjects.POD_DELETED)}
    out: dict[str, PodSpec] = {}
    for _, msg in admitted:
        spec = msg.spec
        if spec.uid in gone or spec.uid in known or not owns(spec) or pod_problem(spec):
            continue
        out[spec.uid] = spec
    return list(out.values())
