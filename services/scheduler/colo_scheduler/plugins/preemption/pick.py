"""Which candidate node a preemptor is nominated to (Kubernetes DefaultPreemption ``pickOneNodeForPreemption``).

Criteria, compared in order, smaller wins:

1. ``budget_violations`` — victims whose eviction breaks their owner's disruption budget;
2. ``highest_victim_priority`` — the priority of the most important victim;
3. ``victim_priority_sum`` — Σ victim priorities (Kubernetes adds MaxInt32 + 1 to each so that negative
   priorities count; Colo's priorities are ≥ 0, REFERENCE.md §1, so the plain sum orders the same);
4. ``victims`` — the number of victims;
5. ``earliest_start_of_highest_s`` — the earliest start (clock seconds) among the victims of the highest
   priority: the *latest* wins (compared negated), so the least work is lost;

then the lowest row (deterministic).
"""

from __future__ import annotations

from collections.abc import Sequence

from colo_scheduler.plugins.preemption.victims import NodeVictims

CRITERIA = ("budget_violations", "highest_victim_priority", "victim_priority_sum", "victims",
            "earliest_start_of_highest_s")
"""Names of the values of :func:`criteria`, in comparison order."""


def criteria(c: NodeVictims) -> tuple[int, int, int, int, float]:
    """The values of :data:`CRITERIA` for a candidate (a node with no victims scores 0, 0, 0, 0, +inf)."""
    if not c.victims:
        return (c.violations, 0, 0, 0, float("inf"))
    highest = max(ap.pod.priority for ap in c.victims)
    earliest = min(ap.assigned_at for ap in c.victims if ap.pod.priority == highest)
    return (c.violations, highest, sum(ap.pod.priority for ap in c.victims), len(c.victims), earliest)


def sort_key(c: NodeVictims) -> tuple[int, int, int, int, float, int]:
    """The order of :func:`pick`: criteria 1–4 ascending, 5 descending, then row."""
    v, h, s, n, e = criteria(c)
    return (v, h, s, n, -e, c.row)


def pick(candidates: Sequence[NodeVictims]) -> tuple[NodeVictims | None, NodeVictims | None]:
    """The chosen candidate and the runner-up (None when there are fewer)."""
    ranked = sorted(candidates, key=sort_key)
    return (ranked[0] if ranked else None, ranked[1] if len(ranked) > 1 else None)
