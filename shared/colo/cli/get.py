"""``colo get nodes|pods|migrations|workloads|podgroups|reservations``: tables from the Redis snapshot;
``colo get quotas`` from the quota stream (:mod:`colo.cli.quotas`; docs/cli.md)."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from rich.markup import escape
from rich.table import Table

from colo.cli.output import _mem, err_console
from colo.messages import PodRecord
from colo.quantity import format_cpu, format_memory

if TYPE_CHECKING:
    from colo.cli.main import Connection
    from colo.store import Store


async def _nodes_table(store: Store) -> Table:
    nodes = await store.list_nodes()
    res = await store.list_node_resources()
    alloc = await store.all_allocated()
    t = Table(title=f"{len(nodes)} nodes")
    # allocatable = what pods may request; requested = Σ requests of the pods bound there (kubectl's
    # "Allocated resources"); batch offered = the slo-manager's NodeResource, batch requested its use
    for col in ("name", "cpu allocatable", "mem allocatable", "cpu requested", "mem requested", "pods",
                "batch-cpu offered", "batch-mem offered", "batch-cpu requested"):
        t.add_column(col, justify="left" if col == "name" else "right")
    for n in sorted(nodes, key=lambda n: n.name):
        a = alloc.get(n.name)
        r = res.get(n.name)
        t.add_row(n.name, format_cpu(n.allocatable.cpu), format_memory(n.allocatable.memory),
                  format_cpu(a.cpu) if a else "0", _mem(a.memory) if a else "0",
                  f"{a.pods if a else 0}/{n.allocatable.pods}",
                  format_cpu(r.batch_cpu) if r else "-", _mem(r.batch_memory) if r else "-",
                  format_cpu(a.batch_cpu) if a else "0")
    return t


MAX_DECISION_LOOKUPS = 200
"""Pending pods whose last scheduling message ``colo get pods`` asks the scheduler for (one request each)."""


def waiting_pods(records: list[PodRecord]) -> list[str]:
    """Uids of the pods waiting for a node (phase Pending, no binding): those with a scheduling message."""
    return sorted(r.spec.uid for r in records if r.phase == "Pending" and not r.node)


async def unschedulable_messages(base_url: str, uids: list[str],
                                 concurrency: int = 16, timeout_s: float = 5.0) -> dict[str, str]:
    """uid → the scheduler's message of its last attempt (``0/N nodes are available: …``), for each
    of ``uids`` whose recorded decision (``GET /debug/pods/{uid}/decision``, docs/scheduler.md
    "Decisions") is ``Unschedulable``. Pods without a record (placed, never tried, or older than the
    scheduler's last ``decision_records`` pods) are left out; dry runs are never used.

    Raises ExplainError when the scheduler does not answer ``/healthz`` (so that an unreachable URL
    costs one timeout, not one per pod).
    """
    import aiohttp

    from colo.cli.explain import ExplainError, fetch_decision

    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s)) as http:
            async with http.get(f"{base_url.rstrip('/')}/healthz") as resp:
                if resp.status != 200:
                    raise ExplainError(f"{base_url}/healthz answered HTTP {resp.status}")
    except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
        raise ExplainError(f"scheduler {base_url} unreachable: {exc or type(exc).__name__}") from exc
    sem = asyncio.Semaphore(concurrency)

    async def one(uid: str) -> tuple[str, str] | None:
        async with sem:
            try:
                d = await fetch_decision(base_url.rstrip("/"), uid, timeout_s=timeout_s)
            except ExplainError:
                return None
        if d.get("source") == "recorded" and d.get("status") == "Unschedulable":
            return uid, str(d.get("message") or "")
        return None

    found = await asyncio.gather(*(one(u) for u in uids))
    return dict(f for f in found if f is not None)


def pod_reason(record: PodRecord, messages: dict[str, str]) -> str:
    """The reason cell: ``Unschedulable: <message>`` for a waiting pod the scheduler last found no node for,
    else the store record's reason (``Evicted``, ``OOMKilled``, ``Completed`` …), else ``-``."""
    msg = messages.get(record.spec.uid)
    if msg is not None and record.phase == "Pending" and not record.node:
        return f"Unschedulable: {msg}" if msg else "Unschedulable"
    return record.reason or "-"


def pods_table(records: list[PodRecord], messages: dict[str, str]) -> Table:
    """The ``colo get pods`` table: one row per record, sorted by namespace and name.

    ``qos`` is the effective class (:func:`colo.classes.qos_class_of`: field, label
    ``koordinator.sh/qosClass``, else derived from requests/limits as Kubernetes does, REFERENCE.md §1);
    ``cpu``/``memory`` are the requests (native, else batch, else mid); ``reason`` is :func:`pod_reason`.
    """
    from colo.classes import qos_class_of

    t = Table(title=f"{len(records)} pods")
    for col in ("namespace", "name", "uid", "phase", "node", "qos", "cpu", "memory", "reason"):
        t.add_column(col, overflow="fold")
    for p in sorted(records, key=lambda p: (p.spec.namespace, p.spec.name, p.spec.uid)):
        req = p.spec.requests
        cpu = req.cpu or req.batch_cpu or req.mid_cpu
        mem = req.memory or req.batch_memory or req.mid_memory
        t.add_row(p.spec.namespace, p.spec.name, p.spec.uid, p.phase, p.node or "-", qos_class_of(p.spec),
                  format_cpu(cpu), _mem(mem), pod_reason(p, messages))
    return t


async def _workloads(what: str, store: Store) -> Table:
    from colo.cli.get_workloads import podgroups_table, workloads_table
    from colo.workloads import decode_record

    pods = await store.list_pods()
    if what == "podgroups":
        return podgroups_table(await store.list_pod_groups(), pods)
    return workloads_table([decode_record(b) for b in (await store.list_workload_records()).values()], pods)


async def _get(what: str, conn: Connection) -> Table:
    from colo.store import Store

    settings = conn.settings
    if what == "quotas":
        from colo.cli.quotas import latest_quota_statuses, quotas_table

        return quotas_table(await latest_quota_statuses(settings.nats_url))
    store = await Store.connect(settings.redis_url, prefix=settings.store_prefix)
    try:
        if what == "nodes":
            return await _nodes_table(store)
        if what == "migrations":
            from colo.cli.migrations import migrations_table
            from colo.migrations import list_jobs

            return migrations_table(await list_jobs(store), time.time())
        if what in ("workloads", "podgroups"):
            return await _workloads(what, store)
        if what == "reservations":
            from colo.cli.reserve import get_reservations

            return await get_reservations(store)
        records = await store.list_pods()
    finally:
        await store.close()
    messages: dict[str, str] = {}
    waiting = waiting_pods(records)
    if waiting and conn.scheduler_url:
        from colo.cli.explain import ExplainError

        try:
            messages = await unschedulable_messages(conn.scheduler_url, waiting[:MAX_DECISION_LOOKUPS])
        except ExplainError as exc:
            err_console.print(f"[yellow]{escape(str(exc))}: reasons of waiting pods are the store's[/]",
                              highlight=False, soft_wrap=True)
        if len(waiting) > MAX_DECISION_LOOKUPS:
            err_console.print(f"[dim]scheduler messages of the first {MAX_DECISION_LOOKUPS} of {len(waiting)} "
                              "waiting pods only; `colo explain UID` for the others[/]", highlight=False)
    elif waiting:
        err_console.print("[dim]no scheduler URL (COLO_SCHEDULER_URL or colo up's): waiting pods show the "
                          "store's reason, not the scheduler's message[/]", highlight=False, soft_wrap=True)
    return pods_table(records, messages)
