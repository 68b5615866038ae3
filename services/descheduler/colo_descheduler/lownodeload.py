"""LowNodeLoad: move pods off nodes that stay hot onto cold ones (REFERENCE.md §6).

Pure: a list of node loads and candidate pods in, a list of evictions out. The
only state carried between rounds is the count of consecutive high rounds per
node (:class:`LowNodeLoad`). Resources are CPU (milli-cores) and memory (bytes),
indexed 0 and 1 in every tuple; percentages are of node allocatable.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from colo.messages import PriorityClass, QoSClass
from colo_descheduler.settings import DeschedulerSettings, Thresholds

Vec = tuple[int, int]
"""(cpu milli-cores, memory bytes)."""

PRIORITY_CLASS_RANK: dict[PriorityClass, int] = {"free": 0, "batch": 1, "mid": 2, "none": 3, "prod": 4}
"""Victim order by priority class, first evicted first (REFERENCE.md §6; ``none`` is
our choice: after mid, before prod)."""
QOS_RANK: dict[QoSClass, int] = {"BE": 0, "LS": 1, "LSR": 2, "LSE": 3, "SYSTEM": 4}
"""Victim order by QoS class, first evicted first (REFERENCE.md §6)."""


@dataclass(frozen=True)
class NodeLoad:
    """A node with a fresh metric: allocatable and usage (system + Σ pods), (cpu m, memory B)."""

    name: str
    allocatable: Vec
    usage: Vec


@dataclass(frozen=True)
class Candidate:
    """A pod that may be evicted: its measured usage and what orders it.

    ``workload`` is "" for a pod without an owning workload; ``priority`` the
    Kubernetes priority value (0 when unset).
    """

    uid: str
    node: str
    usage: Vec
    priority_class: PriorityClass = "none"
    priority: int = 0
    qos_class: QoSClass = "LS"
    workload: str = ""


@dataclass(frozen=True)
class Eviction:
    """A decided migration: evict ``uid`` from ``source``; ``target`` is the low node booked for it."""

    uid: str
    source: str
    target: str
    workload: str
    usage: Vec


@dataclass
class RoundResult:
    """Outcome of one round: node classes, sources (hot long enough), evictions and why pods were kept."""

    low: list[str] = field(default_factory=list)
    high: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    evictions: list[Eviction] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)


def max_unavailable(replicas: int) -> int:
    """Pods of a workload that may be migrating at once (REFERENCE.md §6).

    More than 10 replicas → 10 % (at least 1); 4–10 → 2; fewer than 4 → 1.
    """
    if replicas > 10:
        return max(1, replicas * 10 // 100)
    if replicas >= 4:
        return 2
    return 1


def percent(usage: Vec, allocatable: Vec) -> tuple[float, float]:
    """Usage as percent of allocatable per resource; a zero allocatable counts as 100 % used."""
    return (100.0 * usage[0] / allocatable[0] if allocatable[0] > 0 else 100.0,
            100.0 * usage[1] / allocatable[1] if allocatable[1] > 0 else 100.0)


def is_low(usage: Vec, allocatable: Vec, low: Thresholds) -> bool:
    """Every resource at or below its low threshold."""
    cpu, mem = percent(usage, allocatable)
    return cpu <= low.cpu and mem <= low.memory


def is_high(usage: Vec, allocatable: Vec, high: Thresholds) -> bool:
    """Any resource above its high threshold."""
    cpu, mem = percent(usage, allocatable)
    return cpu > high.cpu or mem > high.memory


def high_limit(allocatable: Vec, high: Thresholds) -> Vec:
    """The usage at the high threshold, (cpu m, memory B), rounded down."""
    return (allocatable[0] * high.cpu // 100, allocatable[1] * high.memory // 100)


def _score(usage: Vec, allocatable: Vec) -> float:
    """Mean usage percent over the resources (weights 1/1): the source order key."""
    cpu, mem = percent(usage, allocatable)
    return (cpu + mem) / 2.0


def victim_order(pods: Sequence[Candidate], excess: Vec, allocatable: Vec) -> list[Candidate]:
    """Pods in eviction order: priority class, priority, QoS class, then closeness of usage to ``excess``.

    Closeness = Σ over resources in excess of |usage − excess| / allocatable (smaller first);
    ties broken by uid so a round is reproducible.
    """
    def distance(p: Candidate) -> float:
        return sum(abs(u - e) / a for u, e, a in zip(p.usage, excess, allocatable) if e > 0 and a > 0)

    return sorted(pods, key=lambda p: (PRIORITY_CLASS_RANK.get(p.priority_class, 3), p.priority,
                                       QOS_RANK.get(p.qos_class, 1), distance(p), p.uid))


class LowNodeLoad:
    """The LowNodeLoad balancer; remembers consecutive high rounds per node between rounds."""

    def __init__(self, settings: DeschedulerSettings | None = None) -> None:
        self.settings = settings or DeschedulerSettings()
        self.high_rounds: dict[str, int] = {}

    def run(
        self,
        nodes: Sequence[NodeLoad],
        pods: Mapping[str, Sequence[Candidate]],
        migrating: Mapping[str, int],
        workload_unavailable: Mapping[str, int],
        workload_replicas: Mapping[str, int],
        allow: Callable[[], bool],
    ) -> RoundResult:
        """One round over ``nodes`` (fresh metrics only; absent nodes lose their high streak).

        ``pods`` node → candidates; ``migrating`` node → running migrations off it;
        ``workload_unavailable`` / ``workload_replicas`` per workload; ``allow()`` asks the
        eviction rate limiter for one token (called only for a victim that passed every check).
        """
        s = self.settings
        result = RoundResult()
        streak: dict[str, int] = {}
        loads = {n.name: n for n in nodes}
        for n in sorted(nodes, key=lambda n: n.name):
            if is_high(n.usage, n.allocatable, s.high_thresholds):
                result.high.append(n.name)
                streak[n.name] = self.high_rounds.get(n.name, 0) + 1
            elif is_low(n.usage, n.allocatable, s.low_thresholds):
                result.low.append(n.name)
        self.high_rounds = streak
        result.sources = sorted((n for n in result.high if streak[n] > s.consecutive_high_rounds),
                                key=lambda n: (-_score(loads[n].usage, loads[n].allocatable), n))
        if not result.low or not result.sources:
            return result
        target_usage = {n: list(loads[n].usage) for n in result.low}
        target_limit = {n: high_limit(loads[n].allocatable, s.high_thresholds) for n in result.low}
        headroom = [sum(target_limit[n][r] - target_usage[n][r] for n in result.low) for r in (0, 1)]
        moving = dict(migrating)
        unavailable = dict(workload_unavailable)
        for name in result.sources:
            node = loads[name]
            usage = list(node.usage)
            limit = high_limit(node.allocatable, s.high_thresholds)
            excess: Vec = (max(usage[0] - limit[0], 0), max(usage[1] - limit[1], 0))
            for pod in victim_order(pods.get(name, ()), excess, node.allocatable):
                if not is_high((usage[0], usage[1]), node.allocatable, s.high_thresholds):
                    break
                if headroom[0] <= 0 or headroom[1] <= 0:
                    return result
                if moving.get(name, 0) >= s.max_migrating_per_node:
                    result.skipped[pod.uid] = f"node {name} has {moving.get(name, 0)} migrating pods"
                    break
                reason = self._refuse(pod, usage, limit, unavailable, workload_replicas)
                if reason:
                    result.skipped[pod.uid] = reason
                    continue
                target = self._target(pod, target_usage, target_limit)
                if target is None:
                    result.skipped[pod.uid] = "fits no low node without making it high"
                    continue
                if not allow():
                    result.skipped[pod.uid] = "eviction rate limit"
                    return result
                for r in (0, 1):
                    usage[r] -= pod.usage[r]
                    target_usage[target][r] += pod.usage[r]
                    headroom[r] -= pod.usage[r]
                moving[name] = moving.get(name, 0) + 1
                if pod.workload:
                    unavailable[pod.workload] = unavailable.get(pod.workload, 0) + 1
                result.evictions.append(Eviction(pod.uid, name, target, pod.workload, pod.usage))
        return result

    @staticmethod
    def _refuse(pod: Candidate, usage: list[int], limit: Vec, unavailable: Mapping[str, int],
                replicas: Mapping[str, int]) -> str:
        """Why ``pod`` must stay ("" when it may go)."""
        if not any(pod.usage[r] > 0 and usage[r] > limit[r] for r in (0, 1)):
            return "uses nothing of the resources in excess"
        if pod.workload:
            allowed = max_unavailable(replicas.get(pod.workload, 1))
            if unavailable.get(pod.workload, 0) >= allowed:
                return f"workload {pod.workload} already has {allowed} unavailable"
        return ""

    @staticmethod
    def _target(pod: Candidate, usage: Mapping[str, list[int]], limit: Mapping[str, Vec]) -> str | None:
        """The low node with the most room left after taking ``pod`` without going over high."""
        best: tuple[float, str] | None = None
        for name, u in usage.items():
            lim = limit[name]
            after = [u[r] + pod.usage[r] for r in (0, 1)]
            if any(after[r] > lim[r] for r in (0, 1)):
                continue
            room = min((lim[r] - after[r]) / lim[r] if lim[r] > 0 else 0.0 for r in (0, 1))
            if best is None or (-room, name) < (-best[0], best[1]):
                best = (room, name)
        return best[1] if best else None
