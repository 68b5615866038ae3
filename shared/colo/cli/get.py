"""``colo get nodes|pods|migrations|workloads|podgroups|reservations [NAME]``: tables from the Redis snapshot
(docs/cli.md "Reading the cluster"); ``colo get quotas`` from the quota stream (:mod:`colo.cli.quotas`). Pods and
nodes also as ``-o wide`` (more columns), ``-o json`` and ``-o yaml`` (the store's records); pods filtered by
``-n NAMESPACE`` (every namespace by default, as ``-A``)."""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import time
from typing import TYPE_CHECKING, Any

from rich.markup import escape
from rich.table import Table

from colo.cli.output import _mem, console, err_console
from colo.codec import to_builtins
from colo.messages import NodeResource, NodeSpec, PodRecord, Resources
from colo.podref import RefError, select_pods
from colo.quantity import format_cpu, format_memory
from colo.store_rejected import DELETED_REASON, REJECTED_REASON

if TYPE_CHECKING:
    from colo.cli.connection import Connection
    from colo.store import Store


async def _nodes_table(store: Store, wide: bool = False, name: str = "") -> Table:
    nodes = await store.list_nodes()
    if name:
        nodes = [n for n in nodes if n.name == name]
        if not nodes:
            raise RefError(f"no node {name!r} in the store")
    return nodes_table(nodes, await store.list_node_resources(), await store.all_allocated(), wide)


def nodes_table(nodes: list[NodeSpec], res: dict[str, NodeResource], alloc: dict[str, Resources],
                wide: bool = False) -> Table:
    """The ``colo get nodes`` table: ``cordoned`` (Kubernetes ``spec.unschedulable``: ``yes`` = no new pods),
    allocatable (what pods may request), requested (Σ requests of the pods bound there, kubectl's "Allocated
    resources"), batch offered (the slo-manager's NodeResource) and batch requested (its use); ``wide`` adds
    mid-cpu/mid-memory offered, the taints and the labels."""
    t = Table(title=f"{len(nodes)} nodes")
    cols = ["name", "cordoned", "cpu allocatable", "mem allocatable", "cpu requested", "mem requested", "pods",
            "batch-cpu offered", "batch-mem offered", "batch-cpu requested"]
    if wide:
        cols += ["mid-cpu offered", "mid-mem offered", "taints", "labels"]
    for col in cols:
        t.add_column(col, justify="left" if col in ("name", "cordoned", "taints", "labels") else "right",
                     overflow="fold")
    for n in sorted(nodes, key=lambda n: n.name):
        a = alloc.get(n.name)
        r = res.get(n.name)
        row = [n.name, "yes" if n.unschedulable else "no", format_cpu(n.allocatable.cpu),
               format_memory(n.allocatable.memory), format_cpu(a.cpu) if a else "0", _mem(a.memory) if a else "0",
               f"{a.pods if a else 0}/{n.allocatable.pods}",
               format_cpu(r.batch_cpu) if r else "-", _mem(r.batch_memory) if r else "-",
               format_cpu(a.batch_cpu) if a else "0"]
        if wide:
            row += [format_cpu(r.mid_cpu) if r else "-", _mem(r.mid_memory) if r else "-",
                    ", ".join(f"{x.key}={x.value}:{x.effect}" if x.value else f"{x.key}:{x.effect}"
                              for x in n.taints) or "-",
                    ", ".join(f"{k}={v}" for k, v in sorted(n.labels.items())) or "-"]
        t.add_row(*row)
    return t


GET_KINDS = {"pods": "pods", "pod": "pods", "po": "pods", "nodes": "nodes", "node": "nodes", "no": "nodes",
             "migrations": "migrations", "migration": "migrations", "workloads": "workloads",
             "workload": "workloads", "podgroups": "podgroups", "podgroup": "podgroups",
             "reservations": "reservations", "reservation": "reservations", "quotas": "quotas", "quota": "quotas"}
"""``colo get`` kinds, singular, plural and kubectl's short names, → the table."""


MAX_DECISION_LOOKUPS = 200
"""Pending pods whose last scheduling message ``colo get pods`` asks the scheduler for (one request each)."""


WAITING_RE = re.compile(r"^(\w+: )?waiting for ")
"""How the message of a pod held at Permit begins: the Permit plugin's name, then ``waiting for`` (the
Coscheduling plugin's ``Coscheduling: waiting for gang …``)."""


def waiting_pods(records: list[PodRecord]) -> list[str]:
    """Uids of the pods waiting for a node (phase Pending, no binding): those with a scheduling message."""
    return sorted(r.spec.uid for r in records if r.phase == "Pending" and not r.node)


async def unschedulable_messages(base_url: str, uids: list[str],
                                 concurrency: int = 16, timeout_s: float = 5.0) -> dict[str, str]:
    """uid → the scheduler's message of its last attempt (``0/N nodes are available: …``), for each
    of ``uids`` whose recorded decision (``GET /debug/pods/{uid}/decision``, docs/scheduler.md
    "Decisions") is ``Unschedulable`` — or ``Wait``: a gang member held at Permit, whose message is ``waiting for
    gang ns/g: 3 of 8 placed`` (:func:`pod_reason` shows it as it is). Pods without a record (placed, never tried, or older than the
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
        if d.get("source") == "recorded" and d.get("status") in ("Unschedulable", "Wait"):
            return uid, str(d.get("message") or "")
        return None

    found = await asyncio.gather(*(one(u) for u in uids))
    return dict(f for f in found if f is not None)


def pod_status(record: PodRecord) -> str:
    """The status cell (kubectl's STATUS): ``Rejected`` for a pod admission refused, ``Deleted`` for one deleted
    while pending (:mod:`colo.store_rejected`) or stopped on its node by a deletion (reason exactly
    :data:`~colo.messages.DELETE_EVICTION_REASON`, as the node agent reports it), else the phase."""
    if record.phase == "Failed":
        if record.reason == DELETED_REASON:
            return DELETED_REASON
        for word in (REJECTED_REASON, DELETED_REASON):
            if record.reason.startswith(word + ":"):
                return word
    return record.phase


def pod_reason(record: PodRecord, messages: dict[str, str]) -> str:
    """The reason cell: ``Unschedulable: <message>`` for a waiting pod the scheduler last found no node for
    (``gang ns/g sent back: …``, ``gang ns/g wait timed out after 600 s`` for a gang member released), the
    message itself for a gang member held at Permit (``waiting for gang ns/g: 3 of 8 placed``),
    else the store record's reason (``Evicted``, ``OOMKilled``, ``Completed``, admission's problems of a
    ``Rejected`` pod …, without the word :func:`pod_status` already shows), else ``-``."""
    msg = messages.get(record.spec.uid)
    if msg is not None and record.phase == "Pending" and not record.node:
        if WAITING_RE.match(msg):  # held at Permit (a gang member): it has room, not a node yet
            return msg
        return f"Unschedulable: {msg}" if msg else "Unschedulable"
    status = pod_status(record)
    if status != record.phase:
        return record.reason.removeprefix(status).removeprefix(":").strip() or "-"
    return record.reason or "-"


def requests_cell(r: Resources) -> str:
    """A pod's requests labelled by kind: ``cpu=500m mem=1Gi``, ``batch-cpu=2 batch-mem=4Gi`` (a BE pod's cores
    are batch-cpu, never shown as cpu), ``mid-cpu=…``; ``-`` when none."""
    parts = [f"{label}={fmt(getattr(r, field))}" for field, label, fmt in (
        ("cpu", "cpu", format_cpu), ("memory", "mem", _mem), ("batch_cpu", "batch-cpu", format_cpu),
        ("batch_memory", "batch-mem", _mem), ("mid_cpu", "mid-cpu", format_cpu), ("mid_memory", "mid-mem", _mem))
        if getattr(r, field)]
    return " ".join(parts) or "-"


def _age(at: float, now: float) -> str:
    from colo.cli.events import format_time

    return format_time(at, now, "ago").removesuffix(" ago") if at else "-"


def pods_table(records: list[PodRecord], messages: dict[str, str], wide: bool = False,
               now: float | None = None) -> Table:
    """The ``colo get pods`` table: one row per record, sorted by namespace and name.

    ``status`` is :func:`pod_status`; ``qos`` the effective class (:func:`colo.classes.qos_class_of`: field,
    label ``koordinator.sh/qosClass``, else derived from requests/limits as Kubernetes does, REFERENCE.md §1);
    ``requests`` labelled by kind (:func:`requests_cell`); ``reason`` is :func:`pod_reason`. ``wide`` adds the
    priority class and value, the owner, the age (since the last change) and the limits.
    """
    from colo.classes import priority_class_of, qos_class_of

    now = time.time() if now is None else now
    t = Table(title=f"{len(records)} pods")
    cols = ["namespace", "name", "uid", "status", "node", "qos", "requests"]
    if wide:
        cols += ["priority", "owner", "age", "limits"]
    for col in (*cols, "reason"):
        t.add_column(col, overflow="fold")
    for p in sorted(records, key=lambda p: (p.spec.namespace, p.spec.name, p.spec.uid)):
        s = p.spec
        row = [s.namespace, s.name, s.uid, pod_status(p), p.node or "-", qos_class_of(s), requests_cell(s.requests)]
        if wide:
            prio = f"{priority_class_of(s)}/{s.priority}" if s.priority is not None else priority_class_of(s)
            owner = f"{s.owner.kind.lower()}/{s.owner.name}" if s.owner else "-"
            row += [prio, owner, _age(p.updated_at, now), requests_cell(s.limits)]
        t.add_row(*row, pod_reason(p, messages))
    return t


async def _workloads(what: str, store: Store) -> Table:
    from colo.cli.get_workloads import podgroups_table, workloads_table
    from colo.workloads import decode_record

    pods = await store.list_pods()
    if what == "podgroups":
        return podgroups_table(await store.list_pod_groups(), pods)
    return workloads_table([decode_record(b) for b in (await store.list_workload_records()).values()], pods)


async def _get(what: str, conn: Connection, namespace: str = "", name: str = "", wide: bool = False) -> Table:
    from colo.store import Store

    settings = conn.settings
    if what == "quotas":
        from colo.cli.quotas import latest_quota_statuses, quotas_table

        return quotas_table(await latest_quota_statuses(settings.nats_url, settings=settings))
    store = await Store.connect(settings.redis_url, prefix=settings.store_prefix, settings=settings)
    try:
        if what == "nodes":
            return await _nodes_table(store, wide, name)
        if what == "migrations":
            from colo.cli.migrations import migrations_table
            from colo.migrations import list_jobs

            return migrations_table(await list_jobs(store), time.time())
        if what in ("workloads", "podgroups"):
            return await _workloads(what, store)
        if what == "reservations":
            from colo.cli.reserve import get_reservations

            return await get_reservations(store)
        records = select_pods(await store.list_pods(), name, namespace)
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
    return pods_table(records, messages, wide)


async def records(what: str, conn: Connection, namespace: str = "", name: str = "") -> Any:
    """The store's records of pods or nodes as plain data, for ``-o json|yaml``: one object for a ``name``, else
    ``{"kind": "List", "items": [...]}``. A pod is its record (spec, phase, node, reason, times); a node its
    NodeSpec with ``resource`` (the NodeResource offered) and ``allocated`` (Σ requests bound there)."""
    from colo.store import Store

    settings = conn.settings
    store = await Store.connect(settings.redis_url, prefix=settings.store_prefix, settings=settings)
    try:
        if what == "pods":
            items = [to_builtins(r) for r in sorted(select_pods(await store.list_pods(), name, namespace),
                                                    key=lambda r: (r.spec.namespace, r.spec.name))]
        else:
            nodes = [n for n in await store.list_nodes() if not name or n.name == name]
            if name and not nodes:
                raise RefError(f"no node {name!r} in the store")
            res, alloc = await store.list_node_resources(), await store.all_allocated()
            items = [{**to_builtins(n), "resource": to_builtins(res[n.name]) if n.name in res else None,
                      "allocated": to_builtins(alloc.get(n.name, Resources()))}
                     for n in sorted(nodes, key=lambda n: n.name)]
    finally:
        await store.close()
    return items[0] if name else {"kind": "List", "items": items}


def dump(data: Any, fmt: str) -> str:
    """``data`` as indented JSON or block YAML."""
    if fmt == "json":
        return json.dumps(data, indent=2, sort_keys=False)
    import yaml

    return str(yaml.safe_dump(data, sort_keys=False, default_flow_style=False))


def cmd_get(args: argparse.Namespace, conn: Connection) -> int:
    """Run ``colo get``: exit 0 when shown, 1 when the store cannot be read or NAME is not found."""
    what = GET_KINDS[args.what]
    namespace = "" if getattr(args, "all_namespaces", False) else getattr(args, "namespace", "")
    name, output = getattr(args, "name", ""), getattr(args, "output", "table")
    if what not in ("pods", "nodes") and (name or output != "table"):
        err_console.print(f"[red]colo get {what}: NAME and -o are for pods and nodes[/]")
        return 2
    try:
        if output in ("json", "yaml"):
            print(dump(asyncio.run(records(what, conn, namespace, name)), output))
        else:
            console.print(asyncio.run(_get(what, conn, namespace, name, output == "wide")))
    except RefError as exc:
        err_console.print(f"[red]{escape(str(exc))}[/]", highlight=False, soft_wrap=True)
        return 1
    except Exception as exc:
        err_console.print(f"[red]cannot read the store: {escape(str(exc))}[/]", highlight=False)
        return 1
    return 0
