"""NodeSLO rendering: the cluster strategy with the first matching node pool's partial strategies merged
on (DESIGN.md §3 policy loop; Koordinator merges a node strategy onto the cluster one). Pure."""

from __future__ import annotations

import msgspec

from colo.messages import NodeSLO, NodeSpec
from colo_slo_manager.settings import NodePool, NodeSLOStrategy, SloManagerSettings


def selects(pool: NodePool, node: NodeSpec) -> bool:
    """Whether every ``node_selector`` label of ``pool`` is on ``node``."""
    return all(node.labels.get(k) == v for k, v in pool.node_selector.items())


def pool_of(node: NodeSpec, pools: list[NodePool]) -> NodePool | None:
    """The first pool that :func:`selects` ``node``, or None."""
    return next((pool for pool in pools if selects(pool, node)), None)


class _Templates:
    """The NodeSLO of each pool (and of no pool) for one (cluster, pools) pair, built once: merging
    partial strategies costs a conversion per strategy, too much to repeat for every node."""

    def __init__(self, cluster: NodeSLOStrategy, pools: list[NodePool]) -> None:
        self.cluster = cluster
        self.pools = pools
        self.none = NodeSLO(node="", **cluster.values())  # type: ignore[arg-type]
        self.by_pool = [NodeSLO(node="", pool=p.name, **p.over(cluster)) for p in pools]  # type: ignore[arg-type]

    def render(self, node: NodeSpec, now: float) -> NodeSLO:
        for pool, template in zip(self.pools, self.by_pool):
            if selects(pool, node):
                return msgspec.structs.replace(template, node=node.name, at=now)
        return msgspec.structs.replace(self.none, node=node.name, at=now)


_last: _Templates | None = None


def render_node_slo(node: NodeSpec, cluster: NodeSLOStrategy, pools: list[NodePool], now: float) -> NodeSLO:
    """The NodeSLO of ``node`` at ``now``: the ``cluster`` strategies, with the partial strategies of the
    first pool whose selector matches merged on field by field (:meth:`NodePool.over`); ``pool`` names
    that pool ("" when none matched). The merged strategies are computed once per (cluster, pools)
    objects and reused while the same objects are passed."""
    global _last
    t = _last
    if t is None or t.cluster is not cluster or t.pools is not pools:
        t = _last = _Templates(cluster, pools)
    return t.render(node, now)


_cluster: tuple[SloManagerSettings, NodeSLOStrategy] | None = None


def cluster_of(settings: SloManagerSettings) -> NodeSLOStrategy:
    """:meth:`SloManagerSettings.cluster_strategy` of ``settings``, built once per settings object (so that
    :func:`render_node_slo` reuses its merged templates across nodes)."""
    global _cluster
    if _cluster is None or _cluster[0] is not settings:
        _cluster = (settings, settings.cluster_strategy())
    return _cluster[1]


def same_policy(a: NodeSLO | None, b: NodeSLO) -> bool:
    """True when ``a`` and ``b`` carry the same policy (the render time ``at`` is ignored)."""
    if a is None:
        return False
    return msgspec.structs.replace(a, at=0.0) == msgspec.structs.replace(b, at=0.0)
