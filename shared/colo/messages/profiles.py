"""Profiler output (REFERENCE.md §7): predicted peaks of pods and nodes (:class:`NodeProfile`) and of
workload replicas (:class:`WorkloadProfile`)."""

from __future__ import annotations

from colo.messages.base import Message
from colo.messages.resources import Usage


class PodPrediction(Message, frozen=True):
    """Predicted peak of one pod: ``cpu_peak`` milli-cores, ``memory_peak`` bytes.

    ``cold``: the pod is in its cold-start period (REFERENCE.md §7), so its own model is not used.
    ``from_workload``: the peak comes from the warm model of the pod's workload (namespace, app),
    capped by the pod's request, instead of the full request (the profiler's
    ``cold_start_from_workload``); False on a cold pod means the peak is its request.
    """

    uid: str
    cpu_peak: int
    memory_peak: int
    cold: bool = False
    from_workload: bool = False


class NodeProfile(Message, frozen=True):
    """Profiler output for one node (subject ``profile.node.<node>``), REFERENCE.md §7.

    ``prod_reclaimable`` = min(pod-based, class-based) reclaimable prod resources,
    in milli-cores / bytes; ``system_peak`` and ``prod_peak`` the predicted peaks.
    """

    node: str
    at: float
    prod_reclaimable: Usage = Usage()
    system_peak: Usage = Usage()
    prod_peak: Usage = Usage()
    pods: list[PodPrediction] = []


class WorkloadPrediction(Message, frozen=True):
    """Predicted peak of one replica of the workload ``app`` (its namespace is the enclosing
    :class:`WorkloadProfile`'s): ``cpu_peak`` milli-cores, ``memory_peak`` bytes, from the per-pod usage
    samples of all its pods (REFERENCE.md §7 percentiles and margin). ``pods`` = pods of the workload
    currently modelled; ``since`` = time of its first sample, seconds; ``warm`` = observed for at least
    the cold-start period, so cold pods of the workload are predicted from it."""

    app: str
    cpu_peak: int
    memory_peak: int
    pods: int = 0
    since: float = 0.0
    warm: bool = False


class WorkloadProfile(Message, frozen=True):
    """Profiler output for the workloads of one namespace (subject ``profile.workload.<namespace>``):
    what a new replica of each is expected to use at its peak, sorted by ``app``."""

    namespace: str
    at: float
    workloads: list[WorkloadPrediction] = []
