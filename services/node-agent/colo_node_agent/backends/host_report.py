"""The ``host`` backend's reports: the node's NodeMetric over the report window and the /debug/state summary.

Functions of :class:`~.host_node.HostNode` (what :meth:`HostBackend.node_metrics` and :meth:`HostBackend.debug`
return). Usage in milli-cores and bytes, times in wall-clock seconds.
"""

from __future__ import annotations

from colo.classes import priority_class_of
from colo.messages import BEBudgetState, MemoryPressure, NodeMetric, PodMetric, Usage
from colo_node_agent.backends.host_node import LS, HostNode
from colo_node_agent.cgroups.layout import BESTEFFORT
from colo_node_agent.strategies.be_budget import budget_debug
from colo_node_agent.strategies.memory_pressure import condition
from colo_node_agent.windows import aggregated


def node_metrics(node: HostNode, at: float) -> list[NodeMetric]:
    """The node's NodeMetric (a one-element list): usage averaged over the last ``window_s`` (REFERENCE.md §2),
    milli-cores and bytes. Each pod's throttled ratio covers the time since the previous call, so this call
    advances the pods' throttling baselines (once per report interval)."""
    n = node.window_n
    cpu, mem = float(node.node_cpu.mean(n)[0]), float(node.node_mem.mean(n)[0])
    pods: list[PodMetric] = []
    pods_cpu = pods_mem = 0.0
    for pod in node.pods.values():
        thr = node.tree.throttling(pod.state.cgroup)  # over the report interval: read at report time
        if thr is not None:
            periods = thr.nr_periods - pod.last_periods
            throttled = thr.nr_throttled - pod.last_throttled
            pod.throttled_ratio = throttled / periods if periods > 0 else 0.0
            pod.last_periods, pod.last_throttled = thr.nr_periods, thr.nr_throttled
        k = len(pod.samples) or 1
        c = sum(x[0] for x in pod.samples) / k
        m = sum(x[1] for x in pod.samples) / k
        psi = node.tree.pressure(pod.state.cgroup)
        signals = (node.interference.signals(pod.uid, psi)
                   if node.interference is not None and pod.state.qos in LS else None)
        pods.append(PodMetric(uid=pod.uid, cpu=int(c), memory=int(m), qos_class=pod.state.qos,
                              priority_class=priority_class_of(pod.state.spec),
                              cpu_throttled_ratio=round(pod.throttled_ratio, 4), pressure=psi,
                              interference=signals))
        pods_cpu += c
        pods_mem += m
    ls = int(node.ls_cpu.mean(n)[0])
    return [NodeMetric(
        node=node.names[0], at=at, window_s=float(min(node.node_cpu.count, n) * node.config.loop_s),
        node_usage=Usage(cpu=int(cpu), memory=int(mem)),
        system_usage=Usage(cpu=int(max(cpu - pods_cpu, 0)), memory=int(max(mem - pods_mem, 0))),
        pods=pods, aggregated=aggregated(node.node_cpu, node.node_mem, node.config.loop_s)[0],
        be_cpu_allowed=node.be_allowed, ls_cpu_demand=ls, ls_cpu_served=ls,
        pressure=dict(node.pressure), memory_pressure=memory_pressure(node),
        be_budget=be_budget(node))]


def be_budget(node: HostNode) -> BEBudgetState | None:
    """The node's BE budget after the last loop (what its NodeMetric carries); None while it is off."""
    return node.memory.be_budget if node.slo.be_budget.enabled else None


def memory_pressure(node: HostNode) -> MemoryPressure | None:
    """The BE memory pressure condition on the last sample (strategies/memory_pressure.py)."""
    used = int(node.node_mem.last(1)[0, -1]) if node.node_mem.count else 0
    return condition(node.memory.memory_pressure, used, node.cap.memory_bytes, node.slo.memory_evict)


def debug_state(node: HostNode) -> dict[str, object]:
    """A summary for /debug/state; ``be_budget`` every field of the node's BE budget
    (:func:`~colo_node_agent.strategies.be_budget.budget_debug`), None while it is off."""
    quota = node.ex.read(BESTEFFORT, "cpu.cfs_quota_us")
    cpus = node.ex.read(BESTEFFORT, "cpuset.cpus")
    idle = node.ex.read(BESTEFFORT, "cpu.idle")
    return {node.names[0]: {
        "backend": "host", "cgroup_version": node.version, "cgroup_parent": node.tree.parent,
        "node_scope": node.config.node_scope, "cpu_capacity_milli": node.cap.cpu_milli,
        "memory_capacity_bytes": node.cap.memory_bytes, "pods": len(node.pods),
        "terminating": len(node.terminating), "pids": {u: p.state.pid for u, p in node.pods.items()},
        "be_cpu_allowed": node.be_allowed, "be_cpus": cpus, "be_quota_us": quota, "be_idle": idle == 1,
        "be_budget": budget_debug(be_budget(node)),
        "cgroup_writes": node.ex.written, "cgroup_failures": node.ex.failed, "pressure": node.pressure,
        "interference": None if node.interference is None else {
            "pods": len(node.interference.pods), "perf": node.interference.perf_problem or "counting"},
        "oom_score_writes": node.oom.written, "net_qos": node.net.problem or (
            "installed" if node.net.installed is not None else "off")}}
