"""Every strategy for one node in one round: a node snapshot and its NodeSLO in, one plan out (DESIGN.md §6).

:func:`plan_node` runs, in this order, each switchable by the NodeSLO (docs/node-agent.md has the table):
pod-level kubelet settings; BE group settings and SCHED_IDLE; LSE/LSR/LS cpusets; CPU suppress (BE cpuset or
quota); CPU burst; memory QoS; BE block I/O throttles; resctrl LLC/MBA; system sysctls; then BE memory eviction
and BE CPU eviction by satisfaction. Later writes of the same file replace earlier ones in the executor (burst
scaling overrides the kubelet quota, suppress the BE cpusets), so the plan is applied as one batch.

State that lives between rounds (eviction cool-downs, the BE CPU window, burst token buckets, BE memory
pressure) is passed in as :class:`StrategyMemory` and never mutated here: the plan carries the new values,
:meth:`StrategyMemory.absorb` keeps them once the caller has applied the plan.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import msgspec

from colo.messages import BEBudgetState, InterferenceSignals, NodeSLO, PodSpec, QoSClass
from colo_node_agent.cgroups.executor import CgroupWrite
from colo_node_agent.cgroups.layout import CGROUPFS, Layout
from colo_node_agent.cgroups.resctrl import ResctrlInfo
from colo_node_agent.cgroups.resources import DEFAULT_PERIOD_US, cpuset_parse
from colo_node_agent.strategies.be_budget import be_budget, ls_signal_at
from colo_node_agent.strategies.blkio import blkio_writes
from colo_node_agent.strategies.cgroup_settings import be_qos_settings, effective_resources, pod_settings
from colo_node_agent.strategies.cpu_burst import (
    BurstPod,
    Limiter,
    NodeState,
    SharePoolPod,
    cpu_burst,
    share_pool,
)
from colo_node_agent.strategies.cpu_evict import BECPUSample, cpu_evict, window_average
from colo_node_agent.strategies.cpu_suppress import SuppressInput, SuppressState, suppress
from colo_node_agent.strategies.cpusets import CpusetPod, plan_cpusets
from colo_node_agent.strategies.memory_evict import memory_evict
from colo_node_agent.strategies.memory_pressure import NO_PRESSURE, PressureState, observe
from colo_node_agent.strategies.memory_qos import MemoryPod, memory_qos
from colo_node_agent.strategies.resctrl_qos import resctrl_plan
from colo_node_agent.strategies.system import system_writes
from colo_node_agent.strategies.types import Eviction, PodView
from colo_node_agent.topology import CPUTopology


@dataclass(frozen=True)
class NodeFeatures:
    """What the node's kernel offers: ``cpu.idle``, CFS burst, memory.min/low/high, blkio throttles, resctrl
    (its :class:`ResctrlInfo`, None = none) and writable sysctls."""

    cpu_idle: bool = True
    cpu_burst: bool = True
    memory_qos: bool = True
    blkio: bool = True
    resctrl: ResctrlInfo | None = None
    sysctl: bool = False


@dataclass(frozen=True)
class PodState:
    """One running pod: its spec and class, use (milli-cores, bytes), current CFS quota (µs, −1 none), whether
    it was throttled since the last round (None unknown), its CPUs now, its task ids, whether an eviction
    is already under way, and the throttled share of CFS periods since the last round (0..1)."""

    spec: PodSpec
    qos: QoSClass
    cpu_used: int = 0
    memory_used: int = 0
    quota_us: int = -1
    throttled: bool | None = None
    cpus: tuple[int, ...] = ()
    pids: tuple[int, ...] = ()
    evicting: bool = False
    throttled_ratio: float = 0.0
    assigned: tuple[int, ...] = ()
    """The CPUs the scheduler chose for the pod (LSE/LSR, ``PodBound.cpuset``); () = none."""
    interference: InterferenceSignals | None = None
    """The pod's interference signals (LS pods; None = not measured), read by the BE budget."""
    interference_at: float = 0.0
    """When ``interference`` was measured (seconds, the loop's clock)."""


@dataclass(frozen=True)
class NodeSnapshot:
    """A node at one instant. CPU in milli-cores, memory in bytes.

    ``node_cpu_used`` None when no usage sample exists yet (suppress and burst then hold still);
    ``node_reserved_cpu`` REFERENCE.md §3 NodeReserved; ``host_apps_used`` non-BE host applications;
    ``be_cpus``/``be_quota_us`` the BE group's cpuset and quota now; ``blkio_devices`` devices with BE rules now;
    ``resctrl_tasks`` the task ids each resctrl group lists now.
    """

    name: str
    cpu_capacity: int
    memory_capacity: int
    node_cpu_used: int | None
    node_memory_used: int
    pods: tuple[PodState, ...]
    topology: CPUTopology
    memory_allocatable: int = 0
    reserved_cpus: tuple[int, ...] = ()
    node_reserved_cpu: int = 0
    host_apps_used: int = 0
    be_cpus: tuple[int, ...] = ()
    be_quota_us: int = -1
    blkio_devices: tuple[str, ...] = ()
    resctrl_tasks: dict[str, frozenset[int]] = field(default_factory=dict)
    features: NodeFeatures = NodeFeatures()
    period_us: int = DEFAULT_PERIOD_US


@dataclass
class StrategyMemory:
    """What strategies remember between rounds of one node."""

    last_memory_evict: float | None = None
    last_cpu_evict: float | None = None
    be_samples: deque[BECPUSample] = field(default_factory=lambda: deque(maxlen=600))
    limiters: dict[str, Limiter] = field(default_factory=dict)
    unthrottled_rounds: dict[str, int] = field(default_factory=dict)
    """CPU burst: per LS pod, the rounds in a row it was not throttled."""
    memory_pressure: PressureState = NO_PRESSURE
    """BE memory pressure (strategies/memory_pressure.py), reported in the NodeMetric."""
    be_budget: BEBudgetState | None = None
    """The SLO-driven BE budget (strategies/be_budget.py) after the last round; None while it is off."""

    def absorb(self, plan: NodePlan, now: float, evicted: dict[str, int] | None = None) -> None:
        """Keep ``plan``'s new state; ``evicted`` pods really evicted per kind ("memory"/"cpu") start a
        cool-down at ``now``."""
        if plan.be_sample is not None:
            self.be_samples.append(plan.be_sample)
        self.limiters = dict(plan.limiters)
        self.unthrottled_rounds = dict(plan.unthrottled_rounds)
        self.memory_pressure = plan.memory_pressure
        self.be_budget = plan.be_budget
        done = evicted if evicted is not None else {}
        if done.get("memory"):
            self.last_memory_evict = now
        if done.get("cpu"):
            self.last_cpu_evict = now


@dataclass(frozen=True)
class PlannedEviction:
    """A victim and the strategy that chose it (``memory`` or ``cpu``)."""

    kind: str
    eviction: Eviction
    release: int


@dataclass(frozen=True)
class NodePlan:
    """One round's result: writes, evictions, the BE CPU budget (−1 = suppress off), burst node state, the
    new limiters, BE sample and BE memory pressure to remember, problems worth an event, the BE cpuset, and
    the CPU burst unthrottled-round counts to remember, and the BE budget's state (None while it is off)."""

    writes: list[CgroupWrite]
    evictions: list[PlannedEviction]
    be_cpu_allowed: int
    burst_state: NodeState
    limiters: dict[str, Limiter]
    be_sample: BECPUSample | None
    problems: list[str]
    be_cpus: tuple[int, ...] = ()
    unthrottled_rounds: dict[str, int] = field(default_factory=dict)
    memory_pressure: PressureState = NO_PRESSURE
    be_budget: BEBudgetState | None = None


def _views(snap: NodeSnapshot) -> list[PodView]:
    out = []
    for p in snap.pods:
        req, lim = effective_resources(p.spec, p.qos)
        out.append(PodView(p.spec.uid, p.qos, p.spec.priority or 0, p.cpu_used, p.memory_used, req.cpu,
                           req.memory, lim.cpu, lim.memory))
    return out


def _be_limit(snap: NodeSnapshot, be_cpus: int, quota_us: int) -> int:
    """CPU the BE group may use now (milli-cores): its cpuset size, its quota, the node."""
    limit = min(be_cpus * 1000 if be_cpus else snap.cpu_capacity, snap.cpu_capacity)
    if quota_us > 0:
        limit = min(limit, quota_us * 1000 // snap.period_us)
    return limit


def _budget(snap: NodeSnapshot, slo: NodeSLO, memory: StrategyMemory, now: float, be_used: int
            ) -> BEBudgetState | None:
    """The BE budget this round (strategies/be_budget.py) from the LS pods' signals; None while it is off;
    the last state unchanged (at first: the floor, in fallback) while the node has no usage sample."""
    if not slo.be_budget.enabled:
        return None
    if snap.node_cpu_used is None:
        floor = float(slo.cpu_suppress.threshold_percent)
        return memory.be_budget or BEBudgetState(threshold_percent=floor, since=now)
    ls = [(p.interference, p.interference_at) for p in snap.pods if p.qos != "BE" and not p.evicting]
    signal, at = ls_signal_at(slo.be_budget.signal, ls)
    return be_budget(slo.be_budget, memory.be_budget, signal, at, be_used, snap.cpu_capacity,
                     slo.cpu_suppress.threshold_percent, now)


def plan_node(snap: NodeSnapshot, slo: NodeSLO, memory: StrategyMemory, now: float, layout: Layout = CGROUPFS,
              sample_interval_s: float = 1.0) -> NodePlan:
    """The plan for one node this round (module doc). Pure: ``memory`` is read, not changed."""
    feats = snap.features
    views = _views(snap)
    be_specs = [p.spec for p in snap.pods if p.qos == "BE"]
    writes: list[CgroupWrite] = []
    problems: list[str] = []
    for p in snap.pods:
        writes += pod_settings(p.spec, p.qos, snap.period_us, layout)
    writes += be_qos_settings(be_specs, slo.be_cpu_idle, idle_supported=feats.cpu_idle, layout=layout,
                              min_shares=slo.be_cpu_shares == "min")

    cs = plan_cpusets([CpusetPod(p.spec.uid, p.qos, v.cpu_request, p.cpus, p.assigned) for p, v in zip(snap.pods, views)],
                      snap.topology, snap.reserved_cpus, slo.cpuset, layout)
    writes += cs.writes
    problems += cs.problems

    be_used = sum(v.cpu_used for v in views if v.qos == "BE")
    non_be_used = sum(v.cpu_used for v in views if v.qos != "BE")
    state = SuppressState(len(snap.topology.cpus), cs.be_candidates, snap.be_cpus or cs.be_candidates,
                          snap.be_quota_us, snap.period_us, snap.topology, cs.lsr_cpus, layout.besteffort,
                          tuple(layout.pod_dir("BE", s.uid) for s in be_specs))
    be_allowed = -1
    be_cpus, be_quota = snap.be_cpus or cs.be_candidates, snap.be_quota_us
    budget = _budget(snap, slo, memory, now, be_used)
    policy = slo.cpu_suppress
    if budget is not None:
        policy = msgspec.structs.replace(policy, threshold_percent=int(budget.threshold_percent))
    if snap.node_cpu_used is not None:
        sp = suppress(SuppressInput(snap.cpu_capacity, snap.node_cpu_used, non_be_used, be_used,
                                    snap.host_apps_used, snap.node_reserved_cpu), policy, state)
        writes += sp.writes
        be_allowed, be_quota = sp.be_cpu_allowed, sp.quota_us
        be_cpus = next((cpuset_parse(str(w.value)) for w in sp.writes
                        if w.cgroup == layout.besteffort and w.resource == "cpuset.cpus"), be_cpus)

    pool = share_pool(len(snap.topology.cpus), snap.node_cpu_used,
                      [SharePoolPod(v.qos, v.cpu_request, v.cpu_used) for v in views])
    bp = cpu_burst([BurstPod(p.spec.uid, layout.pod_dir(p.qos, p.spec.uid), p.qos, v.cpu_limit, p.quota_us,
                             p.throttled, p.cpu_used, p.throttled_ratio) for p, v in zip(snap.pods, views)],
                   pool, slo.cpu_burst, memory.limiters, now, snap.period_us, memory.unthrottled_rounds)
    burst_state = bp.state
    # quota scaling works on every kernel; cfs_burst_us only where the kernel has it (5.14+)
    writes += [w for w in bp.writes if feats.cpu_burst or w.resource != "cpu.cfs_burst_us"]

    mq = memory_qos([MemoryPod(v.uid, v.qos, v.memory_request, v.memory_limit) for v in views], slo.memory_qos,
                    snap.memory_allocatable or snap.memory_capacity, feats.memory_qos, layout)
    writes += mq.writes
    if feats.blkio:
        writes += blkio_writes(slo.blkio, snap.blkio_devices, layout.besteffort)
    tasks: dict[QoSClass, list[int]] = {}
    for p in snap.pods:
        tasks.setdefault(p.qos, []).extend(p.pids)
    rc = resctrl_plan(slo.resctrl, feats.resctrl, tasks, snap.resctrl_tasks)
    writes += rc.writes
    problems += rc.problems
    if feats.sysctl:
        writes += system_writes(slo.system, snap.memory_capacity)

    evictions: list[PlannedEviction] = []
    pending = frozenset(p.spec.uid for p in snap.pods if p.evicting)
    me = memory_evict(snap.memory_capacity, snap.node_memory_used, views, slo.memory_evict, pending,
                      memory.last_memory_evict, now)
    evictions += [PlannedEviction("memory", e, me.release) for e in me.evictions]
    pressure = observe(memory.memory_pressure, now, snap.node_memory_used, snap.memory_capacity, slo.memory_evict,
                       evicted=bool(me.evictions))
    sample = None
    if slo.cpu_evict.enabled:
        be_req = sum(v.cpu_request for v in views if v.qos == "BE")
        sample = BECPUSample(_be_limit(snap, len(be_cpus), be_quota), be_used, be_req)
        window = window_average([*memory.be_samples, sample], sample_interval_s, slo.cpu_evict)
        gone = {e.eviction.uid for e in evictions}
        ce = cpu_evict(window, sample, [v for v in views if v.uid not in gone], slo.cpu_evict,
                       memory.last_cpu_evict, now)
        evictions += [PlannedEviction("cpu", e, ce.release) for e in ce.evictions]
    return NodePlan(writes, evictions, be_allowed, burst_state, bp.limiters, sample, problems, tuple(be_cpus),
                    bp.unthrottled_rounds, pressure, budget)
