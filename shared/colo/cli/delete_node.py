"""``colo delete node NAME [--force]``: forget a node whose machine is gone (docs/cli.md "Deleting a node").

The node is looked up in the store; while pods are bound to it the deletion is refused (:class:`NodeBusy`,
naming them) unless ``force``. A :class:`~colo.messages.NodeDeleted` goes on ``node.deleted.<node>``; the
scheduler ends the node's pods when forced (``Failed``, reason ``Deleted: node <node> deleted by <by>``),
then removes the node from the store and from its candidates. Then, unless ``--no-wait``, the command waits
until the store no longer holds the node. A node agent still running registers it again at its next
reconciliation. Exit codes as ``colo delete pod``: 0 deleted, 1 not found / refused / store or bus failure,
3 still there after the wait (is the scheduler running?). ``DELETE /v1/nodes/{name}`` shares this module.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import TYPE_CHECKING

from rich.markup import escape

from colo.cli.output import console, err_console
from colo.messages import NodeDeleted, PodRecord

if TYPE_CHECKING:
    from colo.bus import Bus
    from colo.cli.connection import Connection
    from colo.store import Store

POLL_S = 0.1
"""How often the store is read while waiting for the node to be gone (seconds)."""


class NodeNotFound(LookupError):
    """The store holds no node of that name."""


class NodeBusy(RuntimeError):
    """Pods are still bound to the node (``pods``: their records) and the deletion was not forced."""

    def __init__(self, node: str, pods: list[PodRecord]) -> None:
        self.node, self.pods = node, pods
        super().__init__(f"node {node} still has {len(pods)} pod(s) bound: {', '.join(pod_names(pods))} "
                         "(delete them first, or force: they are ended)")


def pod_names(pods: list[PodRecord]) -> list[str]:
    """``namespace/name`` of each pod, in order."""
    return [f"{p.spec.namespace}/{p.spec.name}" for p in pods]


async def bound_pods(store: Store, node: str) -> list[PodRecord]:
    """The pods bound to ``node`` that have not ended, sorted by namespace and name."""
    recs = [r for r in await store.pods_on(node) if r.phase not in ("Succeeded", "Failed")]
    return sorted(recs, key=lambda r: (r.spec.namespace, r.spec.name))


async def send_deletion(store: Store, bus: Bus, node: str, force: bool, by: str) -> list[PodRecord]:
    """Check node ``node`` and publish its :class:`NodeDeleted`; returns the pods bound to it (ended by the
    scheduler when ``force``). Raises :class:`NodeNotFound`, :class:`NodeBusy` (not forced, pods bound), store
    and bus errors as they come."""
    from colo import subjects as S

    if not S.is_token(node) or await store.get_node(node) is None:
        raise NodeNotFound(f"no node {node!r}")
    pods = await bound_pods(store, node)
    if pods and not force:
        raise NodeBusy(node, pods)
    at = time.time()
    msg = NodeDeleted(node=node, at=at, by=by, force=force)
    await bus.publish(S.NODE_DELETED, msg, msg_id=f"node-delete-{node}-{at!r}", node=node)
    return pods


async def wait_gone(store: Store, node: str, timeout_s: float) -> bool:
    """Read the store every :data:`POLL_S` until it holds no node ``node`` (True) or ``timeout_s`` passed
    (False)."""
    deadline = time.monotonic() + timeout_s
    while True:
        if await store.get_node(node) is None:
            return True
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(POLL_S)


async def delete_node(conn: Connection, node: str, force: bool, wait_s: float | None,
                      by: str = "colo delete") -> tuple[list[PodRecord], bool | None]:
    """Delete node ``node`` (module doc); returns the pods that were bound to it and (with ``wait_s``) whether
    it was seen gone, None when not waited. Raises as :func:`send_deletion`."""
    from colo.bus import Bus
    from colo.store import Store

    settings = conn.settings
    store = await Store.connect(settings.redis_url, prefix=settings.store_prefix, settings=settings)
    try:
        bus = await Bus.connect(settings.nats_url, "cli", connect_attempts=3, settings=settings)
        try:
            await bus.ensure_streams()
            pods = await send_deletion(store, bus, node, force, by)
        finally:
            await bus.close()
        gone = await wait_gone(store, node, wait_s) if wait_s is not None else None
        return pods, gone
    finally:
        await store.close()


def cmd_delete_node(args: argparse.Namespace, conn: Connection) -> int:
    """Run ``colo delete node`` (module doc for the exit codes)."""
    wait_s = None if args.no_wait else args.wait_s
    try:
        pods, gone = asyncio.run(delete_node(conn, args.name, args.force, wait_s))
    except (NodeNotFound, NodeBusy) as exc:
        err_console.print(f"[red]{escape(str(exc))}[/]", highlight=False, soft_wrap=True)
        return 1
    except Exception as exc:
        err_console.print(f"[red]cannot delete: {escape(str(exc))}[/]", highlight=False, soft_wrap=True)
        return 1
    what = f"node/{args.name}"
    ended = f"; its pods end: {', '.join(pod_names(pods))}" if pods else ""
    if gone is None:
        console.print(f"{escape(what)} deletion sent{escape(ended)}", highlight=False, soft_wrap=True)
        return 0
    if not gone:
        console.print(f"[yellow]{escape(what)} deletion sent{escape(ended)} but it is still in the store after "
                      f"{wait_s:g} s (is the scheduler running?)[/]", highlight=False, soft_wrap=True)
        return 3
    console.print(f"{escape(what)} deleted{escape(ended)}", highlight=False, soft_wrap=True)
    return 0
