"""Jobs: the workload kinds a user submits besides a single pod, their pod groups (gangs) and
ownership (REFERENCE.md §9; Kubernetes ``apps/v1`` Deployment/StatefulSet, ``batch/v1`` Job, the
scheduler-plugins ``PodGroup`` and Koordinator's gang annotations).

A :class:`~colo.messages.workloads.WorkloadSpec` (subject ``workload.submitted``) is expanded by admission into pods that carry
their :class:`OwnerReference` and, when the workload forms a gang, their :class:`GangSpec`. A
:class:`PodGroupSpec` (subject ``podgroup.submitted``) declares a gang that pods join by the
:data:`POD_GROUP_LABEL` label. Times in seconds.
"""

from __future__ import annotations

from typing import Literal

from colo.messages.base import Message

GangMode = Literal["Strict", "NonStrict"]
"""``Strict``: one failed member sends the whole gang back to the queue and frees what it held;
``NonStrict``: placed members keep waiting at Permit while the others retry (Koordinator gang modes)."""

POD_GROUP_LABEL = "pod-group.scheduling.sigs.k8s.io"
"""Pod label naming the PodGroup (same namespace) a pod belongs to (scheduler-plugins Coscheduling)."""

DEFAULT_GANG_TIMEOUT_S = 600.0
"""Default wait of a gang's members at Permit (REFERENCE.md §9: 600 s). Any positive length is accepted:
the reference caps it far below what users ask (REFERENCE.md §11)."""


class OwnerReference(Message, frozen=True):
    """The workload a pod belongs to (Kubernetes ``metadata.ownerReferences[controller]``)."""

    kind: str
    name: str
    uid: str


class GangSpec(Message, frozen=True):
    """A pod's gang membership, copied onto every member by admission.

    ``name`` is the gang's key ``namespace/name``; ``min_member`` members must be placed together before
    any binds; ``total_member`` is the number of members submitted (0 = unknown); ``timeout_s`` how long
    placed members wait at Permit for the rest; ``groups`` the keys of every gang that must be satisfied
    together with this one (a gang *group*, e.g. a PS/worker pair; includes this gang; empty = alone);
    ``created_at`` the gang's submission time, its position in the queue.
    """

    name: str
    min_member: int
    total_member: int = 0
    timeout_s: float = DEFAULT_GANG_TIMEOUT_S
    mode: GangMode = "Strict"
    groups: list[str] = []
    created_at: float = 0.0


class PodGroupSpec(Message, frozen=True):
    """A PodGroup as submitted (subject ``podgroup.submitted``): a gang that pods join by the
    :data:`POD_GROUP_LABEL` label, or that a workload embeds (:class:`~colo.messages.workloads.WorkloadSpec`).

    ``min_member`` ≥ 1; ``timeout_s`` > 0 (seconds, default :data:`DEFAULT_GANG_TIMEOUT_S`); ``groups``
    names other PodGroups (``name`` in the same namespace or ``namespace/name``) that form one gang group
    with this one."""

    uid: str
    name: str
    namespace: str = "default"
    min_member: int = 1
    timeout_s: float = DEFAULT_GANG_TIMEOUT_S
    mode: GangMode = "Strict"
    groups: list[str] = []
    created_at: float = 0.0
