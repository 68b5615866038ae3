"""Victim selection: evict the least that cures a node's excess, lower classes first.

Resources are indexed cpu (milli-cores) 0, memory (bytes) 1 and pods (a count; every pod uses 1) 2. A set of
pods *cures* an excess when, on every resource in excess, their usage sums to at least the excess.

The order (docs/descheduler.md "Victim order"):

1. **Class keys first** (REFERENCE.md §6): a pod's tier is (priority class free < batch < mid < none < prod,
   priority value, QoS BE < LS < LSR < LSE). The selection uses the lowest tiers that can cure: the smallest
   tier ``t`` such that the pods of tiers ≤ ``t`` together cure the excess; pods above ``t`` are not touched.
2. Among the subsets of those pods that cure it: **fewest pods** (so a single pod whose usage covers the
   excess is preferred whenever one exists), then **least total usage** (Σ over the resources in excess of
   usage / allocatable: the smallest single pod that covers), then the uids (reproducible).
3. The chosen pods come first (tier, then larger usage first), then the others (tier, larger usage first, uid).
4. When a chosen pod may not go (limits, no target with room), the balancer re-selects among the pods still
   allowed (:func:`curing_set`), within the tier and the pod count of the node's best set, or evicts nothing.

The search is exact (by increasing subset size, pruned by the largest usages); when a subset size has more
than :data:`SEARCH_BUDGET` combinations it falls back to a greedy cover (largest first, redundant pods dropped,
the last one swapped for the smallest that still cures).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Collection, Sequence
from typing import Protocol, TypeVar

from colo.messages import PriorityClass, QoSClass

PRIORITY_CLASS_RANK: dict[PriorityClass, int] = {"free": 0, "batch": 1, "mid": 2, "none": 3, "prod": 4}
"""Victim order by priority class, first evicted first (REFERENCE.md §6; ``none`` is
our choice: after mid, before prod)."""
QOS_RANK: dict[QoSClass, int] = {"BE": 0, "LS": 1, "LSR": 2, "LSE": 3, "SYSTEM": 4}
"""Victim order by QoS class, first evicted first (REFERENCE.md §6)."""

SEARCH_BUDGET = 20_000
"""Most subsets of one size the exact search enumerates before the greedy cover takes over."""

Vec3 = tuple[int, int, int]
"""(cpu milli-cores, memory bytes, pods)."""


class Victim(Protocol):
    """What selection reads of a candidate pod (``colo_descheduler.lownodeload.Candidate``)."""

    @property
    def uid(self) -> str: ...
    @property
    def usage(self) -> tuple[int, int]: ...
    @property
    def priority_class(self) -> PriorityClass: ...
    @property
    def priority(self) -> int: ...
    @property
    def qos_class(self) -> QoSClass: ...


V = TypeVar("V", bound=Victim)
"""A candidate type (selection returns the objects it was given)."""


def tier(p: Victim) -> tuple[int, int, int]:
    """(priority class rank, priority, QoS rank): lower is evicted first."""
    return PRIORITY_CLASS_RANK.get(p.priority_class, 3), p.priority, QOS_RANK.get(p.qos_class, 1)


def usage3(p: Victim) -> Vec3:
    """(cpu m, memory B, 1 pod)."""
    return p.usage[0], p.usage[1], 1


def _weight(p: Victim, excess: Vec3, allocatable: Vec3) -> float:
    """Σ over resources in excess of usage / allocatable."""
    u = usage3(p)
    return sum(u[r] / allocatable[r] for r in range(3) if excess[r] > 0 and allocatable[r] > 0)


def cures(pods: Sequence[Victim], excess: Vec3) -> bool:
    """Whether ``pods`` together cover ``excess`` on every resource in excess."""
    return all(sum(usage3(p)[r] for p in pods) >= excess[r] for r in range(3) if excess[r] > 0)


def _set_key(pods: Sequence[Victim], excess: Vec3, allocatable: Vec3) -> tuple[int, float, tuple[str, ...]]:
    return len(pods), sum(_weight(p, excess, allocatable) for p in pods), tuple(sorted(p.uid for p in pods))


def _greedy(pool: Sequence[V], excess: Vec3, allocatable: Vec3) -> list[V]:
    chosen: list[V] = []
    for p in sorted(pool, key=lambda p: (-_weight(p, excess, allocatable), p.uid)):
        if cures(chosen, excess):
            break
        chosen.append(p)
    for p in sorted(chosen, key=lambda p: _weight(p, excess, allocatable)):
        rest = [q for q in chosen if q is not p]
        if rest and cures(rest, excess):
            chosen = rest
    if chosen:
        head = chosen[:-1]
        swaps = [p for p in pool if p not in head and cures([*head, p], excess)]
        chosen = [*head, min(swaps, key=lambda p: (_weight(p, excess, allocatable), p.uid))]
    return chosen


def _fewest(pool: Sequence[V], excess: Vec3, allocatable: Vec3) -> list[V]:
    """The subset of ``pool`` (which cures ``excess``) with fewest pods, then least usage, then uids."""
    largest = [sorted((usage3(p)[r] for p in pool), reverse=True) for r in range(3)]
    for k in range(1, len(pool) + 1):
        if any(excess[r] > 0 and sum(largest[r][:k]) < excess[r] for r in range(3)):
            continue
        if math.comb(len(pool), k) > SEARCH_BUDGET:
            return _greedy(pool, excess, allocatable)
        best: tuple[tuple[int, float, tuple[str, ...]], list[V]] | None = None
        for combo in itertools.combinations(pool, k):
            if cures(combo, excess):
                key = _set_key(combo, excess, allocatable)
                if best is None or key < best[0]:
                    best = (key, list(combo))
        if best is not None:
            return best[1]
    return []


def select_victims(pods: Sequence[V], excess: Vec3, allocatable: Vec3) -> list[V]:
    """The pods to evict to cure ``excess`` (module docstring, steps 1–2); [] when nothing cures it.

    ``excess`` and ``allocatable`` are (cpu m, memory B, pods); a zero excess is not in excess.
    """
    if not any(e > 0 for e in excess):
        return []
    useful = [p for p in pods if any(usage3(p)[r] > 0 and excess[r] > 0 for r in range(3))]
    for t in sorted({tier(p) for p in useful}):
        pool = [p for p in useful if tier(p) <= t]
        if cures(pool, excess):
            chosen = _fewest(pool, excess, allocatable)
            return sorted(chosen, key=lambda p: (tier(p), -_weight(p, excess, allocatable), p.uid))
    return []


def order_victims(pods: Sequence[V], excess: Vec3, allocatable: Vec3) -> list[V]:
    """Every pod in eviction order: :func:`select_victims` first, then the rest by the fallback order."""
    chosen = select_victims(pods, excess, allocatable)
    picked = {p.uid for p in chosen}
    rest = sorted((p for p in pods if p.uid not in picked),
                  key=lambda p: (tier(p), -_weight(p, excess, allocatable), p.uid))
    return [*chosen, *rest]


def curing_set(pods: Sequence[V], refused: Collection[str], excess: Vec3, allocatable: Vec3) -> tuple[list[V], str]:
    """The set of ``pods`` to evict to cure ``excess`` without the ``refused`` uids, in eviction order, and
    "" — or [] and why nothing may go.

    ``excess`` / ``allocatable`` are (cpu m, memory B, pods). The node's best set is
    :func:`select_victims` over every pod, refused or not; the set returned is the
    same selection over the pods not refused, kept only when it uses no higher tier and no more pods than
    the best set: a refused victim (workload or time-window limit, no target with room) is replaced by an
    equal one or by nothing, never by a pod of a class the excess did not need, nor by several pods where one
    would do (evicting the small pods that remain does not cure the node, and would be repeated next round).
    Waiting a round instead is our rule (docs/descheduler.md "Victim order"): the refusals are transient.
    """
    best = select_victims(pods, excess, allocatable)
    if not best:
        return [], "no set of its pods cures the excess"
    allowed = [p for p in pods if p.uid not in refused]
    chosen = select_victims(allowed, excess, allocatable)
    if not chosen:
        return [], "no set of the pods allowed to go cures the excess"
    if max(tier(p) for p in chosen) > max(tier(p) for p in best) or len(chosen) > len(best):
        return [], (f"the pods allowed to go cure the excess only with {len(chosen)} pods or a higher class "
                    f"than the {len(best)} its best set needs")
    return chosen, ""
