"""Durable pull consumers of the bus: one :class:`Subscription` per ``Bus.subscribe`` call.

A subscription creates (or resumes) the JetStream consumer ``f"{service}-{durable}"``, keeps one pull
request outstanding, handles the delivered messages in stream order and settles each: ack, nak with
delay, or dead-letter and terminate. The delivery contract is in :mod:`colo.bus` and docs/library.md.
"""

from __future__ import annotations

import asyncio
import collections
import inspect
import itertools
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from colo import codec, telemetry
from colo.subjects import Subject
from colo.transient import is_transient

if TYPE_CHECKING:
    from colo.bus import Bus

T = TypeVar("T")
log = logging.getLogger("colo.bus")

_REPULL: Any = object()
"""Queued by :meth:`Subscription.repull`: the consumer's loop sends a new pull request when it meets it."""

FETCH_BATCH = 256
"""Messages asked for per pull request."""
PULL_EXPIRES_S = 10.0
"""Lifetime of an idle pull request on the server."""
ACK_WAIT_S = 30.0
"""JetStream ack wait of every consumer."""
YIELD_AFTER_S = 0.002
"""A consumer working through queued messages lets the event loop run other tasks after this long:
handlers that never wait (e.g. 1,000 node metrics in a burst) would otherwise hold it for the whole
burst, and a scheduling cycle with it."""
MAX_DELIVER = 5
"""Failures of a handler on one message, not counting transient ones (:func:`colo.transient.is_transient`),
before the message is dead-lettered."""
TRANSIENT_DELAY_MAX_S = 5.0
"""Cap of the nak delay after a transient failure (a dependency unavailable): ``retry_delay_s × 2^(delivery−1)``
grows to this and stays there until the dependency is back; such failures are never dead-lettered."""
ACKS_KEPT = 1024
"""Reply subjects of the last messages a consumer acked, kept to send their acks again (see
:meth:`Subscription.pending`)."""
REACK_PAUSE_S = 1.0
"""Seconds between two such re-sends of one consumer."""
REPULL_PAUSE_S = 0.1
"""Wait before the next pull request after JetStream answered one with status 503 (no responders: the
server is up but its JetStream is not yet), so that a consumer does not spin while it recovers."""

_consumed = telemetry.counter("colo_bus_consumed_total", "Messages handled and acked", ("service", "subject"))
_dead = telemetry.counter("colo_bus_dead_lettered_total", "Messages dead-lettered", ("service", "subject"))
_errors = telemetry.counter("colo_bus_handler_errors_total", "Handler exceptions", ("service", "subject"))


@dataclass(frozen=True)
class MessageInfo:
    """Delivery details passed as the optional second handler argument."""

    subject: str
    headers: Mapping[str, str]
    stream_seq: int
    num_delivered: int


def _filters(subject: Subject[Any], keys: Mapping[str, str | Sequence[str]] | None) -> list[str]:
    """Concrete filter subjects for ``keys`` (missing keys → ``*``). Raises ValueError on bad keys."""
    if not keys:
        return [subject.wildcard]
    unknown = set(keys) - set(subject.keys)
    if unknown:
        raise ValueError(f"{subject.pattern}: unknown keys {sorted(unknown)}")
    choices: list[list[str]] = []
    for k in subject.keys:
        v = keys.get(k)
        if v is None:
            choices.append(["*"])
            continue
        vals = [v] if isinstance(v, str) else list(v)
        if not vals:
            raise ValueError(f"{subject.pattern}: keys[{k!r}] is empty")
        choices.append(vals)
    out = []
    for combo in itertools.product(*choices):
        s = subject.pattern
        for k, x in zip(subject.keys, combo):
            if x != "*":
                subject.format(**{kk: (x if kk == k else "x") for kk in subject.keys})  # validates x
            s = s.replace("{" + k + "}", x)
        out.append(s)
    return sorted(set(out))


class Subscription(Generic[T]):
    """One durable pull consumer and its handling loop. Awaiting it waits until the consumer exists."""

    def __init__(self, bus: Bus, subject: Subject[T], handler: Callable[..., Awaitable[Any]],
                 durable: str, keys: Mapping[str, str | Sequence[str]] | None, max_batch: int = 0) -> None:
        if subject.stream is None:
            raise ValueError(f"{subject.pattern} has no stream: durable subscriptions need one")
        self.bus = bus
        self.subject = subject
        self.handler = handler
        self.name = f"{bus.service}-{durable}"
        self.filters = _filters(subject, keys)
        self._with_info = _takes_two(handler)
        self.max_batch = max_batch
        """0: ``handler`` takes one message; > 0: a list of up to this many ``(msg, info)``."""
        self._queue: asyncio.Queue[Msg] = asyncio.Queue()
        self._busy = False
        self._stopping = False
        self._outstanding = 0
        self._req_deadline = 0.0
        self._pause_pull = False
        self.pulls = 0
        """Pull requests sent so far (one per batch, per expiry, and one at every reconnection)."""
        self._acked: collections.deque[str] = collections.deque(maxlen=ACKS_KEPT)
        """Reply subjects of the last acked messages (:meth:`pending` sends their acks again)."""
        self._reacked_at = 0.0
        self._failures: dict[int, int] = {}
        """Stream sequence → permanent (not transient) handler failures of a message not yet settled."""
        self._started: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None
        self._inbox = ""
        self._sub: Any = None
        labels = (bus.service, subject.wildcard)
        self._n_consumed = _consumed.labels(*labels)
        self._n_dead = _dead.labels(*labels)
        self._n_errors = _errors.labels(*labels)
        self._span_name = f"consume {subject.wildcard}"

    def __await__(self) -> Any:
        async def wait() -> Subscription[T]:
            if self._started is not None:
                await self._started
            return self
        return wait().__await__()

    def start(self) -> asyncio.Future[None]:
        """Create the consumer and start the loop (idempotent); the future completes when running."""
        if self._started is None:
            self._started = asyncio.ensure_future(self._start())
        return self._started

    async def _start(self) -> None:
        cfg = ConsumerConfig(
            name=self.name, durable_name=self.name, deliver_policy=DeliverPolicy.ALL,
            ack_policy=AckPolicy.EXPLICIT, ack_wait=ACK_WAIT_S, max_deliver=-1,
            max_ack_pending=20_000, max_waiting=64,
        )
        if len(self.filters) == 1:
            cfg.filter_subject = self.filters[0]
        else:
            cfg.filter_subjects = self.filters
        assert self.subject.stream is not None
        await self.bus.js.add_consumer(self.subject.stream, config=cfg)
        self._inbox = self.bus.nc.new_inbox()
        self._sub = await self.bus.nc.subscribe(self._inbox, cb=self._on_msg,
                                                pending_msgs_limit=-1, pending_bytes_limit=-1)
        await self.bus.nc.flush()
        self._task = asyncio.create_task(self._run(), name=f"consumer:{self.name}")

    async def _on_msg(self, msg: Msg) -> None:
        self._queue.put_nowait(msg)

    def repull(self) -> None:
        """Send a new pull request at once (the bus calls it when the client reconnected): a restarted
        server forgot the pending one, and waiting for its expiry would stall the consumer that long."""
        if self._task is not None and not self._stopping:
            self._queue.put_nowait(_REPULL)

    @property
    def idle(self) -> bool:
        """No handler running and nothing queued locally."""
        return not self._busy and self._queue.empty()

    async def pending(self) -> int:
        """Messages not yet acked according to the server (undelivered + unacked).

        An ack is a plain publish, never confirmed: one sent while the consumer's JetStream leader is being
        elected (kill -9 of the server that led it) is dropped, and the server counts the message as unacked
        until its ack wait (:data:`ACK_WAIT_S`, 30 s) redelivers it: :meth:`colo.bus.Bus.settle`, and every
        simulated step with it, stalled that long. So when the server reports unacked messages while nothing
        is held here, the acks of the last :data:`ACKS_KEPT` acked messages are sent again (at most once per
        :data:`REACK_PAUSE_S`; acking an acked message changes nothing)."""
        assert self.subject.stream is not None
        info = await self.bus.js.consumer_info(self.subject.stream, self.name)
        unacked = int(info.num_ack_pending or 0)
        if unacked and self.idle and self._acked and time.monotonic() >= self._reacked_at + REACK_PAUSE_S:
            self._reacked_at = time.monotonic()
            log.info("%s: %d messages unacked on the server, none held here; sending the last %d acks again",
                     self.name, unacked, len(self._acked))
            for reply in list(self._acked):
                await self.bus.nc.publish(reply, b"+ACK")
        return int(info.num_pending or 0) + unacked

    async def _ack(self, msg: Msg) -> None:
        await msg.ack()
        if msg.reply:
            self._acked.append(msg.reply)

    async def _pull(self) -> None:
        req = {"batch": FETCH_BATCH, "expires": int(PULL_EXPIRES_S * 1e9)}
        assert self.subject.stream is not None
        await self.bus.nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.{self.subject.stream}.{self.name}",
                                  json.dumps(req).encode(), reply=self._inbox)
        self._outstanding = FETCH_BATCH
        self._req_deadline = time.monotonic() + PULL_EXPIRES_S + 5.0
        self.pulls += 1

    async def _run(self) -> None:
        yielded_at = time.monotonic()
        while not self._stopping:
            if self._outstanding <= 0 or time.monotonic() > self._req_deadline:
                if self._pause_pull:
                    self._pause_pull = False
                    await asyncio.sleep(REPULL_PAUSE_S)
                try:
                    await self._pull()
                except Exception as exc:  # disconnected: the client reconnects, ask again later
                    log.warning("%s: pull request failed: %r", self.name, exc)
                    self._outstanding = 0
                    await asyncio.sleep(0.5)
                    continue
            if self._queue.empty():
                try:
                    msg = await asyncio.wait_for(self._queue.get(),
                                                 timeout=max(0.01, self._req_deadline - time.monotonic()))
                except TimeoutError:
                    self._outstanding = 0
                    continue
                yielded_at = time.monotonic()
            else:
                if time.monotonic() - yielded_at > YIELD_AFTER_S:
                    await asyncio.sleep(0)  # a burst must not starve the other consumers and loops
                    yielded_at = time.monotonic()
                msg = self._queue.get_nowait()
            if msg is _REPULL:
                self._outstanding = 0
                continue
            if self._is_status(msg):
                continue
            self._outstanding -= 1
            self._busy = True
            try:
                if self.max_batch > 0:
                    await self._process_batch(self._take_batch(msg))
                else:
                    await self._process(msg)
            except Exception:  # never let one message kill the loop
                log.exception("%s: failed to settle message on %s", self.name, msg.subject)
            finally:
                self._busy = False
                if self._queue.empty():
                    self.bus._went_idle.set()

    def _is_status(self, msg: Msg) -> bool:
        """True for a pull status message (not data); a final status ends the pull request."""
        status = msg.headers.get("Status") if msg.headers else None
        if not status:
            return False
        if status != "100":  # 404 no messages, 408 expired, 409 ended, 503 no responders: ask again
            self._outstanding = 0
            self._pause_pull = status == "503"
        return True

    def _take_batch(self, first: Msg) -> list[Msg]:
        """``first`` and the data messages already queued locally, up to ``max_batch`` in all."""
        batch = [first]
        while len(batch) < self.max_batch and not self._queue.empty():
            msg = self._queue.get_nowait()
            if msg is _REPULL:
                self._outstanding = 0
            elif not self._is_status(msg):
                self._outstanding -= 1
                batch.append(msg)
        return batch

    async def _process_batch(self, msgs: list[Msg]) -> None:
        """Decode ``msgs`` (dead-lettering what does not decode), hand the rest to the handler in one
        call and ack them. When the call raises, each message is handled again alone, so that one
        poisonous message is retried and dead-lettered by itself while the others are acked; on a transient
        error the batch is nak'ed whole instead, until one of its messages was delivered MAX_DELIVER times."""
        items: list[tuple[Any, MessageInfo]] = []
        kept: list[Msg] = []
        for msg in msgs:
            headers = dict(msg.headers or {})
            seq, delivered = _ack_sequence(msg)
            try:
                decoded = codec.decode(msg.data, self.subject.type)
            except codec.DecodeError as exc:
                await self._to_dead_letters(msg, str(exc), headers, seq, delivered)
                continue
            items.append((decoded, MessageInfo(msg.subject, headers, seq, delivered)))
            kept.append(msg)
        if not items:
            return
        if len(items) > 1:
            try:
                await self.handler(items)
            except Exception as exc:
                self._n_errors.inc()
                delivered = max(info.num_delivered for _, info in items)
                if is_transient(exc) and delivered < MAX_DELIVER:
                    # not any one message's fault: all of them later, none alone now
                    log.warning("%s: batch handler failed on %d messages, a dependency is unavailable: %r;"
                                " retrying them", self.name, len(items), exc)
                    delay = self._transient_delay(delivered)
                    for msg in kept:
                        await msg.nak(delay=delay)
                    return
                # a message redelivered MAX_DELIVER times may be the one that fails (transiently, forever):
                # alone, it holds no other
                log.warning("%s: batch handler failed on %d messages (delivery %d): %r; handling them one by one",
                            self.name, len(items), delivered, exc)
            else:
                for msg in kept:
                    await self._ack(msg)
                self._n_consumed.inc(len(kept))
                if self._failures:
                    for _, info in items:
                        self._failures.pop(info.stream_seq, None)
                return
        for msg, item in zip(kept, items):
            await self._settle_one(msg, item)

    async def _settle_one(self, msg: Msg, item: tuple[Any, MessageInfo]) -> None:
        """Batch handler on the single ``item``: ack, or nak with delay / dead-letter like :meth:`_process`."""
        info = item[1]
        try:
            await self.handler([item])
        except Exception as exc:
            await self._failed(msg, dict(info.headers), info.stream_seq, info.num_delivered, exc)
            return
        await self._ack(msg)
        self._n_consumed.inc()
        if self._failures:
            self._failures.pop(info.stream_seq, None)

    async def _process(self, msg: Msg) -> None:
        headers = dict(msg.headers or {})
        seq, delivered = _ack_sequence(msg)
        try:
            decoded = codec.decode(msg.data, self.subject.type)
        except codec.DecodeError as exc:
            await self._to_dead_letters(msg, str(exc), headers, seq, delivered)
            return
        try:
            if telemetry.tracing_enabled():
                with telemetry.consume_span(self._span_name, headers):
                    await self._call(decoded, msg.subject, headers, seq, delivered)
            else:
                await self._call(decoded, msg.subject, headers, seq, delivered)
        except Exception as exc:
            await self._failed(msg, headers, seq, delivered, exc)
            return
        await self._ack(msg)
        self._n_consumed.inc()
        if self._failures:
            self._failures.pop(seq, None)

    async def _failed(self, msg: Msg, headers: dict[str, str], seq: int, delivered: int, exc: Exception) -> None:
        """A handler raised on ``msg``. A transient error (:func:`colo.transient.is_transient`: NATS or Redis
        unavailable) is nak'ed with a growing delay capped at :data:`TRANSIENT_DELAY_MAX_S` and never
        dead-lettered; any other is nak'ed with ``retry_delay_s × 2^(failures−1)`` and dead-lettered (then
        terminated) at its :data:`MAX_DELIVER`-th failure. Failures are counted in this process: a restarted
        service gives a message its full count again."""
        self._n_errors.inc()
        if is_transient(exc):
            delay = self._transient_delay(delivered)
            log.warning("%s: handler failed on %s (delivery %d), a dependency is unavailable: %r;"
                        " retrying in %.2f s", self.name, msg.subject, delivered, exc, delay)
            await msg.nak(delay=delay)
            return
        failures = self._failures[seq] = self._failures.get(seq, 0) + 1
        if failures >= MAX_DELIVER:
            log.error("%s: handler failed on %s (failure %d, delivery %d), dead-lettering: %r",
                      self.name, msg.subject, failures, delivered, exc, exc_info=exc)
            reason = f"handler failed {failures} times: {type(exc).__name__}: {exc}"
            if await self._to_dead_letters(msg, reason, headers, seq, delivered):
                self._failures.pop(seq, None)
        else:
            log.warning("%s: handler failed on %s (failure %d, delivery %d): %r; will retry",
                        self.name, msg.subject, failures, delivered, exc)
            await msg.nak(delay=self.bus.retry_delay_s * 2 ** (failures - 1))

    async def _to_dead_letters(self, msg: Msg, reason: str, headers: dict[str, str], seq: int,
                               delivered: int) -> bool:
        """Dead-letter ``msg`` and terminate it; when the dead letter cannot be published (the dead-letter
        stream unavailable) nak it with the transient delay instead, so that it is never dropped unrecorded,
        and return False."""
        if not await self.bus.dead_letter(msg.subject, reason, msg.data, headers, msg_id=f"{self.name}-{seq}"):
            await msg.nak(delay=self._transient_delay(delivered))
            return False
        self._n_dead.inc()
        await msg.term()
        return True

    def _transient_delay(self, delivered: int) -> float:
        """Nak delay (s) after a transient failure on a message's ``delivered``-th delivery."""
        return min(TRANSIENT_DELAY_MAX_S, float(self.bus.retry_delay_s) * 2.0 ** min(delivered - 1, 30))

    async def _call(self, decoded: Any, subject: str, headers: dict[str, str], seq: int,
                    delivered: int) -> None:
        if self._with_info:
            await self.handler(decoded, MessageInfo(subject, headers, seq, delivered))
        else:
            await self.handler(decoded)

    async def stop(self, timeout_s: float = 30.0) -> None:
        """Stop intake; let a running handler finish (cancelled after ``timeout_s``); unsubscribe."""
        self._stopping = True
        if self._started is not None and not self._started.done():
            self._started.cancel()
        if self._task is not None:
            if not self._busy:
                self._task.cancel()
            done, _ = await asyncio.wait({self._task}, timeout=timeout_s)
            if not done:
                self._task.cancel()
                await asyncio.gather(self._task, return_exceptions=True)
        if self._sub is not None:
            try:
                await self._sub.unsubscribe()
            except Exception:  # connection already closing
                pass
        while not self._queue.empty():  # delivered but never handled: redeliver at once
            m = self._queue.get_nowait()
            if m is not _REPULL and m.reply and not (m.headers and m.headers.get("Status")):
                try:
                    await m.nak()
                except Exception:
                    pass


def _ack_sequence(msg: Msg) -> tuple[int, int]:
    """(stream sequence, delivery count) from a JetStream message's ack subject; (0, 1) when absent.

    Reads ``$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>...`` (and the 12-token form with
    domain and account) directly: the client's metadata parser costs more than a handler here.
    """
    tokens = (msg.reply or "").split(".")
    try:
        if len(tokens) == 9 and tokens[1] == "ACK":
            return int(tokens[5]), int(tokens[4])
        if len(tokens) >= 11 and tokens[1] == "ACK":
            return int(tokens[7]), int(tokens[6])
        meta = msg.metadata
        return int(meta.sequence.stream), int(meta.num_delivered)
    except Exception:
        return 0, 1


def _takes_two(handler: Callable[..., Any]) -> bool:
    try:
        params = [p for p in inspect.signature(handler).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        return False
    return len(params) >= 2
