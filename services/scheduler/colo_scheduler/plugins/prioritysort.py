"""PrioritySort (QueueSort): higher priority first, then earlier ``created_at`` (Kubernetes PrioritySort)."""

from __future__ import annotations

from colo_scheduler.podinfo import PodInfo


class PrioritySort:
    """Orders the active queue by (−priority, created_at seconds)."""

    name = "PrioritySort"
    events: frozenset[str] = frozenset()

    def sort_key(self, pod: PodInfo) -> tuple[float, ...]:
        """(−priority, created_at)."""
        return (-float(pod.priority), pod.spec.created_at)
