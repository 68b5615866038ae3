"""In-tree plugins and the one function that registers them."""

from __future__ import annotations

import dataclasses

from colo_scheduler.framework.registry import ProfileConfig, Registry
from colo_scheduler.plugins.batchbalance import BatchResourcesBalancedAllocation
from colo_scheduler.plugins.bememorypressure import BEMemoryPressure
from colo_scheduler.plugins.coscheduling import Coscheduling
from colo_scheduler.plugins.deviceshare.plugin import DeviceShare, DeviceShareArgs
from colo_scheduler.plugins.elasticquota import ElasticQuota
from colo_scheduler.plugins.loadaware import LoadAware, LoadAwareArgs
from colo_scheduler.plugins.loadaware import default_args as load_aware_default_args
from colo_scheduler.plugins.maxinstance import MaxInstancePerNode
from colo_scheduler.plugins.nodeaffinity import NodeAffinity
from colo_scheduler.plugins.nodenumaresource import NodeNUMAResource, NodeNUMAResourceArgs
from colo_scheduler.plugins.noderesources import (
    NodeResourcesBalancedAllocation,
    NodeResourcesFit,
    NodeResourcesFitArgs,
    NodeResourcesLeastAllocated,
    ResourcesArgs,
)
from colo_scheduler.plugins.nodeselector import NodeSelector
from colo_scheduler.plugins.nodeunschedulable import NodeUnschedulable
from colo_scheduler.plugins.preemption import DefaultPreemption, DefaultPreemptionArgs
from colo_scheduler.plugins.prioritysort import PrioritySort
from colo_scheduler.plugins.qosadmission import QoSAdmission
from colo_scheduler.plugins.selectorspread import SelectorSpread
from colo_scheduler.plugins.tainttoleration import TaintToleration
from colo_scheduler.settings import SchedulerSettings

NODE_AFFINITY_WEIGHT = 2
"""Default profile weight of the NodeAffinity score (the Kubernetes default profile's weight)."""

NODE_NUMA_RESOURCE_WEIGHT = 1
"""Default profile weight of the NodeNUMAResource score (0 for every node unless the pod wants a cpuset)."""
DEVICE_SHARE_WEIGHT = 3
"""Default profile weight of the DeviceShare score (GPU pods; CPU-only pods too once the target workload gives GPUs
a CPU need, 0 on nodes without GPUs: ``DeviceShareArgs.score_cpu_pods``): 3 so that for GPU pods the
fragmentation score outweighs LeastAllocated's spreading (docs/gpu.md)."""

SELECTOR_SPREAD_WEIGHT = 2
"""Default profile weight of the SelectorSpread score (the Kubernetes default profile's weight of
PodTopologySpread, which replaced SelectorSpread there)."""


def new_in_tree_registry() -> Registry:
    """Every in-tree plugin factory, by plugin name."""
    r = Registry()
    r.register(PrioritySort.name, lambda a, s: PrioritySort())
    r.register(NodeResourcesFit.name, lambda a, s: NodeResourcesFit(a), NodeResourcesFitArgs)
    r.register(NodeResourcesLeastAllocated.name, lambda a, s: NodeResourcesLeastAllocated(a), ResourcesArgs)
    r.register(NodeResourcesBalancedAllocation.name, lambda a, s: NodeResourcesBalancedAllocation(a),
               ResourcesArgs)
    r.register(BatchResourcesBalancedAllocation.name, lambda a, s: BatchResourcesBalancedAllocation(a),
               ResourcesArgs)
    r.register(NodeSelector.name, lambda a, s: NodeSelector())
    r.register(TaintToleration.name, lambda a, s: TaintToleration())
    r.register(MaxInstancePerNode.name, lambda a, s: MaxInstancePerNode())
    r.register(LoadAware.name, lambda a, s: LoadAware(s, a), LoadAwareArgs, load_aware_default_args)
    r.register(NodeAffinity.name, lambda a, s: NodeAffinity())
    r.register(SelectorSpread.name, lambda a, s: SelectorSpread())
    r.register(QoSAdmission.name, lambda a, s: QoSAdmission())
    r.register(NodeUnschedulable.name, lambda a, s: NodeUnschedulable())
    r.register(BEMemoryPressure.name, lambda a, s: BEMemoryPressure())
    r.register(Coscheduling.name, lambda a, s: Coscheduling())
    r.register(ElasticQuota.name, lambda a, s: ElasticQuota())
    r.register(DefaultPreemption.name, lambda a, s: DefaultPreemption(a), DefaultPreemptionArgs)
    r.register(NodeNUMAResource.name, lambda a, s: NodeNUMAResource(a), NodeNUMAResourceArgs)
    r.register(DeviceShare.name, lambda a, s: DeviceShare(a), DeviceShareArgs)
    return r


def default_profile_config(settings: SchedulerSettings) -> ProfileConfig:
    """The default profile (docs/scheduler.md "Default profile").

    QueueSort: Coscheduling (PrioritySort's order, a gang's members adjacent). PreFilter: QoSAdmission,
    NodeAffinity (invalid pods), Coscheduling (gangs short of members), ElasticQuota (docs/quota.md). PostFilter,
    Permit: Coscheduling (gangs; a pod without a gang passes at the cost of one test). Filters, cheap static ones first so
    that their rejections are reported first: NodeUnschedulable, NodeSelector, NodeAffinity, TaintToleration,
    NodeResourcesFit, NodeNUMAResource, DeviceShare, MaxInstancePerNode, BEMemoryPressure, LoadAware. Reserve:
    NodeResourcesFit, NodeNUMAResource, DeviceShare, LoadAware, MaxInstancePerNode, SelectorSpread, ElasticQuota, Coscheduling. Scores (weights):
    LoadAware (``load_aware_weight``, 1), NodeResourcesLeastAllocated (``least_allocated_weight``, 1),
    NodeAffinity (:data:`NODE_AFFINITY_WEIGHT`, 2), SelectorSpread (:data:`SELECTOR_SPREAD_WEIGHT`, 2),
    NodeNUMAResource (:data:`NODE_NUMA_RESOURCE_WEIGHT`, 1; docs/topology.md), DeviceShare
    (:data:`DEVICE_SHARE_WEIGHT`, 3; docs/gpu.md), BatchResourcesBalancedAllocation (``batch_balanced_weight``, 1;
    batch pods only, left out at 0). PreFilter also NodeNUMAResource
    (a malformed resource-spec annotation).
    PostFilter: DefaultPreemption (as the Kubernetes default profile), then Coscheduling (a Strict gang sent back).
    """
    balanced = ({BatchResourcesBalancedAllocation.name: settings.batch_balanced_weight}
                if settings.batch_balanced_weight > 0 else {})
    return ProfileConfig(
        queue_sort=Coscheduling.name,
        pre_filter=(QoSAdmission.name, NodeAffinity.name, Coscheduling.name, ElasticQuota.name, NodeNUMAResource.name),
        filter=(NodeUnschedulable.name, NodeSelector.name, NodeAffinity.name, TaintToleration.name, NodeResourcesFit.name,
                NodeNUMAResource.name, DeviceShare.name, MaxInstancePerNode.name, BEMemoryPressure.name,
                LoadAware.name),
        post_filter=(DefaultPreemption.name, Coscheduling.name),
        score={LoadAware.name: settings.load_aware_weight,
               NodeResourcesLeastAllocated.name: settings.least_allocated_weight,
               NodeAffinity.name: NODE_AFFINITY_WEIGHT,
               SelectorSpread.name: SELECTOR_SPREAD_WEIGHT,
               NodeNUMAResource.name: NODE_NUMA_RESOURCE_WEIGHT,
               DeviceShare.name: DEVICE_SHARE_WEIGHT, **balanced},
        reserve=(NodeResourcesFit.name, NodeNUMAResource.name, DeviceShare.name, LoadAware.name, MaxInstancePerNode.name, SelectorSpread.name,
                 ElasticQuota.name, Coscheduling.name),
        permit=(Coscheduling.name,),
    )


def profile_config(settings: SchedulerSettings) -> ProfileConfig:
    """The default profile with the overrides of ``settings.profile`` (fields left None keep the
    default). Validation happens in :func:`colo_scheduler.framework.registry.build_profile`."""
    base = default_profile_config(settings)
    p = settings.profile
    lists = {name: tuple(v) for name in ("pre_filter", "filter", "post_filter", "pre_score", "reserve",
                                         "permit", "pre_bind") if (v := getattr(p, name)) is not None}
    return dataclasses.replace(
        base, **lists,
        queue_sort=p.queue_sort if p.queue_sort is not None else base.queue_sort,
        score=dict(p.score) if p.score is not None else base.score,
        bind=p.bind if p.bind is not None else base.bind,
        plugin_args={**base.plugin_args, **p.plugin_args},
        percentage_of_nodes_to_score=p.percentage_of_nodes_to_score,
        min_feasible_nodes_to_find=p.min_feasible_nodes_to_find,
    )
