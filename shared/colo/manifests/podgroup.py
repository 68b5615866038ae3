"""``kind: PodGroup`` (scheduling.sigs.k8s.io/v1alpha1) and Koordinator's gang annotations →
:class:`colo.messages.PodGroupSpec` (REFERENCE.md §9).

A PodGroup reads ``spec.minMember`` (≥ 1, default 1) and ``spec.scheduleTimeoutSeconds`` (> 0 seconds,
any length, default :data:`colo.messages.DEFAULT_GANG_TIMEOUT_S`), and from its annotations
:data:`MODE_ANNOTATION` (``Strict`` | ``NonStrict``) and :data:`GROUPS_ANNOTATION` (a JSON list of
``namespace/name`` or ``name``: the gangs that must be satisfied together with this one). A workload embeds a
gang with the same annotations plus :data:`MIN_AVAILABLE_ANNOTATION` and :data:`WAITING_TIME_ANNOTATION`
(Koordinator's gang protocol, on the workload or on its pod template).
"""

from __future__ import annotations

import json
from typing import Any, cast

from colo.manifests.base import NAME, Ctx, duration_s, identifiers, join
from colo.messages import DEFAULT_GANG_TIMEOUT_S, GangMode, PodGroupSpec
from colo.workloads import MAX_UID_CHARS

GANG_PREFIX = "gang.scheduling.koordinator.sh/"
NAME_ANNOTATION = GANG_PREFIX + "name"
"""The embedded gang's name (default: the workload's name)."""
MIN_AVAILABLE_ANNOTATION = GANG_PREFIX + "min-available"
"""Members that must be placed together (≥ 1, ≤ the workload's pods); its presence embeds a gang."""
WAITING_TIME_ANNOTATION = GANG_PREFIX + "waiting-time"
"""How long placed members wait at Permit: seconds or a duration (``"600s"``, ``"2h"``), > 0, no cap."""
MODE_ANNOTATION = GANG_PREFIX + "mode"
"""``Strict`` (default) or ``NonStrict``."""
GROUPS_ANNOTATION = GANG_PREFIX + "groups"
"""JSON list of the gangs of one gang group, ``["ns/ps", "ns/worker"]``."""
MODES = ("Strict", "NonStrict")


def gang_groups(ctx: Ctx, raw: str | None, path: str, namespace: str) -> list[str]:
    """The :data:`GROUPS_ANNOTATION` value as ``namespace/name`` keys (a bare name is in ``namespace``)."""
    if raw is None:
        return []
    try:
        value = json.loads(raw)
    except ValueError:
        value = None
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
        ctx.err(path, f"expected a JSON list of 'namespace/name', got {raw!r}")
        return []
    out: list[str] = []
    for i, item in enumerate(value):
        ns, _, name = item.rpartition("/")
        if not NAME.match(name) or (ns and not NAME.match(ns)):
            ctx.err(join(path, i), f"not a 'namespace/name' of a PodGroup: {item!r}")
            continue
        out.append(f"{ns or namespace}/{name}")
    return out


def gang_mode(ctx: Ctx, raw: str | None, path: str) -> GangMode:
    """The :data:`MODE_ANNOTATION` value; ``Strict`` when absent."""
    if raw is None:
        return "Strict"
    if raw not in MODES:
        ctx.err(path, f"expected Strict or NonStrict, got {raw!r}")
        return "Strict"
    return cast(GangMode, raw)


def parse_pod_group(ctx: Ctx, doc: dict[str, Any], path: str, now: float) -> PodGroupSpec | None:
    """A PodGroup document → PodGroupSpec (uid ``metadata.uid`` or ``<namespace>-<name>``, ``created_at =
    now``); None after recording problems."""
    before = len(ctx.errors)
    mp = join(path, "metadata")
    meta = ctx.mapping(doc.get("metadata"), mp, required=True)
    name = ctx.name(meta, mp) if meta else ""
    namespace = str(meta.get("namespace", "default"))
    uid = str(meta.get("uid") or f"{namespace}-{name}")
    if name:
        identifiers(ctx, meta, mp, uid=uid, name=name, namespace=namespace)
    annotations = ctx.str_map(meta.get("annotations"), join(mp, "annotations"))
    sp = join(path, "spec")
    spec = ctx.mapping(doc.get("spec"), sp)
    ctx.known(spec, sp, ("minMember", "scheduleTimeoutSeconds"))
    min_member = ctx.integer(spec.get("minMember"), join(sp, "minMember"), 1, 1)
    timeout_s = duration_s(ctx, spec.get("scheduleTimeoutSeconds"), join(sp, "scheduleTimeoutSeconds"),
                           DEFAULT_GANG_TIMEOUT_S)
    ap = join(mp, "annotations")
    mode = gang_mode(ctx, annotations.get(MODE_ANNOTATION), join(ap, MODE_ANNOTATION))
    groups = gang_groups(ctx, annotations.get(GROUPS_ANNOTATION), join(ap, GROUPS_ANNOTATION), namespace)
    if len(ctx.errors) > before:
        return None
    return PodGroupSpec(uid=uid, name=name, namespace=namespace,
                        min_member=min_member, timeout_s=timeout_s, mode=mode, groups=groups, created_at=now)


def embedded_gang(ctx: Ctx, annotations: dict[str, str], paths: dict[str, str], name: str, namespace: str,
                  uid: str, now: float) -> PodGroupSpec | None:
    """The gang a workload embeds with :data:`MIN_AVAILABLE_ANNOTATION` in ``annotations`` (the template's
    overlaid by the workload's), or None when it embeds none; ``paths`` gives the annotations' path of each
    key (where it was written)."""
    def at(key: str) -> str:
        return join(paths.get(key, ""), key)

    if MIN_AVAILABLE_ANNOTATION not in annotations:
        for key in (WAITING_TIME_ANNOTATION, MODE_ANNOTATION, GROUPS_ANNOTATION, NAME_ANNOTATION):
            if key in annotations:
                ctx.err(at(key), f"needs {MIN_AVAILABLE_ANNOTATION} (the gang's minimum members)")
        return None
    before = len(ctx.errors)
    min_member = ctx.integer(annotations[MIN_AVAILABLE_ANNOTATION], at(MIN_AVAILABLE_ANNOTATION), 1, 1)
    timeout_s = duration_s(ctx, annotations.get(WAITING_TIME_ANNOTATION), at(WAITING_TIME_ANNOTATION),
                           DEFAULT_GANG_TIMEOUT_S)
    mode = gang_mode(ctx, annotations.get(MODE_ANNOTATION), at(MODE_ANNOTATION))
    groups = gang_groups(ctx, annotations.get(GROUPS_ANNOTATION), at(GROUPS_ANNOTATION), namespace)
    gang_name = annotations.get(NAME_ANNOTATION, name)
    if not NAME.match(gang_name) or len(gang_name) > MAX_UID_CHARS:
        ctx.err(at(NAME_ANNOTATION), f"not a valid name of at most {MAX_UID_CHARS} characters: {gang_name!r}")
    if len(ctx.errors) > before:
        return None
    return PodGroupSpec(uid=f"{uid}-gang", name=gang_name, namespace=namespace, min_member=min_member,
                        timeout_s=timeout_s, mode=mode, groups=groups, created_at=now)
