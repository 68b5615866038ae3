"""``kind: ElasticQuota`` (scheduling.sigs.k8s.io/v1alpha1, with Koordinator's labels and annotations) →
:class:`colo.messages.ElasticQuota` (REFERENCE.md §8).

Read: ``spec.min`` and ``spec.max`` as Kubernetes resource lists (``cpu: "8"``, ``memory: 32Gi``,
``kubernetes.io/batch-cpu: "4000"``, ``pods: 100``; each min ≤ its max; an absent max is unlimited);
label :data:`PARENT_LABEL` (default: a child of the root) and :data:`IS_PARENT_LABEL` (``"true"`` for an
inner node of the tree: a quota naming a parent of this file that is not marked so is refused); annotation
:data:`SHARED_WEIGHT_ANNOTATION` (a JSON resource list; default per resource: its max, REFERENCE.md §8) and
:data:`ALLOW_LENT_ANNOTATION` (``"false"`` keeps the quota's idle min from others). Pods are selected by
``spec.namespaces`` (a list of namespaces; Colo's field, the reference reads an annotation) and/or
``spec.selector.matchLabels`` (every label must match), or name the quota with the
:data:`colo.messages.QUOTA_NAME_LABEL` label. The name becomes a subject token: a DNS label (no ``.``).
"""

from __future__ import annotations

import json
from typing import Any

from colo.manifests.base import LABEL_NAME, Ctx, join, resource_list
from colo.messages import KUBERNETES_RESOURCE_NAMES, ROOT_QUOTA, ElasticQuota

QUOTA_PREFIX = "quota.scheduling.koordinator.sh/"
PARENT_LABEL = QUOTA_PREFIX + "parent"
IS_PARENT_LABEL = QUOTA_PREFIX + "is-parent"
SHARED_WEIGHT_ANNOTATION = QUOTA_PREFIX + "shared-weight"
ALLOW_LENT_ANNOTATION = QUOTA_PREFIX + "allow-lent-resource"
_K8S_NAME = {field: name for name, field in KUBERNETES_RESOURCE_NAMES.items()}


def _shared_weight(ctx: Ctx, raw: str | None, path: str) -> dict[str, int]:
    if raw is None:
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        ctx.err(path, f"expected a JSON resource list like {{\"cpu\": \"8\"}}, got {raw!r}")
        return {}
    return resource_list(ctx, value, path, allow_pods=True)


def parse_quota(ctx: Ctx, doc: dict[str, Any], path: str, now: float) -> tuple[ElasticQuota, bool] | None:
    """An ElasticQuota document → (ElasticQuota with ``created_at = now`` seconds, whether it is marked a
    parent); None after recording problems."""
    before = len(ctx.errors)
    mp = join(path, "metadata")
    meta = ctx.mapping(doc.get("metadata"), mp, required=True)
    name = ctx.name(meta, mp, LABEL_NAME) if meta else ""
    labels = ctx.str_map(meta.get("labels"), join(mp, "labels"))
    annotations = ctx.str_map(meta.get("annotations"), join(mp, "annotations"))
    lp, ap, sp = join(mp, "labels"), join(mp, "annotations"), join(path, "spec")
    spec = ctx.mapping(doc.get("spec"), sp, required=True)
    ctx.known(spec, sp, ("min", "max", "namespaces", "selector"))
    parent = labels.get(PARENT_LABEL, "")
    if parent and parent != ROOT_QUOTA and not LABEL_NAME.match(parent):
        ctx.err(join(lp, PARENT_LABEL), f"not a valid quota name: {parent!r}")
    if parent == name and name:
        ctx.err(join(lp, PARENT_LABEL), "a quota cannot be its own parent")
    is_parent = ctx.boolean(labels.get(IS_PARENT_LABEL), join(lp, IS_PARENT_LABEL), False)
    allow_lent = ctx.boolean(annotations.get(ALLOW_LENT_ANNOTATION), join(ap, ALLOW_LENT_ANNOTATION), True)
    weight = _shared_weight(ctx, annotations.get(SHARED_WEIGHT_ANNOTATION), join(ap, SHARED_WEIGHT_ANNOTATION))
    qmin = resource_list(ctx, spec.get("min"), join(sp, "min"), allow_pods=True)
    qmax = resource_list(ctx, spec.get("max"), join(sp, "max"), allow_pods=True)
    for resource, amount in qmin.items():
        if resource in qmax and amount > qmax[resource]:
            ctx.err(join(join(sp, "min"), _K8S_NAME[resource]), f"min {amount} exceeds max {qmax[resource]}")
    namespaces = ctx.str_list(spec.get("namespaces"), join(sp, "namespaces"))
    selector = ctx.mapping(spec.get("selector"), join(sp, "selector"))
    match_labels = ctx.str_map(selector.get("matchLabels"), join(join(sp, "selector"), "matchLabels"))
    for key in selector:
        if key != "matchLabels":
            ctx.err(join(join(sp, "selector"), str(key)), "unsupported: only matchLabels selects pods")
    if len(ctx.errors) > before:
        return None
    quota = ElasticQuota(name=name, parent="" if parent == ROOT_QUOTA else parent, namespaces=namespaces,
                         match_labels=match_labels, min=qmin, max=qmax, shared_weight=weight,
                         allow_lent=allow_lent, created_at=now)
    return quota, is_parent
