"""Node QoS: the per-node policy :class:`NodeSLO` with one strategy struct per node agent strategy
(REFERENCE.md §5), and the :class:`QoSEvent` a node agent publishes when it acts."""

from __future__ import annotations

from typing import Literal

from colo.messages.base import Message


class CPUSuppressStrategy(Message, frozen=True):
    """CPU suppress (REFERENCE.md §5): BE budget = capacity × threshold% − non-BE used − system."""

    enabled: bool = True
    threshold_percent: int = 65
    min_percent: int = 0
    policy: Literal["cpuset", "cfsQuota"] = "cpuset"


class BEBudgetStrategy(Message, frozen=True):
    """SLO-driven BE CPU budget (docs/node-agent.md "BE budget"; after Heracles, Lo et al., ISCA 2015): the
    suppress threshold grows by ``step_percent`` of capacity per agent loop while the LS pods' interference
    ``signal`` stays within half of ``target_increase_percent`` over its BE-free baseline (the guard band), holds
    between half and all of it, is cut fast above it (half the excess over the floor; to the floor when the rise
    is over twice the target), and holds for ``hold_s`` seconds after a violation. Never below ``cpu_suppress.threshold_percent`` (the static
    threshold is the floor and the fallback when signals are missing), never above ``max_percent``.

    ``signal``: ``runq_wait`` (run-queue wait per CPU second, ``/proc/<pid>/schedstat``), ``cpu_pressure`` (PSI
    ``cpu.some`` avg10 of the pod group), ``cpi`` (cycles per instruction, ``perf``) or ``latency_inflation``
    (the sim's modelled p99 rise over running alone, percent; −1 on real nodes, which then keep the static
    threshold).
    """

    enabled: bool = False
    signal: Literal["runq_wait", "cpu_pressure", "cpi", "latency_inflation"] = "runq_wait"
    target_increase_percent: float = 10.0
    max_percent: int = 95
    step_percent: int = 2
    hold_s: float = 60.0


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


class OOMStrategy(Message, frozen=True):
    """OOM priority (docs/node-agent.md "OOM priority"): every process of a pod gets an ``oom_score_adj``
    (-1000..1000) by its QoS class, so that the kernel's OOM killer takes BE processes before LS ones.

    The reference values are the kubelet's (``pkg/kubelet/qos/policy.go``): Guaranteed -997, BestEffort 1000,
    Burstable 1000 - 1000 x memory request / node memory within 3..999. Colo keeps Guaranteed and BestEffort
    (``lsr_score_adj`` for LSE/LSR/SYSTEM, ``be_score_adj`` for BE) and moves LS below zero: LS = -1000 x
    memory request / node memory within ``lsr_score_adj`` + 1 .. ``ls_max_score_adj``, so that a BE process
    (badness >= 1000 points) is always chosen before an LS one (badness < 1000 while it holds less than all of
    the memory), LS pods among themselves by the kubelet's rule (the one furthest above its request first).
    Off: pods' processes get 0, the kernel's default.
    """

    enabled: bool = True
    be_score_adj: int = 1000
    ls_max_score_adj: int = -1
    lsr_score_adj: int = -997


class NetQoSStrategy(Message, frozen=True):
    """Egress network QoS (docs/node-agent.md "Network QoS"; ``tc`` HTB on ``interface``, pods' traffic
    classified by cgroup v1 ``net_prio``): LS traffic (LSE/LSR/LS pods) is guaranteed ``ls_bps`` and may
    borrow up to ``total_bps``; BE traffic is held to ``be_bps``; other traffic of the node gets the rest of
    ``total_bps`` and may borrow too. Rates in bits per second; ``interface`` a device of the agent's network
    namespace (the host network the pods share).
    """

    enabled: bool = False
    interface: str = ""
    total_bps: int = 0
    ls_bps: int = 0
    be_bps: int = 0


class NodeSLO(Message, frozen=True):
    """Per-node QoS policy rendered by slo-manager (subject ``node.slo.<node>``).

    One switch per node agent strategy (docs/node-agent.md): ``cpu_suppress``, ``memory_evict``, ``cpu_evict``,
    ``cpu_burst``, ``memory_qos``, ``be_cpu_idle`` (SCHED_IDLE for BE), ``be_cpu_shares`` (the BE QoS group's
    cpu.shares: ``requests`` = Σ batch-cpu requests × 1024/1000, ``min`` = 2, the kubelet's MinShares for
    ``kubepods/besteffort``; not written while the group is idle), ``cpuset`` (LSE/LSR cpusets),
    ``resctrl`` (LLC/MBA), ``blkio`` (BE I/O throttles), ``system`` (min_free_kbytes) and ``be_budget`` (the
    SLO-driven BE CPU budget that raises the suppress threshold while measured interference allows), ``oom``
    (``oom_score_adj`` of pods' processes by QoS class) and ``net_qos`` (BE egress bandwidth limit, LS share).
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
    be_budget: BEBudgetStrategy = BEBudgetStrategy()
    oom: OOMStrategy = OOMStrategy()
    net_qos: NetQoSStrategy = NetQoSStrategy()


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
