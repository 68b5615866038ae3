"""Priority preemption (Kubernetes DefaultPreemption as a PostFilter): candidates, victims, node choice,
nomination. See :mod:`.plugin`."""

from __future__ import annotations

from colo_scheduler.plugins.preemption.nominator import NominatedPod, Nominator, PendingEviction
from colo_scheduler.plugins.preemption.plugin import DefaultPreemption, DefaultPreemptionArgs

__all__ = ["DefaultPreemption", "DefaultPreemptionArgs", "NominatedPod", "Nominator", "PendingEviction"]
