"""One fuzz run on one subject: generate N payloads, publish them to the running cluster, check the outcome.

Payload origins (shares of N): hypothesis draws from the message type (:mod:`strategies`, 25 %), mutations of
valid messages (:mod:`mutations`, 55 %, valid seeds among them), raw garbage (15 %) and raw ``HPUB`` frames
with non-UTF-8 header values (5 %). Every payload is classified by the real decoder (``colo.codec.decode``):

* *undecodable* payloads must be refused: they are published first, alone; every consumer whose filter
  matches the subject must dead-letter each of them with a non-empty reason, and the cluster snapshot (store
  keys, ``/debug/state``) must be the same afterwards;
* *decodable* payloads (valid or semantically wrong) are published next, then every service ticks: each is
  either accepted or rejected visibly (dead-lettered by the handler, ``Bus.reject``); state may change.

In both phases: no handler exception (``colo_bus_handler_errors_total`` unchanged, no ``handler failed``
dead letter), no exception logged at ERROR, no tick exception, every service still ready.

Each message carries a ``Fuzz-Id`` header; the dead letters carry the headers back, so each refusal is matched
to its message. Publishing goes in chunks small enough for the stream's per-subject limits (a chunk larger than
``max_msgs_per_subject`` would let the stream drop messages before a consumer sees them), settled in between.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import time
import warnings
from collections import Counter
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from cluster import Cluster, ExceptionLog
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hyp_seed
from mutations import garbage, mutate
from seeds import CASES, Case
from strategies import encode, wire_values

from colo import codec, subjects

FUZZ_ID = "Fuzz-Id"


@dataclass
class Payload:
    fid: str
    origin: str  # hypothesis | mutation:<name> | valid | garbage:<kind> | header
    subject: str
    data: bytes
    raw_header: bytes = b""  # extra header line (raw bytes) for the HPUB frames
    decodable: bool = False


@dataclass
class Outcome:
    subject: str
    sent: int = 0
    undecodable: int = 0
    decodable: int = 0
    dead_lettered: dict[str, int] = field(default_factory=dict)
    """per consumer: dead letters matched to a fuzz message"""
    accepted: dict[str, int] = field(default_factory=dict)
    """per consumer: decodable messages it handled without refusal"""
    origins: dict[str, int] = field(default_factory=dict)
    replayed: int = 0
    """refused decodable payloads published again (:func:`_replay_refused`)"""
    replays_accepted: int = 0
    crashes: int = 0
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def row(self) -> dict[str, Any]:
        return {"subject": self.subject, "sent": self.sent, "undecodable": self.undecodable,
                "decodable": self.decodable, "dead_lettered": self.dead_lettered, "accepted": self.accepted,
                "replayed": self.replayed, "replays_accepted": self.replays_accepted,
                "crashes": self.crashes, "problems": len(self.problems), "seconds": round(self.seconds, 1),
                "first_problems": [p[:400] for p in self.problems[:10]],
                "origins": self.origins}


def draw(case: Case, n: int, seed: int) -> list[Any]:
    """``n`` hypothesis draws of wire values for the case's message type (fewer when hypothesis runs dry)."""
    out: list[Any] = []
    if n <= 0:
        return out

    @hyp_seed(seed)
    @settings(max_examples=n, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(wire_values(case.subject.type))
    def collect(value: Any) -> None:
        out.append(value)

    collect()
    return out[:n]


def _subject(case: Case, rng: random.Random, msg: Any) -> str:
    return case.subject.format(**case.keys(rng, msg))


def generate(case: Case, n: int, seed: int) -> list[Payload]:
    """The ``n`` payloads of one run (deterministic in ``seed``)."""
    rng = random.Random(seed)
    n_hyp, n_mut, n_garbage = int(n * 0.25), int(n * 0.55), int(n * 0.15)
    n_header = n - n_hyp - n_mut - n_garbage
    out: list[Payload] = []

    def add(origin: str, subject: str, data: bytes, raw_header: bytes = b"") -> None:
        out.append(Payload(f"{seed}-{len(out)}", origin, subject, data, raw_header))

    for value in draw(case, n_hyp, seed):
        add("hypothesis", _subject(case, rng, case.valid(rng)), encode(value))
    while len(out) < n_hyp + n_mut:
        valid = case.valid(rng)
        if rng.random() < 0.15:
            add("valid", _subject(case, rng, valid), codec.encode(valid))
        else:
            name, data = mutate(rng, valid)
            add(f"mutation:{name}", _subject(case, rng, valid), data)
    for _ in range(n_garbage):
        kind, data = garbage(rng)
        add(f"garbage:{kind}", _subject(case, rng, case.valid(rng)), data)
    for _ in range(n_header):
        valid = case.valid(rng)
        data = codec.encode(valid) if rng.random() < 0.5 else garbage(rng)[1][:1000]
        add("header", _subject(case, rng, valid), data,
            raw_header=b"X-Fuzz: " + rng.randbytes(6).replace(b"\r", b"r").replace(b"\n", b"n") + b"\xff\xc3(")
    for p in out:
        try:
            codec.decode(p.data, case.subject.type)
        except codec.DecodeError:
            p.decodable = False
        else:
            p.decodable = True
    return out


def _matches(filt: str, subject: str) -> bool:
    f, s = filt.split("."), subject.split(".")
    for i, tok in enumerate(f):
        if tok == ">":
            return len(s) > i
        if i >= len(s) or (tok != "*" and tok != s[i]):
            return False
    return len(f) == len(s)


class RawPublisher:
    """A bare NATS protocol connection for frames the client library cannot write (non-UTF-8 header bytes)."""

    def __init__(self, url: str) -> None:
        u = urlparse(url)
        self.host, self.port = u.hostname or "127.0.0.1", u.port or 4222
        self.writer: asyncio.StreamWriter | None = None
        self.reader: asyncio.StreamReader | None = None

    async def __aenter__(self) -> RawPublisher:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        await self.reader.readline()  # INFO
        self.writer.write(b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"protocol":1}\r\n')
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self.writer is not None
        self.writer.close()
        await self.writer.wait_closed()

    def hpub(self, subject: str, headers: bytes, data: bytes) -> None:
        assert self.writer is not None
        hdr = b"NATS/1.0\r\n" + headers + b"\r\n"
        self.writer.write(f"HPUB {subject} {len(hdr)} {len(hdr) + len(data)}\r\n".encode() + hdr + data + b"\r\n")

    async def flush(self) -> None:
        assert self.writer is not None and self.reader is not None
        self.writer.write(b"PING\r\n")
        await self.writer.drain()
        while True:
            line = await self.reader.readline()
            if line.startswith(b"PONG") or not line:
                return
            if line.startswith(b"-ERR"):
                raise RuntimeError(f"nats-server refused a raw frame: {line!r}")


def _chunk_size(case: Case) -> int:
    """Messages per concrete subject between settles: the stream's ``max_msgs_per_subject``, else no limit."""
    stream = next(s for s in subjects.STREAMS if s.name == case.subject.stream)
    return max(1, stream.max_msgs_per_subject) if stream.max_msgs_per_subject > 0 else 1 << 60


async def publish(cluster: Cluster, raw: RawPublisher, payloads: list[Payload], chunk: int,
                  consumers: list[Any]) -> None:
    """Publish ``payloads`` with their ``Fuzz-Id``; at most ``chunk`` per concrete subject before the
    ``consumers`` of the subject are settled (so that the stream's limit discards nothing unread)."""
    nc = cluster.client.nc
    per_subject: Counter[str] = Counter()
    for p in payloads:
        if per_subject[p.subject] >= chunk:
            await nc.flush()
            await raw.flush()
            await cluster.settle_subscriptions(consumers)
            per_subject.clear()
        per_subject[p.subject] += 1
        if p.raw_header:
            raw.hpub(p.subject, f"{FUZZ_ID}: {p.fid}\r\n".encode() + p.raw_header + b"\r\n", p.data)
        else:
            await nc.publish(p.subject, p.data, headers={FUZZ_ID: p.fid})
    await nc.flush()
    await raw.flush()
    await cluster.settle()


async def fuzz_subject(cluster: Cluster, nats_url: str, pattern: str, n: int, seed: int) -> Outcome:
    """Run ``n`` payloads on ``pattern`` against ``cluster`` and return the counts and every problem found."""
    started = time.monotonic()
    case = CASES[pattern]
    out = Outcome(pattern)
    payloads = generate(case, n, seed)
    out.sent = len(payloads)
    out.origins = dict(Counter(p.origin.split(":")[0] for p in payloads))
    consumers = [(svc, sub) for svc, sub in cluster.subscriptions() if sub.subject.pattern == pattern]
    errors_before = cluster.handler_errors(case.subject)
    exc_log = ExceptionLog()
    logging.getLogger().addHandler(exc_log)
    caught = warnings.catch_warnings(record=True)
    seen_warnings = caught.__enter__()
    warnings.simplefilter("always", RuntimeWarning)  # numpy overflow / invalid value: NaN or inf in a model
    try:
        bad = [p for p in payloads if not p.decodable]
        good = [p for p in payloads if p.decodable]
        out.undecodable, out.decodable = len(bad), len(good)
        chunk = _chunk_size(case)
        subs = [sub for _, sub in consumers]
        async with RawPublisher(nats_url) as raw:
            before = await cluster.snapshot()
            await publish(cluster, raw, bad, chunk, subs)
            after = await cluster.snapshot()
            if after != before:
                out.problems.append("state changed by undecodable payloads: " + _diff(before, after))
            await publish(cluster, raw, good, chunk, subs)
            await _replay_refused(cluster, raw, out, good, consumers, chunk)  # same clock: same verdicts
        out.problems.extend(await cluster.tick(cluster.clock.now() + 60))
        out.problems.extend(await cluster.tick(cluster.clock.now() + 60))
    finally:
        logging.getLogger().removeHandler(exc_log)
        caught.__exit__(None, None, None)
    for w in seen_warnings:
        if issubclass(w.category, RuntimeWarning):
            out.problems.append(f"RuntimeWarning (exception-level: NaN/inf reached a model) at "
                                f"{w.filename}:{w.lineno}: {w.message}")
    _check_dead_letters(cluster, out, payloads, consumers)
    errors_after = cluster.handler_errors(case.subject)
    for svc in errors_after:
        if errors_after[svc] != errors_before.get(svc, 0):
            out.problems.append(f"{svc}: {errors_after[svc] - errors_before.get(svc, 0):.0f} handler exceptions")
    for rec in exc_log.records:
        out.problems.append(f"logged exception ({rec.name}): {rec.getMessage()[:300]}: {rec.exc_info[1]!r}"
                            if rec.exc_info else rec.getMessage())
    for svc in cluster.not_ready():
        out.problems.append(f"{svc} not ready")
    out.crashes = sum(1 for p in out.problems
                      if "exception" in p or "tick" in p or "handler failed" in p or "RuntimeWarning" in p)
    out.seconds = time.monotonic() - started
    return out


async def _replay_refused(cluster: Cluster, raw: RawPublisher, out: Outcome, good: list[Payload],
                          consumers: list[tuple[str, Any]], chunk: int) -> None:
    """Publish again (new ids) the decodable payloads every consumer refused: refused again, they must leave
    the state as it was (a handler that changes state and then refuses is a bug). Refusal counters in
    ``/debug/state`` are left out of the comparison; when some replay is accepted this time (the state it was
    refused against has changed since), the comparison is skipped and counted in ``replays_accepted``."""
    refusals = {(dl.service, dl.headers.get(FUZZ_ID)) for dl, _ in cluster.dead}

    def refused_by_all(p: Payload) -> bool:
        matching = [svc for svc, sub in consumers if any(_matches(f, p.subject) for f in sub.filters)]
        return bool(matching) and all((svc, p.fid) in refusals for svc in matching)

    replays = [Payload(f"{p.fid}-again", p.origin, p.subject, p.data, p.raw_header, True)
               for p in good if refused_by_all(p)]
    if not replays:
        return
    n_dead = len(cluster.dead)
    before = _without_refusal_counters(await cluster.snapshot())
    await publish(cluster, raw, replays, chunk, [sub for _, sub in consumers])
    after = _without_refusal_counters(await cluster.snapshot())
    again = {(dl.service, dl.headers.get(FUZZ_ID)) for dl, _ in cluster.dead[n_dead:]}
    expected = {(svc, p.fid) for p in replays for svc, sub in consumers
                if any(_matches(f, p.subject) for f in sub.filters)}
    out.replayed = len(replays)
    out.replays_accepted = len(expected - again)
    if os.environ.get("FUZZ_DEBUG"):
        print("replays accepted:", Counter(svc for svc, _ in expected - again))
    if not out.replays_accepted and after != before:
        out.problems.append("state changed by payloads that were refused: " + _diff(before, after))


def _without_refusal_counters(snap: dict[str, Any]) -> dict[str, Any]:
    def strip(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: strip(x) for k, x in v.items() if not any(w in k for w in ("dead_letter", "rejected"))}
        return v
    return {"store": snap["store"], "debug": strip(snap["debug"])}


def _superseded(payloads: list[Payload]) -> set[str]:
    """Ids of payloads a later one may have replaced in their stream before any consumer read them: a stream
    that keeps only the last ``max_msgs_per_subject`` messages of a subject (quota specs keep 1) drops the older
    ones, by design, so those need not reach a consumer (nor its dead-letter subject)."""
    limit_of = {s.name: s.max_msgs_per_subject for s in subjects.STREAMS}
    later: Counter[str] = Counter()
    out: set[str] = set()
    for p in reversed(payloads):
        stream = next((s.name for s in subjects.STREAMS if any(_matches(f, p.subject) for f in s.subjects)), "")
        limit = limit_of.get(stream, -1)
        if 0 < limit <= later[p.subject]:
            out.add(p.fid)
        later[p.subject] += 1
    return out


def _check_dead_letters(cluster: Cluster, out: Outcome, payloads: list[Payload],
                        consumers: list[tuple[str, Any]]) -> None:
    by_id = {p.fid: p for p in payloads}
    refused: dict[tuple[str, str], str] = {}
    for dl, _ in cluster.dead:
        fid = dl.headers.get(FUZZ_ID)
        if fid in by_id:
            refused[(dl.service, fid)] = dl.reason
            if dl.reason.startswith("handler failed"):
                out.problems.append(f"{dl.service}: {dl.reason[:300]}")
    superseded = _superseded(payloads)
    for svc, sub in consumers:
        n_dead = n_ok = 0
        missing: list[str] = []
        for p in payloads:
            if not any(_matches(f, p.subject) for f in sub.filters):
                continue
            reason = refused.get((svc, p.fid))
            if reason is not None:
                n_dead += 1
                if not reason.strip():
                    out.problems.append(f"{svc}: dead letter without reason for {p.origin} on {p.subject}")
            elif p.decodable:
                n_ok += 1
            elif p.fid not in superseded:
                missing.append(f"{p.origin}:{p.data[:60]!r}")
        out.dead_lettered[svc] = out.dead_lettered.get(svc, 0) + n_dead
        out.accepted[svc] = out.accepted.get(svc, 0) + n_ok
        if missing:
            out.problems.append(f"{svc}: {len(missing)} undecodable payloads not dead-lettered, e.g. {missing[:3]}")


def _diff(before: Any, after: Any, path: str = "") -> str:
    """The first few differing leaves of two snapshots, as ``path: before -> after``."""
    out: list[str] = []

    def walk(b: Any, a: Any, where: str) -> None:
        if len(out) >= 5 or b == a:
            return
        if isinstance(b, dict) and isinstance(a, dict):
            for k in sorted(set(b) | set(a), key=str):
                walk(b.get(k), a.get(k), f"{where}.{k}" if where else str(k))
        else:
            out.append(f"{where}: {str(b)[:120]} -> {str(a)[:120]}")

    walk(before, after, path)
    return "; ".join(out)
