"""The ``host`` backend's loop body: sample node and pod usage, then one round of every strategy.

:class:`HostLoop` measures the node and the running pods (:mod:`.host_metrics`, :mod:`.host_cgroups`; LS pods'
interference counters, :mod:`.host_interference`, and the BE budget's loop signals, :mod:`.host_budget`), then
runs every strategy on that sample through :func:`~colo_node_agent.strategies.node.plan_node` (REFERENCE.md
§5, each switched by the NodeSLO: pod and BE settings, SCHED_IDLE, LSE/LSR cpusets, CPU suppress, CPU burst,
memory QoS, BE block I/O, BE memory and CPU eviction; writes through :mod:`.host_qos`), then OOM priority
(:mod:`.host_oom`) and network QoS (:mod:`.host_net`). Times are wall-clock seconds.
"""

from __future__ import annotations

import logging

import numpy as np

from colo.messages import QoSEvent
from colo_node_agent.backends.host_budget import update_loop_signals
from colo_node_agent.backends.host_lifecycle import HostLifecycle
from colo_node_agent.backends.host_node import LS
from colo_node_agent.backends.host_qos import apply_plan_writes
from colo_node_agent.backends.sim import AdvanceResult
from colo_node_agent.cgroups.layout import BESTEFFORT
from colo_node_agent.cgroups.resources import cpuset_parse
from colo_node_agent.strategies.be_budget import budget_detail, threshold_changed
from colo_node_agent.strategies.node import NodeSnapshot, PodState, plan_node

log = logging.getLogger("colo.node-agent.host")


class HostLoop(HostLifecycle):
    """Sampling and the strategy round of one loop (:meth:`HostBackend.advance` calls :meth:`_sample`, then
    :meth:`_plan`); the strategies' BE evictions go through :meth:`HostLifecycle.evict_pod` with no grace."""

    # ------------------------------------------------------------------ sample

    def _sample(self, now: float) -> tuple[float | None, float | None]:
        """Node and pod usage now; pushes the report windows. Returns (node CPU milli, node memory bytes)."""
        tree = self.tree
        ls = be = 0.0
        pods_mem = 0.0
        for pod in self.pods.values():
            cg = pod.state.cgroup
            ns = tree.cpu_usage_ns(cg)
            if ns is not None and pod.last_cpu_ns is not None and now > pod.last_at:
                pod.cpu_milli = max(ns - pod.last_cpu_ns, 0) / 1e6 / (now - pod.last_at)
            if ns is not None:
                pod.last_cpu_ns, pod.last_at = ns, now
            pod.memory_bytes = tree.memory_used(cg) or 0
            pod.samples.append((pod.cpu_milli, float(pod.memory_bytes)))
            if len(pod.samples) > self.window_n:
                del pod.samples[0]
            if pod.state.qos == "BE":
                be += pod.cpu_milli
            else:
                ls += pod.cpu_milli
            pods_mem += pod.memory_bytes
        if self.interference is not None:
            self.interference.sample({u: p.state.cgroup for u, p in self.pods.items() if p.state.qos in LS})
            if self.slo.be_budget.enabled:
                psi = self.tree.pressure if self.slo.be_budget.signal == "cpu_pressure" else None
                update_loop_signals(self.interference, self.pods.values(), now, psi)
        node_cpu = self.sampler.cpu_milli(now)
        node_mem = self.sampler.memory_bytes()
        self.pressure = self.sampler.pressure()
        cpu = node_cpu if node_cpu is not None else ls + be
        mem = float(node_mem) if node_mem is not None else pods_mem
        self.node_cpu.push(np.array([cpu]))
        self.node_mem.push(np.array([mem]))
        self.ls_cpu.push(np.array([ls]))
        self._last_sample = {"cpu": cpu, "mem": mem, "ls": ls, "be": be}
        return node_cpu, (float(node_mem) if node_mem is not None else None)

    # ------------------------------------------------------------------ strategies

    def _snapshot(self, node_cpu: float | None, node_mem: float | None) -> NodeSnapshot:
        """The node now, for :func:`plan_node`: running pods, and terminating ones as ``evicting`` (their
        memory is a pending release)."""
        burst = self.slo.cpu_burst.policy != "none"
        pods: list[PodState] = []
        for uid, pod in [*self.pods.items(), *self.terminating.items()]:
            cg = pod.state.cgroup
            quota, cpus = self.ex.read(cg, "cpu.cfs_quota_us"), self.ex.read(cg, "cpuset.cpus")
            throttled, ratio = None, 0.0
            if burst and uid in self.pods:
                thr = self.tree.throttling(cg)
                if thr is not None:
                    periods = thr.nr_periods - pod.loop_periods
                    ratio = (thr.nr_throttled - pod.loop_throttled) / periods if periods > 0 else 0.0
                    throttled, pod.loop_throttled = thr.nr_throttled > pod.loop_throttled, thr.nr_throttled
                    pod.loop_periods = thr.nr_periods
            pods.append(PodState(pod.state.spec, pod.state.qos, int(pod.cpu_milli), pod.memory_bytes,
                                 quota if isinstance(quota, int) else -1, throttled,
                                 cpuset_parse(cpus) if isinstance(cpus, str) and cpus else (),
                                 evicting=uid in self.terminating, throttled_ratio=ratio,
                                 assigned=cpuset_parse(pod.state.cpuset) if pod.state.cpuset else (),
                                 interference=pod.interference, interference_at=pod.interference_at))
        be_cpus, be_quota = self.ex.read(BESTEFFORT, "cpuset.cpus"), self.ex.read(BESTEFFORT, "cpu.cfs_quota_us")
        cap = self.cap
        return NodeSnapshot(
            name=self.names[0], cpu_capacity=cap.cpu_milli, memory_capacity=cap.memory_bytes,
            node_cpu_used=None if node_cpu is None else int(node_cpu),
            node_memory_used=int(node_mem) if node_mem is not None else int(self._last_sample["mem"]),
            pods=tuple(pods), topology=self.topology, memory_allocatable=cap.memory_bytes,
            be_cpus=cpuset_parse(be_cpus) if isinstance(be_cpus, str) and be_cpus else (),
            be_quota_us=be_quota if isinstance(be_quota, int) else -1, blkio_devices=self._blkio_devices,
            features=self.features)

    def _plan(self, now: float, node_cpu: float | None, node_mem: float | None, res: AdvanceResult) -> None:
        """One round of every strategy (:func:`plan_node`): apply the writes, evict the victims at once (hard
        eviction, no grace), publish what changed."""
        plan = plan_node(self._snapshot(node_cpu, node_mem), self.slo, self.memory, now,
                         sample_interval_s=self.config.loop_s)
        records = self._record(apply_plan_writes(self.ex, plan.writes, now))
        self._isolation(now)
        self._blkio_devices = tuple(d.device for d in self.slo.blkio.be) if self.slo.blkio.enabled else ()
        changed = [r for r in records if r.ok and not r.skipped and r.cgroup == BESTEFFORT]
        limit_changed = plan.be_cpu_allowed != self.be_allowed and any(
            r.resource in ("cpuset.cpus", "cpu.cfs_quota_us") for r in changed)
        if limit_changed or threshold_changed(self.memory.be_budget, plan.be_budget):
            quota = self.ex.read(BESTEFFORT, "cpu.cfs_quota_us")
            res.events.append(QoSEvent(node=self.names[0], kind="suppress", at=now,
                                       reason=self.slo.cpu_suppress.policy if limit_changed else "be_budget",
                                       detail={"be_cpu_allowed_milli": plan.be_cpu_allowed,
                                               "be_cpus": len(plan.be_cpus),
                                               "be_quota_us": quota if isinstance(quota, int) else -1,
                                               **budget_detail(plan.be_budget)}))
            self.counts["suppress_events"] += 1
        self.be_allowed = plan.be_cpu_allowed
        victims: dict[str, list[str]] = {}
        release: dict[str, int] = {}
        for pe in plan.evictions:
            end = self.evict_pod(pe.eviction.uid, pe.eviction.reason, pe.eviction.message, now, grace_s=0.0)
            if end is not None:
                res.ended.append(end)
                victims.setdefault(pe.kind, []).append(end.uid)
                release[pe.kind] = pe.release
        calm = self.memory.memory_pressure.since is None
        self.memory.absorb(plan, now, {k: len(v) for k, v in victims.items()})
        if calm and self.memory.memory_pressure.since is not None:
            res.pressure_started.append(self.names[0])
        for kind, uids in victims.items():
            self.counts["be_evictions"] += len(uids)
            res.events.append(QoSEvent(node=self.names[0], kind="evict", at=now, reason=f"BE {kind} eviction",
                                       pods=uids, detail={"release": release[kind]}))
        for problem in [*plan.problems, *self.oom.problems, *([self.net.problem] if self.net.problem else [])]:
            if problem not in self._problems_seen:
                self._problems_seen.add(problem)
                log.warning("node %s: %s", self.names[0], problem)

    def _isolation(self, now: float) -> None:
        """OOM priority of every pod's processes (:mod:`.host_oom`), the network QoS tree and the pod groups'
        packet priorities (:mod:`.host_net`)."""
        net = self.slo.net_qos
        self.oom.apply_pods(self.tree, [(p.state.spec, p.state.qos, p.state.cgroup) for p in self.pods.values()],
                            self.cap.memory_bytes, self.slo.oom)
        self.net.sync(net, now)
        self.net.classify([(p.state.cgroup, p.state.qos) for p in self.pods.values()], net)
