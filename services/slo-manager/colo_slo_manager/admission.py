"""Pod admission: colocation profiles and class validation (REFERENCE.md §1). Pure functions; the checks
themselves are :mod:`colo.validation` (shared with ``colo submit --dry-run`` and the API).

A submitted :class:`~colo.messages.PodSpec` is either admitted — with the first
matching colocation profile applied — or rejected with every problem found.
"""

from __future__ import annotations

import hashlib

import msgspec

from colo.affinity import affinity_problems
from colo.classes import (
    PRIORITY_CLASS_LABEL,
    PRIORITY_RANGES,
    QOS_CLASS_LABEL,
    priority_class_of,
    qos_class_of,
)
from colo.messages import PodAdmitted, PodRejected, PodSpec, PriorityClass, Resources
from colo.validation import MAX_QUANTITY, RESOURCE_FIELDS, basic_problems, class_problems
from colo_slo_manager.selectors import NAMESPACE_NAME_LABEL
from colo_slo_manager.settings import ColocationProfile, SloManagerSettings

KOORDINATOR_PRIORITY_LABEL = "koordinator.sh/priority"
"""Pod label of the sub-priority within a priority class (Koordinator ``koordinatorPriority``)."""

__all__ = ["KOORDINATOR_PRIORITY_LABEL", "MAX_QUANTITY", "admit", "apply_profile", "basic_problems",
           "probability_bucket", "profile_matches", "translate_resources"]
_RESOURCE_FIELDS = RESOURCE_FIELDS


def probability_bucket(profile_name: str, uid: str) -> int:
    """A stable bucket 0..99 for ``uid`` under ``profile_name`` (sha256, independent of process/hash seed).

    A profile with ``probability_percent`` p applies to the pod when the bucket is < p,
    so replays of the same pods decide the same.
    """
    digest = hashlib.sha256(f"{profile_name}/{uid}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % 100


def profile_matches(profile: ColocationProfile, pod: PodSpec) -> bool:
    """True when every selector of ``profile`` matches ``pod`` and the uid falls under its probability.

    The namespace selector sees the namespace's one known label, ``kubernetes.io/metadata.name``.
    Classes are resolved from the pod as submitted (REFERENCE.md §1, :mod:`colo.classes`).
    """
    if profile.namespaces and pod.namespace not in profile.namespaces:
        return False
    ns = profile.namespace_selector
    if (ns.match_labels or ns.match_expressions) and not ns.matches({NAMESPACE_NAME_LABEL: pod.namespace}):
        return False
    if any(pod.labels.get(k) != v for k, v in profile.match_labels.items()):
        return False
    if not all(r.matches(pod.labels) for r in profile.match_expressions):
        return False
    if profile.match_qos_classes and qos_class_of(pod) not in profile.match_qos_classes:
        return False
    if profile.match_priority_classes and priority_class_of(pod) not in profile.match_priority_classes:
        return False
    return probability_bucket(profile.name, pod.uid) < profile.probability_percent


def _fill_request_from_limit(requests: Resources, limits: Resources) -> Resources:
    """Requests with every zero request set to its non-zero limit (Kubernetes defaulting)."""
    changes = {
        f: getattr(limits, f)
        for f in _RESOURCE_FIELDS
        if getattr(requests, f) == 0 and getattr(limits, f) > 0
    }
    return _replace(requests, **changes) if changes else requests


def _replace(res: Resources, **changes: int) -> Resources:
    values = {f: getattr(res, f) for f in (*_RESOURCE_FIELDS, "pods")}
    values.update(changes)
    return Resources(**values)


def translate_resources(res: Resources, target: PriorityClass) -> Resources:
    """Move native cpu/memory of ``res`` into batch-* (target batch/free) or mid-* (target mid).

    Amounts add to any batch-*/mid-* already present; other targets return ``res`` unchanged.
    Units are kept: milli-cores and bytes (REFERENCE.md §1 extended resources).
    """
    if target in ("batch", "free"):
        return _replace(res, cpu=0, memory=0, batch_cpu=res.batch_cpu + res.cpu,
                        batch_memory=res.batch_memory + res.memory)
    if target == "mid":
        return _replace(res, cpu=0, memory=0, mid_cpu=res.mid_cpu + res.cpu,
                        mid_memory=res.mid_memory + res.memory)
    return res


def apply_profile(profile: ColocationProfile, pod: PodSpec) -> PodSpec:
    """``pod`` rewritten by ``profile``: classes, priority, scheduler name, labels, annotations, resources.

    The resolved QoS and priority classes are written explicitly into the result (and its
    ``koordinator.sh/*`` labels) so that translation to extended resources cannot change
    how later readers classify the pod. The priority value defaults to the class default
    of REFERENCE.md §1 when the profile sets a class but no value; ``koordinator_priority``
    becomes the ``koordinator.sh/priority`` label.
    """
    qos = profile.qos_class or qos_class_of(pod)
    prio_class = profile.priority_class or priority_class_of(pod)
    priority = pod.priority
    if profile.priority is not None:
        priority = profile.priority
    elif profile.priority_class is not None and prio_class in PRIORITY_RANGES:
        priority = PRIORITY_RANGES[prio_class][2]
    labels = {**pod.labels, **profile.labels, QOS_CLASS_LABEL: qos, PRIORITY_CLASS_LABEL: prio_class}
    if profile.koordinator_priority is not None:
        labels[KOORDINATOR_PRIORITY_LABEL] = str(profile.koordinator_priority)
    requests, limits = pod.requests, pod.limits
    if profile.translate_resources:
        requests = translate_resources(_fill_request_from_limit(requests, limits), prio_class)
        limits = translate_resources(limits, prio_class)
    return msgspec.structs.replace(
        pod,
        qos_class=qos,
        priority_class=prio_class,
        priority=priority,
        scheduler_name=profile.scheduler_name or pod.scheduler_name,
        labels=labels,
        annotations={**pod.annotations, **profile.annotations},
        requests=requests,
        limits=limits,
    )


def admit(pod: PodSpec, settings: SloManagerSettings, now: float) -> PodAdmitted | PodRejected:
    """Admission of one submitted pod at clock time ``now`` (seconds).

    With ``settings.colocation_enabled`` the first matching profile (in order) is applied
    (:func:`apply_profile`); otherwise the pod is only validated. The result is rejected
    when :func:`basic_problems` or :func:`colo.affinity.affinity_problems` find anything, or
    :func:`colo.classes.validate_classes` or :func:`colo.classes.resource_kind_problems` on the
    pod as it would be admitted (the checks the scheduler applies, so that a pod it would refuse
    anyway is refused here with its reasons); the reason lists every problem, ``"; "``-separated.
    Never raises for bad input.
    """
    problems = basic_problems(pod) + affinity_problems(pod.affinity)
    profile_name = ""
    admitted = pod
    if not problems and settings.colocation_enabled:
        for profile in settings.profiles:
            if profile_matches(profile, pod):
                admitted = apply_profile(profile, pod)
                profile_name = profile.name
                break
    problems += class_problems(admitted)
    if problems:
        prefix = f"profile {profile_name}: " if profile_name else ""
        return PodRejected(uid=pod.uid, name=pod.name, reason=prefix + "; ".join(problems), at=now)
    return PodAdmitted(spec=admitted, at=now, profile=profile_name)
