"""In-tree plugins and the one function that registers them."""

from __future__ import annotations

from colo_scheduler.framework.registry import ProfileConfig, Registry
from colo_scheduler.plugins.loadaware import LoadAware
from colo_scheduler.plugins.maxinstance import MaxInstancePerNode
from colo_scheduler.plugins.noderesources import (
    NodeResourcesBalancedAllocation,
    NodeResourcesFit,
    NodeResourcesFitArgs,
    NodeResourcesLeastAllocated,
    ResourcesArgs,
)
from colo_scheduler.plugins.nodeselector import NodeSelector
from colo_scheduler.plugins.prioritysort import PrioritySort
from colo_scheduler.plugins.tainttoleration import TaintToleration
from colo_scheduler.settings import SchedulerSettings


def new_in_tree_registry() -> Registry:
    """Every in-tree plugin factory, by plugin name."""
    r = Registry()
    r.register(PrioritySort.name, lambda a, s: PrioritySort())
    r.register(NodeResourcesFit.name, lambda a, s: NodeResourcesFit(a), NodeResourcesFitArgs)
    r.register(NodeResourcesLeastAllocated.name, lambda a, s: NodeResourcesLeastAllocated(a), ResourcesArgs)
    r.register(NodeResourcesBalancedAllocation.name, lambda a, s: NodeResourcesBalancedAllocation(a),
               ResourcesArgs)
    r.register(NodeSelector.name, lambda a, s: NodeSelector())
    r.register(TaintToleration.name, lambda a, s: TaintToleration())
    r.register(MaxInstancePerNode.name, lambda a, s: MaxInstancePerNode())
    r.register(LoadAware.name, lambda a, s: LoadAware(s))
    return r


def default_profile_config(settings: SchedulerSettings) -> ProfileConfig:
    """The default profile: cheap static filters first, so their rejections are reported first."""
    return ProfileConfig(
        queue_sort=PrioritySort.name,
        filter=(NodeSelector.name, TaintToleration.name, NodeResourcesFit.name,
                MaxInstancePerNode.name, LoadAware.name),
        score={LoadAware.name: settings.load_aware_weight,
               NodeResourcesLeastAllocated.name: settings.least_allocated_weight},
        reserve=(NodeResourcesFit.name, LoadAware.name, MaxInstancePerNode.name),
    )
