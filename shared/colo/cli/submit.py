"""``colo submit FILE``: validate a whole manifest (:mod:`colo.manifests`), then publish each object on its
subject, in the order of :meth:`colo.manifests.Manifest.ordered`; nothing is published when any object is
invalid. Message ids carry the submission time (a pod's is its uid, as before): a corrected manifest
resubmitted under the same names is not dropped as a duplicate; admission makes a repeated workload uid a
no-op.

=================  =================================  ======================
object             subject                            message id
=================  =================================  ======================
ElasticQuota       ``quota.spec.{name}``              ``quota-<name>-<at>``
PodGroup           ``podgroup.submitted``             ``podgroup-<uid>-<at>``
Reservation        ``reservation.submitted``          ``reservation-<ns>-<name>-<at>``
Deployment, …      ``workload.submitted``             ``workload-<uid>-<at>``
Pod                ``pod.submitted``                  ``<uid>``
=================  =================================  ======================
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from colo import subjects as S
from colo.manifests import Manifest, ManifestError, load_manifest
from colo.messages import ElasticQuota, PodGroupSpec, PodSpec, ReservationSpec, WorkloadSpec
from colo.workloads import expand, initial_pods, referenced_group

Item = tuple[Any, Any, str | None, dict[str, str]]


def publications(manifest: Manifest) -> list[Item]:
    """``(subject, message, msg id, subject keys)`` of every object, in publishing order."""
    out: list[Item] = []
    for obj in manifest.ordered():
        if isinstance(obj, ElasticQuota):
            out.append((S.QUOTA_SPEC, obj, f"quota-{obj.name}-{obj.created_at!r}", {"name": obj.name}))
        elif isinstance(obj, PodGroupSpec):
            out.append((S.PODGROUP_SUBMITTED, obj, f"podgroup-{obj.uid}-{obj.created_at!r}", {}))
        elif isinstance(obj, ReservationSpec):
            out.append((S.RESERVATION_SUBMITTED, obj, f"reservation-{obj.namespace}-{obj.name}-{obj.created_at!r}", {}))
        elif isinstance(obj, WorkloadSpec):
            out.append((S.WORKLOAD_SUBMITTED, obj, f"workload-{obj.uid}-{obj.created_at!r}", {}))
        elif isinstance(obj, PodSpec):
            out.append((S.POD_SUBMITTED, obj, obj.uid, {}))
    return out


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


async def publish(items: list[Item], nats_url: str, connect_attempts: int) -> None:
    """Publish ``items`` in order (each acknowledged by JetStream before the next)."""
    from colo.bus import Bus

    bus = await Bus.connect(nats_url, "cli", connect_attempts=connect_attempts)
    try:
        await bus.ensure_streams()
        await bus.publish_many(items)
    finally:
        await bus.close()


def cmd_submit(args: argparse.Namespace, console: Console, err_console: Console,
               nats_url: Callable[[], str], connect_attempts: int) -> int:
    """Validate the whole file, then publish every object; nothing on any error. Returns the exit code."""
    try:
        manifest = load_manifest(Path(args.file), now=time.time())
    except ManifestError as exc:
        for e in exc.errors:
            console.print(f"[red]{escape(e)}[/]", highlight=False, soft_wrap=True)
        console.print(f"[red]{len(exc.errors)} error(s); nothing submitted[/]")
        return 1
    objects = manifest.ordered()
    if args.dry_run:
        for obj in objects:
            console.print(f"{escape(describe(obj))} valid", highlight=False)
            if isinstance(obj, WorkloadSpec):
                for line in expansion(obj):
                    console.print(escape(line), highlight=False)
        return 0
    try:
        asyncio.run(publish(publications(manifest), nats_url(), connect_attempts))
    except Exception as exc:  # connection problems: report, do not trace back
        err_console.print(f"[red]cannot publish: {escape(str(exc))}[/]", highlight=False)
        return 1
    for obj in objects:
        console.print(f"{escape(describe(obj))} submitted", highlight=False)
    return 0
