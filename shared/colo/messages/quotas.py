"""Elastic quota (REFERENCE.md §8; Koordinator ``ElasticQuota``): a tree of team quotas with min, max and
shared weight per resource, and the status the scheduler publishes.

Resources are keyed by the :data:`colo.messages.RESOURCE_NAMES` field names (``cpu``, ``memory``,
``batch_cpu``, ``batch_memory``, ``mid_cpu``, ``mid_memory``, ``pods``); amounts in milli-cores, bytes or a
count. In ``max`` an absent resource is unlimited; in ``min`` absent is 0; in ``shared_weight`` absent is
the resource's max (REFERENCE.md §8 default), or its min when max is unlimited.
"""

from __future__ import annotations

from colo.messages.base import Message

QUOTA_NAME_LABEL = "quota.scheduling.koordinator.sh/name"
"""Pod label naming its quota explicitly (wins over namespace and label selection)."""
PREEMPTIBLE_LABEL = "quota.scheduling.koordinator.sh/preemptible"
"""Pod label: ``"false"`` marks a pod never preempted, for quota or priority (Koordinator)."""
ROOT_QUOTA = "root"
"""The implicit root of the quota tree: the cluster's total."""


class ElasticQuota(Message, frozen=True):
    """One quota of the tree as submitted (subject ``quota.spec.{name}``).

    ``parent`` "" (or :data:`ROOT_QUOTA`) for a child of the root. Pods belong to the most specific leaf that
    selects them: the :data:`QUOTA_NAME_LABEL` label, else ``match_labels`` (all must match), else
    ``namespaces``. ``allow_lent`` False keeps its idle min from other quotas (Koordinator
    ``allow-lent-resource``). ``deleted`` True removes the quota (its pods fall back to no quota)."""

    name: str
    parent: str = ""
    namespaces: list[str] = []
    match_labels: dict[str, str] = {}
    min: dict[str, int] = {}
    max: dict[str, int] = {}
    shared_weight: dict[str, int] = {}
    allow_lent: bool = True
    deleted: bool = False
    created_at: float = 0.0


class QuotaStatus(Message, frozen=True):
    """A quota's state as the scheduler computes it (subject ``quota.status.{name}``): ``used`` by bound
    and reserved pods, ``request`` = used + pending demand (capped at max), ``runtime`` what it may use
    now (REFERENCE.md §8), per resource; ``at`` the clock time."""

    name: str
    parent: str
    min: dict[str, int]
    max: dict[str, int]
    used: dict[str, int]
    request: dict[str, int]
    runtime: dict[str, int]
    pods: int = 0
    pending: int = 0
    at: float = 0.0
    spec_created_at: float = 0.0
    """``created_at`` of the :class:`ElasticQuota` in force: ``colo submit`` takes a status carrying its
    submission's time as the scheduler's acceptance (a refusal is dead-lettered: :mod:`colo.submission`)."""
