"""JetStream publish acks of :meth:`colo.bus.Bus.publish_many`, and the resend of publishes an ack never answered.

Every message of one call gets its own reply subject (``<inbox>.<call>.<index>``), so the call knows which
messages were acknowledged. A stream that loses its leader (kill -9 of the cluster member leading it) drops the
publishes it receives until a new leader is elected (about 10 s on a 3-server cluster, docs/operations.md) and
answers none of them: waiting for those acks alone stalled admission for the whole 30 s timeout. A message that
carries a message id (``Nats-Msg-Id``) is safe to send again, because the stream's duplicate window drops a
second copy (JetStream de-duplication); so when no ack arrives within an attempt timeout
(:data:`RESEND_FIRST_S`, growing by :data:`RESEND_FACTOR` up to :data:`RESEND_CAP_S`), the unacknowledged
messages that carry an id are sent again, until the call's overall timeout. Messages without an id are never
sent twice; their acks are awaited until the overall timeout.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Sequence

from nats.aio.msg import Msg

from colo import telemetry
from colo.transient import TransientError

__all__ = ["RESEND_CAP_S", "RESEND_FACTOR", "RESEND_FIRST_S", "AckBatch", "BusError", "BusUnavailableError",
           "Outgoing", "check_pub_ack"]

log = logging.getLogger("colo.bus")

RESEND_FIRST_S = 2.0
"""Seconds the first attempt of a :meth:`colo.bus.Bus.publish_many` call waits for its acks before the
unacknowledged messages with an id are sent again (a healthy ack takes milliseconds; a JetStream leader
election after a lost peer takes seconds)."""
RESEND_FACTOR = 1.5
"""Each further attempt waits this many times longer than the previous one ..."""
RESEND_CAP_S = 5.0
"""... up to this many seconds per attempt (s)."""

_resent = telemetry.counter("colo_bus_resent_total", "Publishes sent again after no ack arrived within the attempt"
                            " timeout (messages with a Nats-Msg-Id only)", ("service",))


class BusError(RuntimeError):
    """A bus operation failed (tick without responder, settle timeout, not connected)."""


class BusUnavailableError(BusError, TransientError):
    """JetStream did not take a publish because it is unavailable (status 503, no responders: a server
    restarting, a stream without leader); transient (:func:`colo.transient.is_transient`)."""


Outgoing = tuple[str | None, str, bytes, "dict[str, str] | None"]
"""One prepared publish: (stream or None for core NATS, subject, payload, headers)."""


class AckBatch:
    """The JetStream acks of one :meth:`colo.bus.Bus.publish_many` call: message ``i`` replies to
    ``<reply_prefix>.<i>``. :meth:`add` takes an ack; :attr:`done` resolves once every expected message has one."""

    def __init__(self, expected: Sequence[int], done: asyncio.Future[None], resendable: Sequence[int] = ()) -> None:
        self.pending = set(expected)
        """Indices of the messages without an ack yet."""
        self.resendable = frozenset(resendable)
        """Indices of the messages that carry a message id: a 503 reply (no responders: the stream has no leader
        yet) leaves them pending, to be sent again, instead of refusing the call."""
        self.unavailable: BusUnavailableError | None = None
        """The last 503 reply that left a message pending (reported if the call times out)."""
        self.expected = len(self.pending)
        self.done = done
        self.refusal: BusError | None = None
        if not self.pending and not done.done():
            done.set_result(None)

    @property
    def received(self) -> int:
        return self.expected - len(self.pending)

    def add(self, index: int, reply: Msg) -> None:
        """The ack of message ``index`` (a second ack of a message sent again is ignored)."""
        if index not in self.pending:
            return
        if reply.headers or b'"error"' in reply.data or not reply.data.startswith(b"{"):
            try:
                check_pub_ack(reply)
            except BusUnavailableError as exc:
                if index in self.resendable:
                    self.unavailable = exc
                    return
                self.refusal = self.refusal or exc
            except BusError as exc:
                self.refusal = self.refusal or exc
        self.pending.discard(index)
        if not self.pending and not self.done.done():
            self.done.set_result(None)

    async def wait(self, send: Callable[[int], Awaitable[None]], timeout_s: float, service: str) -> None:
        """Wait until every ack arrived, sending again (``await send(i)``) the unacknowledged messages that carry
        a message id (:attr:`resendable`) after each attempt timeout. Raises BusUnavailableError (transient) when
        acks are still missing after ``timeout_s`` seconds (wall time), else the first refusal among the acks
        (BusError)."""
        deadline = time.monotonic() + timeout_s
        attempt_s = RESEND_FIRST_S
        while not self.done.done():
            left = deadline - time.monotonic()
            if left <= 0:
                last = f" (last reply: {self.unavailable})" if self.unavailable is not None else ""
                raise BusUnavailableError(f"{service}: {len(self.pending)} of {self.expected} publishes not acked "
                                          f"within {timeout_s}s{last}")
            try:
                await asyncio.wait_for(asyncio.shield(self.done), timeout=min(attempt_s, left))
            except TimeoutError:
                again = sorted(self.pending & self.resendable)
                if again and deadline - time.monotonic() > 0:
                    log.warning("%s: %d of %d publishes not acked within %.1f s; sending the %d with a message id "
                                "again", service, len(self.pending), self.expected, attempt_s, len(again))
                    _resent.labels(service).inc(len(again))
                    for i in again:
                        await send(i)
                attempt_s = min(attempt_s * RESEND_FACTOR, RESEND_CAP_S)
        if self.refusal is not None:
            raise self.refusal


def check_pub_ack(reply: Msg) -> None:
    """Raise BusError when a JetStream publish reply is a refusal (no stream, API error); BusUnavailableError
    for status 503 (JetStream unavailable)."""
    status = reply.headers.get("Status") if reply.headers else None
    if status:
        desc = reply.headers.get("Description", "") if reply.headers else ""
        if status == "503":
            raise BusUnavailableError(f"publish refused: status 503 {desc} (JetStream unavailable, or no stream)")
        raise BusError(f"publish refused: status {status} {desc} (are the streams created?)")
    try:
        body = json.loads(reply.data)
    except ValueError as exc:
        raise BusError(f"unreadable publish ack: {reply.data[:200]!r}") from exc
    if "error" in body:
        raise BusError(f"publish refused: {body['error']}")
