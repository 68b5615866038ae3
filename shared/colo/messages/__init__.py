"""Wire message types shared by every Colo service.

All messages are frozen, keyword-only :class:`msgspec.Struct` types encoded as JSON
(see :mod:`colo.codec`). Evolution is additive only: new fields get defaults and
unknown fields are ignored on decode, so older and newer services interoperate.

Units inside the system are integers: CPU in **milli-cores**, memory in **bytes**;
times are **seconds** on the service clock (wall time in production, virtual time
in simulation, see :mod:`colo.clock`). Kubernetes quantity strings (``"500m"``,
``"2Gi"``) are accepted only at the edges (:mod:`colo.quantity`).
"""

from __future__ import annotations

from colo.messages.affinity import (
    Affinity,
    NodeAffinity,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PreferredSchedulingTerm,
)
from colo.messages.base import (
    Message,
    PodPhase,
    PriorityClass,
    QoSClass,
)
from colo.messages.jobs import (
    DEFAULT_GANG_TIMEOUT_S,
    POD_GROUP_LABEL,
    GangMode,
    GangSpec,
    OwnerReference,
    PodGroupSpec,
)
from colo.messages.metrics import (
    AggregatedUsage,
    BEBudgetState,
    InterferenceSignals,
    MemoryPressure,
    NodeMetric,
    PodMetric,
)
from colo.messages.migrations import (
    MigrationPhase,
    PodMigrationJob,
)
from colo.messages.nodes import (
    HOSTNAME_LABEL,
    NodeDeleted,
    NodeResource,
    NodeSpec,
    Taint,
    Toleration,
    with_hostname_label,
)
from colo.messages.pods import (
    DELETE_EVICTION_REASON,
    EvictionCommand,
    PodAdmitted,
    PodBound,
    PodDeleted,
    PodRecord,
    PodRejected,
    PodSpec,
    PodStatus,
    PodUnschedulable,
    SimWorkload,
)
from colo.messages.profiles import (
    NodeProfile,
    PodPrediction,
    WorkloadPrediction,
    WorkloadProfile,
)
from colo.messages.qos import (
    BEBudgetStrategy,
    BlkIOLimit,
    BlkIOStrategy,
    CPUBurstStrategy,
    CPUEvictStrategy,
    CPUSetStrategy,
    CPUSuppressStrategy,
    MemoryEvictStrategy,
    MemoryQoSClass,
    MemoryQoSStrategy,
    NetQoSStrategy,
    NodeSLO,
    OOMStrategy,
    QoSEvent,
    ResctrlClass,
    ResctrlStrategy,
    SystemStrategy,
)
from colo.messages.quotas import (
    PREEMPTIBLE_LABEL,
    QUOTA_NAME_LABEL,
    ROOT_QUOTA,
    ElasticQuota,
    QuotaStatus,
)
from colo.messages.reserve import (
    ReservationOwner,
    ReservationSpec,
)
from colo.messages.resources import (
    KUBERNETES_RESOURCE_NAMES,
    RESOURCE_NAMES,
    Resources,
    Usage,
)
from colo.messages.service import (
    ConfigApplied,
    ConfigRejected,
    DeadLetter,
)
from colo.messages.sim import (
    Tick,
    TickAck,
)
from colo.messages.topology import (
    CPUInfo,
    DeviceAllocation,
    GPUInfo,
    GPURequest,
    NodeTopology,
    allocations_devices,
    cpuset_format,
    cpuset_parse,
    device_allocations,
    devices_format,
    devices_parse,
    smt_topology,
)
from colo.messages.workloads import (
    WorkloadAdmitted,
    WorkloadKind,
    WorkloadRejected,
    WorkloadSpec,
)

__all__ = [
    "CPUInfo",
    "DeviceAllocation",
    "GPUInfo",
    "GPURequest",
    "NodeTopology",
    "allocations_devices",
    "cpuset_format",
    "cpuset_parse",
    "device_allocations",
    "devices_format",
    "devices_parse",
    "smt_topology",
    "PriorityClass",
    "HOSTNAME_LABEL",
    "with_hostname_label",
    "QoSClass",
    "PodPhase",
    "Message",
    "Resources",
    "RESOURCE_NAMES",
    "KUBERNETES_RESOURCE_NAMES",
    "Usage",
    "Taint",
    "Toleration",
    "NodeSpec",
    "NodeDeleted",
    "OOMStrategy",
    "NodeResource",
    "PodMetric",
    "AggregatedUsage",
    "MemoryPressure",
    "NodeMetric",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "NodeSelector",
    "PreferredSchedulingTerm",
    "NodeAffinity",
    "Affinity",
    "SimWorkload",
    "PodSpec",
    "PodAdmitted",
    "PodRejected",
    "PodBound",
    "PodUnschedulable",
    "PodStatus",
    "EvictionCommand",
    "PodDeleted",
    "PodRecord",
    "BEBudgetState",
    "BEBudgetStrategy",
    "CPUSuppressStrategy",
    "InterferenceSignals",
    "MemoryEvictStrategy",
    "CPUEvictStrategy",
    "CPUBurstStrategy",
    "MemoryQoSClass",
    "MemoryQoSStrategy",
    "CPUSetStrategy",
    "ResctrlClass",
    "ResctrlStrategy",
    "BlkIOLimit",
    "BlkIOStrategy",
    "SystemStrategy",
    "NetQoSStrategy",
    "NodeSLO",
    "QoSEvent",
    "PodPrediction",
    "NodeProfile",
    "WorkloadPrediction",
    "WorkloadProfile",
    "DeadLetter",
    "ConfigApplied",
    "ConfigRejected",
    "Tick",
    "TickAck",
    "MigrationPhase",
    "PodMigrationJob",
    "GangMode",
    "GangSpec",
    "OwnerReference",
    "PodGroupSpec",
    "POD_GROUP_LABEL",
    "DEFAULT_GANG_TIMEOUT_S",
    "DELETE_EVICTION_REASON",
    "WorkloadKind",
    "WorkloadSpec",
    "WorkloadAdmitted",
    "WorkloadRejected",
    "ElasticQuota",
    "QuotaStatus",
    "QUOTA_NAME_LABEL",
    "PREEMPTIBLE_LABEL",
    "ROOT_QUOTA",
    "ReservationOwner",
    "ReservationSpec",
]
