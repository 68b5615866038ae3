"""``colo describe pod|node NAME``: everything the store knows of one pod or node, kubectl-style
(docs/cli.md "Reading the cluster"): for a pod its status and reason, classes, owner and gang, requests and
limits by kind, placement constraints and the flags the descheduler reads (mirror, static, local storage); for a
node its cordon, capacity and allocatable, what the slo-manager offers, what is requested and its pods."""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import TYPE_CHECKING

from rich.markup import escape

from colo.cli.events import format_time
from colo.cli.get import pod_reason, pod_status, requests_cell
from colo.cli.output import _mem, console, err_console
from colo.messages import NodeResource, NodeSpec, PodRecord, Resources
from colo.podref import RefError, select_pods
from colo.quantity import format_cpu

if TYPE_CHECKING:
    from colo.cli.connection import Connection


def _when(at: float, now: float) -> str:
    return f"{format_time(at, style='iso')} ({format_time(at, now, 'ago')})" if at else "-"


def _map(d: dict[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(d.items())) or "-"


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def pod_lines(rec: PodRecord, now: float) -> list[tuple[str, str]]:
    """``(field, value)`` rows of ``colo describe pod``."""
    from colo.classes import priority_class_of, qos_class_of

    s = rec.spec
    aff = s.affinity.node_affinity if s.affinity and s.affinity.node_affinity else None
    rows = [("Name", s.name), ("Namespace", s.namespace), ("UID", s.uid), ("Status", pod_status(rec)),
            ("Reason", pod_reason(rec, {})), ("Node", rec.node or "-"), ("QoS class", qos_class_of(s)),
            ("Priority", f"{priority_class_of(s)}" + (f" ({s.priority})" if s.priority is not None else "")),
            ("Preemption policy", s.preemption_policy), ("Scheduler", s.scheduler_name),
            ("Owner", f"{s.owner.kind}/{s.owner.name} ({s.owner.uid})" if s.owner else "-"),
            ("Gang", f"{s.gang.name} (min {s.gang.min_member}, timeout {s.gang.timeout_s:g}s)" if s.gang else "-"),
            ("Labels", _map(s.labels)), ("Annotations", _map(s.annotations)),
            ("Requests", requests_cell(s.requests)), ("Limits", requests_cell(s.limits)),
            ("Node selector", _map(s.node_selector)),
            ("Node affinity", (f"{len(aff.required.node_selector_terms) if aff.required else 0} required term(s), "
                               f"{len(aff.preferred)} preferred") if aff else "-"),
            ("Tolerations", ", ".join(f"{t.key or '*'} {t.operator} {t.value} {t.effect or 'all effects'}".replace(
                "  ", " ") for t in s.tolerations) or "-"),
            ("Mirror pod", _yes(s.mirror)), ("Static pod", _yes(s.static)), ("Local storage", _yes(s.local_storage)),
            ("Max unavailable", str(s.max_unavailable) if s.max_unavailable >= 0 else "-")]
    if s.sim is not None:
        w = s.sim
        rows.append(("Simulated work", f"batch: cpu={format_cpu(w.cpu_milli)} memory={_mem(w.memory_bytes)} "
                                       f"duration={w.duration_s:g}s" if w.kind == "batch"
                     else f"series: {len(w.cpu_util)} samples every {w.step_s:g}s"))
    rows += [("Created", _when(s.created_at, now)), ("Last change", _when(rec.updated_at, now)),
             ("Bound", _when(rec.bound_at, now))]
    return rows


def node_lines(n: NodeSpec, res: NodeResource | None, alloc: Resources, pods: list[PodRecord],
               now: float) -> list[tuple[str, str]]:
    """``(field, value)`` rows of ``colo describe node`` (its pods listed after)."""
    a, c = n.allocatable, n.capacity
    rows = [("Name", n.name), ("Cordoned", _yes(n.unschedulable) + (" (no new pods)" if n.unschedulable else "")),
            ("Labels", _map(n.labels)),
            ("Taints", ", ".join(f"{t.key}={t.value}:{t.effect}" if t.value else f"{t.key}:{t.effect}"
                                 for t in n.taints) or "-"),
            ("Capacity", f"cpu={format_cpu(c.cpu)} mem={_mem(c.memory)} pods={c.pods}"),
            ("Allocatable", f"cpu={format_cpu(a.cpu)} mem={_mem(a.memory)} pods={a.pods}"),
            ("Reserved", requests_cell(n.reserved) + (f" cpus {n.reserved_cpus}" if n.reserved_cpus else "")),
            ("Requested", requests_cell(alloc) + f" pods={alloc.pods}")]
    if res is not None:
        rows.append(("Offered (slo-manager)", f"batch-cpu={format_cpu(res.batch_cpu)} batch-mem={_mem(res.batch_memory)} "
                     f"mid-cpu={format_cpu(res.mid_cpu)} mid-mem={_mem(res.mid_memory)}"
                     + (" (reset: stale metrics)" if res.reset else "")
                     + (" (memory pressure)" if res.memory_pressure else "")
                     + (f" — {res.reason}" if res.reason else "") + f", at {_when(res.at, now)}"))
    else:
        rows.append(("Offered (slo-manager)", "- (no NodeResource yet)"))
    rows += [("Registered", _when(n.registered_at, now)), ("Pods", str(len(pods)))]
    for p in sorted(pods, key=lambda p: (p.spec.namespace, p.spec.name)):
        from colo.classes import qos_class_of

        s = p.spec
        flags = [f for f, on in (("mirror", s.mirror), ("static", s.static), ("local-storage", s.local_storage)) if on]
        rows.append(("", f"{s.namespace}/{s.name} {pod_status(p)} {qos_class_of(s)} {requests_cell(s.requests)}"
                         + (f" [{', '.join(flags)}]" if flags else "")))
    return rows


async def _load(what: str, name: str, namespace: str, conn: Connection) -> list[tuple[str, str]]:
    from colo.store import Store

    settings = conn.settings
    store = await Store.connect(settings.redis_url, prefix=settings.store_prefix, settings=settings)
    now = time.time()
    try:
        if what == "pod":
            (rec,) = select_pods(await store.list_pods(), name, namespace)
            return pod_lines(rec, now)
        node = await store.get_node(name)
        if node is None:
            raise RefError(f"no node {name!r} in the store")
        return node_lines(node, await store.get_node_resource(name), await store.allocated(name),
                          await store.pods_on(name), now)
    finally:
        await store.close()


def cmd_describe(args: argparse.Namespace, conn: Connection) -> int:
    """Run ``colo describe``: exit 0 when shown, 1 when not found or the store cannot be read."""
    what = "pod" if args.what.startswith("pod") else "node"
    try:
        rows = asyncio.run(_load(what, args.name, getattr(args, "namespace", ""), conn))
    except RefError as exc:
        err_console.print(f"[red]{escape(str(exc))}[/]", highlight=False, soft_wrap=True)
        return 1
    except Exception as exc:
        err_console.print(f"[red]cannot read the store: {escape(str(exc))}[/]", highlight=False)
        return 1
    width = max(len(k) for k, _ in rows) + 1
    for key, value in rows:
        console.print(f"[bold]{escape(key + ':' if key else ''):<{width}}[/] {escape(value)}", highlight=False,
                      soft_wrap=True)
    return 0
