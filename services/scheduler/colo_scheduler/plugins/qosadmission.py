"""QoSAdmission (PreFilter): the valid priority/QoS class combinations of REFERENCE.md §1.

Rejects, as UNSCHEDULABLE_AND_UNRESOLVABLE (no cluster event can make such a pod valid),
a pod for which :func:`colo.classes.validate_classes` (BE not prod or unclassified; LSR/LSE
prod with a whole, non-zero number of cores; batch-* only for BE — Koordinator's pod
validating webhook rules) or :func:`colo.classes.resource_kind_problems` (mid-* only for
priority class mid; one resource kind per pod) finds a problem; the reason lists them all.
Admission (slo-manager) applies the same shared checks before the scheduler sees the pod;
this plugin keeps pods that bypass it out of the cluster. The verdict is cached per pod.
"""

from __future__ import annotations

from colo.classes import resource_kind_problems, validate_classes
from colo_scheduler.framework.interface import UNSCHEDULABLE_AND_UNRESOLVABLE, CycleState, Status
from colo_scheduler.podinfo import PodInfo

REASON = "invalid QoS/priority class"

_KEY = "qos_admission"


class QoSAdmission:
    """PreFilter on the pod's priority class, QoS class and requested resource kinds."""

    name = "QoSAdmission"
    events: frozenset[str] = frozenset()

    def pre_filter(self, state: CycleState, pod: PodInfo) -> Status | None:
        """None for a valid pod, else UNSCHEDULABLE_AND_UNRESOLVABLE naming every problem."""
        cached = pod.extra.get(_KEY)
        if not isinstance(cached, tuple):
            cached = pod.extra[_KEY] = tuple(validate_classes(pod.spec) + resource_kind_problems(pod.spec))
        problems: tuple[str, ...] = cached
        if not problems:
            return None
        return Status(UNSCHEDULABLE_AND_UNRESOLVABLE, f"{REASON}: " + "; ".join(problems))
