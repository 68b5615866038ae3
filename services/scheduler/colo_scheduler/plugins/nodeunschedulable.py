"""NodeUnschedulable (Filter): a cordoned node (``NodeSpec.unschedulable``) takes no new pod.

Kubernetes semantics (``pkg/scheduler/framework/plugins/nodeunschedulable``): a pod that tolerates the taint
``node.kubernetes.io/unschedulable:NoSchedule`` (toleration matching as in TaintToleration) may still go
there; pods already bound stay. Masks are cached per answer to "tolerates it" until a node's spec changes.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from colo.messages import Taint
from colo_scheduler.framework.interface import NODE_ADD, CycleState
from colo_scheduler.plugins.maskfilter import CachedMaskFilter
from colo_scheduler.plugins.tainttoleration import tolerates
from colo_scheduler.podinfo import PodInfo
from colo_scheduler.table import BoolArray, NodeTable

REASON = "node(s) were unschedulable"

UNSCHEDULABLE_TAINT = Taint(key="node.kubernetes.io/unschedulable", effect="NoSchedule")
"""The taint a pod tolerates to be placed on a cordoned node (Kubernetes ``TaintNodeUnschedulable``)."""


def tolerates_unschedulable(pod: PodInfo) -> bool:
    """Whether one of the pod's tolerations tolerates :data:`UNSCHEDULABLE_TAINT`."""
    return any(tolerates(t, UNSCHEDULABLE_TAINT) for t in pod.tolerations_key)


def schedulable_builder() -> Callable[[NodeTable], BoolArray]:
    """A mask builder: (n,) True where the node is not unschedulable."""

    def build(table: NodeTable) -> BoolArray:
        return np.fromiter((not table.specs[i].unschedulable for i in range(table.n)), dtype=np.bool_,
                           count=table.n)

    return build


class NodeUnschedulable(CachedMaskFilter):
    """Filter on ``NodeSpec.unschedulable`` (cordon)."""

    name = "NodeUnschedulable"
    events = frozenset({NODE_ADD})
    reason = REASON

    def pool_key(self, pod: PodInfo) -> object:
        """Hashable key on which :meth:`filter` alone depends (a queueing hint, hints.py)."""
        return tolerates_unschedulable(pod)

    def filter(self, state: CycleState, pod: PodInfo) -> BoolArray | None:
        """(n,) True where the node is schedulable, all True (None) for a pod that tolerates the cordon."""
        if tolerates_unschedulable(pod):
            return None
        return state.table.cached_mask(self.name, False, schedulable_builder())
