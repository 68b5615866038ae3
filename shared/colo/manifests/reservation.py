"""``kind: Reservation`` (scheduling.koordinator.sh/v1alpha1) → :class:`colo.messages.ReservationSpec`
(REFERENCE.md §9).

Read: ``spec.template`` (a pod template: its containers' requests, summed, are the room held; its
``nodeSelector`` restricts the nodes; its labels, ``priority`` and classes are the reserve pod's), ``spec.owners`` (a non-empty list; each entry one of ``object: {uid}``
(a pod), ``controller: {kind, name}`` (a workload's pods) or ``labelSelector: {matchLabels}``; an entry may add
``namespace``), ``spec.ttl`` (seconds or a duration ``"30m"``, > 0; default 3600 s), ``spec.allocateOnce``
(default true) and ``spec.nodeName`` (default: the scheduler picks the node).
"""

from __future__ import annotations

from typing import Any

from colo.manifests.base import NAME, Ctx, duration_s, join, nearest
from colo.manifests.pod import parse_template
from colo.messages import ReservationOwner, ReservationSpec

_OWNER_KINDS = ("object", "controller", "labelSelector")


def _owner(ctx: Ctx, obj: Any, path: str) -> ReservationOwner | None:
    entry = ctx.mapping(obj, path, required=True)
    kinds = [k for k in _OWNER_KINDS if k in entry]
    for key in entry:
        if key not in (*_OWNER_KINDS, "namespace"):
            ctx.err(join(path, str(key)), f"unknown owner field{nearest(str(key), (*_OWNER_KINDS, 'namespace'))}")
    if len(kinds) != 1:
        ctx.err(path, f"expected exactly one of {', '.join(_OWNER_KINDS)}, got {len(kinds)}")
        return None
    namespace = entry.get("namespace", "")
    if not isinstance(namespace, str):
        ctx.err(join(path, "namespace"), "expected a string")
        namespace = ""
    kind = kinds[0]
    value = ctx.mapping(entry[kind], join(path, kind), required=True)
    if kind == "object":
        uid = value.get("uid") or value.get("name")
        if not isinstance(uid, str) or not uid:
            ctx.err(join(join(path, kind), "uid"), "required: the pod's uid")
            return None
        return ReservationOwner(uid=uid, namespace=namespace)
    if kind == "controller":
        okind, oname = value.get("kind"), value.get("name")
        if not isinstance(okind, str) or okind not in ("Deployment", "StatefulSet", "Job"):
            ctx.err(join(join(path, kind), "kind"), f"expected Deployment, StatefulSet or Job, got {okind!r}")
        if not isinstance(oname, str) or not NAME.match(oname):
            ctx.err(join(join(path, kind), "name"), f"required: the workload's name, got {oname!r}")
        if not isinstance(okind, str) or not isinstance(oname, str):
            return None
        return ReservationOwner(owner_kind=okind, owner_name=oname, namespace=namespace)
    labels = ctx.str_map(value.get("matchLabels"), join(join(path, kind), "matchLabels"))
    if not labels:
        ctx.err(join(join(path, kind), "matchLabels"), "required: at least one label")
        return None
    return ReservationOwner(match_labels=labels, namespace=namespace)


def parse_reservation(ctx: Ctx, doc: dict[str, Any], path: str, now: float) -> ReservationSpec | None:
    """A Reservation document → ReservationSpec (``created_at = now`` seconds); None after recording
    problems."""
    before = len(ctx.errors)
    mp = join(path, "metadata")
    meta = ctx.mapping(doc.get("metadata"), mp, required=True)
    name = ctx.name(meta, mp) if meta else ""
    namespace = str(meta.get("namespace", "default"))
    sp = join(path, "spec")
    spec = ctx.mapping(doc.get("spec"), sp, required=True)
    ctx.known(spec, sp, ("template", "owners", "ttl", "allocateOnce", "nodeName"))
    template = parse_template(ctx, spec.get("template"), join(sp, "template"), now) if spec else None
    op = join(sp, "owners")
    raw_owners = spec.get("owners")
    owners: list[ReservationOwner] = []
    if not isinstance(raw_owners, list) or not raw_owners:
        if spec:
            ctx.err(op, "required: a non-empty list of owners")
    else:
        owners = [o for i, x in enumerate(raw_owners) if (o := _owner(ctx, x, join(op, i))) is not None]
    ttl_s = duration_s(ctx, spec.get("ttl"), join(sp, "ttl"), 3600.0)
    allocate_once = ctx.boolean(spec.get("allocateOnce"), join(sp, "allocateOnce"), True)
    node = spec.get("nodeName", "")
    if not isinstance(node, str) or (node and not NAME.match(node)):
        ctx.err(join(sp, "nodeName"), f"not a valid node name: {node!r}")
        node = ""
    if template is None or len(ctx.errors) > before:
        return None
    return ReservationSpec(name=name, namespace=namespace, node=node, requests=template.requests, owners=owners,
                           allocate_once=allocate_once, ttl_s=ttl_s, node_selector=template.node_selector,
                           created_at=now, labels=dict(template.labels), priority=template.priority,
                           priority_class=template.priority_class, qos_class=template.qos_class)
