"""``Deployment`` / ``StatefulSet`` (apps/v1) and ``Job`` (batch/v1) → :class:`colo.messages.WorkloadSpec`.

Read: ``spec.replicas`` (≥ 0, default 1) of a Deployment or StatefulSet; ``spec.parallelism`` (≥ 1, default 1)
and ``spec.completions`` (≥ 1, default ``parallelism``) of a Job; ``spec.template`` (``metadata`` and ``spec``
as a Pod's; its namespace is the workload's). A gang is embedded by the Koordinator gang annotations
(:mod:`colo.manifests.podgroup`) on the workload or on its template (the workload's win, key by key), or referenced by the
:data:`colo.messages.POD_GROUP_LABEL` label on the template (not both). The disruption budget is the
:data:`MAX_UNAVAILABLE_ANNOTATION` annotation on the workload.
"""

from __future__ import annotations

import math
import re
from typing import Any, cast

import msgspec

from colo.manifests.base import Ctx, identifiers, join
from colo.manifests.pod import parse_template
from colo.manifests.podgroup import GANG_PREFIX, MIN_AVAILABLE_ANNOTATION, embedded_gang
from colo.messages import POD_GROUP_LABEL, WorkloadKind, WorkloadSpec
from colo.validation import IDENT
from colo.workloads import MAX_UID_CHARS, MAX_WORKLOAD_PODS

API_VERSIONS: dict[str, str] = {"Deployment": "apps/v1", "StatefulSet": "apps/v1", "Job": "batch/v1"}
"""The apiVersion of each workload kind (Kubernetes)."""
MAX_UNAVAILABLE_ANNOTATION = "colo.io/max-unavailable"
"""At most this many of the workload's pods may be preempted or evicted at once: an integer ≥ 0 or a
percentage of its pods at once (replicas, or a Job's min(parallelism, completions); ``"25%"``, rounded up, as Kubernetes rounds a PodDisruptionBudget's
``maxUnavailable``). Absent: no budget."""
_PERCENT = re.compile(r"^(\d+)%$")


def _max_unavailable(ctx: Ctx, raw: str | None, path: str, pods: int) -> int:
    if raw is None:
        return -1
    m = _PERCENT.fullmatch(raw.strip())
    if m:
        percent = int(m.group(1))
        if percent > 100:
            ctx.err(path, f"must be at most 100%, got {raw!r}")
            return -1
        return math.ceil(pods * percent / 100)
    return ctx.integer(raw, path, -1, 0)


def _selector(ctx: Ctx, obj: Any, path: str, template_labels: dict[str, str]) -> None:
    """``spec.selector`` of a Deployment/StatefulSet: ``matchLabels`` the template's labels must satisfy
    (Kubernetes refuses a selector that does not select the template; Colo tracks pods by owner, not by it)."""
    selector = ctx.mapping(obj, path)
    ctx.known(selector, path, ("matchLabels",))
    for key, value in ctx.str_map(selector.get("matchLabels"), join(path, "matchLabels")).items():
        if template_labels.get(key) != value:
            ctx.err(join(join(path, "matchLabels"), key), f"does not select the template (its labels have "
                                                         f"{key}={template_labels.get(key)!r})")


def parse_workload(ctx: Ctx, doc: dict[str, Any], path: str, now: float) -> WorkloadSpec | None:
    """A Deployment, StatefulSet or Job document → WorkloadSpec (uid ``metadata.uid`` or
    ``<namespace>-<name>``, ``created_at = now`` seconds); None after recording problems."""
    before = len(ctx.errors)
    kind = cast(WorkloadKind, doc["kind"])
    mp = join(path, "metadata")
    meta = ctx.mapping(doc.get("metadata"), mp, required=True)
    name = ctx.name(meta, mp) if meta else ""
    namespace = str(meta.get("namespace", "default"))
    uid = str(meta.get("uid") or f"{namespace}-{name}")
    labels = ctx.str_map(meta.get("labels"), join(mp, "labels"))
    annotations = ctx.str_map(meta.get("annotations"), join(mp, "annotations"))
    sp = join(path, "spec")
    spec = ctx.mapping(doc.get("spec"), sp, required=True)
    ctx.known(spec, sp, ("parallelism", "completions", "template") if kind == "Job"
              else ("replicas", "selector", "template"))
    replicas = parallelism = completions = 1
    if not IDENT.fullmatch(uid) or not IDENT.fullmatch(namespace):
        bad = "uid" if not IDENT.fullmatch(uid) else "namespace"
        ctx.err(join(mp, bad if meta.get(bad) else "name"),
                f"{bad} {uid if bad == 'uid' else namespace!r} is not a valid identifier (letters, digits, '_', '.', '-')")
    if name and len(name) > MAX_UID_CHARS:  # a valid uid written, a name admission refuses
        identifiers(ctx, meta, mp, name=name)
    if len(uid) > MAX_UID_CHARS:
        ctx.err(join(mp, "uid" if meta.get("uid") else "name"),
                f"the workload's uid {uid!r} is longer than {MAX_UID_CHARS} characters")
    if kind == "Job":
        parallelism = ctx.integer(spec.get("parallelism"), join(sp, "parallelism"), 1, 1)
        completions = ctx.integer(spec.get("completions"), join(sp, "completions"), parallelism, 1)
        pods = min(parallelism, completions)
        total, total_path = completions, join(sp, "completions")
    else:
        replicas = ctx.integer(spec.get("replicas"), join(sp, "replicas"), 1, 0)
        pods = total = replicas
        total_path = join(sp, "replicas")
    if total > MAX_WORKLOAD_PODS:
        ctx.err(total_path, f"at most {MAX_WORKLOAD_PODS} pods per workload, got {total}")
        return None
    tp = join(sp, "template")
    template = parse_template(ctx, spec.get("template"), tp, now) if spec else None
    pod_group = None
    if template is not None:
        template = msgspec.structs.replace(template, namespace=namespace)
        workload_path, template_path = join(mp, "annotations"), join(join(tp, "metadata"), "annotations")
        gang_annotations = {k: v for k, v in (*template.annotations.items(), *annotations.items())
                            if k.startswith(GANG_PREFIX)}
        paths = {k: workload_path if k in annotations else template_path for k in gang_annotations}
        pod_group = embedded_gang(ctx, gang_annotations, paths, name, namespace, uid, now)
        if pod_group is not None and POD_GROUP_LABEL in template.labels:
            ctx.err(join(join(join(tp, "metadata"), "labels"), POD_GROUP_LABEL),
                    "a workload either embeds a gang or names a PodGroup, not both")
        if pod_group is not None and pod_group.min_member > pods:
            ctx.err(join(paths[MIN_AVAILABLE_ANNOTATION], MIN_AVAILABLE_ANNOTATION),
                    f"must be at most the workload's {pods} pods, got {pod_group.min_member}")
    if template is not None and "selector" in spec:
        _selector(ctx, spec["selector"], join(sp, "selector"), template.labels)
    max_unavailable = _max_unavailable(ctx, annotations.get(MAX_UNAVAILABLE_ANNOTATION),
                                       join(join(mp, "annotations"), MAX_UNAVAILABLE_ANNOTATION),
                                       pods)
    if template is None or len(ctx.errors) > before:
        return None
    return WorkloadSpec(kind=kind, uid=uid, name=name, namespace=namespace, labels=labels, annotations=annotations,
                        replicas=replicas, parallelism=parallelism, completions=completions, template=template,
                        pod_group=pod_group, max_unavailable=max_unavailable, created_at=now)
