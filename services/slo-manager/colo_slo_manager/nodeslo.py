"""NodeSLO rendering: the cluster strategy with node-pool overrides (DESIGN.md §3 policy loop). Pure."""

from __future__ import annotations

import msgspec

from colo.messages import NodeSLO, NodeSpec
from colo_slo_manager.settings import NodePool, NodeSLOStrategy

_STRATEGIES = ("cpu_suppress", "memory_evict", "cpu_evict", "cpu_burst", "memory_qos", "be_cpu_idle", "be_cpu_shares",
               "cpuset",
               "resctrl", "blkio", "system")


def pool_of(node: NodeSpec, pools: list[NodePool]) -> NodePool | None:
    """The first pool whose ``node_selector`` labels are all on ``node``, or None."""
    for pool in pools:
        if all(node.labels.get(k) == v for k, v in pool.node_selector.items()):
            return pool
    return None


def render_node_slo(node: NodeSpec, cluster: NodeSLOStrategy, pools: list[NodePool], now: float) -> NodeSLO:
    """The NodeSLO of ``node`` at ``now``: ``cluster`` strategies, each replaced by the matching
    pool's override when the pool sets one; ``pool`` names the pool ("" when none matched)."""
    pool = pool_of(node, pools)
    values: dict[str, object] = {name: getattr(cluster, name) for name in _STRATEGIES}
    if pool is not None:
        for name in _STRATEGIES:
            override = getattr(pool, name)
            if override is not None:
                values[name] = override
    # values maps each strategy field name to its own strategy type; one dict cannot say that.
    return NodeSLO(node=node.name, at=now, pool=pool.name if pool is not None else "", **values)  # type: ignore[arg-type]


def same_policy(a: NodeSLO | None, b: NodeSLO) -> bool:
    """True when ``a`` and ``b`` carry the same policy (the render time ``at`` is ignored)."""
    if a is None:
        return False
    return msgspec.structs.replace(a, at=0.0) == msgspec.structs.replace(b, at=0.0)
