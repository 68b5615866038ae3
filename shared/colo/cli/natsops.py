"""``colo kv put|get`` and ``colo sub``: what the README otherwise does with the ``nats`` CLI
(docs/cli.md "Without the nats CLI").

* ``colo kv put BUCKET KEY VALUE`` (or ``-f FILE``, ``-`` = stdin) — ``nats kv put BUCKET KEY VALUE``; e.g. the
  slo-manager's policy: ``colo kv put colo-config slo-manager -f policy.yaml``. The bucket is created (16 values
  of history per key, as the services create theirs) when missing.
* ``colo kv get BUCKET KEY`` — the value, as stored, on stdout (exit 1 when the key does not exist).
* ``colo sub SUBJECT [--count N] [--raw]`` — ``nats sub SUBJECT``: every message's subject and payload, one per
  line. A message on a registered subject is decoded with its type and printed as JSON with every field, those at
  their default too (the wire leaves them out, :func:`colo.codec.to_builtins_full`); other subjects, undecodable
  payloads, payloads with a field the type does not have (another message type) and everything with ``--raw`` as
  they arrived (``colo events`` summarizes the same messages instead).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

import msgspec
from rich.markup import escape

from colo.cli.connection import CONNECT_ATTEMPTS, connection
from colo.cli.follow import follow_subject
from colo.cli.output import err_console
from colo.codec import DecodeError, decode, encode, to_builtins_full
from colo.settings import RuntimeSettings
from colo.subjects import by_subject


async def kv_put(nats_url: str, bucket: str, key: str, value: bytes, settings: RuntimeSettings | None = None) -> int:
    """Put ``value`` under ``key`` of ``bucket`` (created when missing); returns the revision."""
    from colo.bus import Bus

    bus = await Bus.connect(nats_url, "cli", connect_attempts=CONNECT_ATTEMPTS, settings=settings)
    try:
        kv = await bus.key_value(bucket)
        return int(await kv.put(key, value))
    finally:
        await bus.close()


async def kv_get(nats_url: str, bucket: str, key: str, settings: RuntimeSettings | None = None) -> bytes | None:
    """The value of ``key`` in ``bucket``, or None when the bucket or the key does not exist."""
    import nats.js.errors

    from colo.bus import Bus

    bus = await Bus.connect(nats_url, "cli", connect_attempts=CONNECT_ATTEMPTS, settings=settings)
    try:
        try:
            kv = await bus.key_value(bucket, create=False)
            entry = await kv.get(key)
        except (nats.js.errors.BucketNotFoundError, nats.js.errors.KeyNotFoundError):
            return None
        return entry.value or b""
    finally:
        await bus.close()


def sub_line(subject: str, data: bytes, n: int, raw: bool = False) -> str:
    """``[#n] subject: payload`` for the ``n``-th message: on a registered subject (:func:`colo.subjects.by_subject`)
    the payload decoded with its type and encoded again with every field (:func:`colo.codec.to_builtins_full`), one
    line of JSON; on any other subject, when it does not decode or carries a field its type does not have (another
    message type), or with ``raw``, the bytes as they arrived."""
    reg = None if raw else by_subject(subject)
    if reg is not None:
        try:
            full = to_builtins_full(decode(data, reg.type))
            if _keys_known(msgspec.json.decode(data), full):
                return f"[#{n}] {subject}: {encode(full).decode()}"
        except (DecodeError, msgspec.DecodeError):
            pass
    return f"[#{n}] {subject}: {data.decode(errors='replace')}"


def _keys_known(sent: Any, full: Any) -> bool:
    """Whether every object key of payload ``sent`` is in ``full`` (the decoded message with every field) at the
    same place: decoding ignores unknown fields, so a payload of another type would be shown as one it is not."""
    if isinstance(sent, dict) and isinstance(full, dict):
        return all(k in full and _keys_known(v, full[k]) for k, v in sent.items())
    if isinstance(sent, list) and isinstance(full, list):
        return len(sent) == len(full) and all(_keys_known(a, b) for a, b in zip(sent, full))
    return True


async def subscribe(nats_url: str, subject: str, count: int, write: Any, settings: RuntimeSettings | None = None,
                    raw: bool = False) -> int:
    """Write :func:`sub_line` for each message on ``subject`` until ``count`` (0 = until SIGINT/SIGTERM); returns
    the number written."""
    return await follow_subject(nats_url, subject, count, lambda msg, n: sub_line(msg.subject, msg.data, n, raw),
                                write, settings=settings)


def _value(args: argparse.Namespace) -> bytes:
    if args.file == "-":
        return sys.stdin.buffer.read()
    if args.file:
        return Path(args.file).read_bytes()
    if args.value is None:
        raise ValueError("give VALUE or -f FILE")
    return str(args.value).encode()


def cmd_kv(args: argparse.Namespace) -> int:
    """Run ``colo kv put|get``: 0 done, 1 failure or missing key, 2 bad arguments."""
    settings = connection("nats").settings
    url = settings.nats_url
    try:
        if args.kv_command == "put":
            try:
                value = _value(args)
            except (ValueError, OSError) as exc:
                err_console.print(f"[red]{escape(str(exc))}[/]", highlight=False)
                return 2
            rev = asyncio.run(kv_put(url, args.bucket, args.key, value, settings))
            err_console.print(f"[dim]{escape(args.bucket)}/{escape(args.key)} revision {rev}[/]", highlight=False)
            return 0
        got = asyncio.run(kv_get(url, args.bucket, args.key, settings))
    except Exception as exc:
        err_console.print(f"[red]cannot reach the key-value bucket: {escape(str(exc))}[/]", highlight=False)
        return 1
    if got is None:
        err_console.print(f"[red]no key {escape(args.key)!r} in bucket {escape(args.bucket)!r}[/]", highlight=False)
        return 1
    sys.stdout.buffer.write(got)
    return 0


def cmd_sub(args: argparse.Namespace) -> int:
    """Run ``colo sub``."""
    settings = connection("nats").settings
    try:
        asyncio.run(subscribe(settings.nats_url, args.subject, args.count, lambda line: print(line, flush=True),
                              settings, raw=args.raw))
    except Exception as exc:
        err_console.print(f"[red]cannot subscribe: {escape(str(exc))}[/]", highlight=False)
        return 1
    return 0


def add_nats_parsers(sub: Any) -> None:
    """Add ``kv`` and ``sub`` to the ``colo`` subcommands."""
    p = sub.add_parser("kv", help="NATS key-value buckets (the slo-manager's policy: colo-config/slo-manager)")
    ksub = p.add_subparsers(dest="kv_command", required=True)
    put = ksub.add_parser("put", help="put a value (created bucket when missing)")
    put.add_argument("bucket")
    put.add_argument("key")
    put.add_argument("value", nargs="?", default=None)
    put.add_argument("-f", "--file", default="", help="read the value from FILE ('-' = stdin)")
    put.set_defaults(func=cmd_kv)
    get = ksub.add_parser("get", help="print a value")
    get.add_argument("bucket")
    get.add_argument("key")
    get.set_defaults(func=cmd_kv)
    p = sub.add_parser("sub", help="print every message on a subject, like `nats sub` (wildcards * and >): "
                                   "Colo's messages decoded with every field, defaults included")
    p.add_argument("subject")
    p.add_argument("--count", type=int, default=0, help="stop after N messages (0 = follow)")
    p.add_argument("--raw", action="store_true", help="print every payload as it arrived (defaults left out)")
    p.set_defaults(func=cmd_sub)
