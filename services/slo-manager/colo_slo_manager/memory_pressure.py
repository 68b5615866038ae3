"""Batch-memory of a node under BE memory pressure (REFERENCE.md §11, first bullet). Pure functions.

The node agent reports the condition in its NodeMetric (:class:`colo.messages.MemoryPressure`: from node
memory at the eviction threshold or a BE memory eviction, until memory has stayed below the lower threshold
for the NodeSLO's ``memory_evict.pressure_hold_s``). While a node's newest metric carries it, the node
offers no batch-memory (0 whatever the §3 formula gives: that formula leaves BE usage out, so it keeps
offering memory to a node that is evicting BE pods) and its NodeResource says ``memory_pressure``, which the
scheduler's BEMemoryPressure filter reads. Both changes are published at once, whatever the publish damping
of REFERENCE.md §3 (10 % / 300 s) says: a drop to 0 that waited would let the evicted pods come straight back.

Outside the condition, batch-memory is also capped by the **eviction headroom**: the BE memory already
requested on the node plus what is left below the lower eviction threshold, so that newly admitted BE
memory cannot by itself take the node to where the agent evicts. The §3 formula alone does not see BE pods
that use more than they request; without the cap a node leaving the hold would be offered the same memory
again and evict again one hold later.
"""

from __future__ import annotations

import dataclasses

from colo.messages import MemoryEvictStrategy, NodeMetric, NodeResource
from colo_slo_manager.allocatable import Allocatable


def under_pressure(computed: Allocatable, metric: NodeMetric) -> Allocatable:
    """``computed`` with batch-memory 0 and ``memory_pressure`` set when ``metric`` carries the condition,
    else ``computed`` unchanged (bytes; mid and batch-cpu are kept: the condition is about BE memory)."""
    if metric.memory_pressure is None:
        return computed
    return dataclasses.replace(computed, batch_memory=0, memory_pressure=True)


def pressure_reason(last: NodeResource, new: Allocatable) -> str:
    """Why ``new`` must be published at once, or ``""``: the pressure started (``memory pressure``) or
    ended (``memory pressure over``), or batch-memory dropped to 0 (``batch_memory to 0``)."""
    if new.memory_pressure != last.memory_pressure:
        return "memory pressure" if new.memory_pressure else "memory pressure over"
    if new.batch_memory == 0 and last.batch_memory > 0:
        return "batch_memory to 0"
    return ""


PEAK_WINDOW_S = 300
"""Window of the aggregated node usage read as the node's recent peak (the NodeMetric window, REFERENCE.md §2)."""


def node_memory_peak(metric: NodeMetric) -> int:
    """Recent node memory used, bytes: the larger of the window mean and the 300 s p99 when the agent
    reports it (a node just filled shows in the percentile before the mean catches up)."""
    peak = metric.node_usage.memory
    for a in metric.aggregated:
        if a.window_s == PEAK_WINDOW_S and a.stat == "p99":
            peak = max(peak, a.memory)
    return peak


def eviction_headroom(computed: Allocatable, metric: NodeMetric, capacity: int, be_memory_request: int,
                      policy: MemoryEvictStrategy) -> Allocatable:
    """``computed`` with batch-memory ≤ ``be_memory_request`` + max(capacity × lower % / 100 − peak, 0) (bytes;
    peak :func:`node_memory_peak`, lower the eviction's lower threshold, threshold − 2 by default): what the
    scheduler may still place (batch-memory − Σ BE requests) never exceeds the room below the lower
    threshold. Unchanged when BE memory eviction is off."""
    if not policy.enabled:
        return computed
    lower = policy.lower_percent if policy.lower_percent is not None else policy.threshold_percent - 2
    cap = be_memory_request + max(capacity * lower // 100 - node_memory_peak(metric), 0)
    if computed.batch_memory <= cap:
        return computed
    return dataclasses.replace(computed, batch_memory=cap)
