"""``GET /v1/events``: the bus as Server-Sent Events (https://html.spec.whatwg.org/multipage/server-sent-events.html).

Each client gets its own core-NATS subscription to ``colo.v1.<filter>`` (default ``colo.v1.>``: every subject,
JetStream ones included, as they are published) and one event per message: ``id`` a per-stream counter,
``event: message``, ``data`` one JSON :class:`~colo_api.views.Event` (the message decoded with the type the
subject registry names). A client that falls ``sse_queue`` events behind loses the oldest; it is told with an
``event: dropped`` whose data is ``{"dropped": N}``. A comment line (``: keep-alive``) goes out every
``sse_heartbeat_s`` without events.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import deque
from typing import Any

import msgspec
from aiohttp import web

from colo import codec
from colo import subjects as S
from colo.bus import Bus
from colo.codec import DecodeError
from colo_api.views import Event

_FILTER = re.compile(r"([A-Za-z0-9_\-]+|\*)(\.([A-Za-z0-9_\-]+|\*))*(\.>)?|>")
"""A NATS subject filter below ``colo.v1``: tokens or ``*``, optionally ending in ``>``."""


def filter_problem(subject: str) -> str:
    """Why ``subject`` is not a usable filter ("" when it is)."""
    if len(subject) > 256 or not _FILTER.fullmatch(subject):
        return (f"subject filter {subject[:80]!r} is not a NATS filter below colo.v1 (tokens of letters, digits, "
                "'_' or '-', or '*', separated by '.', optionally ending in '>'; e.g. 'pod.>' or 'node.qos.*')")
    return ""


def event_of(subject: str, data: bytes, now: float) -> Event:
    """The :class:`Event` of one bus message."""
    reg = S.by_subject(subject)
    short = subject.removeprefix(S.PREFIX + ".")
    if reg is None:
        return Event(subject=short, type="", error=f"unregistered subject ({len(data)} bytes)", received_at=now)
    try:
        msg = codec.decode(data, reg.type)
    except DecodeError as exc:
        return Event(subject=short, type=reg.type.__name__, error=str(exc), received_at=now)
    return Event(subject=short, type=reg.type.__name__, message=msg, received_at=now)


_encoder = msgspec.json.Encoder()


class Streams:
    """The open event streams of a service, so that stopping ends them before the bus closes (an open stream
    would otherwise hold the HTTP server's shutdown for its whole grace period)."""

    def __init__(self) -> None:
        self.wakes: set[asyncio.Event] = set()
        self.closing = False

    def close(self) -> None:
        """End every open stream (each finishes its current write and returns)."""
        self.closing = True
        for wake in self.wakes:
            wake.set()


async def stream_events(request: web.Request, bus: Bus, subject_filter: str, queue_size: int,
                        heartbeat_s: float, limit: int = 0, streams: Streams | None = None) -> web.StreamResponse:
    """Serve the SSE stream until the client goes away, ``limit`` events were sent (0 = no limit) or
    ``streams`` is closed."""
    streams = streams or Streams()
    pending: deque[tuple[str, bytes]] = deque()
    dropped = 0
    wake = asyncio.Event()
    if streams.closing:
        raise web.HTTPServiceUnavailable(text='{"error": "the service is stopping"}', content_type="application/json")

    async def on_msg(msg: Any) -> None:
        nonlocal dropped
        if len(pending) >= queue_size:
            pending.popleft()
            dropped += 1
        pending.append((msg.subject, msg.data))
        wake.set()

    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
                                       "X-Accel-Buffering": "no"})
    await resp.prepare(request)
    sub = await bus.nc.subscribe(f"{S.PREFIX}.{subject_filter}", cb=on_msg)
    streams.wakes.add(wake)
    sent = 0
    try:
        await bus.nc.flush()
        await resp.write(b": subscribed\n\n")  # the client knows the subscription is in place
        while not streams.closing:
            try:
                await asyncio.wait_for(wake.wait(), timeout=heartbeat_s)
            except TimeoutError:
                await resp.write(b": keep-alive\n\n")
                continue
            wake.clear()
            if streams.closing:
                break
            if dropped:
                await resp.write(b"event: dropped\ndata: " + _encoder.encode({"dropped": dropped}) + b"\n\n")
                dropped = 0
            chunk: list[bytes] = []
            while pending:
                subject, data = pending.popleft()
                sent += 1
                body = _encoder.encode(event_of(subject, data, time.time()))
                chunk.append(b"id: %d\nevent: message\ndata: %s\n\n" % (sent, body))
                if limit and sent >= limit:
                    break
            await resp.write(b"".join(chunk))
            if limit and sent >= limit:
                break
    except ConnectionResetError:  # the client went away
        pass
    finally:
        streams.wakes.discard(wake)
        if not bus.nc.is_closed:
            await sub.unsubscribe()
    return resp
