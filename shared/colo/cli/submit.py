"""``colo submit FILE``: validate a whole manifest (:mod:`colo.manifests`, with admission's own checks), then
publish each object on its subject (:mod:`colo.submission`); nothing is published when any object is invalid.
Then it waits (``--wait-s``, default :data:`colo.submission.DEFAULT_WAIT_S`; ``--no-wait`` skips) for admission's
answer for every pod, workload and PodGroup, and the scheduler's for every ElasticQuota (accepted, or refused with
its every problem: :mod:`colo.submission`), and prints it; a rejection prints its reason.

Exit codes: 0 all admitted (or published, with ``--no-wait``); 1 invalid file, a publish failure or anything
rejected or refused; 3 some object got no answer within the wait (is the slo-manager / scheduler running?).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from colo.manifests import ManifestError, load_manifest
from colo.messages import ElasticQuota, PodGroupSpec, PodSpec, ReservationSpec, WorkloadSpec
from colo.settings import RuntimeSettings
from colo.submission import DEFAULT_WAIT_S, Item, Outcome, publications, submit
from colo.workloads import expand, initial_pods, referenced_group

__all__ = ["DEFAULT_WAIT_S", "Item", "cmd_submit", "describe", "expansion", "outcome_line", "publications",
           "publish"]


def describe(obj: object) -> str:
    """``job/train submitted (8 pods)``-style line of one object (without the verb)."""
    if isinstance(obj, ElasticQuota):
        return f"elasticquota/{obj.name}"
    if isinstance(obj, PodGroupSpec):
        return f"podgroup/{obj.name} (min {obj.min_member}, {obj.mode}, timeout {obj.timeout_s:g}s)"
    if isinstance(obj, ReservationSpec):
        return f"reservation/{obj.name} ({len(obj.owners)} owners)"
    if isinstance(obj, WorkloadSpec):
        n = initial_pods(obj)
        extra = f", {obj.completions} completions" if obj.kind == "Job" and obj.completions > n else ""
        return f"{obj.kind.lower()}/{obj.name} ({n} pod{'s' if n != 1 else ''}{extra})"
    assert isinstance(obj, PodSpec)
    return f"pod/{obj.name} ({obj.uid})"


def expansion(w: WorkloadSpec) -> list[str]:
    """The ``--dry-run`` lines of a workload: each pod admission would create at once, with its gang."""
    lines = []
    for pod in expand(w, range(initial_pods(w))):
        group = referenced_group(pod)
        gang = (f" gang {pod.gang.name} (min {pod.gang.min_member})" if pod.gang
                else f" PodGroup {group}" if group else "")
        lines.append(f"  pod/{pod.name} ({pod.uid}){gang}")
    return lines


async def publish(items: list[Item], nats_url: str, connect_attempts: int,
                  settings: RuntimeSettings | None = None) -> None:
    """Publish ``items`` in order (each acknowledged by JetStream before the next); ``settings``: the link's
    credentials and TLS."""
    from colo.bus import Bus

    bus = await Bus.connect(nats_url, "cli", connect_attempts=connect_attempts, settings=settings)
    try:
        await bus.ensure_streams()
        await bus.publish_many(items)
    finally:
        await bus.close()


def outcome_line(o: Outcome, wait_s: float) -> str:
    """``pod/web admitted``, ``job/train rejected: <reason>`` or ``pod/x: no admission answer within 5 s``."""
    what = f"{o.kind.lower()}/{o.name}"
    if o.kind == "ElasticQuota":
        if o.state == "admitted":
            return f"{what} accepted by the scheduler"
        if o.state == "rejected":
            return f"{what} refused by the scheduler: {o.reason}"
        return (f"{what}: no answer from the scheduler within {wait_s:g} s (is it running? a quota whose parent "
                "has not arrived waits for it; `colo get quotas` later)")
    if o.state == "admitted" and o.not_applied:
        return (f"{what} was admitted earlier ({len(o.pods)} pods); this spec's changes were NOT applied: "
                f"{'; '.join(o.not_applied)} (the first admitted spec holds: submit it under a new name)")
    if o.state == "admitted":
        return f"{what} admitted" + (f" ({len(o.pods)} pods)" if o.pods else "")
    if o.state == "rejected":
        return f"{what} rejected: {o.reason}"
    return f"{what}: no admission answer within {wait_s:g} s (is the slo-manager running? `colo get pods` later)"


def cmd_submit(args: argparse.Namespace, console: Console, err_console: Console,
               link: Callable[[], RuntimeSettings], connect_attempts: int) -> int:
    """Validate the whole file, then publish every object; nothing on any error. Returns the exit code.
    ``link()`` gives the connection settings (called only when something is to be published)."""
    try:
        manifest = load_manifest(Path(args.file), now=time.time())
    except ManifestError as exc:
        for e in exc.errors:
            console.print(f"[red]{escape(e)}[/]", highlight=False, soft_wrap=True)
        console.print(f"[red]{len(exc.errors)} error(s); nothing submitted[/]")
        return 1
    objects = manifest.ordered()
    for w in manifest.warnings:
        err_console.print(f"[yellow]warning: {escape(w)}[/]", highlight=False, soft_wrap=True)
    if args.dry_run:
        for obj in objects:
            console.print(f"{escape(describe(obj))} valid", highlight=False)
            if isinstance(obj, WorkloadSpec):
                for line in expansion(obj):
                    console.print(escape(line), highlight=False)
        return 0
    wait_s = None if args.no_wait else args.wait_s
    try:
        settings = link()
        outcomes = asyncio.run(submit(manifest, settings.nats_url, connect_attempts, wait_s, settings=settings))
    except Exception as exc:  # connection problems: report, do not trace back
        err_console.print(f"[red]cannot publish: {escape(str(exc))}[/]", highlight=False)
        return 1
    for obj in objects:
        console.print(f"{escape(describe(obj))} submitted", highlight=False)
    code = 0
    for o in outcomes:
        style = "yellow" if o.not_applied else "green" if o.state == "admitted" else "red" if o.rejected else "yellow"
        console.print(f"[{style}]{escape(outcome_line(o, wait_s or 0.0))}[/]", highlight=False, soft_wrap=True)
        code = 1 if o.rejected else code or (3 if o.state == "unknown" else 0)
    return code
