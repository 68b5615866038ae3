"""Workload and PodGroup admission: checks, expansion into pods, all-or-nothing. Pure functions.

A :class:`~colo.messages.WorkloadSpec` becomes pods (:func:`colo.workloads.expand`) that each go through the
same admission as a bare pod (:func:`colo_slo_manager.admission.admit`: profiles, class validation). When
anything is wrong — with the workload itself or with any one pod — nothing is admitted and one
:class:`~colo.messages.WorkloadRejected` lists every problem with its field path (``replicas: …``,
``template: …``, ``pod_group.min_member: …``). A pod naming a PodGroup by the
:data:`colo.messages.POD_GROUP_LABEL` label gets that group's :class:`~colo.messages.GangSpec`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

import msgspec

from colo.messages import (
    POD_GROUP_LABEL,
    GangSpec,
    PodAdmitted,
    PodGroupSpec,
    PodRejected,
    PodSpec,
    WorkloadRejected,
    WorkloadSpec,
)
from colo.workloads import (
    MAX_UID_CHARS,
    MAX_WORKLOAD_PODS,
    expand,
    gang_key,
    gang_of,
    initial_pods,
    referenced_group,
)
from colo_slo_manager.admission import admit
from colo_slo_manager.settings import SloManagerSettings

_IDENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,79}$")
"""uid / name / namespace of a workload or PodGroup: usable as a message id once a pod suffix is added."""
_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,252}/[A-Za-z0-9][A-Za-z0-9_.\-]{0,252}$")


def _ident_problems(path: str, obj: WorkloadSpec | PodGroupSpec,
                    fields: tuple[str, ...] = ("uid", "name", "namespace")) -> list[str]:
    out = []
    for field in fields:
        value = getattr(obj, field)
        if not _IDENT.fullmatch(value):
            out.append(f"{path}{field}: {value!r} is not a valid identifier (letters, digits, '_', '.', '-'; "
                       f"at most {MAX_UID_CHARS})")
    return out


def pod_group_problems(group: PodGroupSpec, path: str = "", embedded: bool = False) -> list[str]:
    """Problems of a PodGroup, each ``"<path><field>: <problem>"``: identifiers, ``min_member`` ≥ 1,
    ``timeout_s`` > 0 and finite (any length: REFERENCE.md §11), ``groups`` entries ``namespace/name``.
    An ``embedded`` gang's uid (``<workload uid>-gang``, derived from a uid checked already) is not
    checked: a workload uid of 76–80 characters is valid and so is its gang."""
    out = _ident_problems(path, group, ("name", "namespace") if embedded else ("uid", "name", "namespace"))
    if group.min_member < 1:
        out.append(f"{path}min_member: must be ≥ 1, got {group.min_member}")
    if not (group.timeout_s > 0 and math.isfinite(group.timeout_s)):
        out.append(f"{path}timeout_s: must be > 0 seconds, got {group.timeout_s}")
    for i, key in enumerate(group.groups):
        if not _KEY.fullmatch(key):
            out.append(f"{path}groups[{i}]: not a 'namespace/name' of a PodGroup: {key!r}")
    return out


def workload_problems(w: WorkloadSpec) -> list[str]:
    """Problems of the workload itself (not of its pods): identifiers, ``replicas`` ≥ 0, ``parallelism``
    ≥ 1, ``completions`` ≥ 1, at most :data:`MAX_WORKLOAD_PODS` pods, an embedded gang's checks and
    ``min_member`` ≤ the pods created at once, ``max_unavailable`` ≥ −1, not both an embedded gang and a
    named PodGroup."""
    out = _ident_problems("", w)
    if w.kind == "Job":
        if w.parallelism < 1:
            out.append(f"parallelism: must be ≥ 1, got {w.parallelism}")
        if w.completions < 1:
            out.append(f"completions: must be ≥ 1, got {w.completions}")
        total = w.completions
    else:
        if w.replicas < 0:
            out.append(f"replicas: must be ≥ 0, got {w.replicas}")
        total = w.replicas
    if total > MAX_WORKLOAD_PODS:
        out.append(f"{'completions' if w.kind == 'Job' else 'replicas'}: at most {MAX_WORKLOAD_PODS} pods, "
                   f"got {total}")
    if w.max_unavailable < -1:
        out.append(f"max_unavailable: must be ≥ 0 (or -1: no budget), got {w.max_unavailable}")
    if w.pod_group is not None:
        out += pod_group_problems(w.pod_group, "pod_group.", embedded=True)
        if w.pod_group.min_member > initial_pods(w) >= 0:
            out.append(f"pod_group.min_member: must be at most the workload's {initial_pods(w)} pods, "
                       f"got {w.pod_group.min_member}")
        if POD_GROUP_LABEL in w.template.labels:
            out.append(f"template.labels.{POD_GROUP_LABEL}: a workload either embeds a gang or names a PodGroup, "
                       "not both")
    return out


def workload_gang(w: WorkloadSpec, groups: Mapping[str, PodGroupSpec]) -> tuple[GangSpec | None, list[str]]:
    """The gang of ``w``'s pods and the problems finding it: the embedded one (total = the pods created at
    once), or the PodGroup its template names (total 0: other workloads may join it), which must be in
    ``groups`` (``namespace/name`` → PodGroupSpec)."""
    if w.pod_group is not None:
        return gang_of(w.pod_group, initial_pods(w)), []
    name = w.template.labels.get(POD_GROUP_LABEL, "")
    if not name:
        return None, []
    key = gang_key(w.namespace, name)
    group = groups.get(key)
    if group is None:
        return None, [f"template.labels.{POD_GROUP_LABEL}: unknown PodGroup {key!r} (submit it first)"]
    return gang_of(group, 0), []


def admit_pods(pods: list[PodSpec], settings: SloManagerSettings, now: float) -> tuple[list[PodAdmitted], list[str]]:
    """Admission of each pod (:func:`colo_slo_manager.admission.admit`); the admitted ones and, when any is
    rejected, every distinct problem as ``template: <problem>`` (``pod <name>: <problem>`` when it names the
    pod)."""
    admitted: list[PodAdmitted] = []
    problems: dict[str, None] = {}
    for pod in pods:
        result = admit(pod, settings, now)
        if isinstance(result, PodAdmitted):
            admitted.append(result)
            continue
        for problem in result.reason.split("; "):
            own = pod.uid in problem or pod.name in problem
            problems[f"pod {pod.name}: {problem}" if own else f"template: {problem}"] = None
    return admitted, list(problems)


def admit_workload(w: WorkloadSpec, settings: SloManagerSettings, groups: Mapping[str, PodGroupSpec],
                   now: float) -> tuple[list[PodAdmitted], GangSpec | None] | WorkloadRejected:
    """Admission of a workload at clock time ``now`` (seconds): every pod created at once
    (:func:`colo.workloads.initial_pods`) admitted, with the gang they carry; or one rejection listing every
    problem, and then none of its pods. Never raises for bad input."""
    problems = workload_problems(w)
    gang, gang_problems = workload_gang(w, groups)
    problems += gang_problems
    admitted: list[PodAdmitted] = []
    if not problems:
        admitted, pod_problems = admit_pods(expand(w, range(initial_pods(w)), gang), settings, now)
        problems += pod_problems
    if problems:
        return WorkloadRejected(kind=w.kind, uid=w.uid, name=w.name, namespace=w.namespace, errors=problems, at=now)
    return admitted, gang


def with_gang(pod: PodSpec, groups: Mapping[str, PodGroupSpec], now: float) -> PodSpec | PodRejected:
    """``pod`` with the gang of the PodGroup its :data:`colo.messages.POD_GROUP_LABEL` label names (total 0:
    unknown), unchanged when it names none or already carries a gang, rejected when the group is unknown."""
    key = referenced_group(pod)
    if not key or pod.gang is not None:
        return pod
    group = groups.get(key)
    if group is None:
        return PodRejected(uid=pod.uid, name=pod.name, at=now,
                           reason=f"labels.{POD_GROUP_LABEL}: unknown PodGroup {key!r} (submit it first)")
    return msgspec.structs.replace(pod, gang=gang_of(group, 0))
