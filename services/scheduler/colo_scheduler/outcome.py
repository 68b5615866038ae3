"""What one cycle of :class:`colo_scheduler.core.Scheduler` decided: the placements to bind, the failures
(now unschedulable) and the evictions (preemption victims, reclaimed quota), as the service
(:mod:`colo_scheduler.service`) consumes them."""

from __future__ import annotations

from dataclasses import dataclass, field

from colo_scheduler.framework.runner import ScheduleResult
from colo_scheduler.podinfo import PodInfo

NOMINATION = "reservation"
"""Key of a pod's :class:`Nomination` in ``PodInfo.extra`` while it is placed on a reservation and not bound."""


def preempted_by(preemptor: PodInfo) -> str:
    """The eviction reason of a preemption's victims: ``Preempted by <namespace>/<name>``."""
    return f"Preempted by {preemptor.spec.namespace}/{preemptor.spec.name}"


@dataclass(slots=True)
class Placement:
    """A pod reserved on ``node`` (name) in this cycle, awaiting bind."""

    pod: PodInfo
    node: str
    decision_ms: float
    reservation: str = ""
    """The reservation the bind consumes ("" for none; :mod:`colo_scheduler.plugins.reservation`)."""


@dataclass(slots=True)
class Failure:
    """A pod no node accepted in this cycle, with the framework's diagnosis."""

    pod: PodInfo
    result: ScheduleResult
    decision_ms: float


@dataclass(slots=True)
class Eviction:
    """A placed pod to evict from ``node`` (name) for ``reason`` (``Preempted by <ns>/<name>``, or a quota's
    reclaim of its lent min); the service publishes it on ``pod.evict``."""

    pod: PodInfo
    node: str
    reason: str


@dataclass(slots=True)
class CycleOutcome:
    """What one cycle did: placements (reserved, to bind), failures (now unschedulable) and evictions
    (victims of preemption, and pods taken off their nodes to give a quota its lent min back)."""

    placements: list[Placement] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    evictions: list[Eviction] = field(default_factory=list)
