"""BE memory pressure of a node: the condition that ties admission to memory eviction (REFERENCE.md §11).

A node is under BE memory pressure from the first sample with node memory at or above the eviction
threshold (``memory_evict.threshold_percent``, 70), or from a BE memory eviction, until memory has stayed
below the lower threshold (``lower_percent``, threshold − 2) for ``pressure_hold_s`` seconds (300) without a
new eviction. Between the two thresholds the hold does not run (hysteresis: a node that evicts down to the
lower threshold and stays just above it keeps the condition). The agent reports the condition in its
NodeMetric (:class:`colo.messages.MemoryPressure`); the slo-manager then offers no batch-memory and the
scheduler admits no BE pod there. The condition is computed from the agent's own samples and clock, so it
does not depend on when other services receive a message.
"""

from __future__ import annotations

from dataclasses import dataclass

from colo.messages import MemoryEvictStrategy, MemoryPressure


@dataclass(frozen=True, slots=True)
class PressureState:
    """What the condition remembers between samples (seconds of the agent's clock, None = not set):
    ``since`` start of the condition (None = no pressure), ``below_since`` start of the current run of
    samples below the lower threshold, ``last_evict_at`` the last BE memory eviction."""

    since: float | None = None
    below_since: float | None = None
    last_evict_at: float | None = None


NO_PRESSURE = PressureState()


def lower_percent(policy: MemoryEvictStrategy) -> int:
    """The lower threshold: ``lower_percent`` or threshold − 2 (REFERENCE.md §5)."""
    return policy.lower_percent if policy.lower_percent is not None else policy.threshold_percent - 2


def observe(state: PressureState, at: float, used: int, capacity: int, policy: MemoryEvictStrategy,
            evicted: bool = False) -> PressureState:
    """The state after a sample at ``at`` of ``used`` bytes of node memory out of ``capacity`` bytes;
    ``evicted`` when a BE pod was evicted for memory at ``at``. Memory eviction switched off, or no capacity,
    clears the condition (nothing evicts, so nothing to keep consistent with)."""
    if not policy.enabled or capacity <= 0:
        return NO_PRESSURE
    last_evict = at if evicted else state.last_evict_at
    if evicted or used * 100 >= policy.threshold_percent * capacity:
        return PressureState(state.since if state.since is not None else at, None, last_evict)
    if state.since is None:
        return PressureState(None, None, last_evict)
    if used * 100 >= lower_percent(policy) * capacity:
        return PressureState(state.since, None, last_evict)
    below = state.below_since if state.below_since is not None else at
    if at - below >= policy.pressure_hold_s:
        return PressureState(None, None, last_evict)
    return PressureState(state.since, below, last_evict)


def condition(state: PressureState, used: int, capacity: int, policy: MemoryEvictStrategy) -> MemoryPressure | None:
    """The condition to report with ``used`` bytes of ``capacity`` now; None when not under pressure."""
    if state.since is None or capacity <= 0:
        return None
    hold = policy.pressure_hold_s
    return MemoryPressure(since=state.since,
                          until=state.below_since + hold if state.below_since is not None else 0.0,
                          last_evict_at=state.last_evict_at or 0.0, used_percent=used * 100 // capacity,
                          threshold_percent=policy.threshold_percent, lower_percent=lower_percent(policy),
                          hold_s=hold)
