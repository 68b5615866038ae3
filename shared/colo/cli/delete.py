"""``colo delete pod NAME [-n NS]``: end a pod through the bus (docs/cli.md "Deleting a pod").

The pod is looked up in the store (by uid, ``NAMESPACE/NAME`` or ``NAME -n NAMESPACE``); a
:class:`~colo.messages.PodDeleted` goes on ``pod.deleted``. The scheduler that owns the pod drops it from its
queue and marks it ``Failed``/``Deleted: <by>`` in the store when it is pending, or has its node agent stop it
when bound (``pod.evict.<node>`` with reason ``Deleted``; the node agent reports ``Failed``/``Deleted`` and the
scheduler frees its room without requeueing it). Then, unless ``--no-wait``, the command waits until the store
shows the pod ended. Exit codes: 0 deleted (or already ended), 1 not found / store or bus failure, 3 no end seen
within the wait (is the scheduler running?).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import TYPE_CHECKING

from rich.markup import escape

from colo.cli.output import console, err_console
from colo.messages import PodDeleted, PodRecord
from colo.podref import RefError, select_pods

if TYPE_CHECKING:
    from colo.cli.connection import Connection
    from colo.store import Store

POLL_S = 0.1
"""How often the store is read while waiting for the pod to end (seconds)."""


def deletion_id(uid: str, at: float) -> str:
    """The message id of a deletion of ``uid`` sent at ``at`` (clock seconds): one per request."""
    return f"delete-{uid}-{at!r}"


def ended(rec: PodRecord | None) -> bool:
    """Whether a pod record shows the pod over (Succeeded or Failed; None = gone)."""
    return rec is None or rec.phase in ("Succeeded", "Failed")


async def wait_ended(store: Store, uid: str, timeout_s: float) -> PodRecord | None:
    """Read the store every :data:`POLL_S` until pod ``uid`` ended (:func:`ended`) or ``timeout_s`` passed;
    the last record read."""
    deadline = time.monotonic() + timeout_s
    while True:
        rec = await store.get_pod(uid)
        if ended(rec) or time.monotonic() >= deadline:
            return rec
        await asyncio.sleep(POLL_S)


async def delete_pod(conn: Connection, ref: str, namespace: str, wait_s: float | None,
                     by: str = "colo delete") -> tuple[PodRecord, PodRecord | None]:
    """Delete the pod ``ref`` names (module doc); returns its record before and (with ``wait_s``) after, or
    None after when not waited. Raises RefError when no single pod matches, store and bus errors as they come."""
    from colo import subjects as S
    from colo.bus import Bus
    from colo.store import Store

    settings = conn.settings
    store = await Store.connect(settings.redis_url, prefix=settings.store_prefix, settings=settings)
    try:
        (rec,) = select_pods(await store.list_pods(), ref, namespace)
        if ended(rec):
            return rec, rec
        bus = await Bus.connect(settings.nats_url, "cli", connect_attempts=3, settings=settings)
        try:
            await bus.ensure_streams()
            at = time.time()
            msg = PodDeleted(uid=rec.spec.uid, at=at, by=by, namespace=rec.spec.namespace, name=rec.spec.name)
            await bus.publish(S.POD_DELETED, msg, msg_id=deletion_id(rec.spec.uid, at))
        finally:
            await bus.close()
        after = await wait_ended(store, rec.spec.uid, wait_s) if wait_s is not None else None
        return rec, after
    finally:
        await store.close()


def cmd_delete(args: argparse.Namespace, conn: Connection) -> int:
    """Run ``colo delete pod`` (module doc for the exit codes)."""
    wait_s = None if args.no_wait else args.wait_s
    try:
        before, after = asyncio.run(delete_pod(conn, args.name, getattr(args, "namespace", ""), wait_s))
    except RefError as exc:
        err_console.print(f"[red]{escape(str(exc))}[/]", highlight=False, soft_wrap=True)
        return 1
    except Exception as exc:
        err_console.print(f"[red]cannot delete: {escape(str(exc))}[/]", highlight=False, soft_wrap=True)
        return 1
    s = before.spec
    what = f"pod/{s.name} ({s.namespace}, uid {s.uid})"
    if ended(before):
        console.print(f"{escape(what)} already ended: {before.phase} {escape(before.reason)}", highlight=False)
        return 0
    how = f"bound to {before.node}: its node agent stops it" if before.node else "pending: it leaves the queue"
    if wait_s is None:
        console.print(f"{escape(what)} deletion sent ({how})", highlight=False)
        return 0
    if after is not None and not ended(after):
        console.print(f"[yellow]{escape(what)} deletion sent ({how}) but it has not ended within {wait_s:g} s "
                      "(is the scheduler running?)[/]", highlight=False, soft_wrap=True)
        return 3
    state = f"{after.phase} ({after.reason})" if after is not None else "gone"
    console.print(f"{escape(what)} deleted: {escape(state)}", highlight=False, soft_wrap=True)
    return 0
