"""The ``sim`` backend: many virtual nodes in one process (DESIGN.md §6; docs/node-agent.md).

Each node has its own in-memory cgroup tree written through the same :class:`Executor` and strategies a real
node uses; CPU and memory sharing *interpret* what is in the tree:

* CPU per sub-step: pods' demand (PodSpec.sim) capped by their CFS quota; LS pods and the BE group share
  capacity − system by weighted max-min fairness on ``cpu.shares`` (the BE group weighs its QoS directory's
  shares and is capped by its quota and cpuset size × 1000); with ``cpu.idle`` = 1 the BE group only gets what
  LS pods leave. Inside the BE group pods share by their own shares.
* Memory: LS pods follow their series, BE pods hold their memory; a pod above its memory limit, the BE group
  above its limit, or the node above capacity → OOM-kill (BE pods largest first; reason OOMKilled).
* Batch pods complete after ``duration_s`` seconds of full service (slower when served less).

Time advances in sub-steps of ``sub_step_s`` seconds inside each tick and the strategies run after every
sub-step (the reference runs them every second: with 10 s sub-steps reactions are up to 10 s late).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Callable, TypedDict

import numpy as np
import numpy.typing as npt

from colo.messages import NodeMetric, NodeSLO, NodeSpec, PodMetric, PodPhase, PodSpec, QoSEvent, Usage
from colo_node_agent.backends.sharing import water_fill
from colo_node_agent.backends.sim_pods import BOOL, F64, I64, PodTable
from colo_node_agent.cgroups.executor import CgroupWrite, Executor, WriteRecord
from colo_node_agent.cgroups.fs import MemoryFS, cgroup_prefixes, default_files
from colo_node_agent.cgroups.layout import BESTEFFORT, QOS_DIRS, pod_dir
from colo_node_agent.cgroups.resources import DEFAULT_PERIOD_US, CgroupVersion, cpuset_format, cpuset_parse
from colo_node_agent.metrics import Ring, aggregated
from colo_node_agent.strategies.blkio import blkio_writes
from colo_node_agent.strategies.cgroup_settings import be_qos_settings, effective_resources, pod_settings
from colo_node_agent.strategies.cpu_burst import BurstPod, Limiter, SharePoolPod, cpu_burst, share_pool
from colo_node_agent.strategies.cpu_evict import BECPUSample, cpu_evict, window_average
from colo_node_agent.strategies.cpu_suppress import (
    SuppressInput,
    SuppressState,
    be_cpu_allowed_many,
    cpuset_growth,
    cpuset_size_many,
    suppress,
)
from colo_node_agent.strategies.cpusets import CpusetPod, plan_cpusets
from colo_node_agent.strategies.memory_evict import memory_evict
from colo_node_agent.strategies.memory_pressure import NO_PRESSURE, PressureState, condition, observe
from colo_node_agent.strategies.memory_qos import MemoryPod, memory_qos
from colo_node_agent.strategies.types import EvictPlan, PodView
from colo_node_agent.topology import CPUTopology

IDLE_WEIGHT = 1e-9
"""Relative weight of a ``cpu.idle`` group: it gets (practically) nothing while non-idle groups want more."""


@dataclass(frozen=True)
class SimConfig:
    """``sub_step_s`` seconds per simulated step; system usage as fractions of capacity; cgroup hierarchy;
    ``window_s`` the NodeMetric averaging window (REFERENCE.md §2: 300 s); a clock jump over ``max_gap_s``
    is skipped rather than simulated."""

    sub_step_s: float = 10.0
    system_cpu_fraction: float = 0.02
    system_memory_fraction: float = 0.04
    cgroup_version: CgroupVersion = "v1"
    window_s: float = 300.0
    max_gap_s: float = 900.0


@dataclass(frozen=True)
class PodEnd:
    """A pod that stopped: ``phase`` Succeeded/Failed, ``reason`` Completed/Evicted/OOMKilled."""

    uid: str
    node: str
    phase: PodPhase
    reason: str
    message: str
    at: float
    spec: PodSpec


@dataclass
class AdvanceResult:
    """What happened while advancing: ended pods, QoS events, stats (see :meth:`SimBackend.advance`) and the
    nodes whose BE memory pressure began (their NodeMetric is published at once, not at the next report)."""

    ended: list[PodEnd] = field(default_factory=list)
    events: list[QoSEvent] = field(default_factory=list)
    stats: dict[str, float] = field(default_factory=dict)
    pressure_started: list[str] = field(default_factory=list)


class SloColumns(TypedDict):
    """Per-node NodeSLO fields as arrays of shape ``(nodes,)``: percents and milli-cores as int64."""

    cpuset: BOOL
    threshold: I64
    min: I64
    cpu_evict: BOOL
    mem_evict: BOOL
    mem_threshold: F64
    reserved: I64
    burst: BOOL


class SimBackend:
    """Virtual nodes ``nodes`` starting at time ``start`` seconds; ``default_slo(node)`` until a NodeSLO arrives."""

    def __init__(self, nodes: list[NodeSpec], config: SimConfig, default_slo: Callable[[str], NodeSLO],
                 start: float = 0.0) -> None:
        self.config = config
        self.dt = config.sub_step_s
        self.now = start
        self.specs = list(nodes)
        self.names = [n.name for n in nodes]
        self.index = {name: i for i, name in enumerate(self.names)}
        n = len(nodes)
        self.cap_cpu: F64 = np.array([float(s.capacity.cpu) for s in nodes])
        self.cap_mem: F64 = np.array([float(s.capacity.memory) for s in nodes])
        self.sys_cpu: F64 = self.cap_cpu * config.system_cpu_fraction
        self.sys_mem: F64 = self.cap_mem * config.system_memory_fraction
        window_n = max(int(round(config.window_s / self.dt)), 1)
        self.window_n = window_n
        self.pods = PodTable(n, ring=window_n)
        self.slos = [default_slo(name) for name in self.names]
        self.fs = [MemoryFS() for _ in nodes]
        self.ex = [Executor(fs, config.cgroup_version) for fs in self.fs]
        self.logical = [s.cpus or max(s.capacity.cpu // 1000, 1) for s in nodes]
        reserved = [set(cpuset_parse(s.reserved_cpus)) if s.reserved_cpus else set() for s in nodes]
        self.candidates = [tuple(c for c in range(k) if c not in r) for k, r in zip(self.logical, reserved)]
        self.topology = [CPUTopology.flat(k) for k in self.logical]
        self.reserved_cpus = [tuple(sorted(r)) for r in reserved]
        self.lsr_cpus: list[tuple[int, ...]] = [() for _ in nodes]
        self.share_pool: list[tuple[int, ...]] = [c for c in self.candidates]
        self.limiters: list[dict[str, Limiter]] = [{} for _ in nodes]
        self.unthrottled_rounds: list[dict[str, int]] = [{} for _ in nodes]
        self.blkio_devices: list[tuple[str, ...]] = [() for _ in nodes]
        self.memory_qos_on = [False] * n
        self.throttled: BOOL = np.zeros((n, 1), dtype=bool)
        """Per pod slot: demand above its CFS quota in the last sub-step (CPU burst reads it)."""
        self.unmet: F64 = np.zeros((n, 1))
        """Per pod slot: the share of its demand its CFS quota cut off in the last sub-step (CPU burst orders
        throttled pods by it, as the host does by the throttled share of CFS periods)."""
        self.reserved_milli = [max(s.capacity.cpu - s.allocatable.cpu, len(r) * 1000, s.reserved.cpu)
                               for s, r in zip(nodes, reserved)]
        self.be_shares: F64 = np.full(n, 2.0)
        self.be_quota_cap: F64 = np.full(n, np.inf)
        self.be_cpuset_cap: F64 = self.cap_cpu.copy()
        self.be_idle = np.zeros(n, dtype=bool)
        self.be_mem_limit: F64 = np.full(n, np.inf)
        self.be_cpus: list[tuple[int, ...]] = [c for c in self.candidates]
        self.be_quota_us = [-1] * n
        self.candidate_sets = [frozenset(c) for c in self.candidates]
        self.be_settled = [False] * n
        self.cpuset_growth = np.array([cpuset_growth(k) for k in self.logical], dtype=np.int64)
        self._slo_arrays: SloColumns | None = None
        """Per node: the BE cpuset (all candidates) and quota −1 were read back as written, so a cpuset-policy
        round whose target size equals the current size would only re-write unchanged values (see _strategies)."""
        self.be_allowed = [-1] * n
        self.last_mem_evict: list[float | None] = [None] * n
        self.last_cpu_evict: list[float | None] = [None] * n
        self.pressure: list[PressureState] = [NO_PRESSURE] * n
        """BE memory pressure per node (strategies/memory_pressure.py); ``_watched`` the nodes whose state
        is not :data:`NO_PRESSURE` or that evicted for memory in the current sub-step."""
        self._watched: set[int] = set()
        self.be_samples: list[deque[BECPUSample]] = [deque(maxlen=window_n) for _ in nodes]
        agg_n = max(int(np.ceil(1800 / self.dt)), 1)
        self.node_cpu, self.node_mem = Ring(n, agg_n), Ring(n, agg_n)
        self.ls_demand, self.ls_served = Ring(n, window_n), Ring(n, window_n)
        self.cgroup_failures: deque[tuple[str, WriteRecord]] = deque(maxlen=64)
        for i in range(len(nodes)):
            for cg in QOS_DIRS:
                for path, text in default_files(config.cgroup_version, cg, self.logical[i]).items():
                    self.fs[i].seed(path, text)
            self._apply_cpusets(i, start)
            self._apply_be_settings(i, start)

    # ------------------------------------------------------------------ pods and policy

    def has_pod(self, uid: str) -> bool:
        """Whether pod ``uid`` runs on one of these nodes."""
        return uid in self.pods.where

    def pods_on(self, node: str) -> list[str]:
        """Uids of the pods running on ``node``."""
        i = self.index[node]
        return [uid for uid, (r, _) in self.pods.where.items() if r == i]

    def set_slo(self, slo: NodeSLO) -> bool:
        """Adopt ``slo`` for its node; False when the node is not ours."""
        i = self.index.get(slo.node)
        if i is None:
            return False
        burst_was_on = self.slos[i].cpu_burst.policy != "none"
        self.slos[i] = slo
        self._slo_arrays = None
        if burst_was_on and slo.cpu_burst.policy == "none":
            self._burst(i, self.now, float(self.cap_cpu[i]), AdvanceResult())  # back to base quotas, no burst
        self._apply_cpusets(i, self.now)
        self._apply_be_settings(i, self.now)
        self._apply_memory_qos(i, self.now)
        writes = blkio_writes(slo.blkio, self.blkio_devices[i], BESTEFFORT)
        self._record_failures(i, self.ex[i].apply(writes, at=self.now))
        self.blkio_devices[i] = tuple(d.device for d in slo.blkio.be) if slo.blkio.enabled else ()
        return True

    def start_pod(self, spec: PodSpec, node: str) -> bool:
        """Start ``spec`` on ``node`` now (creates its cgroup with kubelet settings). False when the node is
        unknown or the pod already runs here."""
        i = self.index.get(node)
        if i is None or spec.uid in self.pods.where:
            return False
        key = self.pods.add(i, spec, self.now)
        qos = self.pods.qos[key]
        cg = pod_dir(qos, spec.uid)
        for path, text in default_files(self.config.cgroup_version, cg, self.logical[i]).items():
            self.fs[i].seed(path, text)
        self.ex[i].forget(cg)
        writes = pod_settings(spec, qos)
        if qos == "BE":  # a new BE pod starts on the BE group's current cpuset
            writes.append(CgroupWrite(cg, "cpuset.cpus", cpuset_format(self.be_cpus[i]), "BE group cpuset"))
        elif qos not in ("LSE", "LSR"):  # LS pods join the share pool; only LSE/LSR pods change the allocation
            writes.append(CgroupWrite(cg, "cpuset.cpus", cpuset_format(self.share_pool[i]), "share pool"))
        self._record_failures(i, self.ex[i].apply(writes, at=self.now))
        ex = self.ex[i]
        shares, quota, period = ex.read(cg, "cpu.shares"), ex.read(cg, "cpu.cfs_quota_us"), \
            ex.read(cg, "cpu.cfs_period_us")
        limit = ex.read(cg, "memory.limit_in_bytes")
        self.pods.shares[key] = float(shares) if isinstance(shares, int) else 1024.0
        q, p = (quota if isinstance(quota, int) else -1), (period if isinstance(period, int) else 100000)
        self.pods.quota_cap[key] = q * 1000 / p if q > 0 else np.inf
        self.pods.mem_limit[key] = float(limit) if isinstance(limit, int) and limit > 0 else np.inf
        if qos == "BE":
            self._apply_be_settings(i, self.now)
        elif qos in ("LSE", "LSR"):
            self._apply_cpusets(i, self.now)
        self._apply_memory_qos(i, self.now)
        return True

    def evict_pod(self, uid: str, reason: str, message: str, at: float) -> PodEnd | None:
        """Stop pod ``uid`` as Failed with ``reason``; None when it does not run here."""
        return self._end(uid, "Failed", reason, message, at)

    def _end(self, uid: str, phase: PodPhase, reason: str, message: str, at: float) -> PodEnd | None:
        key = self.pods.where.get(uid)
        if key is None:
            return None
        qos = self.pods.qos[key]
        removed = self.pods.remove(uid)
        assert removed is not None
        i = key[0]
        cg = pod_dir(qos, uid)
        for prefix in cgroup_prefixes(self.config.cgroup_version, cg):
            self.fs[i].remove_prefix(prefix)
        self.ex[i].forget(cg)
        self.pods.cpu_used[key] = self.pods.mem_used[key] = 0.0
        self.limiters[i].pop(uid, None)
        if qos == "BE":
            self._apply_be_settings(i, at)
        elif qos in ("LSE", "LSR"):
            self._apply_cpusets(i, at)
        self._apply_memory_qos(i, at)
        return PodEnd(uid, self.names[i], phase, reason, message, at, removed[1])

    def _apply_be_settings(self, i: int, at: float) -> None:
        """Write the BE QoS-level settings of node ``i`` now (pod set or NodeSLO changed) and read them back."""
        T = self.pods
        slots = np.flatnonzero(T.active[i] & T.is_be[i]).tolist()
        writes = be_qos_settings([T.specs[(i, s)] for s in slots], self.slos[i].be_cpu_idle,
                                 min_shares=self.slos[i].be_cpu_shares == "min")
        self._record_failures(i, self.ex[i].apply(writes, at=at))
        self._reload_be([i])

    def _node_pods(self, i: int, be: bool | None = None) -> list[tuple[int, int]]:
        """Keys of the running pods of node ``i`` (only BE / only non-BE when ``be`` is set)."""
        T = self.pods
        mask = T.active[i] if be is None else (T.active[i] & (T.is_be[i] if be else ~T.is_be[i]))
        return [(i, int(s)) for s in np.flatnonzero(mask)]

    def _apply_cpusets(self, i: int, at: float) -> None:
        """LSE/LSR/LS cpusets of node ``i`` (an LSE/LSR pod came or went, or the NodeSLO changed); new share
        pool and BE candidates."""
        T = self.pods
        pods = []
        for key in self._node_pods(i, be=False):
            spec = T.specs[key]
            cur = self.ex[i].read(pod_dir(T.qos[key], spec.uid), "cpuset.cpus")
            pods.append(CpusetPod(spec.uid, T.qos[key], spec.requests.cpu,
                                  cpuset_parse(cur) if isinstance(cur, str) else ()))
        plan = plan_cpusets(pods, self.topology[i], self.reserved_cpus[i], self.slos[i].cpuset)
        self._record_failures(i, self.ex[i].apply(plan.writes, at=at))
        if plan.be_candidates != self.candidates[i]:
            self.candidates[i] = plan.be_candidates
            self.candidate_sets[i] = frozenset(plan.be_candidates)
            self.be_settled[i] = False
        self.lsr_cpus[i] = plan.lsr_cpus
        self.share_pool[i] = plan.share_pool

    def _apply_memory_qos(self, i: int, at: float) -> None:
        """memory.min/low/high of node ``i`` when memory QoS is on (or was on: reset once)."""
        policy = self.slos[i].memory_qos
        if not policy.enabled and not self.memory_qos_on[i]:
            return
        T = self.pods
        pods = []
        for key in self._node_pods(i):
            req, lim = effective_resources(T.specs[key], T.qos[key])
            pods.append(MemoryPod(T.specs[key].uid, T.qos[key], req.memory, lim.memory))
        plan = memory_qos(pods, policy, int(self.specs[i].allocatable.memory or self.cap_mem[i]), supported=True)
        self._record_failures(i, self.ex[i].apply(plan.writes, at=at))
        self.memory_qos_on[i] = policy.enabled

    def _record_failures(self, i: int, records: list[WriteRecord]) -> list[WriteRecord]:
        self.cgroup_failures.extend((self.names[i], r) for r in records if not r.ok and not r.skipped)
        return records

    def _reload_be(self, nodes: range | list[int]) -> None:
        """Read the BE QoS directory's cgroup values back into the sharing arrays."""
        for i in nodes:
            ex = self.ex[i]
            shares, quota = ex.read(BESTEFFORT, "cpu.shares"), ex.read(BESTEFFORT, "cpu.cfs_quota_us")
            period, cpus = ex.read(BESTEFFORT, "cpu.cfs_period_us"), ex.read(BESTEFFORT, "cpuset.cpus")
            idle, limit = ex.read(BESTEFFORT, "cpu.idle"), ex.read(BESTEFFORT, "memory.limit_in_bytes")
            self.be_shares[i] = float(shares) if isinstance(shares, int) else 1024.0
            q, p = (quota if isinstance(quota, int) else -1), (period if isinstance(period, int) else 100000)
            self.be_quota_us[i] = q
            self.be_quota_cap[i] = q * 1000 / p if q > 0 else np.inf
            self.be_cpus[i] = cpuset_parse(cpus) if isinstance(cpus, str) else self.candidates[i]
            self.be_cpuset_cap[i] = len(self.be_cpus[i]) * 1000.0
            self.be_idle[i] = idle == 1
            self.be_mem_limit[i] = float(limit) if isinstance(limit, int) and limit > 0 else np.inf
            self.be_settled[i] = (isinstance(cpus, str) and quota == -1 and bool(self.be_cpus[i])
                                  and self.candidate_sets[i].issuperset(self.be_cpus[i]))

    # ------------------------------------------------------------------ time

    def advance(self, now: float) -> AdvanceResult:
        """Simulate up to ``now`` in sub-steps (a last partial step when ``now`` is not on the grid).

        ``stats``: ``*_milli``/``*_bytes`` are cluster totals averaged over the advanced time
        (cpu_capacity_milli, cpu_used_milli, mem_capacity_bytes, mem_used_bytes, ls_cpu_demand_milli,
        ls_cpu_served_milli, be_cpu_used_milli); counts over the advanced time (batch_completed, be_evictions,
        oom_kills, suppress_events); pods_running at the end.
        """
        res = AdvanceResult()
        acc = dict.fromkeys(("cpu_used_milli", "mem_used_bytes", "ls_cpu_demand_milli",
                             "ls_cpu_served_milli", "be_cpu_used_milli"), 0.0)
        counts = dict.fromkeys(("batch_completed", "be_evictions", "oom_kills", "suppress_events"), 0.0)
        span = 0.0
        if now - self.now > self.config.max_gap_s:
            self.now = now - self.dt
        while now - self.now > 1e-6:
            dt = min(self.dt, now - self.now)
            sums = self._step(self.now, dt, res, counts)
            for k, v in sums.items():
                acc[k] += v * dt
            span += dt
            self.now += dt
        res.stats = {k: (v / span if span > 0 else 0.0) for k, v in acc.items()}
        res.stats.update(counts)
        res.stats["cpu_capacity_milli"] = float(self.cap_cpu.sum())
        res.stats["mem_capacity_bytes"] = float(self.cap_mem.sum())
        res.stats["pods_running"] = float(len(self.pods.where))
        return res

    def _step(self, t: float, dt: float, res: AdvanceResult, counts: dict[str, float]) -> dict[str, float]:
        T = self.pods
        cpu_dem, mem = T.demand_at(t)
        dem = np.minimum(cpu_dem, T.quota_cap)
        self.throttled = T.active & (cpu_dem > T.quota_cap)
        with np.errstate(divide="ignore", invalid="ignore"):
            self.unmet = np.where(self.throttled, 1.0 - T.quota_cap / cpu_dem, 0.0)
        ls, be = T.active & ~T.is_be, T.active & T.is_be
        avail = np.maximum(self.cap_cpu - self.sys_cpu, 0.0)
        be_cap = np.minimum(np.minimum(self.be_quota_cap, self.be_cpuset_cap), avail)
        be_dem = np.where(be, dem, 0.0)
        ls_dem = np.where(ls, dem, 0.0)
        group_dem = np.minimum(be_dem.sum(axis=1), be_cap)
        weights = np.concatenate(
            [T.shares, (self.be_shares * np.where(self.be_idle, IDLE_WEIGHT, 1.0))[:, None]], axis=1)
        alloc = water_fill(np.concatenate([ls_dem, group_dem[:, None]], axis=1), weights, avail)
        be_alloc = water_fill(be_dem, T.shares, alloc[:, -1])
        T.cpu_used = np.where(ls, alloc[:, :-1], 0.0) + be_alloc
        T.demand = dem
        T.mem_used = mem
        at = t + dt
        self._oom(at, res, counts)
        self._memory_evictions(at, res, counts)
        self._oom_node(at, res, counts)
        self._batch_progress(t, dt, res, counts)
        ls, be = T.active & ~T.is_be, T.active & T.is_be
        ls_used = np.where(ls, T.cpu_used, 0.0).sum(axis=1)
        be_used = np.where(be, T.cpu_used, 0.0).sum(axis=1)
        node_cpu = self.sys_cpu + ls_used + be_used
        node_mem = self.sys_mem + np.where(T.active, T.mem_used, 0.0).sum(axis=1)
        ls_demand = np.where(ls, dem, 0.0).sum(axis=1)
        T.record()
        self.node_cpu.push(node_cpu)
        self.node_mem.push(node_mem)
        self.ls_demand.push(ls_demand)
        self.ls_served.push(ls_used)
        self._strategies(at, node_cpu, node_mem, ls_used, be_used, be_cap, res, counts)
        self._observe_pressure(at, node_mem, res)
        return {"cpu_used_milli": float(node_cpu.sum()), "mem_used_bytes": float(node_mem.sum()),
                "ls_cpu_demand_milli": float(ls_demand.sum()), "ls_cpu_served_milli": float(ls_used.sum()),
                "be_cpu_used_milli": float(be_used.sum())}

    def _kill(self, key: tuple[int, int], message: str, at: float, res: AdvanceResult,
              counts: dict[str, float]) -> None:
        uid = self.pods.specs[key].uid
        end = self._end(uid, "Failed", "OOMKilled", message, at)
        if end is not None:
            res.ended.append(end)
            res.events.append(QoSEvent(node=end.node, kind="oom", at=at, reason=message, pods=[uid]))
            counts["oom_kills"] += 1

    def _oom(self, at: float, res: AdvanceResult, counts: dict[str, float]) -> None:
        """cgroup-limit OOM: a pod above its own memory limit (any class), then BE pods while the BE group is
        above its limit (largest first). Node-capacity OOM is :meth:`_oom_node`, after memory eviction."""
        T = self.pods
        for key in zip(*np.nonzero(T.active & (T.mem_used > T.mem_limit))):
            k = (int(key[0]), int(key[1]))
            self._kill(k, f"memory {int(T.mem_used[k])} > limit {int(T.mem_limit[k])}", at, res, counts)
        be_mem = np.where(T.active & T.is_be, T.mem_used, 0.0).sum(axis=1)
        self._oom_rows(np.flatnonzero(be_mem > self.be_mem_limit), "be", at, res, counts)

    def _memory_evictions(self, at: float, res: AdvanceResult, counts: dict[str, float]) -> None:
        """BE memory eviction (REFERENCE.md §5) on this sub-step's memory, before the node-capacity OOM check.

        A series sample (300 s in the traces) changes memory at once in the sim, while the reference's agent
        polls every second: an LS pod that grows by more than the node's free memory within one sample is
        seen crossing the eviction threshold long before the node is full. Running the memory eviction
        before :meth:`_oom_node` models that; only what eviction cannot free (no BE memory left, eviction
        off or in cool-down) ends in OOM. The later eviction pass of :meth:`_strategies` then finds the node
        below the threshold or in cool-down.
        """
        T = self.pods
        col = self._slo_columns()
        node_mem = self.sys_mem + np.where(T.active, T.mem_used, 0.0).sum(axis=1)
        due = col["mem_evict"] & (node_mem * 100 >= col["mem_threshold"] * self.cap_mem)
        for i in np.flatnonzero(due).tolist():
            me = self.slos[i].memory_evict
            plan = memory_evict(int(self.cap_mem[i]), int(node_mem[i]), self._views(i), me,
                                last_evict_at=self.last_mem_evict[i], now=at)
            self._apply_evictions(i, at, "memory", plan, res, counts)

    def _oom_node(self, at: float, res: AdvanceResult, counts: dict[str, float]) -> None:
        """Node-capacity OOM: BE pods largest first while system + pods memory exceeds capacity."""
        T = self.pods
        mem = np.where(T.active, T.mem_used, 0.0)
        self._oom_rows(np.flatnonzero(self.sys_mem + mem.sum(axis=1) > self.cap_mem), "node", at, res, counts)

    def _oom_rows(self, rows: npt.NDArray[np.intp], check: str, at: float, res: AdvanceResult,
                  counts: dict[str, float]) -> None:
        """OOM-kill BE pods of nodes ``rows``, largest first, while the node (``check`` "node") or the BE
        group (``check`` "be") is above its memory capacity/limit."""
        T = self.pods
        for i in rows:
            while True:
                row_mem = np.where(T.active[i], T.mem_used[i], 0.0)
                be_row = np.where(T.is_be[i] & T.active[i], T.mem_used[i], -1.0)
                if check == "node":
                    over = self.sys_mem[i] + row_mem.sum() - self.cap_mem[i]
                    what = "node memory over capacity"
                else:
                    over = be_row.clip(0).sum() - self.be_mem_limit[i]
                    what = "BE memory over limit"
                if over <= 0 or be_row.max() < 0:
                    break
                self._kill((int(i), int(np.argmax(be_row))), what, at, res, counts)

    def _batch_progress(self, t: float, dt: float, res: AdvanceResult, counts: dict[str, float]) -> None:
        T = self.pods
        b = T.active & T.is_batch
        with np.errstate(divide="ignore", invalid="ignore"):
            rate = np.where(T.const_cpu > 0, np.minimum(T.cpu_used / T.const_cpu, 1.0), 1.0)
        rate = np.where(b, rate, 0.0)
        done = b & (T.work_left_s <= rate * dt + 1e-9)
        T.work_left_s = np.where(b, T.work_left_s - rate * dt, T.work_left_s)
        for key in zip(*np.nonzero(done)):
            k = (int(key[0]), int(key[1]))
            left, r = float(T.work_left_s[k]) + float(rate[k]) * dt, float(rate[k])
            at = t + (left / r if r > 0 else dt)
            end = self._end(T.specs[k].uid, "Succeeded", "Completed", "", float(min(at, t + dt)))
            if end is not None:
                res.ended.append(end)
                counts["batch_completed"] += 1

    def _views(self, i: int, be_only: bool = True) -> list[PodView]:
        T = self.pods
        out: list[PodView] = []
        for s in np.flatnonzero(T.active[i] & (T.is_be[i] if be_only else True)):
            key = (i, int(s))
            spec = T.specs[key]
            req, lim = effective_resources(spec, T.qos[key])
            out.append(PodView(spec.uid, T.qos[key], int(T.priority[key]), int(T.cpu_used[key]),
                               int(T.mem_used[key]), req.cpu, req.memory, lim.cpu, lim.memory))
        return out

    def _slo_columns(self) -> SloColumns:
        """Per-node NodeSLO fields the strategies test every sub-step, as arrays (rebuilt when a NodeSLO changes)."""
        if self._slo_arrays is None:
            sup = [s.cpu_suppress for s in self.slos]
            me = [s.memory_evict for s in self.slos]
            self._slo_arrays = {
                "cpuset": np.array([p.enabled and p.policy == "cpuset" for p in sup], dtype=bool),
                "threshold": np.array([p.threshold_percent for p in sup], dtype=np.int64),
                "min": np.array([p.min_percent for p in sup], dtype=np.int64),
                "cpu_evict": np.array([s.cpu_evict.enabled for s in self.slos], dtype=bool),
                "mem_evict": np.array([m.enabled for m in me], dtype=bool),
                "mem_threshold": np.array([m.threshold_percent for m in me], dtype=np.float64),
                "reserved": np.array(self.reserved_milli, dtype=np.int64),
                "burst": np.array([s.cpu_burst.policy != "none" for s in self.slos], dtype=bool),
            }
        return self._slo_arrays

    def _strategies(self, at: float, node_cpu: F64, node_mem: F64, ls_used: F64, be_used: F64, be_cap: F64,
                    res: AdvanceResult, counts: dict[str, float]) -> None:
        """Suppress, then the eviction strategies, node by node (in node order).

        Fast path: a cpuset-policy node whose BE cpuset (all candidates) and quota −1 were read back as written
        and whose target cpuset size equals its current size would only re-write unchanged values (skipped by
        the executor, no record kept, no event); its budget is taken from the vectorized BEAllowed instead.
        """
        col = self._slo_columns()
        cap_i = self.cap_cpu.astype(np.int64)
        allowed = be_cpu_allowed_many(cap_i, node_cpu.astype(np.int64), ls_used.astype(np.int64),
                                      be_used.astype(np.int64), col["reserved"], col["threshold"], col["min"])
        cur = np.array([len(c) for c in self.be_cpus], dtype=np.int64)
        fast = col["cpuset"] & np.array(self.be_settled, dtype=bool) & (
            cpuset_size_many(allowed, cur, self.cpuset_growth) == cur)
        evict = col["cpu_evict"] | (col["mem_evict"] & (node_mem * 100 >= col["mem_threshold"] * self.cap_mem))
        allowed_l, fast_l = allowed.tolist(), fast.tolist()
        self.be_allowed = [a if f else b for a, f, b in zip(allowed_l, fast_l, self.be_allowed)]
        for i in np.flatnonzero(col["burst"]).tolist():
            self._burst(i, at, float(node_cpu[i]), res)
        todo = np.flatnonzero(~fast | evict).tolist()
        if not todo:
            return
        ncpu, nmem, lsu, beu = node_cpu.tolist(), node_mem.tolist(), ls_used.tolist(), be_used.tolist()
        cap, be_cap_l, evict_l = self.cap_cpu.tolist(), be_cap.tolist(), evict.tolist()
        for i in todo:
            if not fast_l[i]:
                self._suppress(i, at, SuppressInput(int(cap[i]), int(ncpu[i]), int(lsu[i]), int(beu[i]),
                                                    node_reserved=self.reserved_milli[i]), res, counts)
            if evict_l[i]:
                self._evictions(i, at, nmem[i], be_cap_l[i], beu[i], res, counts)

    def _suppress(self, i: int, at: float, inp: SuppressInput, res: AdvanceResult, counts: dict[str, float]) -> None:
        """Plan and apply CPU suppress on node ``i``; a QoS event when the BE cpuset or quota changed."""
        policy = self.slos[i].cpu_suppress
        be_pods = tuple(pod_dir("BE", self.pods.specs[k].uid) for k in self._node_pods(i, be=True))
        state = SuppressState(self.logical[i], self.candidates[i], self.be_cpus[i], self.be_quota_us[i],
                              topology=self.topology[i], lsr_cpus=self.lsr_cpus[i], be_pods=be_pods)
        plan = suppress(inp, policy, state)
        records = self._record_failures(i, self.ex[i].apply(plan.writes, at=at))
        changed = [r for r in records if r.ok and not r.skipped]
        if changed:
            self._reload_be([i])
        if any(not r.ok for r in records):
            self.be_settled[i] = False
        if plan.be_cpu_allowed != self.be_allowed[i] and any(
                r.resource in ("cpuset.cpus", "cpu.cfs_quota_us") for r in changed):
            res.events.append(QoSEvent(node=self.names[i], kind="suppress", at=at, reason=policy.policy,
                                       detail={"be_cpu_allowed_milli": plan.be_cpu_allowed,
                                               "be_cpus": len(self.be_cpus[i]),
                                               "be_quota_us": self.be_quota_us[i]}))
            counts["suppress_events"] += 1
        self.be_allowed[i] = plan.be_cpu_allowed

    def _burst(self, i: int, at: float, node_cpu: float, res: AdvanceResult) -> None:
        """CPU burst quota scaling on node ``i`` (REFERENCE.md §5): throttled LS pods (demand above their quota
        this sub-step) get more quota while the share pool is idle; the new quotas cap their demand from the next
        sub-step. ``cfs_burst_us`` is written too but has no effect in a steady-state sharing model."""
        T = self.pods
        policy = self.slos[i].cpu_burst
        keys = self._node_pods(i)
        views = self._views(i, be_only=False)
        pool = share_pool(self.logical[i], int(node_cpu), [SharePoolPod(v.qos, v.cpu_request, v.cpu_used)
                                                            for v in views])
        pods = []
        for key, v in zip(keys, views):
            if v.qos != "LS" or v.cpu_limit <= 0:
                continue
            cg = pod_dir(v.qos, v.uid)
            quota = self.ex[i].read(cg, "cpu.cfs_quota_us")
            pods.append(BurstPod(v.uid, cg, v.qos, v.cpu_limit, quota if isinstance(quota, int) else -1,
                                 bool(self.throttled[key]), v.cpu_used, float(self.unmet[key])))
        if not pods:
            return
        plan = cpu_burst(pods, pool, policy, self.limiters[i], at, unthrottled_rounds=self.unthrottled_rounds[i])
        self.limiters[i] = plan.limiters
        self.unthrottled_rounds[i] = plan.unthrottled_rounds
        state = plan.state
        records = self._record_failures(i, self.ex[i].apply(plan.writes, at=at))
        changed = [r for r in records if r.ok and not r.skipped and r.resource == "cpu.cfs_quota_us"]
        for r in changed:
            key = T.where[r.cgroup.rsplit("/pod", 1)[1]]
            T.quota_cap[key] = int(r.new) * 1000 / DEFAULT_PERIOD_US if int(r.new) > 0 else np.inf
        if changed:
            res.events.append(QoSEvent(node=self.names[i], kind="burst", at=at, reason=f"share pool {state}",
                                       pods=[r.cgroup.rsplit("/pod", 1)[1] for r in changed],
                                       detail={"pods_scaled": len(changed)}))

    def _evictions(self, i: int, at: float, node_mem: float, be_limit: float, be_used: float,
                   res: AdvanceResult, counts: dict[str, float]) -> None:
        slo = self.slos[i]
        plans = []
        me = slo.memory_evict
        if me.enabled and node_mem * 100 >= me.threshold_percent * self.cap_mem[i]:
            plans.append(("memory", memory_evict(int(self.cap_mem[i]), int(node_mem), self._views(i), me,
                                                 last_evict_at=self.last_mem_evict[i], now=at)))
        ce = slo.cpu_evict
        if ce.enabled:
            views = self._views(i)
            sample = BECPUSample(int(be_limit), int(be_used), sum(v.cpu_request for v in views))
            self.be_samples[i].append(sample)
            window = window_average(list(self.be_samples[i]), self.dt, ce)
            plans.append(("cpu", cpu_evict(window, sample, views, ce, self.last_cpu_evict[i], at)))
        for kind, plan in plans:
            self._apply_evictions(i, at, kind, plan, res, counts)

    def _apply_evictions(self, i: int, at: float, kind: str, plan: EvictPlan, res: AdvanceResult,
                         counts: dict[str, float]) -> None:
        """End the victims of ``plan`` (``kind`` memory/cpu) on node ``i``; start the cool-down; one event."""
        victims = []
        for ev in plan.evictions:
            end = self._end(ev.uid, "Failed", ev.reason, ev.message, at)
            if end is not None:
                res.ended.append(end)
                victims.append(ev.uid)
        if victims:
            counts["be_evictions"] += len(victims)
            if kind == "memory":
                self.last_mem_evict[i] = at
                self._watched.add(i)
            else:
                self.last_cpu_evict[i] = at
            res.events.append(QoSEvent(node=self.names[i], kind="evict", at=at, reason=f"BE {kind} eviction",
                                       pods=victims, detail={"release": plan.release}))

    def _observe_pressure(self, at: float, node_mem: F64, res: AdvanceResult) -> None:
        """BE memory pressure after this sub-step's memory and evictions, for the nodes at or above their
        eviction threshold, under pressure already, or that evicted for memory now; a node whose pressure
        begins is named in ``res.pressure_started``."""
        col = self._slo_columns()
        near = np.flatnonzero(col["mem_evict"] & (node_mem * 100 >= col["mem_threshold"] * self.cap_mem))
        for i in self._watched.union(near.tolist()):
            state = observe(self.pressure[i], at, int(node_mem[i]), int(self.cap_mem[i]), self.slos[i].memory_evict,
                            evicted=self.last_mem_evict[i] == at)
            if self.pressure[i].since is None and state.since is not None:
                res.pressure_started.append(self.names[i])
            self.pressure[i] = state
            if state == NO_PRESSURE:
                self._watched.discard(i)
            else:
                self._watched.add(i)

    # ------------------------------------------------------------------ reports

    def node_metrics(self, at: float) -> list[NodeMetric]:
        """One NodeMetric per node: usage averaged over the last ``window_s`` (REFERENCE.md §2)."""
        T = self.pods
        n = self.window_n
        cpu, mem = self.node_cpu.mean(n).tolist(), self.node_mem.mean(n).tolist()
        mem_now = self.node_mem.last(1)[:, -1].tolist() if self.node_mem.count else [0.0] * len(self.names)
        pod_cpu, pod_mem = T.window_usage()
        lsd, lss = self.ls_demand.mean(n).tolist(), self.ls_served.mean(n).tolist()
        agg = aggregated(self.node_cpu, self.node_mem, self.dt)
        per_node: list[list[PodMetric]] = [[] for _ in self.names]
        pods_cpu = [0.0] * len(self.names)
        pods_mem = [0.0] * len(self.names)
        for uid, key in T.where.items():
            c, m = float(pod_cpu[key]), float(pod_mem[key])
            per_node[key[0]].append(PodMetric(uid=uid, cpu=int(c), memory=int(m), qos_class=T.qos[key],
                                              priority_class=T.prio_class[key]))
            pods_cpu[key[0]] += c
            pods_mem[key[0]] += m
        out = []
        for i, name in enumerate(self.names):
            out.append(NodeMetric(
                node=name, at=at, window_s=float(min(self.node_cpu.count, n) * self.dt),
                node_usage=Usage(cpu=int(cpu[i]), memory=int(mem[i])),
                system_usage=Usage(cpu=int(max(cpu[i] - pods_cpu[i], 0)), memory=int(max(mem[i] - pods_mem[i], 0))),
                pods=per_node[i], aggregated=agg[i], be_cpu_allowed=self.be_allowed[i],
                ls_cpu_demand=int(lsd[i]), ls_cpu_served=int(lss[i]),
                memory_pressure=condition(self.pressure[i], int(mem_now[i]), int(self.cap_mem[i]),
                                          self.slos[i].memory_evict)))
        return out

    def debug(self) -> dict[str, object]:
        """A summary per node for /debug/state."""
        return {name: {"pods": len(self.pods_on(name)), "be_cpu_allowed": self.be_allowed[i],
                       "be_cpus": len(self.be_cpus[i]), "be_quota_us": self.be_quota_us[i],
                       "be_idle": bool(self.be_idle[i]), "cgroup_writes": self.ex[i].written,
                       "cgroup_failures": self.ex[i].failed}
                for i, name in enumerate(self.names)}
