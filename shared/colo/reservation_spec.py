"""What a submitted reservation means (REFERENCE.md §9; Koordinator ``Reservation``): who owns it and which
submissions are valid. The store side is :mod:`colo.reservations`, the scheduler places them.

Owner matching (:func:`owner_matches`): a :class:`~colo.messages.ReservationOwner` matches a pod when every
field it sets matches: ``uid`` the pod's uid, ``workload`` its ``namespace/app``
(:func:`colo.reservations.owner_workload`), ``owner_kind`` / ``owner_name`` its controller
(:attr:`colo.messages.PodSpec.owner`, as Koordinator's ``owners[].controller``), ``namespace`` its namespace,
``match_labels`` a subset of its labels (Koordinator's ``owners[].labelSelector.matchLabels``). An owner
setting nothing would match every pod and is refused (:func:`reservation_problems`). A pod matches a
reservation when it matches any of its owners. The store's bind script applies the same rule
(:data:`OWNED_BY_FN`), so the scheduler's choice and the store's check never disagree.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from colo.messages import RESOURCE_NAMES, PodSpec, ReservationOwner, ReservationSpec

MAX_QUANTITY = 2**50
"""Largest amount a reservation may request (milli-cores, bytes), as for pods: exact in the store's Lua."""

_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
"""Kubernetes object names (RFC 1123 subdomain)."""


def pod_workload(spec: PodSpec) -> str:
    """``namespace/app`` of the pod's workload ("" for a standalone pod): ``spec.app``, else the ``app``
    label (the descheduler's workload, docs/descheduler.md)."""
    app = spec.app or spec.labels.get("app", "")
    return f"{spec.namespace}/{app}" if app else ""


def owner_is_set(owner: ReservationOwner) -> bool:
    """Whether ``owner`` selects anything (sets at least one field)."""
    return bool(owner.uid or owner.workload or owner.owner_kind or owner.owner_name or owner.namespace
                or owner.match_labels)


def owner_matches(owner: ReservationOwner, spec: PodSpec) -> bool:
    """Whether pod ``spec`` matches every field ``owner`` sets (module doc); False for an owner setting none."""
    if not owner_is_set(owner):
        return False
    if owner.uid and owner.uid != spec.uid:
        return False
    if owner.workload and owner.workload != pod_workload(spec):
        return False
    ref = spec.owner
    if owner.owner_kind and (ref is None or ref.kind != owner.owner_kind):
        return False
    if owner.owner_name and (ref is None or ref.name != owner.owner_name):
        return False
    if owner.namespace and owner.namespace != spec.namespace:
        return False
    labels = spec.labels
    return all(labels.get(k) == v for k, v in owner.match_labels.items())


def pod_facts(spec: PodSpec) -> dict[str, Any]:
    """The pod's fields :data:`OWNED_BY_FN` matches owners against, as JSON-ready data."""
    ref = spec.owner
    return {"uid": spec.uid, "workload": pod_workload(spec), "owner_kind": ref.kind if ref else "",
            "owner_name": ref.name if ref else "", "namespace": spec.namespace, "labels": dict(spec.labels)}


OWNED_BY_FN = """
local function owner_field(o, f)
  local v = o[f]
  if type(v) ~= 'string' then return '' end
  return v
end
local function owned_by(raw, p)
  if not raw or raw == '' then return false end
  for _, o in ipairs(cjson.decode(raw)) do
    local set, ok = false, true
    for _, f in ipairs({'uid', 'workload', 'owner_kind', 'owner_name', 'namespace'}) do
      local v = owner_field(o, f)
      if v ~= '' then
        set = true
        if v ~= p[f] then ok = false end
      end
    end
    if type(o.match_labels) == 'table' then
      for k, v in pairs(o.match_labels) do
        set = true
        if p.labels[k] ~= v then ok = false end
      end
    end
    if set and ok then return true end
  end
  return false
end
"""
"""Lua of :func:`owner_matches` for the store's bind script: ``owned_by(raw, p)`` with ``raw`` the
reservation's owners (JSON list of :class:`~colo.messages.ReservationOwner`) and ``p`` the decoded
:func:`pod_facts`."""


def owner_problems(owners: Sequence[ReservationOwner], path: str = "owners") -> list[str]:
    """Problems of an owner list, each with its field path: empty, or an owner selecting nothing."""
    if not owners:
        return [f"{path}: at least one owner is needed (uid, workload, owner_kind/owner_name, namespace, "
                "match_labels)"]
    return [f"{path}[{i}]: sets none of uid, workload, owner_kind, owner_name, namespace, match_labels "
            "(it would match every pod)" for i, o in enumerate(owners) if not owner_is_set(o)]


def reservation_problems(spec: ReservationSpec) -> list[str]:
    """Every problem of a submitted reservation, each with its field path (empty = valid): the name (a
    Kubernetes object name), ``requests`` (each 0..:data:`MAX_QUANTITY`; ``pods`` is implied: one slot),
    ``owners`` (:func:`owner_problems`), ``ttl_s`` (finite, > 0), ``created_at`` (finite, >= 0)."""
    out = [] if _NAME_RE.match(spec.name) else [
        f"name: {spec.name!r} is not a Kubernetes object name (lower-case letters, digits, '-', '.')"]
    for field in RESOURCE_NAMES:
        v = getattr(spec.requests, field)
        if field == "pods":
            if v not in (0, 1):
                out.append("requests.pods: a reservation holds one pod slot; leave it 0 or 1")
        elif not 0 <= v <= MAX_QUANTITY:
            out.append(f"requests.{field}: must be within 0..{MAX_QUANTITY}, got {v}")
    out += owner_problems(spec.owners)
    if not (math.isfinite(spec.ttl_s) and spec.ttl_s > 0):
        out.append(f"ttl_s: must be a finite number of seconds > 0, got {spec.ttl_s}")
    if not (math.isfinite(spec.created_at) and spec.created_at >= 0):
        out.append(f"created_at: must be finite and >= 0, got {spec.created_at}")
    return out
