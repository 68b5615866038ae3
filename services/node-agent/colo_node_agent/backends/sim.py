"""The ``sim`` backend: many virtual nodes in one process (DESIGN.md §6; docs/node-agent.md).

Each node has its own in-memory cgroup tree written through the same :class:`Executor` and strategies a real
node uses; CPU and memory sharing *interpret* what is in the tree:

* CPU per sub-step: pods' demand (PodSpec.sim) capped by their CFS quota; LS pods and the BE group share
  capacity − system by weighted max-min fairness on ``cpu.shares`` (the BE group weighs its QoS directory's
  shares and is capped by its quota and cpuset size × 1000); with ``cpu.idle`` = 1 the BE group only gets what
  LS pods leave. Inside the BE group pods share by their own shares.
* Interference (:mod:`.sim_interference`, with a calibration table): the BE cores used on a node inflate its
  LS pods' latency as the table measured for that load and isolation; an LS pod is served
  1 / (1 + p50 inflation) of its share and reports the modelled p99 inflation and signals.
* Memory: LS pods follow their series, BE pods hold their memory; a pod above its memory limit, the BE group
  above its limit, or the node above capacity → OOM-kill (BE pods largest first; reason OOMKilled).
* Batch pods complete after ``duration_s`` seconds of full service (slower when served less).

Time advances in sub-steps of ``sub_step_s`` seconds inside each tick and the strategies run after every
sub-step (the reference runs them every second: with 10 s sub-steps reactions are up to 10 s late).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from colo.messages import BEBudgetState, NodeMetric, NodeSLO, PodMetric, PodSpec, QoSEvent, Usage
from colo_node_agent.backends.sharing import water_fill
from colo_node_agent.backends.sim_interference import STAT_KEYS as HARM_KEYS
from colo_node_agent.backends.sim_strategies import BUDGET_FIELDS, SimStrategies
from colo_node_agent.backends.sim_types import AdvanceResult, PodEnd, SimConfig, SloColumns
from colo_node_agent.cgroups.executor import CgroupWrite
from colo_node_agent.cgroups.fs import default_files
from colo_node_agent.cgroups.layout import BESTEFFORT, pod_dir
from colo_node_agent.cgroups.resources import cpuset_format
from colo_node_agent.strategies.be_budget import BudgetArrays, budget_debug
from colo_node_agent.strategies.blkio import blkio_writes
from colo_node_agent.strategies.cgroup_settings import pod_settings
from colo_node_agent.strategies.memory_evict import memory_evict
from colo_node_agent.strategies.memory_pressure import condition
from colo_node_agent.windows import aggregated

IDLE_WEIGHT = 1e-9
"""Relative weight of a ``cpu.idle`` group: it gets (practically) nothing while non-idle groups want more."""


__all__ = ["IDLE_WEIGHT", "AdvanceResult", "PodEnd", "SimBackend", "SimConfig", "SloColumns"]
"""The backend and the value types its callers use (defined in :mod:`.sim_types`)."""


class SimBackend(SimStrategies):
    """Virtual nodes ``nodes`` starting at time ``start`` seconds; ``default_slo(node)`` until a NodeSLO arrives."""

    # ------------------------------------------------------------------ pods and policy

    def has_pod(self, uid: str) -> bool:
        """Whether pod ``uid`` runs on one of these nodes."""
        return uid in self.pods.where

    def pods_on(self, node: str) -> list[str]:
        """Uids of the pods running on ``node``."""
        i = self.index[node]
        return [uid for uid, (r, _) in self.pods.where.items() if r == i]

    def running(self, node: str) -> list[PodSpec]:
        """Specs of the pods running on ``node``."""
        i = self.index[node]
        return [self.pods.specs[key] for key in self.pods.where.values() if key[0] == i]

    def set_slo(self, slo: NodeSLO) -> bool:
        """Adopt ``slo`` for its node; False when the node is not ours."""
        i = self.index.get(slo.node)
        if i is None:
            return False
        burst_was_on = self.slos[i].cpu_burst.policy != "none"
        old = self.slos[i].be_budget
        if slo.be_budget.enabled and (not old.enabled or old.signal != slo.be_budget.signal):
            # switched on, or another signal (a baseline in other units): start at the floor, learn anew
            fresh = BudgetArrays.initial(np.array([float(slo.cpu_suppress.threshold_percent)]), self.now)
            for f in BUDGET_FIELDS:
                getattr(self.budget, f)[i] = getattr(fresh, f)[0]
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

    def start_pod(self, spec: PodSpec, node: str, cpuset: tuple[int, ...] = (),
                  devices: tuple[tuple[int, int], ...] = ()) -> bool:
        """Start ``spec`` on ``node`` now (creates its cgroup with kubelet settings); ``cpuset`` the CPUs the
        scheduler chose for an LSE/LSR pod (applied when valid, docs/topology.md); ``devices`` the GPUs it
        assigned ((index, milli-GPU), ...). A pod whose devices are not GPUs of the node, would take a GPU over
        100 %, or that requests GPUs and got none, is refused: the next :meth:`advance` reports it Failed with
        reason ``UnexpectedAdmissionError`` (the kubelet's for unavailable devices) and it holds nothing. False
        when the node is unknown or the pod already runs here."""
        i = self.index.get(node)
        if i is None or spec.uid in self.pods.where:
            return False
        problems = self.gpus[i].problems(tuple(devices))
        if spec.gpu is not None and not devices:
            problems.append(f"requests {spec.gpu.count} GPU(s) of {spec.gpu.milli} milli but was bound without devices")
        if problems:
            self.device_refusals.append(PodEnd(spec.uid, node, "Failed", "UnexpectedAdmissionError",
                                               "devices: " + "; ".join(problems), self.now, spec))
            return True
        self.gpus[i].add(spec.uid, tuple(devices))
        key = self.pods.add(i, spec, self.now)
        if cpuset:
            self.pods.assigned[key] = tuple(cpuset)
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

    # ------------------------------------------------------------------ time

    def advance(self, now: float) -> AdvanceResult:
        """Simulate up to ``now`` in sub-steps (a last partial step when ``now`` is not on the grid).

        ``stats``: ``*_milli``/``*_bytes`` are cluster totals averaged over the advanced time
        (cpu_capacity_milli, cpu_used_milli, mem_capacity_bytes, mem_used_bytes, ls_cpu_demand_milli,
        ls_cpu_served_milli, be_cpu_used_milli); the modelled interference over LS pods averaged over the
        advanced time (ls_p99_inflation_mean_pct, ls_p99_inflation_max_pct, ls_runq_wait_ratio,
        ls_cpu_pressure_some: :data:`.sim_interference.STAT_KEYS`); counts over the advanced time (batch_completed,
        be_evictions, oom_kills, suppress_events); pods_running and gpu_held_milli (Σ milli-GPU the running pods
        hold, from the nodes' GPU ledgers) at the end.
        """
        res = AdvanceResult()
        res.ended.extend(self.device_refusals)
        self.device_refusals.clear()
        acc = dict.fromkeys(("cpu_used_milli", "mem_used_bytes", "ls_cpu_demand_milli",
                             "ls_cpu_served_milli", "be_cpu_used_milli", *HARM_KEYS), 0.0)
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
        res.stats["gpu_held_milli"] = float(sum(sum(ledger.used.values()) for ledger in self.gpus))
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
        ls_pods = ls.sum(axis=1).astype(np.float64)
        served = self.interference.step(be_alloc.sum(axis=1), self.cap_cpu, self.be_idle, ls_pods > 0)
        T.cpu_used = np.where(ls, alloc[:, :-1] * served[:, None], 0.0) + be_alloc
        harm = self.interference.sums(ls_pods)
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
                "be_cpu_used_milli": float(be_used.sum()), **harm}

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
        signals = self.interference.window()
        per_node: list[list[PodMetric]] = [[] for _ in self.names]
        pods_cpu = [0.0] * len(self.names)
        pods_mem = [0.0] * len(self.names)
        for uid, key in T.where.items():
            c, m = float(pod_cpu[key]), float(pod_mem[key])
            qos = T.qos[key]
            per_node[key[0]].append(PodMetric(uid=uid, cpu=int(c), memory=int(m), qos_class=qos,
                                              priority_class=T.prio_class[key],
                                              interference=None if qos == "BE" else signals[key[0]]))
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
                                          self.slos[i].memory_evict),
                be_budget=self.be_budget_of(i)))
        return out

    def be_budget_of(self, i: int) -> BEBudgetState | None:
        """Node ``i``'s BE budget after the last sub-step (what its NodeMetric carries); None while it is off."""
        return self.budget.state(i) if self.slos[i].be_budget.enabled else None

    def debug(self) -> dict[str, object]:
        """A summary per node for /debug/state; ``be_budget`` every field of the node's BE budget
        (:func:`~colo_node_agent.strategies.be_budget.budget_debug`), None while it is off."""
        return {name: {"pods": len(self.pods_on(name)), "be_cpu_allowed": self.be_allowed[i],
                       "be_cpus": len(self.be_cpus[i]), "be_quota_us": self.be_quota_us[i],
                       "be_idle": bool(self.be_idle[i]), "be_budget": budget_debug(self.be_budget_of(i)),
                       "cgroup_writes": self.ex[i].written, "cgroup_failures": self.ex[i].failed}
                for i, name in enumerate(self.names)}
