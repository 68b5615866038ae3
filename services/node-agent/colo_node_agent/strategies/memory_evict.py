"""BE memory eviction (REFERENCE.md §5, oracle O11).

When node memory used% = floor(used × 100 / capacity) reaches ``threshold_percent`` (70), release
capacity × (used% − lower%)/100 bytes, lower = ``lower_percent`` or threshold − 2. Victims: BE pods by priority
ascending, then memory usage descending; memory of pods already being evicted counts as released; no new
eviction within ``cooldown_s`` (4 s) of the last one.
"""

from __future__ import annotations

from colo.messages import MemoryEvictStrategy
from colo_node_agent.strategies.types import Eviction, EvictPlan, PodView


def memory_release_bytes(capacity: int, used: int, policy: MemoryEvictStrategy) -> int:
    """Bytes to release on a node with ``capacity`` and ``used`` bytes; 0 below the threshold or disabled."""
    if not policy.enabled or capacity <= 0:
        return 0
    used_pct = used * 100 // capacity
    if used_pct < policy.threshold_percent:
        return 0
    lower = policy.lower_percent if policy.lower_percent is not None else policy.threshold_percent - 2
    return max(capacity * (used_pct - lower) // 100, 0)


def memory_evict(capacity: int, used: int, pods: list[PodView], policy: MemoryEvictStrategy,
                 pending: frozenset[str] = frozenset(), last_evict_at: float | None = None,
                 now: float = 0.0) -> EvictPlan:
    """Choose BE victims freeing at least the release amount (bytes); non-BE pods are never chosen.

    ``pending`` pod uids already being evicted (their usage counts as released); ``last_evict_at`` the time of
    the last eviction on this node (cool-down).
    """
    release = memory_release_bytes(capacity, used, policy)
    if release <= 0:
        return EvictPlan()
    if last_evict_at is not None and now - last_evict_at < policy.cooldown_s:
        return EvictPlan(release, skipped="cool-down")
    freed = sum(p.memory_used for p in pods if p.uid in pending)
    candidates = sorted((p for p in pods if p.qos == "BE" and p.uid not in pending),
                        key=lambda p: (p.priority, -p.memory_used, p.uid))
    used_pct = used * 100 // capacity
    out: list[Eviction] = []
    for p in candidates:
        if freed >= release:
            break
        out.append(Eviction(p.uid, "Evicted", f"node memory {used_pct}% >= {policy.threshold_percent}%: "
                                               f"releasing {release} bytes, pod uses {p.memory_used}"))
        freed += p.memory_used
    return EvictPlan(release, out)
