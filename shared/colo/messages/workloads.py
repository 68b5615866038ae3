"""Workloads: the Deployment, StatefulSet and Job shapes a user submits besides a single pod (Kubernetes
``apps/v1`` and ``batch/v1``), expanded by admission into pods that carry their owner and gang
(:mod:`colo.messages.jobs`)."""

from __future__ import annotations

from typing import Literal

from colo.messages.base import Message
from colo.messages.jobs import PodGroupSpec
from colo.messages.pods import PodSpec

WorkloadKind = Literal["Deployment", "StatefulSet", "Job"]


class WorkloadSpec(Message, frozen=True, kw_only=True):
    """A Deployment, StatefulSet or Job as submitted (subject ``workload.submitted``).

    ``replicas`` (Deployment, StatefulSet) or ``parallelism``/``completions`` (Job) pods are made from
    ``template`` (a :class:`PodSpec` whose ``uid``/``name`` are ignored: each pod is named
    ``<name>-<index>`` for a StatefulSet or Job, ``<name>-<hash>`` for a Deployment). ``pod_group``, when
    set, makes the pods one gang. ``max_unavailable`` is the workload's disruption budget: at most this many
    of its pods may be preempted or evicted at once (−1 = no budget; Kubernetes PodDisruptionBudget
    ``maxUnavailable``). ``created_at`` the submission time (seconds)."""

    kind: WorkloadKind
    uid: str
    name: str
    namespace: str = "default"
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    replicas: int = 1
    parallelism: int = 1
    completions: int = 1
    template: PodSpec
    pod_group: PodGroupSpec | None = None
    max_unavailable: int = -1
    created_at: float = 0.0


class WorkloadAdmitted(Message, frozen=True):
    """A workload (or PodGroup) accepted by admission: its key ``kind/namespace/name``, the uids of the pods
    it was expanded into so far (subject ``workload.admitted``)."""

    kind: str
    uid: str
    name: str
    namespace: str
    pods: list[str]
    at: float
    not_applied: list[str] = []
    """For a resubmission of an admitted uid whose spec differs: each change that was not applied
    (``replicas: 3 → 5``, ``template``); the first admitted spec holds (:func:`colo.workloads.spec_changes`)."""


class WorkloadRejected(Message, frozen=True):
    """A workload (or PodGroup) refused by admission, with every problem as ``"<field path>: <problem>"``;
    none of its pods was admitted (subject ``workload.rejected``)."""

    kind: str
    uid: str
    name: str
    namespace: str
    errors: list[str]
    at: float
