"""slo-manager settings: colocation profiles, batch/mid resource policy, publishing, NodeSLO.

Read from environment variables with the prefix ``COLO_SLO_MANAGER`` (nested fields
joined by ``__``, lists and dicts as JSON), or from a YAML file named by
``COLO_SLO_MANAGER_CONFIG``, through :func:`colo.settings.load_settings`. Examples::

    COLO_SLO_MANAGER_COLOCATION_ENABLED=0                  # baseline: no batch/mid resources
    COLO_SLO_MANAGER_BATCH__CPU_RECLAIM_THRESHOLD_PERCENT=65
    COLO_SLO_MANAGER_BATCH__MEMORY_POLICY=request
    COLO_SLO_MANAGER_PROFILES='[{"name": "spark", "match_labels": {"app": "spark"}, ...}]'

Every struct rejects unknown fields; every constraint violation of a struct is
reported together (``__post_init__`` collects them all and raises one
:class:`colo.settings.SettingsError`). Defaults are Koordinator v1.8's (REFERENCE.md §1, §3, §5).

Everything but ``tick_interval_s`` and ``config_reload`` is *policy* and may be replaced while
the service runs (:mod:`colo_slo_manager.config`, docs/slo-manager.md "Configuration and hot reload").
"""

from __future__ import annotations

import math
import re
from typing import Literal

import msgspec

from colo.classes import PRIORITY_RANGES
from colo.messages import (
    BEBudgetStrategy,
    BlkIOStrategy,
    CPUBurstStrategy,
    CPUEvictStrategy,
    CPUSetStrategy,
    CPUSuppressStrategy,
    MemoryEvictStrategy,
    MemoryQoSStrategy,
    NetQoSStrategy,
    OOMStrategy,
    PriorityClass,
    QoSClass,
    ResctrlStrategy,
    SystemStrategy,
)
from colo.settings import SettingsError
from colo.slo import strategy_problems
from colo_slo_manager.selectors import (
    NAMESPACE_NAME_LABEL,
    LabelSelector,
    LabelSelectorRequirement,
    label_problems,
)
from colo_slo_manager.settings_base import SettingsStruct as _Settings
from colo_slo_manager.settings_base import percent_problem as _percent
from colo_slo_manager.strategy import (
    STRATEGY_TYPES,
    Patch,
    full_patch,
    merge_patch,
    patch_problems,
)
from colo_slo_manager.thresholds import memory_evict_strategies, memory_threshold_problems

ENV_PREFIX = "COLO_SLO_MANAGER"
"""Environment variable prefix of :class:`SloManagerSettings`."""


class ColocationProfile(_Settings, frozen=True):
    """A colocation profile: which submitted pods it rewrites and how (REFERENCE.md §1; Koordinator
    ``ClusterColocationProfile``).

    A pod matches when every selector matches: its namespace is in ``namespaces`` (empty = any)
    and satisfies ``namespace_selector``, its labels contain ``match_labels`` and satisfy
    ``match_expressions``, its resolved QoS class is in ``match_qos_classes`` and its resolved
    priority class in ``match_priority_classes`` (empty = any), and the stable hash of its uid
    falls under ``probability_percent``.
    """

    name: str
    """Profile name, recorded in ``PodAdmitted.profile`` and the probability hash."""
    namespaces: list[str] = []
    """Namespace selector: namespaces the profile applies to; empty = every namespace."""
    namespace_selector: LabelSelector = LabelSelector()
    """Koordinator ``namespaceSelector``, over the namespace's labels. Colo has no Namespace objects, so
    the only label a namespace has is ``kubernetes.io/metadata.name`` (its name, as Kubernetes sets it on
    every namespace); a selector on any other key is refused. Example: ``match_expressions: [{key:
    kubernetes.io/metadata.name, operator: NotIn, values: [kube-system]}]``."""
    match_labels: dict[str, str] = {}
    """Pod label selector (Kubernetes ``matchLabels`` of Koordinator's ``selector``): every pair must be
    on the pod."""
    match_expressions: list[LabelSelectorRequirement] = []
    """Pod label selector (``matchExpressions`` of Koordinator's ``selector``): In, NotIn, Exists,
    DoesNotExist, ANDed with ``match_labels``."""
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
    koordinator_priority: int | None = None
    """Sub-priority within the class, written to the pod label ``koordinator.sh/priority`` (Koordinator
    ``koordinatorPriority``); None sets nothing."""
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
        where = f"profile {self.name!r}"
        _percent(out, f"{where}: probability_percent", self.probability_percent)
        if self.priority is not None and self.priority_class is not None:
            lo, hi, _ = PRIORITY_RANGES.get(self.priority_class, (None, None, None))
            if lo is not None and hi is not None and not lo <= self.priority <= hi:
                out.append(f"{where}: priority {self.priority} is outside "
                           f"the {self.priority_class} range {lo}..{hi}")
        other = sorted(self.namespace_selector.keys - {NAMESPACE_NAME_LABEL})
        if other:
            out.append(f"{where}: namespace_selector may only test {NAMESPACE_NAME_LABEL} (Colo knows no "
                       f"other namespace label), got {', '.join(other)}")
        out += label_problems(f"{where}: match_labels", self.match_labels)
        out += label_problems(f"{where}: labels", self.labels)
        if self.koordinator_priority is not None and not -(2**31) <= self.koordinator_priority < 2**31:
            out.append(f"{where}: koordinator_priority {self.koordinator_priority} is outside the int32 range")
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
    be_budget: BEBudgetStrategy = BEBudgetStrategy()
    """SLO-driven BE CPU budget (docs/node-agent.md "BE budget"); off. ``SloManagerSettings.be_budget_enabled``
    switches it on without restating the knobs."""
    oom: OOMStrategy = OOMStrategy()
    """oom_score_adj of pods' processes by QoS class (BE 1000, LS -996..-1, LSE/LSR -997); on."""
    net_qos: NetQoSStrategy = NetQoSStrategy()
    """BE egress limit and LS share on one interface (net_cls + tc HTB, bits/s); off."""

    def values(self) -> dict[str, object]:
        """NodeSLO field → value, for every strategy of the policy."""
        return {name: getattr(self, name) for name in self.__struct_fields__}

    def problems(self) -> list[str]:
        """Every out-of-range strategy value (:func:`colo.slo.strategy_problems`)."""
        return strategy_problems(self.values(), "node_slo")


class NodePool(_Settings, frozen=True):
    """A node pool: nodes whose labels contain ``node_selector`` get this pool's changes to the cluster
    strategy (Koordinator ``NodeStrategy``). The first matching pool wins; ``NodeSLO.pool`` names it.

    Each strategy is a *partial* strategy: a mapping of only the fields the pool changes, in the
    strategy's shape (``cpu_suppress: {threshold_percent: 50}``), merged onto the cluster strategy
    field by field (:func:`colo_slo_manager.strategy.merge_patch`); None or ``{}`` keeps the
    cluster's. In Python a strategy struct may be given instead: it sets every field (it replaces the
    cluster's strategy whole). Unknown fields and values of the wrong type are refused here; the
    merged result is range-checked by :class:`SloManagerSettings`.
    """

    name: str
    """Pool name."""
    node_selector: dict[str, str] = {}
    """Node labels (``matchLabels``) selecting the pool's nodes; empty selects every node."""
    cpu_suppress: Patch | None = None
    """Fields of the CPU suppress strategy (:class:`colo.messages.CPUSuppressStrategy`) to change."""
    memory_evict: Patch | None = None
    """Fields of the memory eviction strategy (:class:`colo.messages.MemoryEvictStrategy`) to change."""
    cpu_evict: Patch | None = None
    """Fields of the CPU eviction strategy (:class:`colo.messages.CPUEvictStrategy`) to change."""
    cpu_burst: Patch | None = None
    """Fields of the CPU burst strategy (:class:`colo.messages.CPUBurstStrategy`) to change."""
    memory_qos: Patch | None = None
    """Fields of the memory QoS strategy (:class:`colo.messages.MemoryQoSStrategy`) to change."""
    be_cpu_idle: bool | None = None
    """Override of ``be_cpu_idle``."""
    be_cpu_shares: Literal["requests", "min"] | None = None
    """Override of ``be_cpu_shares``."""
    cpuset: Patch | None = None
    """Fields of the cpuset strategy (:class:`colo.messages.CPUSetStrategy`) to change."""
    resctrl: Patch | None = None
    """Fields of the resctrl strategy (:class:`colo.messages.ResctrlStrategy`) to change."""
    blkio: Patch | None = None
    """Fields of the BE block I/O strategy (:class:`colo.messages.BlkIOStrategy`) to change."""
    system: Patch | None = None
    """Fields of the system strategy (:class:`colo.messages.SystemStrategy`) to change."""
    be_budget: Patch | None = None
    """Fields of the SLO-driven BE budget (:class:`colo.messages.BEBudgetStrategy`) to change."""
    oom: Patch | None = None
    """Fields of the OOM priority strategy (:class:`colo.messages.OOMStrategy`) to change."""
    net_qos: Patch | None = None
    """Fields of the network QoS strategy (:class:`colo.messages.NetQoSStrategy`) to change."""

    def __post_init__(self) -> None:
        for field in STRATEGY_TYPES:  # a whole strategy given in Python: every field set
            value = getattr(self, field)
            if isinstance(value, msgspec.Struct):
                msgspec.structs.force_setattr(self, field, full_patch(value))
        super().__post_init__()

    def problems(self) -> list[str]:
        """Every problem of the pool: no name, invalid selector labels, unknown fields or values of the
        wrong type in a partial strategy."""
        out = [] if self.name else ["node pool name must not be empty"]
        where = f"node pool {self.name!r}"
        out += label_problems(f"{where}: node_selector", self.node_selector)
        for field, tp in STRATEGY_TYPES.items():
            patch = getattr(self, field)
            if patch is not None:
                out += patch_problems(tp, patch, f"{where}: {field}")
        return out

    def over(self, cluster: NodeSLOStrategy) -> dict[str, object]:
        """NodeSLO field → value of this pool's nodes: ``cluster`` with the pool's partial strategies
        merged on. Raises msgspec.ValidationError for a patch :meth:`problems` would refuse."""
        values = cluster.values()
        for field in STRATEGY_TYPES:
            patch = getattr(self, field)
            if patch:
                values[field] = merge_patch(getattr(cluster, field), patch)
        if self.be_cpu_idle is not None:
            values["be_cpu_idle"] = self.be_cpu_idle
        if self.be_cpu_shares is not None:
            values["be_cpu_shares"] = self.be_cpu_shares
        return values


class ConfigReloadSettings(_Settings, frozen=True):
    """Where a running slo-manager takes new policy from (not itself reloadable: read at start)."""

    file_poll_s: float = 5.0
    """Seconds between checks of the YAML file named by ``COLO_SLO_MANAGER_CONFIG`` (content hash);
    0 = do not watch it."""
    kv_bucket: str = "colo-config"
    """JetStream key-value bucket holding a configuration that overrides the file (created when
    missing); empty = no key-value configuration."""
    kv_key: str = "slo-manager"
    """Key of the slo-manager's configuration in ``kv_bucket``: YAML or JSON of the settings' shape."""

    def problems(self) -> list[str]:
        """Negative poll period, bucket or key names NATS refuses."""
        out: list[str] = []
        if not (0 <= self.file_poll_s < math.inf):
            out.append(f"config_reload.file_poll_s must be a finite number >= 0, got {self.file_poll_s}")
        if self.kv_bucket and not re.fullmatch(r"[A-Za-z0-9_-]+", self.kv_bucket):
            out.append(f"config_reload.kv_bucket {self.kv_bucket!r} must be letters, digits, '_' or '-'")
        key_ok = re.fullmatch(r"[-/_=.A-Za-z0-9]+", self.kv_key) and not self.kv_key.startswith(".") \
            and not self.kv_key.endswith(".")
        if self.kv_bucket and not key_ok:
            out.append(f"config_reload.kv_key {self.kv_key!r} must be letters, digits or '-/_=.', "
                       "not starting or ending with '.'")
        return out


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
    """Node pools changing parts of the cluster strategy (partial strategies merged onto it), first
    match wins."""
    tick_interval_s: float = 60.0
    """Period of the recompute loop under the wall clock, seconds (one NodeMetric report interval).
    Not reloadable."""
    config_reload: ConfigReloadSettings = ConfigReloadSettings()
    """Sources of configuration changes while running (YAML file, NATS key-value). Not reloadable."""
    be_budget_enabled: bool = False
    """Switch the SLO-driven BE budget on in every NodeSLO rendered (``COLO_SLO_MANAGER_BE_BUDGET_ENABLED=1``):
    ``node_slo.be_budget`` with ``enabled`` true, its other knobs as configured there
    (``COLO_SLO_MANAGER_NODE_SLO__BE_BUDGET__MAX_PERCENT=90`` ...); a node pool may still switch it off. False
    leaves ``node_slo.be_budget.enabled`` as it is. The batch-cpu offer then follows each node's budget
    (docs/slo-manager.md "BE budget")."""

    def cluster_strategy(self) -> NodeSLOStrategy:
        """The cluster strategy rendered into NodeSLOs: ``node_slo``, with ``be_budget.enabled`` set when
        :attr:`be_budget_enabled` is. Raises SettingsError when that strategy is invalid."""
        if not self.be_budget_enabled or self.node_slo.be_budget.enabled:
            return self.node_slo
        budget = msgspec.structs.replace(self.node_slo.be_budget, enabled=True)
        return msgspec.structs.replace(self.node_slo, be_budget=budget)

    def problems(self) -> list[str]:
        """Every constraint violation of the top-level fields (nested structs check themselves)."""
        out: list[str] = []
        _percent(out, "diff_threshold_percent", self.diff_threshold_percent, hi=1000)
        for name in ("max_publish_age_s", "metric_stale_reset_s", "tick_interval_s"):
            value = getattr(self, name)
            if not (0 < value < math.inf):  # NaN compares false both ways: it would never age anything
                out.append(f"{name} must be a finite number > 0, got {value}")
        names = [p.name for p in self.profiles]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            out.append(f"duplicate profile names: {', '.join(dupes)}")
        pools = [p.name for p in self.node_pools]
        dupes = sorted({n for n in pools if pools.count(n) > 1})
        if dupes:
            out.append(f"duplicate node pool names: {', '.join(dupes)}")
        out += self.pool_problems()
        out += memory_threshold_problems(self.batch.memory_reclaim_threshold_percent, memory_evict_strategies(self))
        return out

    def pool_problems(self) -> list[str]:
        """Problems of the cluster strategy that only :attr:`be_budget_enabled` brings, then out-of-range
        values of each pool's merged strategies that the cluster strategy alone does not have (those are
        reported once, by ``node_slo``)."""
        cluster = set(self.node_slo.problems())
        out: list[str] = []
        try:
            strategy = self.cluster_strategy()
        except SettingsError as exc:
            out += [f"be_budget_enabled: {p}" for p in exc.errors if p not in cluster]
            return out
        for i, pool in enumerate(self.node_pools):
            try:
                merged = pool.over(strategy)
            except msgspec.ValidationError as exc:
                out.append(f"node_pools[{i}] ({pool.name}): {exc}")
                continue
            out += [f"node_pools[{i}] ({pool.name}) merged onto the cluster: {p.removeprefix('node_slo.')}"
                    for p in strategy_problems(merged, "node_slo") if p not in cluster]
        return out
