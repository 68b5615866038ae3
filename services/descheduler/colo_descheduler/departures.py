"""A pod that left its node by itself: the share of the node's window mean it still holds (no I/O).

A NodeMetric's node usage is the mean over ``window_s`` seconds ending at ``at`` (REFERENCE.md §2, 300 s), so a
pod that Succeeded, or was evicted by something other than the descheduler (the node agent's BE memory
eviction), still adds ``usage × covered`` to its node's figure until the window no longer covers any second it
ran there, ``covered`` being that share of the window (:func:`colo_descheduler.booking.covered`). Its pod list
already leaves it out, so the descheduler's usage (the node figure less host apps) would count a pod that is
gone: a node whose 25 % pod had just finished looked 65 % full where it carried 40 %, and lost a pod it did not
need to (2-hour audited run, seed 1; ``tests/descheduler/test_departures.py``).

The descheduler's own evictions are not departures: their :class:`colo_descheduler.booking.Booking` takes the
same share off (and also books the target). A departure ends once a metric of the node no longer lists the pod
and its window starts at or after the pod left; ``booking_ttl_s`` after the departure is the backstop.
"""

from __future__ import annotations

from dataclasses import dataclass

from colo.messages import NodeMetric
from colo_descheduler.booking import covered

Vec = tuple[int, int]
"""(cpu milli-cores, memory bytes)."""


@dataclass
class Departure:
    """Pod ``uid`` ran on ``node`` from ``ran_since`` to ``left_at`` (seconds) using ``usage`` (cpu m, memory B,
    its per-pod figure in the newest metric that listed it); ``done`` latches once no metric needs it."""

    uid: str
    node: str
    usage: Vec
    ran_since: float
    left_at: float
    done: bool = False

    def share(self, metric: NodeMetric) -> float:
        """Share (0–1) of ``usage`` that ``metric`` of the node still holds although the pod is gone.

        0 while the metric still lists the pod (it ran there when the metric was taken: it is in its pod list
        and Σ pods as any other pod) and once the window starts at or after ``left_at`` (latches ``done``).
        """
        if self.done or any(p.uid == self.uid for p in metric.pods):
            return 0.0
        start = metric.at - metric.window_s
        if start >= self.left_at:
            self.done = True
            return 0.0
        return covered(start, metric.at, self.ran_since, min(self.left_at, metric.at))


def departure_from(usage: Vec, uid: str, node: str, ran_since: float, left_at: float) -> Departure | None:
    """The departure of ``uid`` from ``node`` at ``left_at`` with ``usage`` (cpu m, memory B: the pod's figure in
    the newest metric of the node that listed it, whichever of that node's metric and the pod's status came
    first); None when no metric showed the pod (``usage`` (0, 0): it left before any report, nothing of it to
    take off)."""
    if usage == (0, 0):
        return None
    return Departure(uid, node, usage, ran_since, left_at)
