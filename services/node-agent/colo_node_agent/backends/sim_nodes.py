"""The node model of the ``sim`` backend: per-node state (capacity, cgroup tree, BE group, cpusets, metric
rings) and the cgroup settings that follow the pod set and the NodeSLO (docs/node-agent.md).

A pod set or NodeSLO change is written through each node's :class:`Executor` and read back into the arrays
the CPU and memory sharing of :mod:`.sim` interpret.
"""


from __future__ import annotations

from collections import deque
from typing import Callable

import numpy as np

from colo.messages import NodeSLO, NodeSpec, PodPhase
from colo_node_agent.backends.gpus import GpuLedger
from colo_node_agent.backends.sim_interference import SimInterference
from colo_node_agent.backends.sim_pods import BOOL, F64, PodTable
from colo_node_agent.backends.sim_types import PodEnd, SimConfig, SloColumns
from colo_node_agent.cgroups.executor import Executor, WriteRecord
from colo_node_agent.cgroups.fs import MemoryFS, cgroup_prefixes, default_files
from colo_node_agent.cgroups.layout import BESTEFFORT, QOS_DIRS, pod_dir
from colo_node_agent.cgroups.resources import cpuset_parse
from colo_node_agent.strategies.be_budget import BudgetArrays, allowed_rise
from colo_node_agent.strategies.cgroup_settings import be_qos_settings, effective_resources
from colo_node_agent.strategies.cpu_burst import Limiter
from colo_node_agent.strategies.cpu_evict import BECPUSample
from colo_node_agent.strategies.cpu_suppress import (
    cpuset_growth,
)
from colo_node_agent.strategies.cpusets import CpusetPod, plan_cpusets
from colo_node_agent.strategies.memory_pressure import NO_PRESSURE, PressureState
from colo_node_agent.strategies.memory_qos import MemoryPod, memory_qos
from colo_node_agent.strategies.types import PodView
from colo_node_agent.topology import CPUTopology
from colo_node_agent.windows import Ring


class SimNodes:
    """State of virtual nodes ``nodes`` starting at time ``start`` seconds; ``default_slo(node)`` until a NodeSLO
    arrives. CPU in milli-cores, memory in bytes; arrays of shape ``(nodes,)`` or ``(nodes, pod slots)``."""

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
        # the registered topology when it covers the node's CPUs, else one core per CPU
        self.topology = [CPUTopology.of(s.topology) if len(s.topology.cpus) == k else CPUTopology.flat(k)
                         for s, k in zip(nodes, self.logical)]
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
        self.gpus = [GpuLedger.of(list(s.gpus)) for s in nodes]
        """Per node: the GPUs the running pods hold (the invariant the sim enforces, docs/gpu.md)."""
        self.device_refusals: list[PodEnd] = []
        """Pods refused at start because their devices break the invariant, reported by the next advance."""
        """Per node: the BE cpuset (all candidates) and quota −1 were read back as written, so a cpuset-policy
        round whose target size equals the current size would only re-write unchanged values (see _strategies)."""
        self.be_allowed = [-1] * n
        self.last_mem_evict: list[float | None] = [None] * n
        self.last_cpu_evict: list[float | None] = [None] * n
        self.pressure: list[PressureState] = [NO_PRESSURE] * n
        """BE memory pressure per node (strategies/memory_pressure.py); ``_watched`` the nodes whose state
        is not :data:`NO_PRESSURE` or that evicted for memory in the current sub-step."""
        self._watched: set[int] = set()
        self.budget = BudgetArrays.initial(np.array([float(s.cpu_suppress.threshold_percent) for s in self.slos]),
                                           start)
        """The SLO-driven BE budget of every node (strategies/be_budget.py); rows of nodes with it off are unused."""
        self.be_samples: list[deque[BECPUSample]] = [deque(maxlen=window_n) for _ in nodes]
        agg_n = max(int(np.ceil(1800 / self.dt)), 1)
        self.node_cpu, self.node_mem = Ring(n, agg_n), Ring(n, agg_n)
        self.ls_demand, self.ls_served = Ring(n, window_n), Ring(n, window_n)
        self.interference = SimInterference(n, window_n, config.interference)
        """Modelled LS harm and interference signals per node (:mod:`.sim_interference`)."""
        self.cgroup_failures: deque[tuple[str, WriteRecord]] = deque(maxlen=64)
        for i in range(len(nodes)):
            for cg in QOS_DIRS:
                for path, text in default_files(config.cgroup_version, cg, self.logical[i]).items():
                    self.fs[i].seed(path, text)
            self._apply_cpusets(i, start)
            self._apply_be_settings(i, start)

    def ls_signal(self, kind: str) -> F64:
        """Per node ``(nodes,)``: the LS pods' modelled interference signal ``kind`` (``runq_wait``,
        ``cpu_pressure``, ``cpi`` or ``latency_inflation``) in the last sub-step; −1 where unknown (no model, no LS
        pod, or a signal the calibration lacks). Raises ValueError for another kind
        (:meth:`SimInterference.ls_signal`)."""
        return self.interference.ls_signal(kind)

    def _end(self, uid: str, phase: PodPhase, reason: str, message: str, at: float) -> PodEnd | None:
        key = self.pods.where.get(uid)
        if key is None:
            return None
        qos = self.pods.qos[key]
        removed = self.pods.remove(uid)
        assert removed is not None
        i = key[0]
        self.gpus[i].remove(uid)
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
                                  cpuset_parse(cur) if isinstance(cur, str) else (), T.assigned.get(key, ())))
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
            bb = [s.be_budget for s in self.slos]
            self._slo_arrays = {
                "cpuset": np.array([p.enabled and p.policy == "cpuset" for p in sup], dtype=bool),
                "threshold": np.array([p.threshold_percent for p in sup], dtype=np.int64),
                "min": np.array([p.min_percent for p in sup], dtype=np.int64),
                "cpu_evict": np.array([s.cpu_evict.enabled for s in self.slos], dtype=bool),
                "mem_evict": np.array([m.enabled for m in me], dtype=bool),
                "mem_threshold": np.array([m.threshold_percent for m in me], dtype=np.float64),
                "reserved": np.array(self.reserved_milli, dtype=np.int64),
                "burst": np.array([s.cpu_burst.policy != "none" for s in self.slos], dtype=bool),
                "budget": np.array([b.enabled for b in bb], dtype=bool),
                "budget_target": np.array([b.target_increase_percent for b in bb], dtype=np.float64),
                "budget_max": np.array([b.max_percent for b in bb], dtype=np.float64),
                "budget_step": np.array([b.step_percent for b in bb], dtype=np.float64),
                "budget_hold": np.array([b.hold_s for b in bb], dtype=np.float64),
                "budget_noise": np.array([allowed_rise(b) for b in bb], dtype=np.float64),
                "budget_signal": np.array([b.signal for b in bb], dtype=np.str_),
            }
        return self._slo_arrays
