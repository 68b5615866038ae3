"""Audit of a run's descheduling from what the node agents reported (no I/O).

Given every NodeMetric of a run and every eviction order the descheduler sent, it answers
three questions a user of a descheduler asks (issue 12, item 9):

- how often was each pod migrated (:meth:`MigrationAudit.migrations_per_pod`);
- how often did each node swing between *high* and *low* (:meth:`MigrationAudit.oscillations`; the
  swings a migration took part in: :meth:`MigrationAudit.migration_oscillations`), classified as
  LowNodeLoad does (REFERENCE.md §6: low = every resource ≤ its low threshold, high = any resource above
  its high threshold, usage = system + Σ pods of the metric);
- did the descheduler evict more than the excess required (:meth:`MigrationAudit.over_evictions`):
  the evictions off a node within the time its metrics need to show the first of them (the
  aggregation window plus one report) must not exceed the fewest pods whose removal brings every
  resource to its high threshold or below (:func:`fewest_pods_to_cure`), in the most demanding
  metric the descheduler decided on meanwhile; and no eviction may come while the node's newest
  metric shows it not high.

Resources are CPU (milli-cores) and memory (bytes); thresholds are percent of allocatable.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from colo.messages import EvictionCommand, NodeMetric

Vec = tuple[int, int]
"""(cpu milli-cores, memory bytes)."""

EXACT_SEARCH_PODS = 12
"""Above this many pods a node's cure count comes from the largest-first greedy bound instead of the
exact search over subsets (the greedy count is never below the exact one, so the audit stays lenient)."""


def usage_of(metric: NodeMetric) -> Vec:
    """Node usage as LowNodeLoad reads it: system usage + Σ pod usage (REFERENCE.md §6)."""
    return (metric.system_usage.cpu + sum(p.cpu for p in metric.pods),
            metric.system_usage.memory + sum(p.memory for p in metric.pods))


def classify(usage: Vec, allocatable: Vec, low: Vec, high: Vec) -> str:
    """``"high"``, ``"low"`` or ``"mid"`` for ``usage`` against thresholds in percent (cpu, memory)."""
    pct = [100.0 * u / a if a > 0 else 100.0 for u, a in zip(usage, allocatable)]
    if any(p > h for p, h in zip(pct, high)):
        return "high"
    if all(p <= lo for p, lo in zip(pct, low)):
        return "low"
    return "mid"


def fewest_pods_to_cure(usage: Vec, allocatable: Vec, high: Vec, pods: Sequence[Vec]) -> int:
    """The fewest of ``pods`` (usage vectors) whose removal leaves every resource ≤ its high threshold.

    0 when the node is not above its threshold; ``len(pods) + 1`` when even removing all does not
    cure it. Exact for up to :data:`EXACT_SEARCH_PODS` pods, else the largest-first greedy count
    on the resource most in excess (an upper bound of the exact answer).
    """
    limit = [a * h // 100 for a, h in zip(allocatable, high)]
    excess = [max(u - lim, 0) for u, lim in zip(usage, limit)]
    if not any(excess):
        return 0

    def cures(chosen: Iterable[Vec]) -> bool:
        freed = [0, 0]
        for p in chosen:
            freed[0] += p[0]
            freed[1] += p[1]
        return all(f >= e for f, e in zip(freed, excess))

    if len(pods) <= EXACT_SEARCH_PODS:
        for k in range(1, len(pods) + 1):
            if any(cures(c) for c in itertools.combinations(pods, k)):
                return k
        return len(pods) + 1
    worst = max(range(2), key=lambda r: excess[r] / allocatable[r] if allocatable[r] else 0.0)
    ordered = sorted(pods, key=lambda p: -p[worst])
    for k in range(1, len(ordered) + 1):
        if cures(ordered[:k]):
            return k
    return len(pods) + 1


@dataclass
class OverEviction:
    """Evictions off ``node`` from ``start`` to ``end`` (s) that the metrics did not require: ``evicted`` of them
    where ``required`` would have cured the excess."""

    node: str
    start: float
    end: float
    evicted: int
    required: int


@dataclass
class MigrationAudit:
    """Metrics and eviction orders of one run; thresholds in percent (cpu, memory)."""

    allocatable: dict[str, Vec]
    low: Vec
    high: Vec
    metrics: dict[str, list[NodeMetric]] = field(default_factory=dict)
    evictions: list[EvictionCommand] = field(default_factory=list)

    def add_metric(self, metric: NodeMetric) -> None:
        """Record a NodeMetric (kept in time order per node; replays of a time are dropped)."""
        series = self.metrics.setdefault(metric.node, [])
        if series and metric.at <= series[-1].at:
            if metric.at < series[-1].at:
                series.append(metric)
                series.sort(key=lambda m: m.at)
            return
        series.append(metric)

    def add_eviction(self, cmd: EvictionCommand) -> None:
        """Record an eviction order."""
        self.evictions.append(cmd)

    def classes(self, node: str) -> list[tuple[float, str]]:
        """(metric time, class) of every metric of ``node``."""
        alloc = self.allocatable[node]
        return [(m.at, classify(usage_of(m), alloc, self.low, self.high)) for m in self.metrics.get(node, [])]

    def oscillations(self) -> dict[str, int]:
        """Per node, how many times it went from high to low or low to high (mid metrics skipped)."""
        out: dict[str, int] = {}
        for node in self.metrics:
            last = ""
            swings = 0
            for _, cls in self.classes(node):
                if cls == "mid":
                    continue
                if last and cls != last:
                    swings += 1
                last = cls
            out[node] = swings
        return out

    def migrations_per_pod(self) -> dict[str, int]:
        """uid → eviction orders sent for it."""
        out: dict[str, int] = {}
        for cmd in self.evictions:
            out[cmd.uid] = out.get(cmd.uid, 0) + 1
        return out

    def over_evictions(self, report_interval_s: float = 60.0) -> list[OverEviction]:
        """Groups of evictions off one node that exceed what its metrics required.

        A group starts at an eviction at ``t0`` and holds every later eviction off that node before
        ``t0 + window + report_interval_s`` (the time until a metric no longer contains any of the
        group's pods: ``NodeMetric.window_s`` of the node's metric, 300 s by default, plus one report);
        within it the descheduler cannot yet see what its first eviction did. The group may hold at most
        the fewest pods that cure the excess (:func:`fewest_pods_to_cure`) in the most demanding metric
        the descheduler may have decided on: the node's metrics from the newest at ``t0`` to the newest at
        the group's last eviction. An eviction whose newest metric shows the node not high is reported
        alone with ``required`` 0 (the metrics did not ask for it).
        """
        by_node: dict[str, list[EvictionCommand]] = {}
        for cmd in self.evictions:
            by_node.setdefault(cmd.node, []).append(cmd)
        out: list[OverEviction] = []
        for node, cmds in sorted(by_node.items()):
            series = self.metrics.get(node, [])
            alloc = self.allocatable.get(node, (0, 0))

            def newest(at: float, series: list[NodeMetric] = series) -> int:
                return max((i for i, m in enumerate(series) if m.at <= at), default=-1)

            justified: list[EvictionCommand] = []
            for cmd in sorted(cmds, key=lambda c: c.at):
                idx = newest(cmd.at)
                if idx < 0 or classify(usage_of(series[idx]), alloc, self.low, self.high) != "high":
                    at = series[idx].at if idx >= 0 else cmd.at
                    out.append(OverEviction(node, at, at, 1, 0))
                else:
                    justified.append(cmd)
            i = 0
            while i < len(justified):
                t0 = justified[i].at
                horizon = series[newest(t0)].window_s + report_interval_s
                group = [c for c in justified[i:] if c.at < t0 + horizon]
                first, last = newest(t0), newest(group[-1].at)
                required = max(
                    fewest_pods_to_cure(usage_of(m), alloc, self.high, [(p.cpu, p.memory) for p in m.pods])
                    for m in series[first:last + 1])
                if len(group) > required:
                    out.append(OverEviction(node, t0, group[-1].at, len(group), required))
                i += len(group)
        return out

    def migration_events(self) -> dict[str, tuple[list[float], list[float]]]:
        """Per node, the times (s) migrations touched it: (evictions off it, arrivals of evicted pods on it: the
        first metric of the node listing that uid after its eviction, and on the node it was evicted from after
        a metric without it, as when the scheduler puts it back)."""
        out: dict[str, tuple[list[float], list[float]]] = {}
        for cmd in self.evictions:
            out.setdefault(cmd.node, ([], []))[0].append(cmd.at)
        for node, series in self.metrics.items():
            for cmd in self.evictions:
                absent = cmd.node != node
                for m in (m for m in series if m.at > cmd.at):
                    listed = any(p.uid == cmd.uid for p in m.pods)
                    if listed and absent:
                        out.setdefault(node, ([], []))[1].append(m.at)
                        break
                    absent = absent or not listed
        return out

    def migration_oscillations(self, report_interval_s: float = 60.0) -> dict[str, int]:
        """Per node, the swings of :meth:`oscillations` a migration took part in.

        A swing from the class of the metric at ``t_j`` to the other one at ``t_k`` (mid metrics between them
        skipped) counts when a migration event that moves the node that way (:meth:`migration_events`: an
        eviction off it for high → low, an evicted pod arriving on it for low → high) lies in
        ``(t_j − window − report_interval_s, t_k]``, the time in which its effect reaches the metrics. A node
        no migration touched swings only with its own load (pods arriving and finishing), which no descheduler
        decision caused: on the 2-hour demo run one such node swings 7 times with the descheduler off.
        """
        events = self.migration_events()
        out: dict[str, int] = {}
        for node, series in self.metrics.items():
            alloc = self.allocatable[node]
            off, on = events.get(node, ([], []))
            last: tuple[float, str] | None = None
            swings = 0
            for m in series:
                cls = classify(usage_of(m), alloc, self.low, self.high)
                if cls == "mid":
                    continue
                if last is not None and cls != last[1]:
                    since = last[0] - m.window_s - report_interval_s
                    if any(since < t <= m.at for t in (off if cls == "low" else on)):
                        swings += 1
                last = (m.at, cls)
            out[node] = swings
        return out

    def migration_bounces(self, within_s: float = 1800.0) -> dict[str, int]:
        """Per node, the evictions off it that came within ``within_s`` seconds (default 30 min) after an evicted
        pod arrived on it (:meth:`migration_events`): a target the descheduler filled and then relieved again,
        the round trip of a cascade (a target driven from 20 % to 80 %, then evicting one back). Nodes with
        none are left out."""
        out: dict[str, int] = {}
        for node, (off, arrived) in self.migration_events().items():
            n = sum(1 for te in off if any(0 < te - ta <= within_s for ta in arrived))
            if n:
                out[node] = n
        return out
