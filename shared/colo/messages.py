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

from typing import Literal

import msgspec

PriorityClass = Literal["prod", "mid", "batch", "free", "none"]
"""Koordinator priority classes (REFERENCE.md §1)."""

QoSClass = Literal["SYSTEM", "LSE", "LSR", "LS", "BE"]
"""Koordinator QoS classes (REFERENCE.md §1)."""

PodPhase = Literal["Pending", "Running", "Succeeded", "Failed"]
"""Kubernetes pod phases."""


class Message(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Base of every wire message: frozen, keyword-only, defaults omitted on the wire, unknown fields ignored."""


# --------------------------------------------------------------------------- resources


class Resources(Message, frozen=True):
    """A resource vector.

    ``cpu``, ``batch_cpu``, ``mid_cpu`` in milli-cores; ``memory``, ``batch_memory``,
    ``mid_memory`` in bytes; ``pods`` a count (used for capacity/allocatable only,
    every pod implicitly requests one). ``batch_*`` / ``mid_*`` are the extended
    resources ``kubernetes.io/batch-cpu`` etc. of REFERENCE.md §1.
    """

    cpu: int = 0
    memory: int = 0
    batch_cpu: int = 0
    batch_memory: int = 0
    mid_cpu: int = 0
    mid_memory: int = 0
    pods: int = 0


RESOURCE_NAMES: tuple[str, ...] = (
    "cpu",
    "memory",
    "batch_cpu",
    "batch_memory",
    "mid_cpu",
    "mid_memory",
    "pods",
)
"""Field names of :class:`Resources`, in column order for vectorized code."""

KUBERNETES_RESOURCE_NAMES: dict[str, str] = {
    "cpu": "cpu",
    "memory": "memory",
    "kubernetes.io/batch-cpu": "batch_cpu",
    "kubernetes.io/batch-memory": "batch_memory",
    "kubernetes.io/mid-cpu": "mid_cpu",
    "kubernetes.io/mid-memory": "mid_memory",
    "pods": "pods",
}
"""Kubernetes resource name → :class:`Resources` field."""


class Usage(Message, frozen=True):
    """Measured usage: ``cpu`` milli-cores, ``memory`` bytes."""

    cpu: int = 0
    memory: int = 0


# --------------------------------------------------------------------------- nodes


class Taint(Message, frozen=True):
    """A Kubernetes node taint; ``effect`` is NoSchedule, PreferNoSchedule or NoExecute."""

    key: str
    value: str = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = "NoSchedule"


class Toleration(Message, frozen=True):
    """A Kubernetes toleration; ``operator`` Equal or Exists; empty ``effect`` matches all."""

    key: str = ""
    operator: Literal["Equal", "Exists"] = "Equal"
    value: str = ""
    effect: str = ""


class NodeSpec(Message, frozen=True):
    """A node as registered by its node agent (subject ``node.registered``).

    ``capacity`` is the machine; ``allocatable`` what Kubernetes would offer pods
    (capacity minus node reservations). ``reserved_cpus`` lists CPU ids reserved
    for the system (REFERENCE.md §3 NodeReserved). ``cpus`` is the logical CPU count.
    """

    name: str
    capacity: Resources
    allocatable: Resources
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    taints: list[Taint] = []
    reserved_cpus: str = ""
    reserved: Resources = Resources()
    cpus: int = 0
    registered_at: float = 0.0
    unschedulable: bool = False
    """Cordoned (Kubernetes ``spec.unschedulable``): no new pod is placed here unless it tolerates
    ``node.kubernetes.io/unschedulable:NoSchedule``, and the descheduler never migrates pods onto it; pods
    already running stay."""


class NodeResource(Message, frozen=True):
    """Batch and mid allocatable of one node computed by slo-manager (REFERENCE.md §3).

    ``batch_cpu``/``mid_cpu`` milli-cores, ``batch_memory``/``mid_memory`` bytes.
    ``reset`` is true when the node's metric went stale and the node stops offering
    batch/mid resources until fresh data arrives (all four values are then 0).
    """

    node: str
    batch_cpu: int = 0
    batch_memory: int = 0
    mid_cpu: int = 0
    mid_memory: int = 0
    reset: bool = False
    reason: str = ""
    at: float = 0.0
    memory_pressure: bool = False
    """The node is under BE memory pressure (its NodeMetric carries a :class:`MemoryPressure`): ``batch_memory``
    is then 0 and the scheduler's BEMemoryPressure filter rejects BE pods and pods requesting batch-memory."""


# --------------------------------------------------------------------------- metrics


class PodMetric(Message, frozen=True):
    """Usage of one pod over the report window; ``cpu`` milli-cores, ``memory`` bytes.

    ``cpu_throttled_ratio`` share of CFS periods throttled since the previous report; ``pressure`` the pod
    group's PSI where the kernel has it per group (``cpu.some``, ``memory.full`` ...: the kernel's avg10, percent
    of wall time stalled over the last 10 s; empty elsewhere).
    """

    uid: str
    cpu: int = 0
    memory: int = 0
    qos_class: QoSClass | None = None
    priority_class: PriorityClass | None = None
    cpu_throttled_ratio: float = 0.0
    pressure: dict[str, float] = {}


class AggregatedUsage(Message, frozen=True):
    """Node usage statistic ``stat`` (avg, p50, p90, p95, p99) over ``window_s`` seconds."""

    window_s: int
    stat: Literal["avg", "p50", "p90", "p95", "p99"]
    cpu: int = 0
    memory: int = 0


class MemoryPressure(Message, frozen=True):
    """BE memory pressure of a node, as its node agent sees it (docs/node-agent.md "BE memory pressure").

    The condition starts (``since``, seconds) when node memory reaches the eviction threshold or the agent
    evicts a BE pod for memory, and holds until memory has stayed below the lower threshold for ``hold_s``
    seconds: ``until`` is when that hold ends if memory stays below (0 while memory is at or above the lower
    threshold). ``last_evict_at`` the last BE memory eviction (0 = none); ``used_percent`` node memory used
    ⌊used × 100 / capacity⌋ at the report; thresholds as the NodeSLO's ``memory_evict`` (REFERENCE.md §5).
    """

    since: float
    until: float = 0.0
    last_evict_at: float = 0.0
    used_percent: int = 0
    threshold_percent: int = 70
    lower_percent: int = 68
    hold_s: float = 300.0


class NodeMetric(Message, frozen=True):
    """A node agent's report (REFERENCE.md §2): averages over ``window_s`` ending at ``at``.

    ``node_usage`` = node used; ``system_usage`` = max(node − Σpods − Σhost apps, 0);
    ``pods`` per-pod usage; ``aggregated`` percentiles of node usage; ``be_cpu_allowed``
    the CPU suppress budget in milli-cores (−1 when suppress is off); ``pressure`` the node's PSI
    (``/proc/pressure``: ``cpu.some``, ``memory.full`` ... avg10 percent; empty where the kernel has none
    or the backend is simulated).
    """

    node: str
    at: float
    window_s: float = 300.0
    node_usage: Usage = Usage()
    system_usage: Usage = Usage()
    host_apps_usage: Usage = Usage()
    pods: list[PodMetric] = []
    aggregated: list[AggregatedUsage] = []
    be_cpu_allowed: int = -1
    ls_cpu_demand: int = 0
    ls_cpu_served: int = 0
    pressure: dict[str, float] = {}
    memory_pressure: MemoryPressure | None = None
    """The node's BE memory pressure condition at ``at``; None when the node is not under it."""


# --------------------------------------------------------------------------- pods


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


class NodeSelectorRequirement(Message, frozen=True):
    """One label test of a node selector term (Kubernetes NodeSelectorRequirement).

    ``operator``: ``In`` / ``NotIn`` (``values`` non-empty; NotIn also matches a node without the
    key), ``Exists`` / ``DoesNotExist`` (no values), ``Gt`` / ``Lt`` (exactly one integer value,
    compared with the node's label parsed as a base-10 int64; a node whose label does not parse
    does not match). Kept as a plain string so that a pod with a bad operator still decodes and
    is rejected with a clear reason (:func:`colo.affinity.affinity_problems`).
    """

    key: str
    operator: str
    values: list[str] = []


class NodeSelectorTerm(Message, frozen=True):
    """Expressions ANDed; a term without expressions matches no node (Kubernetes NodeSelectorTerm)."""

    match_expressions: list[NodeSelectorRequirement] = []


class NodeSelector(Message, frozen=True):
    """Terms ORed (Kubernetes NodeSelector); at least one term is required."""

    node_selector_terms: list[NodeSelectorTerm] = []


class PreferredSchedulingTerm(Message, frozen=True):
    """A preferred term and its ``weight`` 1..100 (Kubernetes PreferredSchedulingTerm)."""

    weight: int
    preference: NodeSelectorTerm


class NodeAffinity(Message, frozen=True):
    """Kubernetes NodeAffinity: ``required`` (requiredDuringSchedulingIgnoredDuringExecution; None =
    no requirement) and ``preferred`` (preferredDuringSchedulingIgnoredDuringExecution)."""

    required: NodeSelector | None = None
    preferred: list[PreferredSchedulingTerm] = []


class Affinity(Message, frozen=True):
    """A pod's affinity (Kubernetes Affinity); only node affinity for now."""

    node_affinity: NodeAffinity | None = None


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


class PodAdmitted(Message, frozen=True):
    """A pod accepted by admission, with colocation profiles applied (subject ``pod.admitted``)."""

    spec: PodSpec
    at: float
    profile: str = ""


class PodRejected(Message, frozen=True):
    """A pod refused by admission; ``reason`` is human readable (subject ``pod.rejected``)."""

    uid: str
    name: str
    reason: str
    at: float


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


# --------------------------------------------------------------------------- policy


class CPUSuppressStrategy(Message, frozen=True):
    """CPU suppress (REFERENCE.md §5): BE budget = capacity × threshold% − non-BE used − system."""

    enabled: bool = True
    threshold_percent: int = 65
    min_percent: int = 0
    policy: Literal["cpuset", "cfsQuota"] = "cpuset"


class MemoryEvictStrategy(Message, frozen=True):
    """BE memory eviction (REFERENCE.md §5): start at ``threshold_percent``, free down to lower."""

    enabled: bool = True
    threshold_percent: int = 70
    lower_percent: int | None = None
    cooldown_s: float = 4.0
    pressure_hold_s: float = 300.0
    """Seconds node memory must stay below the lower threshold before a node under BE memory pressure
    offers batch-memory and takes BE pods again: 300 = the NodeMetric window (REFERENCE.md §2), so the
    averages the batch formula and LoadAware read hold no sample of the pressure any more."""


class CPUEvictStrategy(Message, frozen=True):
    """BE CPU eviction by satisfaction (REFERENCE.md §5, oracle O10)."""

    enabled: bool = False
    upper_percent: int = 40
    lower_percent: int = 30
    usage_threshold_percent: int = 90
    window_s: float = 60.0
    cooldown_s: float = 20.0


class CPUBurstStrategy(Message, frozen=True):
    """CPU burst for LS pods (REFERENCE.md §5; Koordinator ``CPUBurstStrategy``).

    ``policy``: ``none``; ``cpuBurstOnly`` sets ``cpu.cfs_burst_us`` = limit × ``burst_percent``/100 × period;
    ``cfsQuotaBurstOnly`` scales the CFS quota ×1.2 up when throttled / ×0.8 down within [base, base ×
    ``quota_scale_max_percent``/100] by the share-pool state (Overload ≥ ``share_pool_threshold_percent``,
    Cooling ≥ 90 % of it), pod by pod within the pool's headroom below Overload; ``auto`` both.
    ``quota_burst_period_s`` caps how long a pod may run above its base quota (token bucket; −1 = no cap,
    ``cfsQuotaBurstPeriodSeconds``).
    """

    policy: Literal["none", "cpuBurstOnly", "cfsQuotaBurstOnly", "auto"] = "none"
    burst_percent: int = 1000
    quota_scale_max_percent: int = 300
    share_pool_threshold_percent: int = 50
    quota_burst_period_s: int = -1
    scale_down_unthrottled_rounds: int = 5
    """A pod above its base quota that was not throttled for this many rounds in a row, and whose use fits the
    next lower quota, steps down ×0.8 (it gives back quota it does not use). 0 = never: such a pod keeps its
    quota until the share pool is in Overload, as in the reference. ≥ 0."""


class MemoryQoSClass(Message, frozen=True):
    """Memory QoS percents of one QoS class (Koordinator ``MemoryQOS`` of ``LSRClass``/``LSClass``/``BEClass``)."""

    min_percent: int = 0
    low_percent: int = 0
    throttling_percent: int = 0


class MemoryQoSStrategy(Message, frozen=True):
    """Memory QoS (REFERENCE.md §5): memory.min/low/high from requests.

    memory.min = request × ``min_percent``/100, memory.low = request × ``low_percent``/100, memory.high =
    request + (limit − request) × ``throttling_percent``/100 rounded down to a page (0 → max). ``lsr`` (also
    LSE), ``ls`` and ``be`` override the node-wide percents for their class when set.
    """

    enabled: bool = False
    min_percent: int = 0
    low_percent: int = 0
    throttling_percent: int = 0
    lsr: MemoryQoSClass | None = None
    ls: MemoryQoSClass | None = None
    be: MemoryQoSClass | None = None


class CPUSetStrategy(Message, frozen=True):
    """Exclusive (LSE) and reserved (LSR) cpusets (REFERENCE.md §5 "CPU priority"): LSE/LSR pods get whole cores
    of their own, LS pods the share pool (never LSE/LSR/reserved CPUs), BE pods never LSE CPUs."""

    enabled: bool = True


class ResctrlClass(Message, frozen=True):
    """LLC ways (``l3_start_percent``..``l3_end_percent`` of the cache mask) and memory bandwidth
    (``mba_percent``) of one resctrl group (Koordinator ``ResctrlQOS``)."""

    l3_start_percent: int = 0
    l3_end_percent: int = 100
    mba_percent: int = 100


class ResctrlStrategy(Message, frozen=True):
    """LLC / memory bandwidth isolation through resctrl where ``/sys/fs/resctrl`` exists (REFERENCE.md §5):
    groups LSR (LSE and LSR pods), LS and BE; BE gets L3 ways 0–30 % by default."""

    enabled: bool = False
    lsr: ResctrlClass = ResctrlClass()
    ls: ResctrlClass = ResctrlClass()
    be: ResctrlClass = ResctrlClass(l3_end_percent=30)


class BlkIOLimit(Message, frozen=True):
    """Throttles of one block device ``"MAJ:MIN"``: bytes/s and IO/s for reads and writes (0 = no limit)."""

    device: str
    read_bps: int = 0
    write_bps: int = 0
    read_iops: int = 0
    write_iops: int = 0


class BlkIOStrategy(Message, frozen=True):
    """Block I/O throttling of the BE QoS group (blkio.throttle.* on v1, io.max on v2; Koordinator ``BlkIOQOS``)."""

    enabled: bool = False
    be: list[BlkIOLimit] = []


class SystemStrategy(Message, frozen=True):
    """Node kernel settings (REFERENCE.md §5 "System"; Koordinator ``SystemStrategy``): ``vm.min_free_kbytes`` =
    ``min_free_kbytes_factor`` × total memory (KiB) / 10000 and ``vm.watermark_scale_factor``."""

    enabled: bool = False
    min_free_kbytes_factor: int = 100
    watermark_scale_factor: int = 150


class NodeSLO(Message, frozen=True):
    """Per-node QoS policy rendered by slo-manager (subject ``node.slo.<node>``).

    One switch per node agent strategy (docs/node-agent.md): ``cpu_suppress``, ``memory_evict``, ``cpu_evict``,
    ``cpu_burst``, ``memory_qos``, ``be_cpu_idle`` (SCHED_IDLE for BE), ``be_cpu_shares`` (the BE QoS group's
    cpu.shares: ``requests`` = Σ batch-cpu requests × 1024/1000, ``min`` = 2, the kubelet's MinShares for
    ``kubepods/besteffort``; not written while the group is idle), ``cpuset`` (LSE/LSR cpusets),
    ``resctrl`` (LLC/MBA), ``blkio`` (BE I/O throttles) and ``system`` (min_free_kbytes).
    """

    node: str
    at: float = 0.0
    cpu_suppress: CPUSuppressStrategy = CPUSuppressStrategy()
    memory_evict: MemoryEvictStrategy = MemoryEvictStrategy()
    cpu_evict: CPUEvictStrategy = CPUEvictStrategy()
    cpu_burst: CPUBurstStrategy = CPUBurstStrategy()
    memory_qos: MemoryQoSStrategy = MemoryQoSStrategy()
    be_cpu_idle: bool = True
    pool: str = ""
    be_cpu_shares: Literal["requests", "min"] = "requests"
    cpuset: CPUSetStrategy = CPUSetStrategy()
    resctrl: ResctrlStrategy = ResctrlStrategy()
    blkio: BlkIOStrategy = BlkIOStrategy()
    system: SystemStrategy = SystemStrategy()


# --------------------------------------------------------------------------- events


class QoSEvent(Message, frozen=True):
    """A node agent action (subject ``node.qos.<node>``).

    ``kind``: ``suppress`` (BE CPU budget changed), ``evict``, ``cgroup`` (a write),
    ``burst``, ``oom``. ``detail`` carries numbers with units in their keys.
    """

    node: str
    kind: Literal["suppress", "evict", "cgroup", "burst", "oom"]
    at: float
    reason: str = ""
    pods: list[str] = []
    detail: dict[str, float | int | str] = {}


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


class DeadLetter(Message, frozen=True):
    """A message that could not be decoded or handled (subject ``dlq.<service>``)."""

    service: str
    subject: str
    reason: str
    data: str
    at: float
    headers: dict[str, str] = {}


class ConfigApplied(Message, frozen=True):
    """A service put a new configuration in force (subject ``config.applied.<service>``).

    ``version`` = first 16 hex digits of the sha256 of the effective settings (sorted JSON), the same
    for the same settings wherever they come from; ``trigger`` what caused it (``start``, ``file``,
    ``kv``); ``sources`` each layer in force and its identity (file path and content hash, KV
    bucket/key and revision); ``restart_required`` settings that differ in the new configuration but
    only take effect after a restart (the running values stay). ``at`` in clock seconds.
    """

    service: str
    version: str
    trigger: str
    at: float
    sources: dict[str, str] = {}
    restart_required: list[str] = []
    warnings: list[str] = []
    """Combinations the service accepts but advises against, with the numbers (e.g. the slo-manager's
    batch-memory admission overlapping BE memory eviction, docs/slo-manager.md)."""


class ConfigRejected(Message, frozen=True):
    """A new configuration was refused (subject ``config.rejected.<service>``): ``errors`` lists every
    problem, one per entry; the configuration ``version_in_force`` stays. ``trigger``: ``file`` or ``kv``
    (the change that was tried), ``at`` in clock seconds."""

    service: str
    trigger: str
    errors: list[str]
    version_in_force: str
    at: float


# --------------------------------------------------------------------------- simulation


class Tick(Message, frozen=True):
    """Virtual-time tick: the service processes everything due up to ``now`` then acks."""

    seq: int
    now: float
    step_s: float
    settle_only: bool = False
    """Only drain the service's consumers at the current time (``now`` must equal it) and ack, without a
    tick: the coordinator sends it to every service after the step's ticks so that what the last ones
    published (evictions, the statuses they lead to) is handled within the step, at its time."""


class TickAck(Message, frozen=True):
    """A service's answer to a :class:`Tick`; ``stats`` are counters for the report."""

    service: str
    seq: int
    stats: dict[str, float] = {}
    error: str = ""


# --------------------------------------------------------------------------- migration


MigrationPhase = Literal["Pending", "Running", "Succeeded", "Failed", "Aborted"]
"""Phases of a :class:`PodMigrationJob` (Koordinator's PodMigrationJob phases, docs/descheduler.md)."""


class PodMigrationJob(Message, frozen=True, kw_only=True):
    """A safe migration of pod ``uid`` off ``source`` onto ``target`` (subject ``migration.<phase>``; the
    descheduler keeps it in the store, ``colo get migrations`` reads it there).

    ``id`` is ``mig-<uid>-<created_at>``. ``phase``: Pending (waits for arbitration and a reservation;
    nothing done to the pod), Running (room reserved on ``target`` as ``reservation``, then the eviction
    sent: ``evicted_at`` > 0), Succeeded (a replacement ``replacement`` was bound on the reservation),
    Failed (evicted, but no replacement bound on the reservation in time, or bound elsewhere; the
    reservation released), Aborted (stopped before any eviction: reservation refused until the pending
    timeout, or the pod went away). ``reason`` says why the phase was entered. ``usage_cpu`` (milli-cores)
    and ``usage_memory`` (bytes) are the pod's measured usage the descheduler books on ``target``; times
    in clock seconds (``phase_at``: when ``phase`` was entered)."""

    id: str
    uid: str
    name: str = ""
    namespace: str = "default"
    workload: str = ""
    source: str
    target: str
    phase: MigrationPhase
    reason: str = ""
    reservation: str = ""
    replacement: str = ""
    usage_cpu: int = 0
    usage_memory: int = 0
    created_at: float = 0.0
    phase_at: float = 0.0
    evicted_at: float = 0.0
    bound_at: float = 0.0
    """When the pod was bound on ``source`` (its eviction's message id names that binding)."""
