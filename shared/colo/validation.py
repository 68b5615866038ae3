"""The checks admission applies to a pod, in one place (docs/cli.md "One validation path").

The slo-manager's admission (``colo_slo_manager.admission.admit``), ``colo submit`` and ``colo submit
--dry-run`` (through :mod:`colo.manifests`) and the REST API call these functions, so that a pod a dry run
accepts is one admission admits (unless a colocation profile rewrites it into an invalid one) and every
refusal gives the same reason everywhere. Pure functions; each returns every problem found (an empty list
when valid), as sentences without a field path (the callers add theirs).

========================  ======================================================================
function                  checks
========================  ======================================================================
identity_problems         uid, name, namespace: non-empty identifiers (letters, digits, ``_ . -``)
quantity_problems         requests/limits within 0..:data:`MAX_QUANTITY`; request ≤ limit; priority
                          int32 and inside the range of its priority class (REFERENCE.md §1)
class_problems            valid QoS × priority class combinations and resource kinds
                          (:func:`colo.classes.validate_classes`, :func:`colo.classes.resource_kind_problems`)
affinity_problems         node affinity (:func:`colo.affinity.affinity_problems`)
========================  ======================================================================
"""

from __future__ import annotations

import re

from colo.affinity import affinity_problems
from colo.classes import priority_class_of_value, resource_kind_problems, validate_classes
from colo.messages import PodSpec

__all__ = ["IDENT", "MAX_QUANTITY", "RESOURCE_FIELDS", "admission_problems", "affinity_problems",
           "basic_problems", "class_problems", "identity_problems", "pod_problems", "quantity_problems"]

IDENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,252}$")
"""uid / name / namespace: a letter or digit, then letters, digits, ``_ . -`` (usable as a message id)."""

MAX_QUANTITY = 2**50
"""Largest accepted resource amount (milli-cores, bytes, count); larger would overflow the scheduler's int64
sums (the scheduler rejects the same bound, ``colo_scheduler.validation``)."""

RESOURCE_FIELDS = ("cpu", "memory", "batch_cpu", "batch_memory", "mid_cpu", "mid_memory")
"""The :class:`colo.messages.Resources` fields a request/limit pair is checked on (``pods`` has no limit)."""

INT32 = (-(2**31), 2**31 - 1)
"""Inclusive bounds of a Kubernetes priority value (``int32``)."""


def identity_problems(pod: PodSpec) -> list[str]:
    """uid, name and namespace: each non-empty and an :data:`IDENT` (no trailing newline either)."""
    out: list[str] = []
    for field in ("uid", "name", "namespace"):
        value = getattr(pod, field)
        if not value:
            out.append(f"{field} must not be empty")
        elif not IDENT.fullmatch(value):  # fullmatch: `$` lets a trailing newline through
            out.append(f"{field} {value!r} is not a valid identifier (letters, digits, '_', '.', '-')")
    return out


def quantity_problems(pod: PodSpec) -> list[str]:
    """Negative or absurd (> :data:`MAX_QUANTITY`) requests/limits, a request above its limit (Kubernetes
    refuses it too), a priority outside int32 or outside the range of the pod's explicit priority class
    (REFERENCE.md §1 :data:`colo.classes.PRIORITY_RANGES`)."""
    out: list[str] = []
    for kind, res in (("request", pod.requests), ("limit", pod.limits)):
        for f in (*RESOURCE_FIELDS, "pods"):
            value = getattr(res, f)
            if value < 0:
                out.append(f"{kind} {f} must not be negative, got {value}")
            elif value > MAX_QUANTITY:
                out.append(f"{kind} {f} must not exceed {MAX_QUANTITY}, got {value}")
    if pod.priority is not None and not INT32[0] <= pod.priority <= INT32[1]:
        out.append(f"priority {pod.priority} is outside the int32 range")
    for f in RESOURCE_FIELDS:
        req, lim = getattr(pod.requests, f), getattr(pod.limits, f)
        if lim > 0 and req > lim:
            out.append(f"request {f} {req} exceeds limit {lim}")
    if pod.priority_class is not None and pod.priority is not None:
        by_value = priority_class_of_value(pod.priority)
        if pod.priority_class != "none" and by_value != pod.priority_class:
            out.append(f"priority {pod.priority} is outside the {pod.priority_class} range")
    return out + gpu_problems(pod)


def gpu_problems(pod: PodSpec) -> list[str]:
    """Problems of the pod's GPU request (``gpu``; docs/gpu.md): ``count`` in 1..8, ``milli`` in 1..1000,
    several devices only whole (``milli`` 1000), model names non-empty."""
    g = pod.gpu
    if g is None:
        return []
    out: list[str] = []
    if not 1 <= g.count <= 8:
        out.append(f"gpu.count must lie in 1..8, got {g.count}")
    if not 1 <= g.milli <= 1000:
        out.append(f"gpu.milli must lie in 1..1000, got {g.milli}")
    elif g.count > 1 and g.milli != 1000:
        out.append(f"gpu: a share ({g.milli} milli) is of one GPU only, got count {g.count}")
    out.extend(f"gpu.models[{i}]: empty model name" for i, m in enumerate(g.models) if not m.strip())
    return out


def basic_problems(pod: PodSpec) -> list[str]:
    """Problems independent of classes: :func:`identity_problems` + :func:`quantity_problems`."""
    return identity_problems(pod) + quantity_problems(pod)


def class_problems(pod: PodSpec) -> list[str]:
    """Invalid class combinations and resource kinds of ``pod`` as it would be admitted."""
    return validate_classes(pod) + resource_kind_problems(pod)


def admission_problems(submitted: PodSpec, admitted: PodSpec) -> list[str]:
    """What admission refuses: :func:`basic_problems` and node affinity of the pod as ``submitted``, then
    :func:`class_problems` of the pod as ``admitted`` (after a colocation profile, or ``submitted`` itself).
    The checks the scheduler applies are among them, so a pod it would refuse is refused up front."""
    return basic_problems(submitted) + affinity_problems(submitted.affinity) + class_problems(admitted)


def pod_problems(pod: PodSpec, identity: bool = True) -> list[str]:
    """:func:`admission_problems` of a pod no profile rewrites (what ``colo submit --dry-run`` and the API
    check); ``identity=False`` skips :func:`identity_problems` (a workload's template, named by admission)."""
    head = basic_problems(pod) if identity else quantity_problems(pod)
    return head + affinity_problems(pod.affinity) + class_problems(pod)
