"""Per-pod scheduling facts computed once when a pod enters the queue (the PreFilter state).

Request vectors follow :data:`colo.messages.RESOURCE_NAMES` column order
(cpu, memory, batch_cpu, batch_memory, mid_cpu, mid_memory, pods): milli-cores,
bytes and a pod count.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass, field, fields

import numpy as np
import numpy.typing as npt

from colo.affinity import affinity_problems
from colo.classes import PRIORITY_RANGES, priority_class_of
from colo.messages import RESOURCE_NAMES, NodeSelectorTerm, PodSpec, PriorityClass, Resources

IntArray = npt.NDArray[np.int64]

COL: dict[str, int] = {name: i for i, name in enumerate(RESOURCE_NAMES)}
"""Resource field name → column in request / allocatable arrays."""

N_RES = len(RESOURCE_NAMES)

NOT_REQUESTED = np.iinfo(np.int64).min
"""``fit_request`` holds NOT_REQUESTED (int64's minimum) for resources the pod does not request, so
``free >= fit_request`` passes them whatever the node's free amount (−2^62 did not: a column
over-committed beyond it failed the compiled row filter, kernels.fit_rows)."""

KIND_COLUMNS: dict[str, tuple[int, int]] = {
    "native": (COL["cpu"], COL["memory"]),
    "batch": (COL["batch_cpu"], COL["batch_memory"]),
    "mid": (COL["mid_cpu"], COL["mid_memory"]),
}
"""Resource kind → its (cpu, memory) columns (REFERENCE.md §1 extended resources)."""


TermKey = tuple[tuple[str, str, tuple[str, ...]], ...]
"""Hashable form of a node selector term: (key, operator, values) per expression."""

ASSIGNED_CPUSET = "numa.cpuset"
"""``PodInfo.extra`` key of the cpuset (kernel list format, ``"0-3"``) NodeNUMAResource chose at Reserve: the
bind path stores it with the binding and puts it on ``PodBound``; a pod adopted from the store (restart, other
binders) carries it in before Reserve so the plugin books the same CPUs again."""


ASSIGNED_DEVICES = "deviceshare.devices"
"""``PodInfo.extra`` key of the GPUs DeviceShare chose at Reserve (``"index:milli,..."``,
:func:`colo.messages.devices_format`): stored with the binding and put on ``PodBound.devices`` like
:data:`ASSIGNED_CPUSET`; a pod adopted from the store carries it in so the plugin books the same GPUs again."""


def term_key(term: NodeSelectorTerm) -> TermKey:
    """``term`` as a :data:`TermKey`."""
    return tuple((r.key, r.operator, tuple(r.values)) for r in term.match_expressions)


def affinity_keys(spec: PodSpec) -> tuple[tuple[TermKey, ...] | None, tuple[tuple[int, TermKey], ...]]:
    """Hashable forms of the pod's required node affinity terms (None = no requirement) and of its
    preferred terms with their weights, for mask and score caches."""
    na = spec.affinity.node_affinity if spec.affinity is not None else None
    if na is None:
        return None, ()
    required = (tuple(term_key(t) for t in na.required.node_selector_terms)
                if na.required is not None else None)
    return required, tuple((p.weight, term_key(p.preference)) for p in na.preferred)


def resource_vector(r: Resources, pods: int | None = None) -> IntArray:
    """``r`` as a (7,) int64 vector in :data:`RESOURCE_NAMES` order; ``pods`` overrides the count."""
    return np.array((r.cpu, r.memory, r.batch_cpu, r.batch_memory, r.mid_cpu, r.mid_memory,
                     r.pods if pods is None else pods), dtype=np.int64)


def _round_percent(q: int, factor_percent: int) -> int:
    """round(q × factor / 100), halves away from zero, in integers (q, factor ≥ 0)."""
    return (2 * q * factor_percent + 100) // 200


def estimate_pod(
    spec: PodSpec,
    cpu_factor_percent: int = 85,
    memory_factor_percent: int = 70,
    default_cpu_milli: int = 250,
    default_memory_bytes: int = 200 * 1024 * 1024,
) -> tuple[int, int]:
    """Estimated usage of a pod: (cpu milli-cores, memory bytes). REFERENCE.md §4, oracle O3.

    Per resource, q = max(limit, request) of the class-translated resource: a pod's
    native, batch-* and mid-* amounts are summed (valid pods request only one kind,
    REFERENCE.md §1, so the sum is the translated amount). q = 0 → the default estimate;
    else round(q × factor / 100), capped at the limit when one is set.
    """
    r, lim = spec.requests, spec.limits
    out: list[int] = []
    for names, factor, default in (
        (("cpu", "batch_cpu", "mid_cpu"), cpu_factor_percent, default_cpu_milli),
        (("memory", "batch_memory", "mid_memory"), memory_factor_percent, default_memory_bytes),
    ):
        req = sum(getattr(r, n) for n in names)
        limit = sum(getattr(lim, n) for n in names)
        q = max(req, limit)
        if q <= 0:
            out.append(default)
            continue
        est = _round_percent(q, factor)
        out.append(min(est, limit) if limit > 0 else est)
    return out[0], out[1]


def pod_priority(spec: PodSpec) -> int:
    """The pod's priority value: explicit, else its class default (REFERENCE.md §1), else 0."""
    if spec.priority is not None:
        return spec.priority
    cls = priority_class_of(spec)
    return PRIORITY_RANGES[cls][2] if cls in PRIORITY_RANGES else 0


def resource_kind(spec: PodSpec) -> str:
    """``"batch"`` if the pod requests batch-*, ``"mid"`` if mid-*, else ``"native"``."""
    r, lim = spec.requests, spec.limits
    if r.batch_cpu or r.batch_memory or lim.batch_cpu or lim.batch_memory:
        return "batch"
    if r.mid_cpu or r.mid_memory or lim.mid_cpu or lim.mid_memory:
        return "mid"
    return "native"


@dataclass(slots=True)
class PodInfo:
    """A pod prepared for scheduling.

    ``request`` (7,) int64 with ``pods`` = 1; ``request_cols`` the columns with a
    non-zero request; ``estimate`` (2,) int64 cpu milli-cores / memory bytes
    (REFERENCE.md §4); ``kind_cols`` the (cpu, memory) columns of the pod's resource
    kind (adjacent columns); ``fit_request`` (7,) the request with :data:`NOT_REQUESTED` where
    nothing is requested; ``kind_request`` (2,) the request in the kind's columns;
    ``estimate200`` = 200 × estimate (for the integer threshold test); ``estimate_ints`` the estimate as
    Python ints (per-pod loops of the load estimate avoid tiny array operations), ``request_ints`` /
    ``request_col_ints`` the request and its non-zero columns likewise (one-row plugin methods);
    ``selector_key`` / ``tolerations_key`` hashable forms for mask caches;
    ``required_affinity_key`` / ``preferred_affinity_key`` those of the node affinity
    (:func:`affinity_keys`) and ``affinity_problems`` its validation errors
    (:func:`colo.affinity.affinity_problems`, empty when valid);
    ``attempts`` scheduling attempts so far, ``queued_at`` / ``last_attempt_at`` clock seconds.
    """

    spec: PodSpec
    uid: str
    priority: int
    priority_class: PriorityClass
    request: IntArray
    request_cols: npt.NDArray[np.intp]
    estimate: IntArray
    kind_cols: tuple[int, int]
    fit_request: IntArray
    kind_request: IntArray
    estimate200: IntArray
    selector_key: tuple[tuple[str, str], ...]
    tolerations_key: tuple[tuple[str, str, str, str], ...]
    estimate_ints: tuple[int, int] = (0, 0)
    request_ints: tuple[int, ...] = ()
    request_col_ints: tuple[int, ...] = ()
    required_affinity_key: tuple[TermKey, ...] | None = None
    preferred_affinity_key: tuple[tuple[int, TermKey], ...] = ()
    affinity_problems: tuple[str, ...] = ()
    attempts: int = 0
    queued_at: float = 0.0
    last_attempt_at: float = 0.0
    extra: dict[str, object] = field(default_factory=dict)


_FIELDS = operator.attrgetter(*(f.name for f in fields(PodInfo)))
"""Every field of a PodInfo, in constructor order."""


def clone_pod_info(template: PodInfo, spec: PodSpec, queued_at: float, extra: dict[str, object]) -> PodInfo:
    """A PodInfo of ``spec`` sharing ``template``'s derived arrays (same class: read-only by
    convention), with ``queued_at``, no attempts and ``extra``. Equivalent to ``copy.copy`` and
    setting those fields, at a sixth of its cost (the constructor with positional fields)."""
    info = PodInfo(*_FIELDS(template))
    info.spec, info.uid, info.queued_at = spec, spec.uid, queued_at
    info.attempts, info.last_attempt_at, info.extra = 0, 0.0, extra
    return info


def estimate_times_200(est: Sequence[int]) -> IntArray:
    """(2,) int64 200 × ``est`` (cpu milli-cores, memory bytes), saturated at int64's bounds: LoadAware's
    threshold test ``slack > 200 × estimate`` then rejects (or passes) as in Python ints where 200 ×
    the estimate leaves int64 (a wrapped product passed a 2^56 milli-core pod on any node)."""
    lo, hi = int(np.iinfo(np.int64).min), int(np.iinfo(np.int64).max)
    return np.array([min(max(200 * int(e), lo), hi) for e in est], np.int64)


def make_pod_info(
    spec: PodSpec,
    cpu_factor_percent: int = 85,
    memory_factor_percent: int = 70,
    default_cpu_milli: int = 250,
    default_memory_bytes: int = 200 * 1024 * 1024,
    queued_at: float = 0.0,
) -> PodInfo:
    """Build the :class:`PodInfo` of ``spec`` (estimate per :func:`estimate_pod`)."""
    request = resource_vector(spec.requests, pods=1)
    est = estimate_pod(spec, cpu_factor_percent, memory_factor_percent,
                       default_cpu_milli, default_memory_bytes)
    kind_cols = KIND_COLUMNS[resource_kind(spec)]
    required, preferred = affinity_keys(spec)
    return PodInfo(
        spec=spec,
        uid=spec.uid,
        priority=pod_priority(spec),
        priority_class=priority_class_of(spec),
        request=request,
        request_cols=np.array([i for i, v in enumerate(request.tolist()) if v > 0], np.intp),
        request_ints=tuple(request.tolist()),
        request_col_ints=tuple(i for i, v in enumerate(request.tolist()) if v > 0),
        estimate=np.array(est, dtype=np.int64),
        kind_cols=kind_cols,
        fit_request=np.array([v if v > 0 else NOT_REQUESTED for v in request.tolist()], np.int64),
        kind_request=request[kind_cols[0]: kind_cols[1] + 1].copy(),
        estimate200=estimate_times_200(est),
        estimate_ints=(int(est[0]), int(est[1])),
        selector_key=tuple(sorted(spec.node_selector.items())),
        tolerations_key=tuple((t.key, t.operator, t.value, t.effect) for t in spec.tolerations),
        required_affinity_key=required,
        preferred_affinity_key=preferred,
        affinity_problems=tuple(affinity_problems(spec.affinity)),
        queued_at=queued_at,
    )
