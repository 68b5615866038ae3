"""slo-manager settings: colocation profiles, batch/mid resource policy, publishing, NodeSLO.

Read from environment variables with the prefix ``COLO_SLO_MANAGER`` (nested fields
joined by ``__``, lists and dicts as JSON), or from a YAML file named by
``COLO_SLO_MANAGER_CONFIG``, through :func:`colo.settings.load_settings`. Examples::

    COLO_SLO_MANAGER_COLOCATION_ENABLED=0                  # baseline: no batch/mid resources
    COLO_SLO_MANAGER_BATCH__CPU_RECLAIM_THRESHOLD_PERCENT=65
    COLO_SLO_MANAGER_BATCH__MEMORY_POLICY=request
    COLO_SLO_MANAGER_PROFILES='[{"name": "spark", "match_labels": {"app": "spark"}, ...}]'

Every struct rejects unknown fields; every constraint violation of a struct is
reported together (``__post_init__`` collects them all before raising).
Defaults are Koordinator v1.8's (REFERENCE.md §1, §3, §5).
"""

from __future__ import annotations

from typing import Literal

import msgspec

from colo.classes import PRIORITY_RANGES
from colo.messages import (
    BlkIOStrategy,
    CPUBurstStrategy,
    CPUEvictStrategy,
    CPUSetStrategy,
    CPUSuppressStrategy,
    MemoryEvictStrategy,
    MemoryQoSStrategy,
    PriorityClass,
    QoSClass,
    ResctrlStrategy,
    SystemStrategy,
)

ENV_PREFIX = "COLO_SLO_MANAGER"
"""Environment variable prefix of :class:`SloManagerSettings`."""


class _Settings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base of the settings structs: frozen, keyword-only, unknown fields rejected."""

    def problems(self) -> list[str]:
        """Every constraint violation of this struct (empty when valid)."""
        return []

    def __post_init__(self) -> None:
        problems = self.problems()
        if problems:
            raise ValueError("; ".join(problems))


def _percent(problems: list[str], name: str, value: int | None, hi: int = 100) -> None:
    if value is not None and not 0 <= value <= hi:
        problems.append(f"{name} must be within 0..{hi}, got {value}")


class ColocationProfile(_Settings, frozen=True):
    """A colocation profile: which submitted pods it rewrites and how (REFERENCE.md §1).

    A pod matches when every selector matches: its namespace is in ``namespaces``
    (empty = any), its labels contain ``match_labels``, its resolved QoS class is in
    ``match_qos_classes`` and its resolved priority class in ``match_priority_classes``
    (empty = any), and the stable hash of its uid falls under ``probability_percent``.
    """

    name: str
    """Profile name, recorded in ``PodAdmitted.profile`` and the probability hash."""
    namespaces: list[str] = []
    """Namespace selector: namespaces the profile applies to; empty = every namespace."""
    match_labels: dict[str, str] = {}
    """Label selector (Kubernetes ``matchLabels``): every pair must be on the pod."""
    match_qos_classes: list[QoSClass] = []
    """Only pods whose QoS class (as submitted, resolved per REFERENCE.md §1) is listed; empty = any."""
    match_priority_classes: list[PriorityClass] = []
    """Only pods whose priority class (as submitted, resolved) is listed; empty = any."""
    probability_percent: int = 100
    """Percent of matching pods the profile applies to, decided by a stable hash of the pod uid
    (so a replay of the same pods decides the same); 0..100. Koordinator ``probability``."""
    qos_class: QoSClass | None = None
    """QoS class to set; None keeps the pod's resolved class."""
    priority_class: PriorityClass | None = None
    """Priority class to set; None keeps the pod's resolved class."""
    priority: int | None = None
    """Priority value to set; None = the class default of REFERENCE.md §1 when ``priority_class`` is set."""
    scheduler_name: str = ""
    """Scheduler name to set; empty keeps the pod's."""
    labels: dict[str, str] = {}
    """Labels added to the pod (overwriting equal keys)."""
    annotations: dict[str, str] = {}
    """Annotations added to the pod (overwriting equal keys)."""
    translate_resources: bool = True
    """Translate cpu/memory requests and limits into batch-* (batch/free pods) or mid-* (mid pods),
    copying limit → request when only a limit is given (REFERENCE.md §1)."""

    def problems(self) -> list[str]:
        """Every constraint violation of this profile."""
        out: list[str] = []
        if not self.name:
            out.append("profile name must not be empty")
        _percent(out, f"profile {self.name!r}: probability_percent", self.probability_percent)
        if self.priority is not None and self.priority_class is not None:
            lo, hi, _ = PRIORITY_RANGES.get(self.priority_class, (None, None, None))
            if lo is not None and hi is not None and not lo <= self.priority <= hi:
                out.append(f"profile {self.name!r}: priority {self.priority} is outside "
                           f"the {self.priority_class} range {lo}..{hi}")
        return out


def default_profiles() -> list[ColocationProfile]:
    """The default profile list: BE pods of the batch/free classes run on batch-cpu/batch-memory."""
    return [
        ColocationProfile(
            name="batch",
            match_qos_classes=["BE"],
            match_priority_classes=["batch", "free"],
            qos_class="BE",
            translate_resources=True,
        ),
    ]


class BatchConfig(_Settings, frozen=True):
    """Batch allocatable policy (REFERENCE.md §3, Koordinator ``ColocationStrategy``)."""

    cpu_policy: Literal["usage", "maxUsageRequest"] = "usage"
    """How high-priority pods count for batch-cpu: their usage, or max(request, usage)."""
    memory_policy: Literal["usage", "request", "maxUsageRequest"] = "usage"
    """How high-priority pods count for batch-memory: usage, request, or max(request, usage)."""
    cpu_reclaim_threshold_percent: int = 60
    """Percent of node CPU capacity that may be used by all pods; the rest is the safety margin.
    Koordinator default 60 (REFERENCE.md §3)."""
    memory_reclaim_threshold_percent: int = 65
    """Percent of node memory capacity that may be used by all pods. Koordinator default 65."""
    cpu_threshold_percent: int | None = None
    """Optional cap: batch-cpu ≤ capacity × this / 100 (Koordinator ``batchCPUThresholdPercent``)."""
    memory_threshold_percent: int | None = None
    """Optional cap: batch-memory ≤ capacity × this / 100 (``batchMemoryThresholdPercent``)."""

    def problems(self) -> list[str]:
        """Every constraint violation of the batch policy."""
        out: list[str] = []
        _percent(out, "batch.cpu_reclaim_threshold_percent", self.cpu_reclaim_threshold_percent)
        _percent(out, "batch.memory_reclaim_threshold_percent", self.memory_reclaim_threshold_percent)
        _percent(out, "batch.cpu_threshold_percent", self.cpu_threshold_percent)
        _percent(out, "batch.memory_threshold_percent", self.memory_threshold_percent)
        return out


class MidConfig(_Settings, frozen=True):
    """Mid allocatable (REFERENCE.md §3, Koordinator ``midresource`` plugin)."""

    mode: Literal["dynamic", "static"] = "dynamic"
    """``dynamic``: from prod-reclaimable and unallocated resources; ``static``: a fixed percent of capacity."""
    cpu_threshold_percent: int = 100
    """Cap: mid-cpu ≤ capacity × this / 100. Default 100."""
    memory_threshold_percent: int = 100
    """Cap: mid-memory ≤ capacity × this / 100. Default 100."""
    cpu_unallocated_percent: int = 0
    """Percent of unallocated CPU (capacity − reserved/system − prod/none requests) added to mid. Default 0."""
    memory_unallocated_percent: int = 0
    """Percent of unallocated memory added to mid. Default 0."""
    cpu_static_percent: int = 0
    """Static mode: mid-cpu = capacity × this / 100 (then capped by the threshold)."""
    memory_static_percent: int = 0
    """Static mode: mid-memory = capacity × this / 100 (then capped by the threshold)."""

    def problems(self) -> list[str]:
        """Every constraint violation of the mid configuration."""
        out: list[str] = []
        for field in ("cpu_threshold_percent", "memory_threshold_percent", "cpu_unallocated_percent",
                      "memory_unallocated_percent", "cpu_static_percent", "memory_static_percent"):
            _percent(out, f"mid.{field}", getattr(self, field))
        return out


class NodeSLOStrategy(_Settings, frozen=True):
    """The cluster-wide node QoS policy (fields of :class:`colo.messages.NodeSLO`, REFERENCE.md §5)."""

    cpu_suppress: CPUSuppressStrategy = CPUSuppressStrategy()
    """CPU suppress of BE pods; on, threshold 65 %, cpuset policy."""
    memory_evict: MemoryEvictStrategy = MemoryEvictStrategy()
    """BE memory eviction; on at 70 % (off in Koordinator, on here for BE)."""
    cpu_evict: CPUEvictStrategy = CPUEvictStrategy()
    """BE CPU eviction by satisfaction; off."""
    cpu_burst: CPUBurstStrategy = CPUBurstStrategy()
    """CPU burst of LS pods; policy none."""
    memory_qos: MemoryQoSStrategy = MemoryQoSStrategy()
    """memory.min/low/high from requests; off."""
    be_cpu_idle: bool = True
    """Run BE pods with SCHED_IDLE / cpu.idle where the kernel has it."""
    be_cpu_shares: Literal["requests", "min"] = "requests"
    """The BE QoS group's cpu.shares: Σ batch-cpu requests, or ``min`` = 2 (the kubelet's MinShares)."""
    cpuset: CPUSetStrategy = CPUSetStrategy()
    """LSE exclusive / LSR reserved cpusets; on."""
    resctrl: ResctrlStrategy = ResctrlStrategy()
    """LLC / memory bandwidth per QoS group where resctrl exists; off (BE 0-30 % of L3 when on)."""
    blkio: BlkIOStrategy = BlkIOStrategy()
    """BE block I/O throttles per device; off."""
    system: SystemStrategy = SystemStrategy()
    """vm.min_free_kbytes / watermark_scale_factor; off."""


class NodePool(_Settings, frozen=True):
    """A node pool: nodes whose labels contain ``node_selector`` get these overrides of the cluster strategy.

    Each strategy left None keeps the cluster's. The first matching pool wins; its name is
    recorded in ``NodeSLO.pool``.
    """

    name: str
    """Pool name."""
    node_selector: dict[str, str] = {}
    """Node labels (``matchLabels``) selecting the pool's nodes; empty selects every node."""
    cpu_suppress: CPUSuppressStrategy | None = None
    """Override of the CPU suppress strategy."""
    memory_evict: MemoryEvictStrategy | None = None
    """Override of the memory eviction strategy."""
    cpu_evict: CPUEvictStrategy | None = None
    """Override of the CPU eviction strategy."""
    cpu_burst: CPUBurstStrategy | None = None
    """Override of the CPU burst strategy."""
    memory_qos: MemoryQoSStrategy | None = None
    """Override of the memory QoS strategy."""
    be_cpu_idle: bool | None = None
    """Override of ``be_cpu_idle``."""
    be_cpu_shares: Literal["requests", "min"] | None = None
    """Override of ``be_cpu_shares``."""
    cpuset: CPUSetStrategy | None = None
    """Override of the cpuset strategy."""
    resctrl: ResctrlStrategy | None = None
    """Override of the resctrl strategy."""
    blkio: BlkIOStrategy | None = None
    """Override of the BE block I/O strategy."""
    system: SystemStrategy | None = None
    """Override of the system strategy."""

    def problems(self) -> list[str]:
        """Every constraint violation of the pool."""
        return [] if self.name else ["node pool name must not be empty"]


class SloManagerSettings(_Settings, frozen=True):
    """Everything the slo-manager service can be told (env prefix ``COLO_SLO_MANAGER``)."""

    colocation_enabled: bool = True
    """False = the no-co-location baseline: admission only validates (no profile, no translation)
    and no batch/mid resources are published. NodeSLOs are still rendered."""
    profiles: list[ColocationProfile] = msgspec.field(default_factory=default_profiles)
    """Colocation profiles, tried in order; the first that matches applies (REFERENCE.md §1)."""
    batch: BatchConfig = BatchConfig()
    """Batch allocatable policy and thresholds (REFERENCE.md §3)."""
    mid: MidConfig = MidConfig()
    """Mid allocatable configuration (REFERENCE.md §3)."""
    diff_threshold_percent: int = 10
    """Publish a NodeResource only when a value differs from the last published one by more than
    this percent (relative), Koordinator ``resourceDiffThreshold`` 0.1 (REFERENCE.md §3)."""
    max_publish_age_s: float = 300.0
    """…or when the last publish is older than this many seconds (``updateTimeThresholdSeconds`` 300)."""
    metric_stale_reset_s: float = 900.0
    """A node whose latest NodeMetric is older than this many seconds has its batch/mid resources
    reset to 0 (``degradeTimeMinutes`` 15, REFERENCE.md §2)."""
    node_slo: NodeSLOStrategy = NodeSLOStrategy()
    """Cluster-wide node QoS strategy rendered into every NodeSLO."""
    node_pools: list[NodePool] = []
    """Node pools overriding parts of the cluster strategy, first match wins."""
    tick_interval_s: float = 60.0
    """Period of the recompute loop under the wall clock, seconds (one NodeMetric report interval)."""

    def problems(self) -> list[str]:
        """Every constraint violation of the top-level fields (nested structs check themselves)."""
        out: list[str] = []
        _percent(out, "diff_threshold_percent", self.diff_threshold_percent, hi=1000)
        if self.max_publish_age_s <= 0:
            out.append(f"max_publish_age_s must be > 0, got {self.max_publish_age_s}")
        if self.metric_stale_reset_s <= 0:
            out.append(f"metric_stale_reset_s must be > 0, got {self.metric_stale_reset_s}")
        if self.tick_interval_s <= 0:
            out.append(f"tick_interval_s must be > 0, got {self.tick_interval_s}")
        names = [p.name for p in self.profiles]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            out.append(f"duplicate profile names: {', '.join(dupes)}")
        return out
