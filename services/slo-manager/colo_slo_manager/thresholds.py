"""One threshold story for BE memory: batch-memory admission must not be looser than BE memory eviction
(REFERENCE.md §11, first bullet). Pure functions over the policy; every message carries the numbers.

The `usage` and `maxUsageRequest` batch-memory formulas (REFERENCE.md §3) fill a node with BE memory up to
``batch.memory_reclaim_threshold_percent`` (65) of its capacity, counting online pods and the system; the
node agent evicts BE pods from ``memory_evict.threshold_percent`` (70) down to its lower threshold (68).

* **rejected**: reclaim threshold ≥ eviction threshold. Admission then fills nodes to where eviction starts,
  so a node at its admission limit evicts and is offered the same memory again at the next report: a loop
  by configuration.
* **warned**: lower threshold < reclaim threshold < eviction threshold. A node filled to the reclaim
  threshold sits above the lower threshold: one BE memory eviction keeps the node under BE memory pressure
  (no batch-memory) until usage falls on its own. It works, but admission and eviction overlap.
* **warned**: memory policy ``request``: batch-memory then follows online requests, not usage, so online
  pods above their requests can take a node to the eviction threshold whatever the reclaim threshold is.

Eviction switched off (``memory_evict.enabled`` false) leaves nothing to be consistent with: no check.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import msgspec

from colo.messages import MemoryEvictStrategy

if TYPE_CHECKING:
    from colo_slo_manager.settings import SloManagerSettings


def _lower(me: MemoryEvictStrategy) -> int:
    return me.lower_percent if me.lower_percent is not None else me.threshold_percent - 2


def memory_threshold_problems(reclaim_percent: int, strategies: Iterable[tuple[str, MemoryEvictStrategy]],
                              ) -> list[str]:
    """The rejected combinations (module doc): one message per ``(where, memory_evict)`` whose eviction
    threshold is at or below ``reclaim_percent`` (``batch.memory_reclaim_threshold_percent``)."""
    out: list[str] = []
    for where, me in strategies:
        if me.enabled and reclaim_percent >= me.threshold_percent:
            out.append(f"batch.memory_reclaim_threshold_percent {reclaim_percent} >= {where}.memory_evict."
                       f"threshold_percent {me.threshold_percent}: batch-memory would be offered up to "
                       f"{reclaim_percent} % of node memory while BE memory eviction starts at "
                       f"{me.threshold_percent} %, so evicted BE pods would be placed straight back; set the "
                       f"reclaim threshold at or below the lower threshold {_lower(me)} %")
    return out


def memory_threshold_warnings(reclaim_percent: int, memory_policy: str,
                              strategies: Iterable[tuple[str, MemoryEvictStrategy]]) -> list[str]:
    """The warned combinations (module doc), with the numbers."""
    out: list[str] = []
    for where, me in strategies:
        if not me.enabled:
            continue
        lower = _lower(me)
        if lower < reclaim_percent < me.threshold_percent:
            out.append(f"batch.memory_reclaim_threshold_percent {reclaim_percent} > {where}.memory_evict lower "
                       f"threshold {lower}: a node filled with BE memory to {reclaim_percent} % stays under BE "
                       f"memory pressure after one eviction (evictions stop at {lower} %)")
        if memory_policy == "request":
            out.append(f"batch.memory_policy request: batch-memory follows online requests, not usage; online "
                       f"pods above their requests can take a node to {where}.memory_evict.threshold_percent "
                       f"{me.threshold_percent} whatever the reclaim threshold ({reclaim_percent})")
    return out


def memory_evict_strategies(settings: SloManagerSettings) -> list[tuple[str, MemoryEvictStrategy]]:
    """``(where, memory_evict)`` of the cluster strategy and of each node pool whose merge changes it (a pool
    whose patch does not merge is skipped: ``SloManagerSettings.pool_problems`` reports it)."""
    out = [("node_slo", settings.node_slo.memory_evict)]
    for i, pool in enumerate(settings.node_pools):
        try:
            me = pool.over(settings.node_slo)["memory_evict"]
        except msgspec.ValidationError:
            continue
        if isinstance(me, MemoryEvictStrategy) and me != settings.node_slo.memory_evict:
            out.append((f"node_pools[{i}] ({pool.name})", me))
    return out


def settings_warnings(settings: SloManagerSettings) -> list[str]:
    """:func:`memory_threshold_warnings` of ``settings``: logged and announced (``ConfigApplied.warnings``)
    whenever a configuration comes in force."""
    batch = settings.batch
    return memory_threshold_warnings(batch.memory_reclaim_threshold_percent, batch.memory_policy,
                                     memory_evict_strategies(settings))
