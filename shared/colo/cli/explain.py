"""``colo explain POD_UID``: why the scheduler placed (or did not place) a pod.

Reads ``GET /debug/pods/{uid}/decision`` of a scheduler: the URL from ``--scheduler``,
``$COLO_SCHEDULER_URL`` or the services a running ``colo up`` recorded.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from datetime import datetime, timezone
from typing import Any
from urllib.parse import quote

import aiohttp
from rich.console import Console
from rich.markup import escape
from rich.table import Table


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


async def fetch_decision(base_url: str, uid: str, live: bool = False, timeout_s: float = 10.0) -> dict[str, Any]:
    """The decision JSON of pod ``uid``.

    Raises ExplainError naming the problem: the scheduler's own message (404 for a pod it does not
    know), the HTTP status and the start of the body of any other failure, an answer that is not
    JSON or not a decision record (a wrong URL), or a connection failure."""
    url = decision_url(base_url, uid, live)
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s)) as session:
            async with session.get(url) as resp:
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
        t.add_row(name, _v(value), _v(runner.get(name)) if runner else "-")
    console.print(t)


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


def cmd_explain(args: argparse.Namespace, console: Console, up_services: dict[str, str]) -> int:
    """Run ``colo explain``; exit 0 when shown, 1 when the decision cannot be fetched."""
    err = Console(stderr=True)
    try:
        url = scheduler_url(args.scheduler, up_services)
        source = ("--scheduler" if args.scheduler else
                  "COLO_SCHEDULER_URL" if os.environ.get("COLO_SCHEDULER_URL") else "the running `colo up`")
        err.print(f"[dim]using scheduler {escape(url)} from {source}[/]", highlight=False, soft_wrap=True)
        decision = asyncio.run(fetch_ref(url, args.uid, args.live))
    except ExplainError as exc:
        console.print(f"[red]{escape(str(exc))}[/]", highlight=False, soft_wrap=True)
        return 1
    if args.json:
        print(json.dumps(decision, indent=2))
    else:
        render(decision, console, args.max_nodes)
    return 0
