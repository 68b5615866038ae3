"""The ``host`` backend: this Linux machine as one node, pods as real processes in real cgroups.

Layout (cgroupfs, kubelet style, :mod:`colo_node_agent.cgroups.layout`) under the parent ``cgroup_parent``
(``colo``) in every hierarchy: ``kubepods`` (LSE/LSR pods, Kubernetes Guaranteed), ``kubepods/burstable``
(LS), ``kubepods/besteffort`` (BE), one ``pod<uid>`` group per pod. A pod's group gets the kubelet's pod-level
settings (shares from the CPU request, CFS quota from the CPU limit, memory limit; batch-* for BE) before its
process starts inside it (:mod:`.host_pods`), and the BE group its QoS-level settings.

Each :meth:`HostBackend.advance` (every ``loop_s``, REFERENCE.md §2: 1 s): exits are detected (exit code →
Succeeded/Failed, OOM kill → OOMKilled), terminating pods are cleaned up, node and pod usage sampled
(:mod:`.host_metrics`, :mod:`.host_cgroups`; LS pods' interference counters, :mod:`.host_interference`), then
every strategy runs on that sample through :func:`~colo_node_agent.strategies.node.plan_node` (REFERENCE.md
§5, each switched by the NodeSLO: pod and BE settings, SCHED_IDLE, LSE/LSR cpusets, CPU suppress, CPU burst,
memory QoS, BE block I/O, BE memory and CPU eviction; :mod:`.host_qos`), then OOM priority (:mod:`.host_oom`)
and network QoS (:mod:`.host_net`). Pods survive an agent restart: the state file and the pod groups let the
next agent adopt them (none orphaned, none started twice). Times are wall-clock seconds.

:class:`HostBackend` is assembled from its parts, each a layer over the one below: the node state
(:mod:`.host_node`), the pod lifecycle (:mod:`.host_lifecycle`: adopt, start, evict, exits, cleanup, purge),
the loop body (:mod:`.host_loop`: sample, strategies, isolation) and the reports (:mod:`.host_report`).
"""

from __future__ import annotations

import time
from typing import Callable

from colo.messages import NodeMetric, NodeSLO
from colo_node_agent.backends import host_report
from colo_node_agent.backends.host_cgroups import CgroupTree
from colo_node_agent.backends.host_config import HostConfig, HostConfigError, host_problems
from colo_node_agent.backends.host_loop import HostLoop
from colo_node_agent.backends.host_pods import alive
from colo_node_agent.backends.sim import AdvanceResult

__all__ = ["HostBackend", "HostConfig", "HostConfigError", "host_problems"]


class HostBackend(HostLoop):
    """This machine as node ``config.node_name``; ``default_slo(node)`` until a NodeSLO arrives.

    ``tree`` overrides the cgroup tree (fake trees in tests). Raises HostConfigError listing every problem,
    OSError when the QoS-class groups cannot be made. The pods recorded by a previous agent are adopted
    (:meth:`HostLifecycle._adopt`) and the BE group gets its settings before this returns.

    Defined in the parts: the pod queries (:meth:`has_pod`, :meth:`is_running`, :meth:`pods_on`,
    :meth:`running`, :meth:`pid_of`; :mod:`.host_node`), :meth:`start_pod`, :meth:`evict_pod`, :meth:`close`,
    :meth:`purge` (:mod:`.host_lifecycle`); here: :meth:`set_slo`, :meth:`advance`, :meth:`node_metrics`,
    :meth:`debug`.
    """

    def __init__(self, config: HostConfig, default_slo: Callable[[str], NodeSLO], start: float,
                 tree: CgroupTree | None = None, clock: Callable[[], float] = time.time) -> None:
        super().__init__(config, default_slo, start, tree, clock)
        self._adopt(start)
        self._apply_be_settings(start)

    # ------------------------------------------------------------------ policy

    def set_slo(self, slo: NodeSLO) -> bool:
        """Adopt ``slo`` (BE settings such as ``cpu.idle`` are written now); False for another node."""
        if slo.node not in self.index:
            return False
        if slo.be_budget.signal != self.slo.be_budget.signal:
            self.memory.be_budget = None  # a baseline in the old signal's units: start at the floor, learn anew
        self.slo = slo
        self._apply_be_settings(self.clock())
        return True

    # ------------------------------------------------------------------ loop

    def advance(self, now: float) -> AdvanceResult:
        """One loop at clock ``now``: exits, cleanup, sample, strategies (see the module doc).

        ``stats`` as the sim's (:meth:`SimBackend.advance`) from this loop's sample: cpu/mem capacity and
        used, ``ls_cpu_demand_milli`` = ``ls_cpu_served_milli`` = LS used (a real node has no demand signal),
        ``be_cpu_used_milli``; counts since the previous call; ``pods_running``.
        """
        res = AdvanceResult(ended=self._ended, events=self._events)
        self._ended, self._events = [], []
        for pod in list(self.pods.values()):
            if not alive(pod):
                res.ended.append(self._finish(pod, now))
        res.events.extend(self._events)
        self._events = []
        self._cleanup(now)
        node_cpu, node_mem = self._sample(now)
        self._plan(now, node_cpu, node_mem, res)
        self.now = now
        s = self._last_sample
        res.stats = {"cpu_capacity_milli": float(self.cap.cpu_milli), "cpu_used_milli": s["cpu"],
                     "mem_capacity_bytes": float(self.cap.memory_bytes), "mem_used_bytes": s["mem"],
                     "ls_cpu_demand_milli": s["ls"], "ls_cpu_served_milli": s["ls"],
                     "be_cpu_used_milli": s["be"],
                     **self.counts, "pods_running": float(len(self.pods))}
        self.counts = dict.fromkeys(self.counts, 0.0)
        return res

    # ------------------------------------------------------------------ reports

    def node_metrics(self, at: float) -> list[NodeMetric]:
        """The node's NodeMetric: usage averaged over the last ``window_s`` (REFERENCE.md §2;
        :func:`.host_report.node_metrics`)."""
        return host_report.node_metrics(self, at)

    def debug(self) -> dict[str, object]:
        """A summary for /debug/state (:func:`.host_report.debug_state`)."""
        return host_report.debug_state(self)
