"""``colo reserve NAME …`` (submit a Reservation on ``reservation.submitted``) and ``colo get reservations``
and ``colo delete reservation NAME`` (docs/cli.md "Reservations")."""

from __future__ import annotations

import argparse
import asyncio
import re
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.markup import escape
from rich.table import Table

from colo.cli.migrations import age
from colo.cli.output import _mem, console, err_console
from colo.messages import ReservationOwner, ReservationSpec, Resources
from colo.quantity import format_cpu, parse_cpu, parse_memory
from colo.reservation_spec import reservation_problems

if TYPE_CHECKING:
    from colo.reservations import Reservation
    from colo.settings import RuntimeSettings
    from colo.store import Store

_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
_UNIT_S = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> float:
    """Seconds of ``90``, ``90s``, ``15m``, ``2h``, ``1.5d``. Raises ValueError otherwise."""
    m = _DURATION_RE.match(text)
    if m is None:
        raise ValueError(f"{text!r} is not a duration (e.g. 90s, 15m, 2h, 1d)")
    return float(m.group(1)) * _UNIT_S[m.group(2)]


def build_spec(args: argparse.Namespace, now: float) -> tuple[ReservationSpec | None, list[str]]:
    """The ReservationSpec of ``colo reserve``'s arguments created at ``now`` (wall clock), or None and every
    problem, each naming its option."""
    problems: list[str] = []
    cpu = memory = 0
    try:
        cpu = parse_cpu(args.cpu)
    except ValueError as exc:
        problems.append(f"--cpu: {exc}")
    try:
        memory = parse_memory(args.memory)
    except ValueError as exc:
        problems.append(f"--memory: {exc}")
    batch_cpu = batch_memory = 0
    try:
        batch_cpu = parse_cpu(args.batch_cpu)
    except ValueError as exc:
        problems.append(f"--batch-cpu: {exc}")
    try:
        batch_memory = parse_memory(args.batch_memory)
    except ValueError as exc:
        problems.append(f"--batch-memory: {exc}")
    ttl_s = 0.0
    try:
        ttl_s = parse_duration(args.ttl)
    except ValueError as exc:
        problems.append(f"--ttl: {exc}")
    owners = [ReservationOwner(uid=u) for u in args.owner_uid]
    for app in args.owner_app:
        if app.count("/") != 1 or not all(app.split("/")):
            problems.append(f"--owner-app: {app!r} is not NAMESPACE/APP")
        else:
            owners.append(ReservationOwner(workload=app))
    labels: dict[str, str] = {}
    for kv in args.owner_label:
        key, sep, value = kv.partition("=")
        if not sep or not key:
            problems.append(f"--owner-label: {kv!r} is not KEY=VALUE")
        else:
            labels[key] = value
    if labels:
        owners.append(ReservationOwner(match_labels=labels, namespace=args.namespace or ""))
    if not owners and not problems:
        problems.append("an owner is needed: --owner-app NS/APP, --owner-uid UID or --owner-label KEY=VALUE")
    if problems:
        return None, problems
    spec = ReservationSpec(name=args.name, namespace=args.namespace or "default", node=args.node,
                           requests=Resources(cpu=cpu, memory=memory, batch_cpu=batch_cpu,
                                              batch_memory=batch_memory), owners=owners,
                           allocate_once=not args.reusable, ttl_s=ttl_s, created_at=now)
    problems = reservation_problems(spec)
    return (None, problems) if problems else (spec, [])


async def _publish(spec: ReservationSpec, nats_url: str, attempts: int, settings: RuntimeSettings | None = None
                   ) -> None:
    from colo import subjects as S
    from colo.bus import Bus

    bus = await Bus.connect(nats_url, "cli", connect_attempts=attempts, settings=settings)
    try:
        await bus.ensure_streams()
        await bus.publish(S.RESERVATION_SUBMITTED, spec, msg_id=f"reservation-{spec.name}-{spec.created_at!r}")
    finally:
        await bus.close()


def cmd_reserve(args: argparse.Namespace) -> int:
    """Check the arguments, then publish the reservation; nothing on any error (exit 1)."""
    from colo.cli.connection import CONNECT_ATTEMPTS, connection

    spec, problems = build_spec(args, time.time())
    if spec is None:
        for p in problems:
            console.print(f"[red]{escape(p)}[/]", highlight=False, soft_wrap=True)
        console.print(f"[red]{len(problems)} error(s); nothing submitted[/]")
        return 1
    try:
        settings = connection("nats").settings
        asyncio.run(_publish(spec, settings.nats_url, CONNECT_ATTEMPTS, settings))
    except Exception as exc:  # connection problems: report, do not trace back
        err_console.print(f"[red]cannot publish: {escape(str(exc))}[/]", highlight=False)
        return 1
    where = f"on {spec.node}" if spec.node else "the scheduler picks the node"
    console.print(f"reservation/{spec.name} submitted ({where}; `colo get reservations` shows it)")
    return 0


def add_reserve_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register ``colo reserve``."""
    p = sub.add_parser("reserve", help="hold room on a node ahead of time for an owner's pods")
    p.add_argument("name", help="reservation name (a Kubernetes object name)")
    p.add_argument("--cpu", default="0", help="cores (4, 500m)")
    p.add_argument("--memory", default="0", help="bytes (8Gi, 512Mi)")
    p.add_argument("--batch-cpu", default="0",
                   help="batch cores (kubernetes.io/batch-cpu: 16, 500m); placed as a BE pod of batch priority")
    p.add_argument("--batch-memory", default="0", help="batch bytes (kubernetes.io/batch-memory: 32Gi)")
    p.add_argument("--owner-app", action="append", default=[], metavar="NS/APP",
                   help="pods of this workload (namespace/app) may consume it (repeatable)")
    p.add_argument("--owner-uid", action="append", default=[], metavar="UID", help="this pod may (repeatable)")
    p.add_argument("--owner-label", action="append", default=[], metavar="KEY=VALUE",
                   help="pods with all these labels (in --namespace when given) may (repeatable)")
    p.add_argument("--namespace", default=None, help="namespace of the reservation and of --owner-label")
    p.add_argument("--node", default="", help="reserve on this node (default: the scheduler places it)")
    p.add_argument("--ttl", default="1h", help="expires this long after submission (90s, 15m, 2h, 1d)")
    p.add_argument("--reusable", action="store_true",
                   help="keep it for the owners' next pods (a pod ending gives its room back)")
    p.set_defaults(func=cmd_reserve)


def owners_text(r: Reservation) -> str:
    """The owners cell: ``uid=…``, ``app=ns/app``, ``Kind/name``, ``ns:k=v,…``, comma separated."""
    parts = [f"uid={r.owner_uid}"] if r.owner_uid else []
    if r.owner_workload:
        parts.append(f"app={r.owner_workload}")
    for o in r.owners:
        sel = [f"uid={o.uid}"] if o.uid else []
        if o.workload:
            sel.append(f"app={o.workload}")
        if o.owner_kind or o.owner_name:
            sel.append(f"{o.owner_kind or '*'}/{o.owner_name or '*'}")
        if o.namespace:
            sel.append(f"ns={o.namespace}")
        sel += [f"{k}={v}" for k, v in sorted(o.match_labels.items())]
        parts.append(" ".join(sel))
    return ", ".join(parts) or "-"


def reservations_table(reservations: Sequence[Reservation], now: float) -> Table:
    """One row per reservation, oldest first: name, state, node, owners, cpu, memory, batch-cpu and
    batch-memory (held, or asked for while Pending; ``-`` for none), once/reusable, expiry (from ``now``, clock
    seconds), last consumer, reason."""
    t = Table(title=f"{len(reservations)} reservations")
    for col in ("name", "state", "node", "owners", "cpu", "memory", "batch-cpu", "batch-memory", "kind", "expires",
                "consumed by", "reason"):
        t.add_column(col, overflow="fold")
    for r in sorted(reservations, key=lambda r: (r.created_at, r.name)):
        left = r.expires_at - now
        expires = ("in " + age(left)) if left > 0 else (age(-left) + " ago")
        h = r.held
        t.add_row(r.name, r.state, r.node or "-", owners_text(r), format_cpu(h.cpu), _mem(h.memory),
                  format_cpu(h.batch_cpu) if h.batch_cpu else "-", _mem(h.batch_memory) if h.batch_memory else "-",
                  "once" if r.allocate_once else "reusable", expires, r.consumed_by or "-", r.reason or "-")
    return t


async def get_reservations(store: Store) -> Table:
    """``colo get reservations``: every reservation the store still has (pending, available, ended within the
    history), by the wall clock (the services' clock under ``colo up``)."""
    from colo.reservations import ReservationStore

    return reservations_table(await ReservationStore(store.redis, store.keys).all(), time.time())


DELETED_REASON = "deleted by colo delete"
"""The reason an ended reservation shows after ``colo delete reservation``."""


async def delete_reservation(store: Store, name: str, at: float) -> tuple[Reservation, Reservation | None]:
    """End reservation ``name`` as ``Aborted`` at ``at`` (wall-clock seconds): a Pending one leaves the
    scheduler's placement (:meth:`~colo.reservations.ReservationStore.end_pending`), an Available one gives its
    held room back to its node (:meth:`~colo.reservations.ReservationStore.release`); one that already ended
    changes nothing. Returns its record before and after (None after when it had ended). Raises LookupError
    when the store has no reservation of that name."""
    from colo.reservations import ReservationStore

    rs = ReservationStore(store.redis, store.keys)
    before = await rs.get(name)
    if before is None:
        raise LookupError(f"no reservation {name!r} (`colo get reservations` lists them)")
    if before.state == "Pending":
        await rs.end_pending(name, "Aborted", DELETED_REASON, at)
    elif before.state == "Available":
        await rs.release(name, at, DELETED_REASON)
    else:
        return before, None
    return before, await rs.get(name)


def cmd_delete_reservation(args: argparse.Namespace, settings: RuntimeSettings) -> int:
    """``colo delete reservation NAME``: exit 0 when it ended now or had ended, 1 when unknown or on a store
    error."""
    from colo.store import Store

    async def run() -> tuple[Reservation, Reservation | None]:
        store = await Store.connect(settings.redis_url, prefix=settings.store_prefix, settings=settings)
        try:
            return await delete_reservation(store, args.name, time.time())
        finally:
            await store.close()

    try:
        before, after = asyncio.run(run())
    except LookupError as exc:
        err_console.print(f"[red]{escape(str(exc.args[0]))}[/]", highlight=False, soft_wrap=True)
        return 1
    except Exception as exc:
        err_console.print(f"[red]cannot delete: {escape(str(exc))}[/]", highlight=False, soft_wrap=True)
        return 1
    if after is None:
        console.print(f"reservation/{escape(before.name)} already ended: {before.state} {escape(before.reason)}",
                      highlight=False, soft_wrap=True)
        return 0
    freed = f"; its room on {before.node} is free again" if before.state == "Available" else ""
    console.print(f"reservation/{escape(before.name)} deleted: {after.state}{freed}", highlight=False,
                  soft_wrap=True)
    return 0
