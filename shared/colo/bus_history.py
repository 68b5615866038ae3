"""Read back what a JetStream stream still holds for one subject pattern (docs/operations.md "Recovery").

The streams outlive the store: ``COLO_PODS`` keeps every ``pod.bound.<node>`` and ``pod.status.<node>`` for 7
days (:data:`colo.subjects.STREAMS`). After a store loss, a restarted node agent reads them back to learn which
pods its nodes ran (:mod:`colo_node_agent.lost`). Reading uses an ephemeral pull consumer (deliver all, no
acks) that is deleted at the end, so it changes no durable consumer's position.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import TypeVar

import nats.errors
from nats.js import api
from nats.js.errors import NotFoundError

from colo import codec
from colo.bus import Bus, BusError
from colo.subjects import Subject

T = TypeVar("T")
FETCH = 1000
"""Messages per fetch."""


async def history(bus: Bus, subject: Subject[T], keep: Callable[[str], bool] | None = None,
                  fetch_timeout_s: float = 1.0, consumer: str = "") -> list[tuple[str, T]]:
    """Every message of ``subject`` (any keys: ``subject.wildcard``) its stream still holds, oldest first, as
    ``(concrete subject, decoded message)``; only those whose subject ``keep`` accepts when given. Messages that
    do not decode are skipped (they were dead-lettered when first consumed). ``consumer``: the reading
    consumer is named ``{service}-{consumer}`` (one left over by an interrupted read is replaced), as a user
    whose NATS permissions name its consumers needs (:mod:`colo.permissions`); "" = a random name. Raises
    ValueError for a subject with no stream; BusError when the stream cannot be read."""
    try:
        return await _history(bus, subject, keep, fetch_timeout_s, consumer)
    except nats.errors.Error as exc:
        raise BusError(f"cannot read the history of {subject.pattern}: {exc!r}") from exc


async def _history(bus: Bus, subject: Subject[T], keep: Callable[[str], bool] | None,
                   fetch_timeout_s: float, consumer: str) -> list[tuple[str, T]]:
    if subject.stream is None:
        raise ValueError(f"{subject.pattern} has no stream: no history")
    config = api.ConsumerConfig(deliver_policy=api.DeliverPolicy.ALL, ack_policy=api.AckPolicy.NONE,
                                inactive_threshold=60.0)
    if consumer:
        config.name = f"{bus.service}-{consumer}"
        config.filter_subject = subject.wildcard
        with contextlib.suppress(NotFoundError):
            await bus.js.delete_consumer(subject.stream, config.name)
        await bus.js.add_consumer(subject.stream, config=config)
        sub = await bus.js.pull_subscribe_bind(consumer=config.name, stream=subject.stream)
    else:
        sub = await bus.js.pull_subscribe(subject.wildcard, durable=None, stream=subject.stream, config=config)
    out: list[tuple[str, T]] = []
    try:
        info = await sub.consumer_info()
        left = info.num_pending or 0
        while left > 0:
            try:
                msgs = await sub.fetch(min(FETCH, left), timeout=fetch_timeout_s)
            except asyncio.TimeoutError:
                break
            for msg in msgs:
                left = msg.metadata.num_pending
                if keep is None or keep(msg.subject):
                    try:
                        out.append((msg.subject, codec.decode(msg.data, subject.type)))
                    except codec.DecodeError:
                        pass
        with contextlib.suppress(NotFoundError):
            await bus.js.delete_consumer(subject.stream, info.name)
    finally:
        await sub.unsubscribe()
    return out
