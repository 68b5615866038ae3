"""``colo events``: every Colo message, one line each, with its time (docs/cli.md "Events")."""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Callable
from datetime import datetime, timezone

from rich.markup import escape

from colo import subjects as S
from colo.cli.connection import connection
from colo.cli.follow import follow_subject
from colo.cli.output import _mem, err_console
from colo.codec import DecodeError, decode, to_builtins
from colo.messages import (
    ConfigApplied,
    ConfigRejected,
    DeadLetter,
    EvictionCommand,
    NodeDeleted,
    NodeMetric,
    NodeProfile,
    NodeResource,
    NodeSLO,
    NodeSpec,
    PodAdmitted,
    PodBound,
    PodDeleted,
    PodMigrationJob,
    PodRejected,
    PodSpec,
    PodStatus,
    PodUnschedulable,
    QoSEvent,
    Resources,
)
from colo.quantity import format_cpu
from colo.settings import RuntimeSettings


def _resources(r: Resources) -> str:
    """The non-zero resources of ``r``: ``cpu=2 memory=4Gi batch-cpu=500m``."""
    parts = [f"cpu={format_cpu(r.cpu)}" if r.cpu else "", f"memory={_mem(r.memory)}" if r.memory else "",
             f"batch-cpu={format_cpu(r.batch_cpu)}" if r.batch_cpu else "",
             f"batch-memory={_mem(r.batch_memory)}" if r.batch_memory else "",
             f"mid-cpu={format_cpu(r.mid_cpu)}" if r.mid_cpu else "",
             f"mid-memory={_mem(r.mid_memory)}" if r.mid_memory else ""]
    return " ".join(p for p in parts if p) or "none"


def _pod(spec: PodSpec) -> str:
    from colo.classes import qos_class_of

    return f"{spec.namespace}/{spec.name} uid={spec.uid} qos={qos_class_of(spec)} requests {_resources(spec.requests)}"


def key_fields(msg: object) -> str:
    """The few fields that matter of a Colo message, for one event line (CPU as quantities of
    milli-cores, memory in binary units); other structs fall back to their scalar fields."""
    if isinstance(msg, PodSpec):
        return _pod(msg)
    if isinstance(msg, PodAdmitted):
        return _pod(msg.spec) + (f" profile={msg.profile}" if msg.profile else "")
    if isinstance(msg, PodRejected):
        ns = f" namespace={msg.namespace}" if msg.namespace else ""
        return f"uid={msg.uid} name={msg.name}{ns} reason={msg.reason}"
    if isinstance(msg, PodDeleted):
        return f"uid={msg.uid}" + (f" by={msg.by}" if msg.by else "")
    if isinstance(msg, NodeDeleted):
        return f"node={msg.node}" + (" force" if msg.force else "") + (f" by={msg.by}" if msg.by else "")
    if isinstance(msg, PodBound):
        return f"{msg.spec.namespace}/{msg.spec.name} uid={msg.spec.uid} node={msg.node} attempt={msg.attempt_ms:.2f}ms"
    if isinstance(msg, PodUnschedulable):
        return f"uid={msg.uid} attempts={msg.attempts} {msg.message}"
    if isinstance(msg, PodStatus):
        return f"uid={msg.uid} node={msg.node} phase={msg.phase}" + (f" reason={msg.reason}" if msg.reason else "")
    if isinstance(msg, EvictionCommand):
        return f"uid={msg.uid} node={msg.node} reason={msg.reason}" + (f" by={msg.by}" if msg.by else "")
    if isinstance(msg, NodeSpec):
        a = msg.allocatable
        return f"node={msg.name} allocatable cpu={format_cpu(a.cpu)} memory={_mem(a.memory)} pods={a.pods}"
    if isinstance(msg, NodeResource):
        offer = Resources(batch_cpu=msg.batch_cpu, batch_memory=msg.batch_memory,
                          mid_cpu=msg.mid_cpu, mid_memory=msg.mid_memory)
        return f"node={msg.node} {_resources(offer)}" + (f" reason={msg.reason}" if msg.reason else "")
    if isinstance(msg, NodeSLO):
        return (f"node={msg.node} cpu-suppress={msg.cpu_suppress.threshold_percent}% "
                f"memory-evict={msg.memory_evict.threshold_percent if msg.memory_evict.enabled else 'off'}"
                + ("%" if msg.memory_evict.enabled else "") + (f" pool={msg.pool}" if msg.pool else ""))
    if isinstance(msg, NodeMetric):
        u = msg.node_usage
        allowed = f" be-cpu-allowed={format_cpu(msg.be_cpu_allowed)}" if msg.be_cpu_allowed >= 0 else ""
        return f"node={msg.node} cpu={format_cpu(u.cpu)} memory={_mem(u.memory)} pods={len(msg.pods)}{allowed}"
    if isinstance(msg, QoSEvent):
        pods = f" pods={','.join(msg.pods[:3])}{'…' if len(msg.pods) > 3 else ''}" if msg.pods else ""
        return f"node={msg.node} kind={msg.kind}" + (f" reason={msg.reason}" if msg.reason else "") + pods
    if isinstance(msg, NodeProfile):
        r = msg.prod_reclaimable
        return f"node={msg.node} prod-reclaimable cpu={format_cpu(r.cpu)} memory={_mem(r.memory)} pods={len(msg.pods)}"
    if isinstance(msg, DeadLetter):
        return f"service={msg.service} subject={msg.subject} reason={msg.reason}"
    if isinstance(msg, PodMigrationJob):
        rsv = f" reservation={msg.reservation}" if msg.reservation else ""
        return (f"job={msg.id} pod={msg.namespace}/{msg.name or msg.uid} {msg.source}→{msg.target} "
                f"phase={msg.phase}{rsv} reason={msg.reason}")
    if isinstance(msg, ConfigApplied):
        restart = f" restart-required={','.join(msg.restart_required)}" if msg.restart_required else ""
        return f"service={msg.service} version={msg.version} trigger={msg.trigger}{restart}"
    if isinstance(msg, ConfigRejected):
        return (f"service={msg.service} trigger={msg.trigger} in-force={msg.version_in_force} "
                f"{len(msg.errors)} problem(s): {'; '.join(msg.errors)}")
    d = to_builtins(msg)
    if isinstance(d, dict):
        return " ".join(f"{k}={format_time(float(v)) if _is_time(k, v) else v}" for k, v in d.items()
                        if isinstance(v, (str, int, float)) and v not in ("",))
    return str(d)


def _is_time(key: str, value: object) -> bool:
    return (key == "at" or key.endswith("_at")) and isinstance(value, (int, float)) and not isinstance(value, bool)


def format_time(at: float, now: float | None = None, style: str = "iso") -> str:
    """A message time for people: ``style`` ``iso`` → ``2026-12-02T01:07:40Z`` (UTC, whole seconds), ``ago`` →
    ``12s ago`` / ``3m4s ago`` / ``2h5m ago`` / ``in 3s`` (relative to ``now``, default the wall clock),
    ``unix`` → the seconds as sent. Times below 10^9 s are simulated clock seconds: ``t=123.4s``."""
    if style == "unix":
        return f"{at:.3f}"
    if at < 1e9:
        return f"t={at:.1f}s"
    if style == "ago":
        delta = (time.time() if now is None else now) - at
        return f"{_span(abs(delta))} ago" if delta >= 0 else f"in {_span(-delta)}"
    return datetime.fromtimestamp(at, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _span(seconds: float) -> str:
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60}s" if s % 60 else f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h{(s % 3600) // 60}m" if s % 3600 >= 60 else f"{s // 3600}h"
    return f"{s // 86400}d{(s % 86400) // 3600}h"


def message_time(msg: object) -> float | None:
    """The clock time a message carries (``at``), or None."""
    at = getattr(msg, "at", None)
    return float(at) if isinstance(at, (int, float)) and not isinstance(at, bool) and at > 0 else None


def describe(subject: str, data: bytes, time_style: str = "") -> str:
    """One human-readable line for a message on ``subject`` (decoded with its registered type):
    the subject without ``colo.v1.``, the type and :func:`key_fields`; with ``time_style`` (``iso``, ``ago``,
    ``unix``) prefixed by the message's own time (:func:`format_time`) when it carries one, else ``-``.
    Never more than one line."""
    reg = S.by_subject(subject)
    short = subject.removeprefix(S.PREFIX + ".")
    if reg is None:
        line = f"{short}  ({len(data)} bytes, unregistered subject)"
        return f"- {line}" if time_style else line
    try:
        msg = decode(data, reg.type)
    except DecodeError as exc:
        line = f"{short}  undecodable: {exc}".replace("\n", " ")
        return f"- {line}" if time_style else line
    line = f"{short}  {type(msg).__name__} {key_fields(msg)}".replace("\n", " ")
    if time_style:
        at = message_time(msg)
        line = f"{format_time(at, style=time_style) if at is not None else '-'} {line}"
    return line


async def follow_events(nats_url: str, count: int, subject: str, write: Callable[[str], None],
                        time_style: str = "", settings: RuntimeSettings | None = None,
                        on_subscribed: Callable[[], None] | None = None) -> int:
    """Subscribe to ``subject`` and ``write`` one line per message (:func:`describe`, prefixed with the
    local time of arrival and, with ``time_style``, the message's own time) until ``count`` messages (0 =
    until SIGINT/SIGTERM). Messages that arrive after the count was reached are not written. Returns the
    number of lines written. ``settings``: the link's credentials and TLS (:mod:`colo.connections`);
    ``on_subscribed``: called once subscribed (:func:`colo.cli.follow.follow_subject`)."""
    return await follow_subject(
        nats_url, subject, count,
        lambda msg, _n: f"{time.strftime('%H:%M:%S')} {describe(msg.subject, msg.data, time_style)}", write, quiet=True,
        settings=settings, on_subscribed=on_subscribed)


def _print_line(line: str) -> None:
    print(line, flush=True)


def cmd_events(args: argparse.Namespace) -> int:
    """Follow ``colo.v1.>`` (or ``--subject``) and print each message on one line until Ctrl-C or ``--count``."""
    if args.count < 0:
        err_console.print("[red]--count must be 0 (follow) or more[/]")
        return 2
    conn = connection("nats")
    until = f"{args.count} message(s) or Ctrl-C" if args.count else "Ctrl-C stops"

    def waiting() -> None:  # on stderr: stdout stays the event lines only
        err_console.print(f"waiting for events on {args.subject} ({until})", highlight=False, soft_wrap=True)

    try:
        asyncio.run(follow_events(conn.settings.nats_url, args.count, args.subject, _print_line,
                                  getattr(args, "time", "") or "", settings=conn.settings, on_subscribed=waiting))
    except Exception as exc:
        err_console.print(f"[red]cannot follow events: {escape(str(exc))}[/]", highlight=False)
        return 1
    return 0
