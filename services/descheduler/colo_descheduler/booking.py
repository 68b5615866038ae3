"""A migration's booking: the usage it takes off its source and adds to its target until the metrics show it.

A NodeMetric's node usage is the mean over ``window_s`` seconds ending at ``at`` (REFERENCE.md §2, 300 s), and
the descheduler's node usage is system + Σ pods, which equals that node figure less host apps (system is
node − Σ pods − host apps; :func:`base_usage` reads the node figure itself where the metric has it). So a pod
contributes ``usage × covered`` to a node's figure, where ``covered`` is the share of the window it ran there.
After an eviction:

- on the **source**, its share is still in the node figure while the window covers any second it ran there
  (after it left the pod list, as part of system usage); the booking takes ``usage × covered_source`` off;
- on the **target** (the node the replacement was bound on, else the booked target), the replacement is only
  partly in the figure until it has run for a whole window; the booking adds ``usage × (1 − covered_target)``.

A metric without its node figure (``node_usage`` 0) tells only through its pod list: a listed pod's figure is
in Σ pods (the source takes all of ``usage`` off, the target adds nothing), an unlisted one is handled as above.

Each side ends when its share is 0 (the source's window starts after the pod left and its pod list no longer
names it; the replacement has run on the target for a whole window); a TTL after the eviction is the backstop.
Pod counts (the ``pods`` resource) move with the pod list: −1 on the source while it lists the pod, +1 on the
target until its list does.
"""

from __future__ import annotations

from dataclasses import dataclass

from colo.messages import NodeMetric

Vec = tuple[int, int]
"""(cpu milli-cores, memory bytes)."""


def covered(window_start: float, window_end: float, run_start: float, run_end: float) -> float:
    """Share (0–1) of the window [window_start, window_end] (seconds) in which a pod ran [run_start, run_end].

    A zero-length window counts as covered when the run spans its end.
    """
    span = window_end - window_start
    overlap = min(window_end, run_end) - max(window_start, run_start)
    if span <= 0:
        return 1.0 if run_start <= window_end <= run_end else 0.0
    return min(max(overlap / span, 0.0), 1.0)


@dataclass
class Booking:
    """The bookkeeping of one evicted pod (times in seconds, ``usage`` (cpu m, memory B)).

    ``ran_since`` is when the pod started on ``source``; ``left_at`` when it stopped there (None while it still
    runs); ``bound_node``/``bound_at`` where and when its replacement was bound (None before). ``source_done``
    and ``target_done`` latch once the metrics no longer need that side.
    """

    uid: str
    source: str
    target: str
    usage: Vec
    started_at: float
    ran_since: float = 0.0
    left_at: float | None = None
    bound_node: str | None = None
    bound_at: float | None = None
    source_done: bool = False
    target_done: bool = False

    @property
    def done(self) -> bool:
        """Both sides ended: nothing of the pod is mis-stated by any metric any more."""
        return self.source_done and self.target_done

    @property
    def target_node(self) -> str:
        """The node the replacement's usage is booked on: where it was bound, else the booked target."""
        return self.bound_node or self.target

    def source_share(self, metric: NodeMetric) -> tuple[float, int]:
        """(share of ``usage`` to take off, pods to take off) of the source's ``metric``; latches the end."""
        if self.source_done:
            return 0.0, 0
        listed = any(p.uid == self.uid for p in metric.pods)
        start = metric.at - metric.window_s
        if not listed and self.left_at is not None and start >= self.left_at:
            self.source_done = True
            return 0.0, 0
        end = metric.at if self.left_at is None else min(self.left_at, metric.at)
        if not has_node_figure(metric):
            share = 1.0 if listed or self.left_at is None else covered(start, metric.at, self.ran_since, end)
        else:
            share = covered(start, metric.at, self.ran_since, end)
        return share, 1 if listed else 0

    def target_share(self, metric: NodeMetric) -> tuple[float, int]:
        """(share of ``usage`` to add, pods to add) to the target's ``metric``; latches the end."""
        if self.target_done:
            return 0.0, 0
        listed = any(p.uid == self.uid for p in metric.pods)
        pods = 0 if listed else 1
        if self.bound_at is None:
            return 1.0, pods
        if metric.at - metric.window_s >= self.bound_at:
            self.target_done = True
            return 0.0, 0
        if not has_node_figure(metric):
            return (0.0 if listed else 1.0), pods
        return 1.0 - covered(metric.at - metric.window_s, metric.at, self.bound_at, metric.at), pods


def has_node_figure(metric: NodeMetric) -> bool:
    """Whether ``metric`` carries its node usage (the window mean); without it only its pod list tells."""
    return metric.node_usage.cpu > 0 or metric.node_usage.memory > 0


def base_usage(metric: NodeMetric) -> Vec:
    """The usage a round starts from, (cpu m, memory B): node − host apps when the metric has its node figure
    (= system + Σ pods, without the clamp of system at 0 that over-counts a pod started within the window,
    whose per-pod mean covers only its own run), else system + Σ pods (REFERENCE.md §6)."""
    if has_node_figure(metric):
        return (max(metric.node_usage.cpu - metric.host_apps_usage.cpu, 0),
                max(metric.node_usage.memory - metric.host_apps_usage.memory, 0))
    return (metric.system_usage.cpu + sum(p.cpu for p in metric.pods),
            metric.system_usage.memory + sum(p.memory for p in metric.pods))
