"""The message bus: NATS + JetStream streams, durable pull consumers, dead letters, settle, ticks.

Every subject string comes from :mod:`colo.subjects`; payloads are :mod:`colo.codec` JSON.
Delivery contract (docs/architecture.md "Bus"):

* a subscriber is a durable pull consumer named ``f"{service}-{durable}"`` (stable across
  restarts: a restarted service resumes where it left), deliver policy *all*, explicit ack,
  ack wait 30 s; messages are fetched in batches of up to 256 and handled one at a time in
  stream order; a *batch* subscriber (:meth:`Bus.subscribe_batch`) gets every message already
  delivered and waiting (up to its ``max_batch``) in one call, in stream order, and each is
  acked once the call returns;
* a payload that does not decode is published to ``colo.v1.dlq.<service>`` with the reason
  and terminated (never redelivered);
* a handler exception is logged and counted. When it means a dependency is unavailable
  (:func:`colo.transient.is_transient`: Redis or NATS down, restarting, loading, failing over) the
  message is nak'ed with an exponential delay capped at 5 s and never dead-lettered; any other
  failure is nak'ed with an exponential delay and dead-lettered (then terminated) at its 5th;
* when the client reconnects, every consumer sends a new pull request at once (a restarted server
  forgot the pending ones);
* :meth:`Bus.settle` returns once every consumer of this bus has nothing pending and no
  handler is running (a few milliseconds on an idle bus).

A handler is ``async def handler(msg)`` or ``async def handler(msg, info)`` where ``info`` is
a :class:`MessageInfo` carrying the concrete subject, headers and delivery count; a batch
handler is ``async def handler(items)`` with ``items`` a list of ``(msg, info)``. Handlers of
different subscriptions run concurrently (interleaved at ``await`` points). See docs/library.md.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import nats
import nats.js.errors
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import KeyValueConfig, StorageType, StreamConfig
from nats.js.kv import KeyValue

from colo import codec, subjects, telemetry
from colo.clock import Clock, WallClock
from colo.connections import nats_options, nats_servers
from colo.messages import DeadLetter, Tick, TickAck
from colo.publish_acks import AckBatch, BusError, BusUnavailableError, Outgoing
from colo.settings import RuntimeSettings
from colo.subjects import Subject
from colo.subscription import FETCH_BATCH, MessageInfo, Subscription, _dead
from colo.transient import is_transient

__all__ = ["DEAD_LETTER_MAX_DATA", "STORE_CREATE_FAILED", "STORE_RETRY_S", "Bus", "BusError", "BusUnavailableError",
           "JetStreamNotEnabled", "MessageInfo", "Subscription", "retry_store_creation"]
"""``MessageInfo`` and ``Subscription`` live in :mod:`colo.subscription`; handlers import them from here."""

T = TypeVar("T")
R = TypeVar("R")
log = logging.getLogger("colo.bus")

DEAD_LETTER_MAX_DATA = 64 * 1024
"""Bytes of the offending payload kept in a DeadLetter (a payload near the server's 1 MiB limit,
or invalid UTF-8 inflated by replacement characters, would otherwise not fit)."""

_published = telemetry.counter("colo_bus_published_total", "Messages published", ("service", "subject"))


def _trace_headers() -> dict[str, str] | None:
    """W3C trace headers of the current span when tracing is set up (:func:`colo.telemetry.setup`),
    else None."""
    return telemetry.inject({}) if telemetry.tracing_enabled() else None


STORE_RETRY_S = 10.0
"""How long :meth:`Bus.ensure_streams` retries a stream store the server is still removing (s)."""

STORE_CREATE_FAILED = 10049
"""JetStream's ``err_code`` for "error creating store for stream" (JSStreamCreateErrF): among other
causes, a stream created again while the server still deletes the previous one's files."""


class JetStreamNotEnabled(RuntimeError):
    """The NATS server answers but runs without JetStream, which every stream and KV bucket needs. The message
    names the server and how to enable it; :func:`colo.runtime.main` prints it as the one line of a failed start."""


def _server_name(nc: NATS) -> str:
    """``scheme://host:port`` of the server ``nc`` is connected to (no credentials), or "" when none."""
    url = nc.connected_url
    if url is None:
        return ""
    return f"{url.scheme}://{url.hostname}:{url.port}" if url.port else f"{url.scheme}://{url.hostname}"


async def retry_store_creation(create: Callable[[], Awaitable[R]], within_s: float = STORE_RETRY_S) -> R:
    """Await ``create()`` and return its result; while it fails with JetStream's transient
    :data:`STORE_CREATE_FAILED` refusal, wait (25 ms doubling to 0.5 s, wall time) and try again, for
    up to ``within_s`` seconds; then the last refusal is raised. Any other error is raised at once."""
    delay = 0.025
    deadline = time.monotonic() + within_s
    while True:
        try:
            return await create()
        except nats.js.errors.ServerError as exc:
            if exc.err_code != STORE_CREATE_FAILED or time.monotonic() + delay > deadline:
                raise
            log.info("JetStream refused a stream store (%s); retrying in %.3f s", exc.description, delay)
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.5)


TICK_NO_RESPONDERS_GRACE_S = 2.0
"""Seconds :meth:`Bus.request_tick` keeps asking while NATS answers "no responders" (interest still
propagating between cluster servers, or a service that has only just subscribed)."""


class Bus:
    """A service's connection to NATS/JetStream. Create with ``await Bus.connect(...)``."""

    def __init__(self, nc: NATS, service: str, clock: Clock, autostart: bool, retry_delay_s: float,
                 replicas: int = 1) -> None:
        self.nc = nc
        self.replicas = replicas
        """Replicas of the streams and KV buckets this bus creates (``RuntimeSettings.stream_replicas``)."""
        self.js: JetStreamContext = nc.jetstream()
        self.service = service
        self.clock = clock
        self.retry_delay_s = retry_delay_s
        self._autostart = autostart
        self._subs: list[Subscription[Any]] = []
        self._tick_sub: Any = None
        self._closed = False
        self._ack_inbox = ""
        self._ack_seq = 0
        self._ack_batches: dict[str, AckBatch] = {}
        self._published: dict[str, Any] = {}
        """Published-messages counter per subject pattern (a labels() lookup per message costs more
        than the publish)."""
        self._went_idle = asyncio.Event()
        """Set by a consumer when it finishes a message with nothing queued (wakes :meth:`settle`)."""

    @classmethod
    async def connect(cls, url: str, service: str, clock: Clock | None = None, *,
                      autostart: bool = True, retry_delay_s: float = 0.1, name: str = "",
                      connect_attempts: int = -1, settings: RuntimeSettings | None = None) -> Bus:
        """Connect to ``url`` as ``service`` (a subject token, e.g. ``"slo-manager"``).

        ``autostart=False`` defers consumers until :meth:`start_consumers` (the runtime uses it
        so that handlers run only after ``service.start``). ``retry_delay_s`` is the first nak
        delay of a failing handler (doubled per delivery); ``name`` the NATS client name
        (default ``service``); ``connect_attempts`` how many times the server is tried (and, once
        connected, reconnected) every 0.5 s before giving up, −1 = forever (services: the server may
        start after them; a command line tool passes a few). Raises ValueError for a bad service
        name and nats errors (``NoServersError``) when the server stays unreachable.

        ``url`` may list several servers of a cluster separated by commas; ``settings`` gives the
        credentials and TLS of the link (:func:`colo.connections.nats_options`; LinkError when a file
        named there cannot be read) and the replica count of the streams and buckets it creates.
        """
        subjects.DEAD_LETTER.format(service=service)  # validates the token
        made: list[Bus] = []
        nc = await nats.connect(servers=nats_servers(url), name=name or service, connect_timeout=5,
                                **nats_options(settings),
                                max_reconnect_attempts=connect_attempts, reconnect_time_wait=0.5,
                                error_cb=_log_error if connect_attempts < 0 else _quiet_error,
                                reconnected_cb=functools.partial(_reconnected, made))
        made.append(cls(nc, service, clock or WallClock(), autostart, retry_delay_s,
                        settings.stream_replicas if settings is not None else 1))
        return made[0]

    def on_reconnected(self) -> None:
        """The client reconnected (to the same server restarted, or another one): every running consumer
        sends a new pull request at once (:meth:`Subscription.repull`) instead of waiting out the expiry
        of one the server may have forgotten (up to :data:`colo.subscription.PULL_EXPIRES_S` + 5 s)."""
        log.info("%s: reconnected to NATS; re-issuing the pull requests of %d consumers", self.service,
                 len(self._subs))
        for sub in self._subs:
            sub.repull()

    async def ensure_streams(self, store_retry_s: float = STORE_RETRY_S) -> None:
        """Create or update every stream of :data:`colo.subjects.STREAMS`, with :attr:`replicas` replicas
        (a stream created with fewer is updated to that count; JetStream refuses more replicas than the
        cluster has servers).

        A stream created again right after it was deleted can be refused with JetStream's
        ``err_code`` 10049 ("error creating store for stream") while the server still removes the
        old stream's files in the background; that refusal is retried with backoff (25 ms doubling
        to 0.5 s) for up to ``store_retry_s`` seconds of wall time, then raised. Raises
        nats.js.errors.APIError for any other refusal. A stream whose update this user may not send (no
        ``STREAM.UPDATE`` in its permissions, :mod:`colo.permissions`) is left as it is, with a warning.
        Raises :class:`JetStreamNotEnabled` first when the server runs without JetStream.
        """
        await self.require_jetstream()
        for s in subjects.STREAMS:
            cfg = StreamConfig(
                name=s.name, subjects=list(s.subjects), storage=StorageType.FILE,
                max_age=s.max_age_s or None, max_msgs_per_subject=s.max_msgs_per_subject,
                duplicate_window=s.duplicate_window_s, num_replicas=self.replicas,
            )
            await retry_store_creation(functools.partial(self._add_or_update_stream, cfg), store_retry_s)

    async def require_jetstream(self) -> None:
        """Raise :class:`JetStreamNotEnabled` when the server runs without JetStream: nothing answers its API
        (``$JS.API.INFO``), which nats-py reports as ServiceUnavailableError (a 503 "no responders")."""
        try:
            await self.js.account_info()
        except (nats.js.errors.ServiceUnavailableError, nats.errors.NoRespondersError):
            server = _server_name(self.nc) or "the NATS server"
            raise JetStreamNotEnabled(
                f"JetStream is not enabled on the NATS server {server}: start it with `nats-server -js`, "
                "or add `jetstream {}` to its configuration file") from None

    async def _add_or_update_stream(self, cfg: StreamConfig) -> None:
        try:
            await self.js.add_stream(cfg)
        except nats.js.errors.BadRequestError:
            try:
                await self.js.update_stream(cfg)
            except nats.errors.TimeoutError:
                # a user without STREAM.UPDATE (colo.permissions: only the scheduler's): the server drops the
                # request. The stream exists (the add was refused for its different configuration): use it as is.
                await self.js.stream_info(cfg.name or "")
                log.warning("%s: stream %s differs from this release's configuration and this user may not "
                            "update it; left as it is (the scheduler or `colo` as admin updates it)",
                            self.service, cfg.name)

    async def key_value(self, bucket: str, *, create: bool = True, history: int = 16) -> KeyValue:
        """The JetStream key-value bucket ``bucket``, created (keeping ``history`` values per key, with
        :attr:`replicas` replicas) when it does not exist and ``create`` is set.

        Raises nats.js.errors.BucketNotFoundError when it does not exist and ``create`` is False,
        InvalidBucketNameError for a bad name, nats errors when JetStream is unavailable. Creation
        retries the transient store refusal as :meth:`ensure_streams` does.
        """
        try:
            return await self.js.key_value(bucket)
        except nats.js.errors.BucketNotFoundError:
            if not create:
                raise
        config = KeyValueConfig(bucket=bucket, history=history, replicas=self.replicas)
        try:
            return await retry_store_creation(lambda: self.js.create_key_value(config))
        except nats.js.errors.BadRequestError:  # created meanwhile by another process
            return await self.js.key_value(bucket)

    async def purge_streams(self) -> None:
        """Remove every message of every Colo stream (consumers stay)."""
        for s in subjects.STREAMS:
            try:
                await self.js.purge_stream(s.name)
            except nats.js.errors.NotFoundError:
                pass

    async def last_seq(self, subject: Subject[Any], **keys: str) -> int:
        """Stream sequence of the newest message on ``subject`` (concrete with ``keys``) its stream holds; 0 when it
        holds none. Needs ``STREAM.MSG.GET`` on the stream (:attr:`colo.permissions.BusGrant.reads_streams`)."""
        assert subject.stream is not None
        try:
            raw = await self.js.get_last_msg(subject.stream, subject.format(**keys))
        except nats.js.errors.NotFoundError:
            return 0
        return int(raw.seq or 0)

    async def delete_streams(self) -> None:
        """Delete every ``COLO_*`` stream and its consumers (tests, resets)."""
        for info in await self.js.streams_info():
            if info.config.name and info.config.name.startswith("COLO_"):
                await self.js.delete_stream(info.config.name)

    # ------------------------------------------------------------------ publish

    def _prepare(self, subject: Subject[T], msg: T, msg_id: str | None, keys: Mapping[str, str],
                 trace: Mapping[str, str] | None) -> tuple[str, bytes, dict[str, str] | None]:
        """(subject, payload, headers) of one publish; ``trace`` the trace headers of the current
        span (:func:`_trace_headers`), the same for every message published from one context."""
        if not isinstance(msg, subject.type):
            raise TypeError(f"{subject.pattern} carries {subject.type.__name__}, got {type(msg).__name__}")
        subj = subject.format(**keys)
        headers: dict[str, str] = {}
        if msg_id:
            headers["Nats-Msg-Id"] = msg_id
        if trace:
            headers.update(trace)
        return subj, codec.encode(msg), headers or None

    def _count(self, subject: Subject[Any], n: int = 1) -> None:
        counter = self._published.get(subject.pattern)
        if counter is None:
            counter = self._published[subject.pattern] = _published.labels(self.service, subject.wildcard)
        counter.inc(n)

    async def publish(self, subject: Subject[T], msg: T, msg_id: str | None = None, **keys: str) -> None:
        """Publish ``msg`` on ``subject`` formatted with ``keys``; JetStream (waits for the ack,
        de-duplicated by ``msg_id``) when the subject has a stream, core NATS otherwise.

        Raises TypeError when ``msg`` is not the subject's type, ValueError for bad keys, nats
        errors on timeout or when streams were not created.
        """
        subj, data, headers = self._prepare(subject, msg, msg_id, keys, _trace_headers())
        self._count(subject)
        if subject.stream is None:
            await self.nc.publish(subj, data, headers=headers)
        else:
            await self.js.publish(subj, data, headers=headers, timeout=10.0)

    async def publish_many(self, items: Iterable[tuple[Subject[Any], Any, str | None, Mapping[str, str]]],
                           timeout_s: float = 30.0) -> None:
        """Publish ``(subject, msg, msg_id, keys)`` items and wait for every JetStream ack.

        All publishes are written before any ack is awaited, so they leave in few socket
        writes. A message with a ``msg_id`` whose ack does not come within an attempt timeout (2 s,
        growing to 5 s: :mod:`colo.publish_acks`) is sent again (the stream's duplicate window keeps one
        copy), so a stream that dropped it while electing a leader gets it within seconds. Raises BusError
        when a stream refuses a message or acks do not arrive within ``timeout_s`` (seconds);
        TypeError/ValueError as :meth:`publish`.
        """
        trace = _trace_headers()  # one current span for the whole call: inject once, not per message
        counts: dict[str, int] = {}
        by_pattern: dict[str, Subject[Any]] = {}
        prepared: list[Outgoing] = []
        for subject, msg, msg_id, keys in items:
            prepared.append((subject.stream, *self._prepare(subject, msg, msg_id, keys, trace)))
            counts[subject.pattern] = counts.get(subject.pattern, 0) + 1
            by_pattern[subject.pattern] = subject
        for pattern, n in counts.items():  # counted as prepared (before sending), as publish does
            self._count(by_pattern[pattern], n)
        if not prepared:
            return
        await self._ensure_ack_inbox()
        self._ack_seq += 1
        token = str(self._ack_seq)
        batch = AckBatch([i for i, p in enumerate(prepared) if p[0] is not None],
                         asyncio.get_running_loop().create_future(),
                         [i for i, p in enumerate(prepared) if p[0] is not None and p[3] and "Nats-Msg-Id" in p[3]])
        self._ack_batches[token] = batch
        reply = f"{self._ack_inbox}.{token}"

        async def send(i: int) -> None:
            stream, subj, data, headers = prepared[i]
            await self.nc.publish(subj, data, reply=f"{reply}.{i}" if stream is not None else "", headers=headers)

        try:
            for i in range(len(prepared)):
                await send(i)
            await batch.wait(send, timeout_s, self.service)
        finally:
            self._ack_batches.pop(token, None)

    async def _ensure_ack_inbox(self) -> None:
        if self._ack_inbox:
            return
        inbox = self.nc.new_inbox()

        async def on_ack(msg: Msg) -> None:
            token, _, index = msg.subject[len(inbox) + 1:].partition(".")  # <inbox>.<call>.<message index>
            batch = self._ack_batches.get(token)
            if batch is not None and index.isdigit():
                batch.add(int(index), msg)

        await self.nc.subscribe(f"{inbox}.*.*", cb=on_ack)
        self._ack_inbox = inbox

    async def dead_letter(self, subject: str, reason: str, data: bytes, headers: Mapping[str, str],
                          msg_id: str | None = None) -> bool:
        """Publish a :class:`DeadLetter` for ``data`` received on ``subject`` to ``dlq.<service>``; False (logged)
        when it could not be published (the dead-letter stream unavailable): the caller keeps the message."""
        try:
            await self._publish_dead_letter(subject, reason, data, headers, msg_id)
        except Exception:
            log.exception("%s: could not publish dead letter", self.service)
            return False
        return True

    async def _publish_dead_letter(self, subject: str, reason: str, data: bytes, headers: Mapping[str, str],
                                   msg_id: str | None) -> None:
        log.error("%s: dead letter from %s: %s", self.service, subject, reason)
        if len(data) > DEAD_LETTER_MAX_DATA:  # the dead letter must stay under the server's max payload
            reason = f"{reason} (data truncated from {len(data)} bytes)"
            data = data[:DEAD_LETTER_MAX_DATA]
        dl = DeadLetter(service=self.service, subject=subject, reason=reason[:DEAD_LETTER_MAX_DATA],
                        data=data.decode("utf-8", errors="replace"), at=self.clock.now(),
                        headers={str(k): str(v) for k, v in headers.items()})
        await self.publish(subjects.DEAD_LETTER, dl, msg_id=msg_id, service=self.service)

    async def reject(self, info: MessageInfo, msg: Any, reason: str) -> None:
        """Dead-letter ``msg``, which decoded but makes no sense (e.g. an empty uid), so that its handler
        can return and have it acked rather than retried. De-duplicated per delivery (subject and stream
        sequence), so a redelivered message is dead-lettered once. Raises BusError (from the publish's error)
        when the dead letter cannot be published: the handler fails and the message is retried."""
        try:
            await self._publish_dead_letter(info.subject, reason, codec.encode(msg), info.headers,
                                            msg_id=f"{self.service}-rejected-{info.subject}-{info.stream_seq}")
        except Exception as exc:
            raise BusError(f"{self.service}: could not publish the dead letter of {info.subject}: {exc!r}") from exc
        registered = subjects.by_subject(info.subject)  # labelled by pattern: node tokens would be unbounded
        _dead.labels(self.service, registered.wildcard if registered is not None else "other").inc()

    # ------------------------------------------------------------------ consume

    def subscribe(self, subject: Subject[T], handler: Callable[..., Awaitable[Any]], durable: str,
                  keys: Mapping[str, str | Sequence[str]] | None = None) -> Subscription[T]:
        """Register ``handler`` for ``subject`` on the durable consumer ``f"{service}-{durable}"``.

        ``keys`` (e.g. ``{"node": ["n1", "n2"]}``) narrows the consumer to those concrete
        subjects. With ``autostart`` the consumer starts at once (``await`` the returned
        subscription to wait for it); otherwise at :meth:`start_consumers`.
        Raises ValueError for a subject without stream, bad keys or a duplicate durable.
        """
        return self._add(Subscription(self, subject, handler, durable, keys))

    def subscribe_batch(self, subject: Subject[T], handler: Callable[[list[tuple[T, MessageInfo]]], Awaitable[Any]],
                        durable: str, keys: Mapping[str, str | Sequence[str]] | None = None,
                        max_batch: int = FETCH_BATCH) -> Subscription[T]:
        """Like :meth:`subscribe`, but ``handler`` gets a list of ``(msg, info)``: the next message
        and every message already delivered behind it, up to ``max_batch``, in stream order.

        All are acked once the handler returns. When it raises, each message of the batch is
        passed again alone (a list of one), and only those whose single call raises are retried
        and dead-lettered as with :meth:`subscribe`: a handler must therefore be idempotent per
        message. Payloads that do not decode are dead-lettered before the call. Raises
        ValueError as :meth:`subscribe`, and for ``max_batch`` < 1.
        """
        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {max_batch}")
        return self._add(Subscription(self, subject, handler, durable, keys, max_batch=max_batch))

    def _add(self, sub: Subscription[T]) -> Subscription[T]:
        if any(s.name == sub.name for s in self._subs):
            raise ValueError(f"durable {sub.name.removeprefix(self.service + '-')!r} already subscribed on this bus")
        self._subs.append(sub)
        if self._autostart:
            sub.start()
        return sub

    async def start_consumers(self) -> None:
        """Start every registered consumer (and those registered later) and wait until running."""
        self._autostart = True
        await asyncio.gather(*(s.start() for s in self._subs))

    async def settle(self, timeout_s: float = 60.0) -> None:
        """Return once every consumer has nothing pending and no handler runs.

        The server's pending counts are asked again while NATS is unavailable (a transient error,
        :func:`colo.transient.is_transient`: the server restarting, a cluster member failing over).
        Raises BusError after ``timeout_s`` seconds.
        """
        started = [s._started for s in self._subs if s._started is not None]
        if started:
            await asyncio.gather(*started)
        deadline = time.monotonic() + timeout_s
        delay = 0.0005
        subs = [s for s in self._subs if s._started is not None]
        while True:
            self._went_idle.clear()
            if all(s.idle for s in subs):
                try:
                    counts = await asyncio.gather(*(s.pending() for s in subs))
                except Exception as exc:
                    if not is_transient(exc):
                        raise
                    log.debug("%s: settle: pending counts unavailable (%r); again", self.service, exc)
                    counts = [1]
                if not any(counts) and all(s.idle for s in subs):
                    return
            if time.monotonic() > deadline:
                raise BusError(f"{self.service}: bus did not settle within {timeout_s}s")
            # woken as soon as a consumer drains its queue, else polled with a growing delay
            try:
                await asyncio.wait_for(self._went_idle.wait(), timeout=delay)
            except TimeoutError:
                pass
            delay = min(delay * 2, 0.02)

    # ------------------------------------------------------------------ ticks

    async def serve_ticks(self, handler: Callable[[Tick], Awaitable[TickAck]]) -> None:
        """Answer ``sim.tick.<service>`` requests with ``await handler(tick)`` (one at a time).

        A tick that does not decode is answered with a TickAck carrying the error (seq −1).
        """
        async def on_tick(msg: Msg) -> None:
            try:
                tick = codec.decode(msg.data, Tick)
            except codec.DecodeError as exc:
                await self.dead_letter(msg.subject, str(exc), msg.data, dict(msg.headers or {}))
                ack = TickAck(service=self.service, seq=-1, error=str(exc))
            else:
                try:
                    ack = await handler(tick)
                except Exception as exc:
                    log.exception("%s: tick %d failed", self.service, tick.seq)
                    ack = TickAck(service=self.service, seq=tick.seq, error=f"{type(exc).__name__}: {exc}")
            if msg.reply:
                await self.nc.publish(msg.reply, codec.encode(ack))

        self._tick_sub = await self.nc.subscribe(subjects.SIM_TICK.format(service=self.service), cb=on_tick)
        await self.nc.flush()  # the server knows the subscription before anyone asks

    async def request_tick(self, service: str, tick: Tick, timeout_s: float = 600.0) -> TickAck:
        """Send ``tick`` to ``service`` and wait for its TickAck.

        "No responders" is asked again every 50 ms for up to :data:`TICK_NO_RESPONDERS_GRACE_S` (or
        ``timeout_s`` when shorter): in a NATS cluster a subscription made on one server reaches the others
        a moment later, so a service that has just started serving ticks elsewhere is not yet seen.

        Raises BusError when no service answers or the answer does not arrive within ``timeout_s``.
        """
        subj = subjects.SIM_TICK.format(service=service)
        loop = asyncio.get_running_loop()
        give_up = loop.time() + min(timeout_s, TICK_NO_RESPONDERS_GRACE_S)
        while True:
            try:
                reply = await self.nc.request(subj, codec.encode(tick), timeout=timeout_s)
                break
            except nats.errors.NoRespondersError as exc:
                if loop.time() >= give_up:
                    raise BusError(f"no {service} is serving ticks on {subj}") from exc
                await asyncio.sleep(0.05)
            except (nats.errors.TimeoutError, TimeoutError) as exc:
                raise BusError(f"{service} did not answer tick {tick.seq} within {timeout_s}s") from exc
        return codec.decode(reply.data, TickAck)

    # ------------------------------------------------------------------ lifecycle

    async def stop_consumers(self, timeout_s: float = 30.0) -> None:
        """Stop intake: every consumer finishes its running handler and stops fetching."""
        if self._tick_sub is not None:
            try:
                await self._tick_sub.unsubscribe()
            except Exception:
                pass
            self._tick_sub = None
        await asyncio.gather(*(s.stop(timeout_s) for s in self._subs))

    async def close(self) -> None:
        """Stop consumers, then drain and close the connection (idempotent)."""
        if self._closed:
            return
        self._closed = True
        await self.stop_consumers()
        if not self.nc.is_closed:
            try:
                await self.nc.drain()
            except Exception:
                await self.nc.close()


async def _reconnected(made: list[Bus]) -> None:
    """nats-py's ``reconnected_cb`` (called after the client re-sent its subscriptions)."""
    for bus in made:
        bus.on_reconnected()


async def _log_error(exc: Exception) -> None:
    log.warning("nats: %r", exc)


async def _quiet_error(exc: Exception) -> None:
    """Connection errors of a short-lived client: the caller reports the final failure once."""
    log.debug("nats: %r", exc)
