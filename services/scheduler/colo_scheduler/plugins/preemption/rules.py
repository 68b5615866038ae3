"""Who may be preempted, by whom, and the disruption budgets of the victims' owners.

A pod on a node is a *potential victim* of a preemptor (Kubernetes DefaultPreemption, the pods
``selectVictimsOnNode`` considers) when its priority is strictly below the preemptor's and no rule
protects it:

* the label ``quota.scheduling.koordinator.sh/preemptible: "false"`` (Koordinator; never preempted),
* a DaemonSet, mirror or static pod (they belong to the node: Kubernetes never schedules them
  elsewhere, so evicting them frees nothing for long),
* prod is never preempted by batch or free (REFERENCE.md §1 classes; by priority ranges this
  already holds, the rule keeps it for pods with explicit priorities outside their class range),
* a plugin of the profile with ``victim_allowed`` (:class:`PreemptionVictimFilter`, e.g. the
  ElasticQuota plugin) says no.

Budgets: a pod's ``max_unavailable`` (Kubernetes PodDisruptionBudget ``maxUnavailable``) limits how many
pods of its owner — ``PodSpec.owner`` (kind/name/uid), else the workload ``namespace/app`` — may be
preempted at once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from colo.messages import PodSpec
from colo.messages.quotas import PREEMPTIBLE_LABEL
from colo_scheduler.framework.interface import CycleState, PreemptionVictimFilter
from colo_scheduler.podinfo import PodInfo

PROD_KEEPERS = frozenset({"batch", "free"})
"""Priority classes that never preempt a prod pod."""

NON_PREEMPTIBLE = "non-preemptible label"
NODE_BOUND = "daemonset, mirror or static pod"
PROD_BY_LOWER_CLASS = "prod is never preempted by batch/free"
NOT_LOWER = "priority not below the preemptor's"


def protection(preemptor: PodInfo, victim: PodInfo) -> str | None:
    """Why ``victim`` may not be preempted by ``preemptor`` (one of the reasons above), or None."""
    v = victim.spec
    if victim.priority >= preemptor.priority:
        return NOT_LOWER
    if v.labels.get(PREEMPTIBLE_LABEL) == "false":
        return NON_PREEMPTIBLE
    if v.daemonset or v.mirror or v.static:
        return NODE_BOUND
    if victim.priority_class == "prod" and preemptor.priority_class in PROD_KEEPERS:
        return PROD_BY_LOWER_CLASS
    return None


def allowed_by_plugins(filters: Sequence[PreemptionVictimFilter], state: CycleState, preemptor: PodInfo,
                       victim: PodInfo) -> bool:
    """True when every victim filter of the profile lets ``preemptor`` take ``victim``."""
    return all(f.victim_allowed(state, preemptor, victim) for f in filters)


def owner_key(spec: PodSpec) -> str:
    """The disruption-budget key of a pod: ``kind/uid`` of its owner, else ``namespace/app``, else ""
    (no owner: no budget)."""
    if spec.owner is not None:
        return f"{spec.owner.kind}/{spec.owner.uid or spec.owner.name}"
    return f"{spec.namespace}/{spec.app}" if spec.app else ""


def violating(victims: Sequence[PodInfo], leaving: Mapping[str, int]) -> list[bool]:
    """Per pod of ``victims`` (most important first), whether evicting it breaks its owner's budget
    (Kubernetes ``filterPodsWithPDBViolation``): each owner's allowance is ``max_unavailable`` less the
    owner's pods already leaving for earlier preemptions (``leaving``: owner key → pods), spent in
    order; a pod that finds it at zero violates. Pods without a budget (−1) never violate."""
    allowed: dict[str, int] = {}
    out: list[bool] = []
    for v in victims:
        budget = v.spec.max_unavailable
        key = owner_key(v.spec)
        if budget < 0 or not key:
            out.append(False)
            continue
        left = allowed.get(key, budget - leaving.get(key, 0))
        allowed[key] = left - 1
        out.append(left <= 0)
    return out
