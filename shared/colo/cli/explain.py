"""``colo explain POD_UID``: why the scheduler placed (or did not place) a pod.

Reads ``GET /debug/pods/{uid}/decision`` of a scheduler: the URL from ``--scheduler``,
``$COLO_SCHEDULER_URL`` or the services a running ``colo up`` recorded; with the bearer token of
``COLO_HTTP_TOKEN_FILE`` when that is set (the scheduler's endpoints then require it, docs/security.md).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from collections.abc import Callable
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import aiohttp
from rich.console import Console
from rich.markup import escape
from rich.table import Table

if TYPE_CHECKING:
    from colo.cli.connection import Connection
    from colo.messages import PodRecord


class ExplainError(Exception):
    """The decision could not be fetched (no scheduler URL, HTTP error, unknown pod)."""


def scheduler_url(explicit: str, up_services: dict[str, str]) -> str:
    """The scheduler's base URL: ``explicit``, else ``$COLO_SCHEDULER_URL``, else ``colo up``'s.

    Raises ExplainError when none is known."""
    url = explicit or os.environ.get("COLO_SCHEDULER_URL", "") or up_services.get("scheduler", "")
    if not url:
        raise ExplainError("no scheduler URL: pass --scheduler http://HOST:PORT, set COLO_SCHEDULER_URL, "
                           "or start `colo up`")
    return url.rstrip("/")


DECISION_KEYS = ("uid", "attempt", "at", "status", "node", "runner_up", "nodes", "feasible", "message",
                 "decision_ms", "filters", "rejected_nodes", "scores")
"""Keys every decision record of ``GET /debug/pods/{uid}/decision`` carries (what :func:`render` reads)."""


def decision_url(base_url: str, uid: str, live: bool = False) -> str:
    """The decision URL of pod ``uid``: the uid is percent-encoded whole (a ``/``, ``?``, ``#``, ``%``
    or space in it stays part of the uid)."""
    return f"{base_url}/debug/pods/{quote(uid, safe='')}/decision" + ("?live=1" if live else "")


def http_token() -> str:
    """The bearer token of ``COLO_HTTP_TOKEN_FILE`` ("" when unset). Raises ExplainError when the settings
    or the file cannot be read."""
    from colo import http_auth
    from colo.settings import SettingsError, load_runtime_settings

    try:
        return http_auth.read_token(load_runtime_settings().http_token_file)
    except (SettingsError, http_auth.TokenFileError) as exc:
        raise ExplainError(str(exc)) from None


async def fetch_decision(base_url: str, uid: str, live: bool = False, timeout_s: float = 10.0,
                         token: str | None = None) -> dict[str, Any]:
    """The decision JSON of pod ``uid``, asked with ``Authorization: Bearer <token>`` (``None``: the token
    of :func:`http_token`; "" or no token file: no header).

    Raises ExplainError naming the problem: the scheduler's own message (404 for a pod it does not
    know, 401 without the right token), the HTTP status and the start of the body of any other failure,
    an answer that is not JSON or not a decision record (a wrong URL), or a connection failure."""
    url = decision_url(base_url, uid, live)
    token = http_token() if token is None else token
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s)) as session:
            async with session.get(url, headers=headers) as resp:
                text = await resp.text(errors="replace")
                status, content_type = resp.status, resp.content_type
    except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
        raise ExplainError(f"cannot read {url}: {exc!r}") from None
    try:
        body = json.loads(text)
    except json.JSONDecodeError:
        body = None
    if status != 200:
        if isinstance(body, dict) and isinstance(body.get("error"), str):
            raise ExplainError(body["error"])
        raise ExplainError(f"{url}: HTTP {status}: {_excerpt(text)}")
    if body is None:
        raise ExplainError(f"{url}: the answer is not JSON ({content_type}): {_excerpt(text)}")
    missing = [k for k in DECISION_KEYS if k not in body] if isinstance(body, dict) else list(DECISION_KEYS)
    if missing:
        raise ExplainError(f"{url}: the answer is not a decision record (missing {', '.join(missing[:5])}"
                           f"{', …' if len(missing) > 5 else ''}); is this the scheduler's URL?")
    return body  # type: ignore[no-any-return]


def _v(value: object) -> str:
    """A value for display: ``-`` for none."""
    return "-" if value is None else str(value)


def _when(at: float) -> str:
    """A clock time: UTC date and time for wall-clock seconds, else simulated seconds."""
    if at > 1e9:
        return datetime.fromtimestamp(at, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"t={at:.1f} s (simulated clock)"


def pod_uid(ref: str) -> str:
    """The uid for ``NAMESPACE/NAME`` (``colo submit`` gives pods the uid ``NAMESPACE-NAME`` unless the
    manifest sets one), else ``ref`` itself."""
    if "/" in ref:
        namespace, _, name = ref.partition("/")
        return f"{namespace}-{name}"
    return ref


def _excerpt(text: str, limit: int = 200) -> str:
    one_line = " ".join(text.split())
    return one_line if len(one_line) <= limit else one_line[:limit] + "…"


def render(decision: dict[str, Any], console: Console, max_nodes: int = 20) -> None:
    """Print a decision: outcome, per-filter rejections, scores of the chosen node and runner-up,
    and up to ``max_nodes`` rejected nodes with the plugin and reason (0 = all)."""
    d = decision
    console.print(f"[bold]pod {d['uid']}[/] attempt {d['attempt']} at {_when(d['at'])} ({d.get('source', '')}): "
                  f"[bold]{d['status']}[/]")
    console.print(f"  {d['message']}")
    console.print(f"  node [green]{_v(d['node'])}[/]  runner-up {_v(d['runner_up'])}  feasible "
                  f"{d['feasible']}/{d['nodes']}  decision {d['decision_ms']} ms")
    totals = [s["total"] for s in d["scores"].values()]
    if len(totals) == 2 and totals[0] == totals[1]:
        console.print("  the chosen node and the runner-up tie: the scheduler's seeded random tie-break chose")
    if d["filters"]:
        t = Table("filter", "nodes rejected", "reasons", title="Filters (first rejecting filter per node)")
        for name, f in d["filters"].items():
            t.add_row(name, str(f["rejected"]), ", ".join(f"{r} ({c})" for r, c in f["reasons"].items()))
        console.print(t)
    if d["scores"]:
        nodes = list(d["scores"])
        t = Table("score plugin", *[f"{n} raw/norm×w" for n in nodes], title="Scores")
        plugins = list(next(iter(d["scores"].values()))["plugins"])
        for p in plugins:
            cells = []
            for n in nodes:
                s = d["scores"][n]["plugins"][p]
                cells.append(f"{s['raw']}/{s['normalized']}×{s['weight']} = {s['weighted']}")
            t.add_row(p, *cells)
        t.add_row("[bold]total[/]", *[f"[bold]{d['scores'][n]['total']}[/]" for n in nodes])
        console.print(t)
    render_preemption(d, console)
    rejected = d["rejected_nodes"]
    if rejected:
        shown = list(rejected.items()) if max_nodes <= 0 else list(rejected.items())[:max_nodes]
        t = Table("node", "rejected by", "reason", title=f"Rejected nodes ({len(shown)} of {len(rejected)})")
        counted = False
        for node, r in shown:
            reason = r.get("reason")
            if reason is None:  # summary detail: the filter's reasons are counted, not kept per node
                reasons = d["filters"].get(r["plugin"], {}).get("reasons", {})
                reason = "one of: " + ", ".join(reasons) if reasons else ""
                counted = True
            t.add_row(node, r["plugin"], reason)
        if counted:
            t.caption = "per-node reasons: --live (a dry run now) or the scheduler's decision_detail: nodes"
        console.print(t)


def render_preemption(d: dict[str, Any], console: Console) -> None:
    """Print the preemption behind a nomination (``preemption`` of the record, absent in older schedulers):
    the nominated node, the victims (uid, priority, start) and the node-choice criteria of the nominated
    node against the runner-up."""
    pre = d.get("preemption")
    if not pre:
        return
    kept = " (kept: its victims are still leaving)" if pre.get("kept") else ""
    console.print(f"  preemption: nominated to [green]{_v(pre['node'])}[/]{kept}, "
                  f"{pre['candidates']} candidate node(s) evaluated")
    t = Table("victim", "priority", "started", title=f"Victims on {_v(pre['node'])}")
    for v in pre["victims"]:
        t.add_row(v["uid"], str(v["priority"]), _when(v["started_at"]))
    console.print(t)
    runner = pre.get("runner_up_criteria") or {}
    t = Table("criterion (smaller wins; start: later wins)", f"{_v(pre['node'])}", f"runner-up {_v(pre['runner_up'])}",
              title="Why this node (Kubernetes pickOneNodeForPreemption order)")
    for name, value in pre["criteria"].items():
        t.add_row(name, _criterion(name, value), _criterion(name, runner.get(name)) if runner else "-")
    console.print(t)


def _criterion(name: str, value: Any) -> str:
    """A criterion's value: a start time (``…_start…_s``, clock seconds) as :func:`_when` shows it, else as is."""
    if isinstance(value, (int, float)) and "start" in name and name.endswith("_s"):
        return _when(float(value))
    return _v(value)


async def fetch_ref(base_url: str, ref: str, live: bool = False) -> dict[str, Any]:
    """The decision of the pod ``ref`` names (:func:`pod_uid`); when a ``NAMESPACE/NAME`` ref is not
    found as ``NAMESPACE-NAME``, the ref itself is tried as the uid (a uid may hold a ``/``). Raises
    the first ExplainError when neither is found."""
    uid = pod_uid(ref)
    try:
        return await fetch_decision(base_url, uid, live)
    except ExplainError as first:
        if uid == ref:
            raise
        try:
            return await fetch_decision(base_url, ref, live)
        except ExplainError:
            raise first from None


class NeverScheduled(ExplainError):
    """The pod never reached the scheduler: admission refused it, or it was deleted while pending."""


async def pod_from_store(conn: Connection, ref: str, namespace: str) -> PodRecord:
    """The record of the pod ``ref`` names in the store (:func:`colo.podref.select_pods`: uid, ``NS/NAME``, or a
    NAME in ``namespace`` or in the only namespace holding it). Raises ExplainError when none (or several) match
    or the store cannot be read."""
    from colo.podref import RefError, select_pods
    from colo.store import Store

    try:
        store = await Store.connect(conn.settings.redis_url, prefix=conn.settings.store_prefix,
                                    settings=conn.settings)
        try:
            (rec,) = select_pods(await store.list_pods(), ref, namespace)
        finally:
            await store.close()
    except RefError as exc:
        raise ExplainError(str(exc)) from None
    except Exception as exc:
        raise ExplainError(f"cannot read the store to find pod {ref!r}: {exc}") from None
    return rec


def never_scheduled(rec: PodRecord) -> str:
    """Why a pod has no decision record although the store knows it (``""`` when it should have one): refused by
    admission, with every problem, or deleted before a node was found."""
    from colo.cli.get import pod_reason, pod_status

    status = pod_status(rec)
    what = f"pod {rec.spec.namespace}/{rec.spec.name} ({rec.spec.uid})"
    if status == "Rejected":
        return f"{what} never reached the scheduler: admission rejected it: {pod_reason(rec, {})}"
    if status == "Deleted" and not rec.node:
        return f"{what} was deleted before it was scheduled ({pod_reason(rec, {})})"
    return ""


def _decision(url: str, ref: str, namespace: str, live: bool,
              store_connection: Callable[[], Connection] | None) -> dict[str, Any]:
    """The decision of ``ref`` (:func:`fetch_ref`), else of the pod the store finds by that name; raises
    NeverScheduled (exit 0: an answer) for a pod that never reached the scheduler."""
    full = f"{namespace}/{ref}" if namespace and "/" not in ref else ref
    try:
        return asyncio.run(fetch_ref(url, full, live))
    except ExplainError as first:
        if store_connection is None:
            raise
        try:
            rec = asyncio.run(pod_from_store(store_connection(), ref, namespace))
        except ExplainError as second:
            if "/" not in full:  # a bare name: what the store says of it (which namespaces hold it) leads
                raise ExplainError(f"{second} (the scheduler knows no pod with the uid {ref!r})") from None
            raise ExplainError(f"{first}; {second}") from None
        why = never_scheduled(rec)
        if why:
            raise NeverScheduled(why) from None
        return asyncio.run(fetch_decision(url, rec.spec.uid, live))


def cmd_explain(args: argparse.Namespace, console: Console, up_services: dict[str, str],
                store_connection: Callable[[], Connection] | None = None) -> int:
    """Run ``colo explain UID | NAMESPACE/NAME | NAME [-n NAMESPACE]``; exit 0 when shown (or when the store says
    the pod never reached the scheduler: rejected by admission, or deleted while pending — the reason is printed),
    1 when the decision cannot be fetched. A ref the scheduler does not know as a uid (nor as
    ``NAMESPACE-NAME``) is looked up by name in the store (``store_connection``), so ``colo explain web-0`` finds
    ``shop/web-0``."""
    err = Console(stderr=True)
    try:
        url = scheduler_url(args.scheduler, up_services)
        source = ("--scheduler" if args.scheduler else
                  "COLO_SCHEDULER_URL" if os.environ.get("COLO_SCHEDULER_URL") else "the running `colo up`")
        err.print(f"[dim]using scheduler {escape(url)} from {source}[/]", highlight=False, soft_wrap=True)
        decision = _decision(url, args.uid, getattr(args, "namespace", "") or "", args.live, store_connection)
    except NeverScheduled as exc:
        console.print(f"[yellow]{escape(str(exc))}[/]", highlight=False, soft_wrap=True)
        return 0
    except ExplainError as exc:
        console.print(f"[red]{escape(str(exc))}[/]", highlight=False, soft_wrap=True)
        return 1
    if args.json:
        print(json.dumps(decision, indent=2))
    else:
        render(decision, console, args.max_nodes)
    return 0
