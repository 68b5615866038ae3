"""Pods: the submitted :class:`PodSpec` (and its simulated workload), its lifecycle events (admitted,
rejected, bound, unschedulable, status, eviction) and its :class:`PodRecord` in the store."""

from __future__ import annotations

from typing import Literal

from colo.messages.affinity import Affinity
from colo.messages.base import Message, PodPhase, PriorityClass, QoSClass
from colo.messages.jobs import GangSpec, OwnerReference
from colo.messages.nodes import Toleration
from colo.messages.resources import Resources
from colo.messages.topology import DeviceAllocation, GPURequest


class SimWorkload(Message, frozen=True):
    """What a pod does under the ``sim`` node backend.

    ``kind="series"``: a long-running service whose demand follows a usage series
    sampled every ``step_s`` seconds starting at the pod's start (cyclic):
    demand_cpu(t) = ``cpu_util[i]`` × ``cpu_scale_milli``, demand_memory(t) =
    ``memory_util[i]`` × ``memory_scale_bytes`` (fractions 0–1).
    ``kind="batch"``: a task that needs ``cpu_milli`` while running and completes after
    ``duration_s`` seconds of full service (slower when served less), holding
    ``memory_bytes``.
    """

    kind: Literal["series", "batch"]
    step_s: float = 300.0
    cpu_util: list[float] = []
    memory_util: list[float] = []
    cpu_scale_milli: int = 0
    memory_scale_bytes: int = 0
    cpu_milli: int = 0
    memory_bytes: int = 0
    duration_s: float = 0.0


class PodSpec(Message, frozen=True):
    """A pod as submitted (subject ``pod.submitted``).

    ``requests``/``limits`` in milli-cores and bytes. ``priority`` is the Kubernetes
    priority value; ``priority_class`` / ``qos_class`` the Koordinator labels (None =
    derive, REFERENCE.md §1). ``app`` names the owning workload; ``max_instance_per_node``
    caps its pods per node (−1 = no cap). ``command`` is run by the ``host`` backend,
    ``sim`` by the ``sim`` backend. ``created_at`` is the submission time (seconds).
    ``affinity`` holds required and preferred node affinity (None = none).
    """

    uid: str
    name: str
    namespace: str = "default"
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    priority: int | None = None
    priority_class: PriorityClass | None = None
    qos_class: QoSClass | None = None
    scheduler_name: str = "colo-scheduler"
    requests: Resources = Resources()
    limits: Resources = Resources()
    node_selector: dict[str, str] = {}
    affinity: Affinity | None = None
    tolerations: list[Toleration] = []
    app: str = ""
    max_instance_per_node: int = -1
    daemonset: bool = False
    command: list[str] = []
    env: dict[str, str] = {}
    sim: SimWorkload | None = None
    created_at: float = 0.0
    mirror: bool = False
    """A mirror pod (Kubernetes: the API copy of a static pod, annotation ``kubernetes.io/config.mirror``):
    never evicted."""
    static: bool = False
    """A static pod (started by the kubelet from a manifest, not by the scheduler): never evicted."""
    local_storage: bool = False
    """Has local storage (emptyDir or hostPath volumes), lost on eviction: evicted only when the descheduler's
    ``evict_local_storage_pods`` is set."""
    owner: OwnerReference | None = None
    """The workload the pod was expanded from (admission, :mod:`colo.messages.workloads`); None for a bare pod."""
    gang: GangSpec | None = None
    """The pod's gang (pod group) when it must be placed together with others (Coscheduling); None = alone."""
    max_unavailable: int = -1
    """Disruption budget of the pod's owner: at most this many of the owner's pods may be preempted or evicted
    at once (−1 = none; Kubernetes PodDisruptionBudget ``maxUnavailable``)."""
    preemption_policy: Literal["PreemptLowerPriority", "Never"] = "PreemptLowerPriority"
    """Kubernetes ``preemptionPolicy``: ``Never`` keeps the pod from preempting others (it may still be preempted)."""
    gpu: GPURequest | None = None
    """The pod's GPU request (``nvidia.com/gpu``, ``koordinator.sh/gpu-core``/``gpu-memory-ratio``,
    ``colo.io/gpu-milli``; docs/gpu.md); None = no GPU."""


class PodAdmitted(Message, frozen=True):
    """A pod accepted by admission, with colocation profiles applied (subject ``pod.admitted``)."""

    spec: PodSpec
    at: float
    profile: str = ""


class PodRejected(Message, frozen=True):
    """A pod refused by admission; ``reason`` is human readable (subject ``pod.rejected``). ``namespace`` and
    ``created_at`` are the refused submission's (the latter tells two submissions of one uid apart)."""

    uid: str
    name: str
    reason: str
    at: float
    namespace: str = ""
    created_at: float = 0.0


class PodBound(Message, frozen=True):
    """A pod bound to ``node`` in the store (subject ``pod.bound.<node>``).

    ``attempt_ms`` is the wall time of the scheduling attempt that placed it
    (filter, score, reserve and bind), ``queued_s`` the clock time it waited.
    """

    spec: PodSpec
    node: str
    at: float
    attempt_ms: float = 0.0
    queued_s: float = 0.0
    cpuset: str = ""
    """The CPUs the scheduler's NodeNUMAResource plugin chose for an LSE/LSR pod (kernel list format, e.g.
    ``"0-3"``; docs/topology.md); empty = none chosen (the pod runs in its QoS class's shared pool)."""
    devices: list[DeviceAllocation] = []
    """Devices assigned at Reserve (GPU indices and shares); empty = none."""


class PodUnschedulable(Message, frozen=True):
    """A scheduling attempt that found no node (subject ``pod.unschedulable``).

    ``reasons`` maps a rejection reason (e.g. ``"Insufficient cpu"``) to the number
    of nodes rejected for it, as the Kubernetes scheduler reports.
    """

    uid: str
    name: str
    reasons: dict[str, int]
    message: str
    at: float
    attempts: int = 1


class PodStatus(Message, frozen=True):
    """A pod lifecycle change reported by a node agent (subject ``pod.status.<node>``).

    ``phase`` Running/Succeeded/Failed; ``reason`` e.g. ``Evicted``, ``OOMKilled``,
    ``Completed``. ``requests`` repeats the pod's requests so that consumers can free
    resources without a lookup.
    """

    uid: str
    node: str
    phase: PodPhase
    at: float
    reason: str = ""
    message: str = ""
    requests: Resources = Resources()
    qos_class: QoSClass | None = None
    priority_class: PriorityClass | None = None


class EvictionCommand(Message, frozen=True):
    """An order to evict pod ``uid`` from ``node`` (subject ``pod.evict.<node>``)."""

    uid: str
    node: str
    reason: str
    at: float
    by: str = ""


class PodRecord(Message, frozen=True):
    """A pod's state in the store: spec, phase, node (empty when unbound)."""

    spec: PodSpec
    phase: PodPhase = "Pending"
    node: str = ""
    reason: str = ""
    updated_at: float = 0.0
    bound_at: float = 0.0
    cpuset: str = ""
    """The cpuset of the pod's binding (``PodBound.cpuset``), kept by the store with the binding."""
    devices: str = ""
    """The GPUs of the pod's binding (``"index:milli,..."``, :func:`colo.messages.devices_format`), kept by the
    store with the binding."""


class PodDeleted(Message, frozen=True):
    """An order to delete pod ``uid`` (subject ``pod.deleted``; ``colo delete pod``, docs/cli.md "Deleting a
    pod"). The scheduler owning the uid drops it from its queue and, when it is pending, marks it ``Failed`` with
    reason ``Deleted: <by>`` in the store; when it is bound, it orders its node agent to stop it
    (:class:`EvictionCommand` with reason :data:`DELETE_EVICTION_REASON`), which reports it ``Failed`` with
    reason ``Deleted`` (never requeued). ``at`` clock seconds."""

    uid: str
    at: float
    by: str = ""
    namespace: str = ""
    name: str = ""


DELETE_EVICTION_REASON = "Deleted"
"""The :class:`EvictionCommand` reason (and then the :class:`PodStatus` reason) of a deletion: the pod ends
for good, it is not requeued as an evicted pod is."""
