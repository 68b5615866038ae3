"""Pods lost with a restart on an empty store: found in the streams, reported (docs/operations.md "Recovery").

A sim agent's pods live in its memory; a restarted agent re-creates those the store binds to its nodes
(``adopted``). When the store was lost too, nothing is bound there, and the pods the last agent ran vanished
without a word: the scheduler still counted them, nobody requeued them. At start, when a node of ours was
missing from the store, the agent reads ``pod.bound.<node>`` and ``pod.status.<node>`` back from the
``COLO_PODS`` stream (:func:`colo.bus_history.history`): a pod whose last bind was to one of our nodes, with no
end reported there since and not running now, was lost. Each is reported ``Failed``/``Evicted`` (the scheduler
takes it off its node and requeues it when the store still has its record) and counted ``lost``.
"""

from __future__ import annotations

from collections.abc import Container

from colo import subjects
from colo.bus import Bus
from colo.bus_history import history
from colo.messages import PodBound

LOST_MESSAGE = "lost: the node agent restarted and the store held no binding for it"
"""Message of the Failed/Evicted status of a lost pod."""


def _node_of(subject: str) -> str:
    return subject.rsplit(".", 1)[-1]


async def lost_pods(bus: Bus, nodes: Container[str], running: Container[str], consumer: str = "") -> list[PodBound]:
    """The last PodBound of every pod bound to one of ``nodes`` that has no end reported on that node since
    its bind and is not in ``running`` (uids), oldest bind first; ``consumer``: the name of the reading
    consumer (:func:`colo.bus_history.history`). Raises BusError when the stream cannot be read."""
    last: dict[str, PodBound] = {}
    for _, bound in await history(bus, subjects.POD_BOUND, consumer=consumer):
        prev = last.get(bound.spec.uid)
        if prev is None or bound.at >= prev.at:
            last[bound.spec.uid] = bound
    mine = {uid: b for uid, b in last.items() if b.node in nodes and uid not in running}
    if not mine:
        return []
    statuses = await history(bus, subjects.POD_STATUS, keep=lambda s: _node_of(s) in nodes, consumer=consumer)
    for _, st in statuses:
        b = mine.get(st.uid)
        if b is not None and st.node == b.node and st.phase in ("Succeeded", "Failed") and st.at >= b.at:
            del mine[st.uid]
    return sorted(mine.values(), key=lambda b: (b.at, b.spec.uid))

