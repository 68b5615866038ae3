"""Node agent strategies on the ``sim`` backend's nodes after every sub-step (REFERENCE.md §5): CPU suppress
(with its fast path), CPU burst, BE memory and CPU eviction, and BE memory pressure (docs/node-agent.md)."""


from __future__ import annotations

import msgspec
import numpy as np

from colo.messages import QoSEvent
from colo_node_agent.backends.sim_nodes import SimNodes
from colo_node_agent.backends.sim_pods import F64, I64
from colo_node_agent.backends.sim_types import AdvanceResult, SloColumns
from colo_node_agent.cgroups.layout import pod_dir
from colo_node_agent.cgroups.resources import DEFAULT_PERIOD_US
from colo_node_agent.strategies.be_budget import NOISE_FLOOR, BudgetArrays, budget_detail, step_many
from colo_node_agent.strategies.cpu_burst import BurstPod, SharePoolPod, cpu_burst, share_pool
from colo_node_agent.strategies.cpu_evict import BECPUSample, cpu_evict, window_average
from colo_node_agent.strategies.cpu_suppress import (
    SuppressInput,
    SuppressState,
    be_cpu_allowed_many,
    cpuset_size_many,
    suppress,
)
from colo_node_agent.strategies.memory_evict import memory_evict
from colo_node_agent.strategies.memory_pressure import NO_PRESSURE, observe
from colo_node_agent.strategies.types import EvictPlan

BUDGET_FIELDS = ("threshold", "phase", "since", "baseline", "samples", "cut_at", "signal", "cut_from")
"""The fields of :class:`BudgetArrays`, in order."""


class SimStrategies(SimNodes):
    """The strategies run node by node on :class:`SimNodes`; the QoS events and evictions go into the
    sub-step's :class:`AdvanceResult`."""

    def _strategies(self, at: float, node_cpu: F64, node_mem: F64, ls_used: F64, be_used: F64, be_cap: F64,
                    res: AdvanceResult, counts: dict[str, float]) -> None:
        """Suppress, then the eviction strategies, node by node (in node order).

        Fast path: a cpuset-policy node whose BE cpuset (all candidates) and quota −1 were read back as written
        and whose target cpuset size equals its current size would only re-write unchanged values (skipped by
        the executor, no record kept, no event); its budget is taken from the vectorized BEAllowed instead.
        """
        col = self._slo_columns()
        cap_i = self.cap_cpu.astype(np.int64)
        threshold, moved = col["threshold"], set[int]()
        if col["budget"].any():
            threshold, moved = self._budget(at, be_used, col)
        allowed = be_cpu_allowed_many(cap_i, node_cpu.astype(np.int64), ls_used.astype(np.int64),
                                      be_used.astype(np.int64), col["reserved"], threshold, col["min"])
        cur = np.array([len(c) for c in self.be_cpus], dtype=np.int64)
        fast = col["cpuset"] & np.array(self.be_settled, dtype=bool) & (
            cpuset_size_many(allowed, cur, self.cpuset_growth) == cur)
        evict = col["cpu_evict"] | (col["mem_evict"] & (node_mem * 100 >= col["mem_threshold"] * self.cap_mem))
        allowed_l, fast_l = allowed.tolist(), fast.tolist()
        self.be_allowed = [a if f else b for a, f, b in zip(allowed_l, fast_l, self.be_allowed)]
        for i in np.flatnonzero(col["burst"]).tolist():
            self._burst(i, at, float(node_cpu[i]), res)
        todo = np.flatnonzero(~fast | evict).tolist()
        if not todo and not moved:
            return
        ncpu, nmem, lsu, beu = node_cpu.tolist(), node_mem.tolist(), ls_used.tolist(), be_used.tolist()
        cap, be_cap_l, evict_l, thr = self.cap_cpu.tolist(), be_cap.tolist(), evict.tolist(), threshold.tolist()
        for i in todo:
            if not fast_l[i]:
                self._suppress(i, at, SuppressInput(int(cap[i]), int(ncpu[i]), int(lsu[i]), int(beu[i]),
                                                    node_reserved=self.reserved_milli[i]), res, counts,
                               thr[i], i in moved)
                moved.discard(i)
            if evict_l[i]:
                self._evictions(i, at, nmem[i], be_cap_l[i], beu[i], res, counts)
        for i in sorted(moved):  # the threshold moved but the BE limit did not need a write
            self._suppress_event(i, at, "be_budget", res, counts)

    def _budget(self, at: float, be_used: F64, col: SloColumns) -> tuple[I64, set[int]]:
        """One step of the BE budget (strategies/be_budget.py) for the nodes that have it on, all at once, from
        :meth:`ls_signal`; returns every node's suppress threshold (the static one where the budget is off) and
        the nodes whose threshold moved."""
        on = np.flatnonzero(col["budget"])
        signal = np.full(len(on), -1.0)
        kinds = col["budget_signal"][on]
        for kind in NOISE_FLOOR:
            mask = kinds == kind
            if mask.any():
                signal = np.where(mask, self.ls_signal(kind)[on], signal)
        b = self.budget
        prev = BudgetArrays(*(getattr(b, f)[on] for f in BUDGET_FIELDS))
        new = step_many(prev, signal, np.full(len(on), at), be_used[on], self.cap_cpu[on],
                        col["threshold"][on].astype(np.float64), col["budget_target"][on], col["budget_max"][on],
                        col["budget_step"][on], col["budget_hold"][on], col["budget_noise"][on], at)
        for f in BUDGET_FIELDS:
            getattr(b, f)[on] = getattr(new, f)
        moved = set(on[new.threshold != prev.threshold].tolist())
        threshold = col["threshold"].copy()
        threshold[on] = new.threshold.astype(np.int64)
        return threshold, moved

    def _suppress(self, i: int, at: float, inp: SuppressInput, res: AdvanceResult, counts: dict[str, float],
                  threshold: int, moved: bool = False) -> None:
        """Plan and apply CPU suppress on node ``i`` at suppress threshold ``threshold`` (percent: the static one,
        or the BE budget's); a QoS event when the BE cpuset or quota changed or the budget's threshold ``moved``."""
        policy = self.slos[i].cpu_suppress
        if threshold != policy.threshold_percent:
            policy = msgspec.structs.replace(policy, threshold_percent=threshold)
        be_pods = tuple(pod_dir("BE", self.pods.specs[k].uid) for k in self._node_pods(i, be=True))
        state = SuppressState(self.logical[i], self.candidates[i], self.be_cpus[i], self.be_quota_us[i],
                              topology=self.topology[i], lsr_cpus=self.lsr_cpus[i], be_pods=be_pods)
        plan = suppress(inp, policy, state)
        prev = self.be_allowed[i]
        records = self._record_failures(i, self.ex[i].apply(plan.writes, at=at))
        changed = [r for r in records if r.ok and not r.skipped]
        if changed:
            self._reload_be([i])
        if any(not r.ok for r in records):
            self.be_settled[i] = False
        self.be_allowed[i] = plan.be_cpu_allowed
        if any(r.resource in ("cpuset.cpus", "cpu.cfs_quota_us") for r in changed) and (
                plan.be_cpu_allowed != prev):
            self._suppress_event(i, at, policy.policy, res, counts)
        elif moved:
            self._suppress_event(i, at, "be_budget", res, counts)

    def _suppress_event(self, i: int, at: float, reason: str, res: AdvanceResult, counts: dict[str, float]) -> None:
        """A ``suppress`` QoS event for node ``i``: its BE budget now, and the BE budget's state when it is on."""
        budget = self.budget.state(i) if self.slos[i].be_budget.enabled else None
        res.events.append(QoSEvent(node=self.names[i], kind="suppress", at=at, reason=reason,
                                   detail={"be_cpu_allowed_milli": self.be_allowed[i], "be_cpus": len(self.be_cpus[i]),
                                           "be_quota_us": self.be_quota_us[i], **budget_detail(budget)}))
        counts["suppress_events"] += 1

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
