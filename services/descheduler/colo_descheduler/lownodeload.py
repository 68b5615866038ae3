"""LowNodeLoad: move pods off nodes that stay hot onto cold ones (REFERENCE.md §6).

Pure: a list of node loads and candidate pods in, a list of evictions out. The
only state carried between rounds is the count of consecutive high rounds per
node (:class:`LowNodeLoad`). Resources are CPU (milli-cores) and memory (bytes),
indexed 0 and 1 in every tuple, and the pod count (index 2 inside a round, when a
``pods`` threshold is set); percentages are of node allocatable.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from colo.messages import PriorityClass, QoSClass
from colo_descheduler.settings import DeschedulerSettings, Thresholds
from colo_descheduler.victims import PRIORITY_CLASS_RANK, QOS_RANK, curing_set, order_victims

Vec = tuple[int, int]
"""(cpu milli-cores, memory bytes)."""

# The class ranks live in victims.py; re-exported here, where they used to be defined.
__all__ = ["PRIORITY_CLASS_RANK", "QOS_RANK", "Candidate", "Eviction", "LowNodeLoad", "NodeLoad", "RoundResult",
           "Vec", "is_high", "is_low", "max_unavailable", "node_is_high", "node_is_low", "percent",
           "curing_set", "pods_percent", "victim_order"]


@dataclass(frozen=True)
class NodeLoad:
    """A node with a fresh metric: allocatable and usage (system + Σ pods), (cpu m, memory B).

    ``usage`` / ``pods`` are what the node really carries: its metric less what already left (outgoing
    bookings). ``incoming`` / ``incoming_pods`` are the replacements bound or booked on it that its metric does
    not show yet (incoming bookings): they count against its room as a target (:meth:`booked`), never towards
    making it a source (a pod that does not run there yet cannot be relieved by evicting another).
    ``pods_allocatable`` / ``pods``: the node's pod capacity and pod count (0 capacity = pods not
    considered on this node); ``target_ok`` False for a node that may not receive pods (unschedulable,
    NoSchedule/NoExecute taint).
    """

    name: str
    allocatable: Vec
    usage: Vec
    pods_allocatable: int = 0
    pods: int = 0
    target_ok: bool = True
    incoming: Vec = (0, 0)
    incoming_pods: int = 0
    settling: bool = False
    """Pods evicted off this node are still in its metric (an outgoing booking not ended, booking.py): what
    the evictions did is only estimated, so the node is no source until its metric shows it."""

    def booked(self) -> NodeLoad:
        """The node as a migration target sees it: ``usage`` + ``incoming``, ``pods`` + ``incoming_pods``."""
        if self.incoming == (0, 0) and self.incoming_pods == 0:
            return self
        return replace(self, usage=(self.usage[0] + self.incoming[0], self.usage[1] + self.incoming[1]),
                       pods=self.pods + self.incoming_pods, incoming=(0, 0), incoming_pods=0)


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
    namespace: str = "default"


@dataclass(frozen=True)
class Eviction:
    """A decided migration: evict ``uid`` from ``source``; ``target`` is the low node booked for it."""

    uid: str
    source: str
    target: str
    workload: str
    usage: Vec
    namespace: str = "default"


@dataclass
class RoundResult:
    """Outcome of one round: node classes, sources (hot long enough), evictions and why pods were kept."""

    low: list[str] = field(default_factory=list)
    high: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    evictions: list[Eviction] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    settling: list[str] = field(default_factory=list)
    """High nodes kept from being sources because their metric does not show their evictions yet."""


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


def _score(usage: Vec, allocatable: Vec) -> float:
    """Mean usage percent over the resources (weights 1/1): the source order key."""
    cpu, mem = percent(usage, allocatable)
    return (cpu + mem) / 2.0


def victim_order(pods: Sequence[Candidate], excess: Sequence[int], allocatable: Sequence[int]) -> list[Candidate]:
    """Pods in eviction order (colo_descheduler/victims.py): class keys first, then the fewest pods that cure
    ``excess`` (a single covering pod, the smallest, when one exists), then least usage; the rest after.

    ``excess`` / ``allocatable``: (cpu m, memory B) or (cpu m, memory B, pods).
    """
    ex = (excess[0], excess[1], excess[2] if len(excess) > 2 else 0)
    al = (allocatable[0], allocatable[1], allocatable[2] if len(allocatable) > 2 else 0)
    return order_victims(pods, ex, al)


Vec3 = list[float]
"""(cpu m, memory B, pods) inside a round; a limit of ``inf`` means the resource is not considered."""


def _limits(load: NodeLoad, t: Thresholds) -> Vec3:
    """The usage at thresholds ``t`` per resource; pods at ``inf`` when not considered."""
    lim: Vec3 = [load.allocatable[0] * t.cpu / 100, load.allocatable[1] * t.memory / 100, math.inf]
    if t.pods is not None and load.pods_allocatable > 0:
        lim[2] = load.pods_allocatable * t.pods / 100
    return lim


def _usage(load: NodeLoad) -> Vec3:
    return [float(load.usage[0]), float(load.usage[1]), float(load.pods)]


def pods_percent(load: NodeLoad) -> float | None:
    """The node's pod count as percent of its pods allocatable; None when that is 0 (pods not considered)."""
    return 100.0 * load.pods / load.pods_allocatable if load.pods_allocatable > 0 else None


def node_is_low(load: NodeLoad, low: Thresholds) -> bool:
    """Every considered resource (cpu, memory; pods when its threshold is set) at or below its low threshold."""
    if not is_low(load.usage, load.allocatable, low):
        return False
    pods = pods_percent(load)
    return low.pods is None or pods is None or pods <= low.pods


def node_is_high(load: NodeLoad, high: Thresholds) -> bool:
    """Any considered resource above its high threshold (a zero cpu/memory allocatable counts as 100 %)."""
    if is_high(load.usage, load.allocatable, high):
        return True
    pods = pods_percent(load)
    return high.pods is not None and pods is not None and pods > high.pods


class LowNodeLoad:
    """The LowNodeLoad balancer; remembers consecutive high rounds per node between rounds."""

    def __init__(self, settings: DeschedulerSettings | None = None) -> None:
        self.settings = settings or DeschedulerSettings()
        self.high_rounds: dict[str, int] = {}
        self._fits: Callable[[Candidate, str, Sequence[Eviction]], bool] | None = None

    def run(
        self,
        nodes: Sequence[NodeLoad],
        pods: Mapping[str, Sequence[Candidate]],
        migrating: Mapping[str, int],
        workload_unavailable: Mapping[str, int],
        workload_replicas: Mapping[str, int],
        allow: Callable[[], bool],
        refuse: Callable[[Candidate, Sequence[Eviction]], str] | None = None,
        fits: Callable[[Candidate, str, Sequence[Eviction]], bool] | None = None,
    ) -> RoundResult:
        """One round over ``nodes`` (fresh metrics only; absent nodes lose their high streak).

        ``pods`` node → candidates; ``migrating`` node → running migrations off it;
        ``workload_unavailable`` / ``workload_replicas`` per workload; ``allow()`` asks the
        eviction rate limiter for one token (called only for a victim that passed every check);
        ``refuse(pod, planned)`` the time-window limits ("" = may go; ``planned`` = this round's
        evictions so far). Low nodes that may not receive pods (``target_ok`` False) are neither
        low nor targets. A node is high (a source) by what it carries (``usage``), low and a target's
        room by :meth:`NodeLoad.booked` (its incoming bookings included); a high node that is
        ``settling`` keeps its streak but is no source (``RoundResult.settling``). ``fits(pod, target,
        planned)`` whether ``target`` admits the pod and has the schedulable room the store checks, after
        ``planned`` (targetroom.py; None = usage alone decides).
        """
        s = self.settings
        self._fits = fits
        result = RoundResult()
        streak: dict[str, int] = {}
        loads = {n.name: n for n in nodes}
        for n in sorted(nodes, key=lambda n: n.name):
            if node_is_high(n, s.high_thresholds):
                result.high.append(n.name)
                streak[n.name] = self.high_rounds.get(n.name, 0) + 1
            elif n.target_ok and node_is_low(n.booked(), s.low_thresholds):
                result.low.append(n.name)
        self.high_rounds = streak
        result.settling = [n for n in result.high if loads[n].settling]
        result.sources = sorted((n for n in result.high
                                 if streak[n] >= s.consecutive_high_rounds and not loads[n].settling),
                                key=lambda n: (-_score(loads[n].usage, loads[n].allocatable), n))
        if not result.low or not result.sources:
            return result
        target_usage = {n: _usage(loads[n].booked()) for n in result.low}
        target_limit = {n: _limits(loads[n], s.high_thresholds) for n in result.low}
        headroom = [sum(target_limit[n][r] - target_usage[n][r] for n in result.low) for r in range(3)]
        moving = dict(migrating)
        unavailable = dict(workload_unavailable)
        for name in result.sources:
            if not self._drain(name, loads[name], list(pods.get(name, ())), target_usage, target_limit,
                               headroom, moving, unavailable, workload_replicas, allow, refuse, result):
                return result
        return result

    def _drain(self, name: str, node: NodeLoad, remaining: list[Candidate], target_usage: dict[str, Vec3],
               target_limit: Mapping[str, Vec3], headroom: Vec3, moving: dict[str, int],
               unavailable: dict[str, int], replicas: Mapping[str, int], allow: Callable[[], bool],
               refuse: Callable[[Candidate, Sequence[Eviction]], str] | None, result: RoundResult) -> bool:
        """Evict a curing set from source ``name`` while it is high; False ends the round.

        The set is :func:`curing_set`: re-selected after every refusal among the pods still allowed, never of
        a higher tier nor with more pods than the node's best curing set; every pod of it must pass the checks
        (:meth:`_plan`) before the first goes; when no allowed set cures, the node keeps its pods this round.
        The per-node cap and the rate limit may stop a set halfway (its first pods gone, the rest next time).
        """
        s = self.settings
        usage = _usage(node)
        limit = _limits(node, s.high_thresholds)
        alloc = (node.allocatable[0], node.allocatable[1], node.pods_allocatable)
        refused: set[str] = set()
        while remaining and any(u > m for u, m in zip(usage, limit, strict=True)):
            if any(h <= 0 for h in headroom):
                return False
            excess = (max(math.ceil(usage[0] - limit[0]), 0), max(math.ceil(usage[1] - limit[1]), 0),
                      max(math.ceil(usage[2] - limit[2]), 0) if limit[2] != math.inf else 0)
            chosen, why = curing_set(remaining, refused, excess, alloc)
            if not chosen:
                for p in remaining:
                    result.skipped.setdefault(p.uid, f"node {name}: {why}")
                return True
            if moving.get(name, 0) >= s.max_migrating_per_node:
                result.skipped[chosen[0].uid] = f"node {name} has {moving.get(name, 0)} migrating pods"
                return True
            plan, refusal = self._plan(name, chosen, usage, limit, target_usage, target_limit, unavailable,
                                       replicas, refuse, result.evictions)
            if refusal is not None:
                result.skipped[refusal[0].uid] = refusal[1]
                refused.add(refusal[0].uid)
                continue
            for pod, target in plan:
                if moving.get(name, 0) >= s.max_migrating_per_node:
                    result.skipped[pod.uid] = f"node {name} has {moving.get(name, 0)} migrating pods"
                    return True
                if not allow():
                    result.skipped[pod.uid] = "eviction rate limit"
                    return False
                remaining.remove(pod)
                for r, amount in enumerate((pod.usage[0], pod.usage[1], 1)):
                    usage[r] -= amount
                    target_usage[target][r] += amount
                    headroom[r] -= amount
                moving[name] = moving.get(name, 0) + 1
                if pod.workload:
                    unavailable[pod.workload] = unavailable.get(pod.workload, 0) + 1
                result.evictions.append(Eviction(pod.uid, name, target, pod.workload, pod.usage, pod.namespace))
        return True

    def _plan(self, name: str, chosen: Sequence[Candidate], usage: Vec3, limit: Vec3,
              target_usage: Mapping[str, Vec3], target_limit: Mapping[str, Vec3], unavailable: Mapping[str, int],
              replicas: Mapping[str, int], refuse: Callable[[Candidate, Sequence[Eviction]], str] | None,
              planned: Sequence[Eviction]) -> tuple[list[tuple[Candidate, str]], tuple[Candidate, str] | None]:
        """Targets for every pod of ``chosen`` as if the earlier ones had gone (nothing is changed): (pod,
        target) pairs, and None — or the first refused pod and why (workload, time-window limits, no low node
        with room)."""
        usage = list(usage)
        targets = {n: list(u) for n, u in target_usage.items()}
        unavailable = dict(unavailable)
        planned = list(planned)
        plan: list[tuple[Candidate, str]] = []
        for pod in chosen:
            reason = self._refuse(pod, usage, limit, unavailable, replicas)
            if not reason and refuse is not None:
                reason = refuse(pod, planned)
            if reason:
                return plan, (pod, reason)
            target = self._target(pod, targets, target_limit, self._fits, planned)
            if target is None:
                return plan, (pod, "fits no low node without making it high, or with the room it requests")
            for r, amount in enumerate((pod.usage[0], pod.usage[1], 1)):
                usage[r] -= amount
                targets[target][r] += amount
            if pod.workload:
                unavailable[pod.workload] = unavailable.get(pod.workload, 0) + 1
            planned.append(Eviction(pod.uid, name, target, pod.workload, pod.usage, pod.namespace))
            plan.append((pod, target))
        return plan, None

    @staticmethod
    def _refuse(pod: Candidate, usage: Vec3, limit: Vec3, unavailable: Mapping[str, int],
                replicas: Mapping[str, int]) -> str:
        """Why ``pod`` must stay ("" when it may go)."""
        amounts = (pod.usage[0], pod.usage[1], 1)
        if not any(amounts[r] > 0 and usage[r] > limit[r] for r in range(3)):
            return "uses nothing of the resources in excess"
        if pod.workload:
            allowed = max_unavailable(replicas.get(pod.workload, 1))
            if unavailable.get(pod.workload, 0) >= allowed:
                return f"workload {pod.workload} already has {allowed} unavailable"
        return ""

    @staticmethod
    def _target(pod: Candidate, usage: Mapping[str, Vec3], limit: Mapping[str, Vec3],
                fits: Callable[[Candidate, str, Sequence[Eviction]], bool] | None = None,
                planned: Sequence[Eviction] = ()) -> str | None:
        """The low node with the most room left after taking ``pod`` without going over high, among those
        ``fits(pod, node, planned)`` admits (all when None)."""
        amounts = (pod.usage[0], pod.usage[1], 1)
        best: tuple[float, str] | None = None
        for name, u in usage.items():
            lim = limit[name]
            after = [u[r] + amounts[r] for r in range(3)]
            if any(after[r] > lim[r] for r in range(3)):
                continue
            if fits is not None and not fits(pod, name, planned):
                continue
            room = min((lim[r] - after[r]) / lim[r] if lim[r] > 0 else 0.0
                       for r in range(3) if lim[r] != math.inf)
            if best is None or (-room, name) < (-best[0], best[1]):
                best = (room, name)
        return best[1] if best else None

