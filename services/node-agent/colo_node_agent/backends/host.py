"""The ``host`` backend: this Linux machine as one node, pods as real processes in real cgroups.

Layout (cgroupfs, kubelet style, :mod:`colo_node_agent.cgroups.layout`) under the parent ``cgroup_parent``
(``colo``) in every hierarchy: ``kubepods`` (LSE/LSR pods, Kubernetes Guaranteed), ``kubepods/burstable``
(LS), ``kubepods/besteffort`` (BE), one ``pod<uid>`` group per pod. A pod's group gets the kubelet's pod-level
settings (shares from the CPU request, CFS quota from the CPU limit, memory limit; batch-* for BE) before its
process starts inside it (:mod:`.host_pods`), and the BE group its QoS-level settings.

Each :meth:`HostBackend.advance` (every ``loop_s``, REFERENCE.md §2: 1 s): exits are detected (exit code →
Succeeded/Failed, OOM kill → OOMKilled), terminating pods are cleaned up, node and pod usage sampled
(:mod:`.host_metrics`, :mod:`.host_cgroups`; LS pods' interference counters, :mod:`.host_interference`), then every strategy runs on that sample through
:func:`~colo_node_agent.strategies.node.plan_node` (REFERENCE.md §5, each switched by the NodeSLO: pod and BE
settings, SCHED_IDLE, LSE/LSR cpusets, CPU suppress, CPU burst, memory QoS, BE block I/O, BE memory and CPU
eviction; :mod:`.host_qos`), then OOM priority (:mod:`.host_oom`) and network QoS (:mod:`.host_net`). Pods survive an agent restart: the state file and the pod groups let the next
agent adopt them (none orphaned, none started twice). Times are wall-clock seconds.
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import time
from collections import deque
from pathlib import Path
from typing import Callable

import msgspec
import numpy as np

from colo.classes import priority_class_of, qos_class_of
from colo.messages import (
    MemoryPressure,
    NodeMetric,
    NodeSLO,
    NodeSpec,
    PodMetric,
    PodPhase,
    PodSpec,
    QoSEvent,
    Resources,
    Usage,
)
from colo_node_agent.backends.gpus import gpu_env
from colo_node_agent.backends.host_budget import update_loop_signals
from colo_node_agent.backends.host_cgroups import CgroupTree
from colo_node_agent.backends.host_config import HostConfig, HostConfigError, host_problems
from colo_node_agent.backends.host_interference import InterferenceSampler
from colo_node_agent.backends.host_metrics import NodeSampler, capacity
from colo_node_agent.backends.host_net import NetQoS
from colo_node_agent.backends.host_oom import OOMScores, pod_score
from colo_node_agent.backends.host_pods import (
    SIGKILL,
    SIGTERM,
    HostPod,
    PodRecordState,
    StateFile,
    alive,
    create_time,
    exit_status,
    launch,
    log_tail,
    pod_paths,
    reap,
    signal_pod,
)
from colo_node_agent.backends.host_qos import apply_plan_writes, kernel_features, node_topology
from colo_node_agent.backends.sim import AdvanceResult, PodEnd
from colo_node_agent.cgroups.executor import Executor, WriteRecord
from colo_node_agent.cgroups.fs import HostFS, detect_version
from colo_node_agent.cgroups.layout import BESTEFFORT, QOS_DIRS, pod_dir
from colo_node_agent.cgroups.resources import cpuset_format, cpuset_parse
from colo_node_agent.strategies.be_budget import budget_detail, threshold_changed
from colo_node_agent.strategies.cgroup_settings import be_qos_settings, pod_settings
from colo_node_agent.strategies.memory_pressure import condition
from colo_node_agent.strategies.node import NodeSnapshot, PodState, StrategyMemory, plan_node
from colo_node_agent.windows import Ring, aggregated

__all__ = ["HostBackend", "HostConfig", "HostConfigError", "host_problems"]

log = logging.getLogger("colo.node-agent.host")

MAX_PODS = 110
"""Pods capacity of the node (the kubelet's default ``maxPods``)."""
PURGE_TIMEOUT_S = 5.0
LS = ("LSE", "LSR", "LS")
"""QoS classes whose pods get interference signals (``PodMetric.interference``)."""


class HostBackend:
    """This machine as node ``config.node_name``; ``default_slo(node)`` until a NodeSLO arrives.

    ``tree`` overrides the cgroup tree (fake trees in tests). Raises HostConfigError listing every problem,
    OSError when the QoS-class groups cannot be made.
    """

    def __init__(self, config: HostConfig, default_slo: Callable[[str], NodeSLO], start: float,
                 tree: CgroupTree | None = None, clock: Callable[[], float] = time.time) -> None:
        if tree is None:
            problems = host_problems(config)
            if problems:
                raise HostConfigError(problems)
            root = Path(config.cgroup_root)
            tree = CgroupTree(root, config.cgroup_parent, detect_version(HostFS(root)))
        self.config = config
        self.tree = tree
        self.version = tree.version
        self.clock = clock
        self.state_dir = Path(config.state_dir)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.state_file = StateFile(self.state_dir)
        for cg in QOS_DIRS:
            tree.ensure(cg)
        self.cap = capacity(tree, config.node_scope, config.cpu_capacity_milli, config.memory_capacity_bytes)
        res = Resources(cpu=self.cap.cpu_milli, memory=self.cap.memory_bytes, pods=MAX_PODS)
        self.spec = NodeSpec(name=config.node_name, capacity=res, allocatable=res, cpus=len(self.cap.cpus),
                             labels={"colo.io/backend": "host"})
        self.names = [config.node_name]
        self.index = {config.node_name: 0}
        self.slo = default_slo(config.node_name)
        self.ex = Executor(tree.fs, self.version)
        self.features = kernel_features(tree)
        self.topology = node_topology(self.cap.cpus)
        # registered with the node: the scheduler's NodeNUMAResource chooses LSE/LSR cpusets from it
        self.spec = msgspec.structs.replace(self.spec, topology=self.topology.message())
        self.memory = StrategyMemory()
        self._blkio_devices: tuple[str, ...] = ()
        self.oom = OOMScores()
        self.net = NetQoS(tree)
        self._problems_seen: set[str] = set()
        self.sampler = NodeSampler(tree, config.node_scope)
        self.interference = InterferenceSampler(tree.threads) if config.interference_signals else None
        self.now = start
        self.pods: dict[str, HostPod] = {}
        self.terminating: dict[str, HostPod] = {}
        self.cgroup_failures: deque[tuple[str, WriteRecord]] = deque(maxlen=64)
        self.window_n = max(int(round(config.window_s / config.loop_s)), 1)
        agg_n = max(int(math.ceil(1800 / config.loop_s)), 1)
        self.node_cpu, self.node_mem = Ring(1, agg_n), Ring(1, agg_n)
        self.ls_cpu = Ring(1, self.window_n)
        self.be_allowed = -1
        self.pressure: dict[str, float] = {}
        self.counts = dict.fromkeys(("batch_completed", "be_evictions", "oom_kills", "suppress_events"), 0.0)
        self.adopted: list[str] = []
        self._ended: list[PodEnd] = []
        self._events: list[QoSEvent] = []
        self._last_sample = {"cpu": 0.0, "mem": 0.0, "ls": 0.0, "be": 0.0}
        self._adopt(start)
        self._apply_be_settings(start)

    # ------------------------------------------------------------------ adoption and state

    def _adopt(self, now: float) -> None:
        """Adopt the pods of the state file still running; pods that ended while no agent ran are reported
        at the next :meth:`advance`; groups without a usable record are orphans: killed and removed."""
        recorded = self.state_file.load()
        if self.state_file.error:
            log.error("state file unreadable, moved aside: %s", self.state_file.error)
        for uid, st in recorded.items():
            pod = HostPod(st)
            if st.pid <= 0:
                self._purge_group(st.cgroup)
            elif st.terminating:
                pod.kill_at = now
                self.terminating[uid] = pod
            elif alive(pod):
                self.pods[uid] = pod
                self.adopted.append(uid)
            else:
                self._ended.append(self._finish(pod, now))
        for uid, cg in self.tree.pod_groups().items():
            if uid not in recorded or recorded[uid].pid <= 0:
                log.warning("pod group %s has no record: killing its processes and removing it", cg)
                self._purge_group(cg)
        self._save()

    def _save(self) -> None:
        states = [p.state for p in self.pods.values()] + [p.state for p in self.terminating.values()]
        self.state_file.save(states)

    def _members(self, cgroup: str) -> list[int]:
        """Pids the kernel confirms are in ``cgroup`` (never a stranger, see CgroupTree.member)."""
        return [pid for pid in self.tree.procs(cgroup) if self.tree.member(pid, cgroup)]

    def _purge_group(self, cgroup: str) -> bool:
        """SIGKILL every member of ``cgroup`` until it is empty, then remove it (≤ PURGE_TIMEOUT_S)."""
        deadline = time.monotonic() + PURGE_TIMEOUT_S
        while True:
            members = self._members(cgroup)
            for pid in members:
                try:
                    os.kill(pid, SIGKILL)
                except ProcessLookupError:
                    pass
            if not members and self.tree.remove(cgroup):
                self.ex.forget(cgroup)
                return True
            if time.monotonic() > deadline:
                log.error("cgroup %s still busy after %.0f s", cgroup, PURGE_TIMEOUT_S)
                return False
            time.sleep(0.02)

    def purge(self) -> None:
        """Kill every process in the agent's groups and remove all of them, the parent included, the network
        QoS tree and the state file (tests and benchmarks leave nothing behind with it; the agent never calls it)."""
        for pod in list(self.pods.values()) + list(self.terminating.values()):
            signal_pod(pod, self._members(pod.state.cgroup), SIGKILL)
            reap(pod)
        for cg in self.tree.all_groups():
            self._purge_group(cg)
        for pod in list(self.pods.values()) + list(self.terminating.values()):
            if pod.popen is not None:
                pod.popen.wait(timeout=PURGE_TIMEOUT_S)
        self.pods.clear()
        self.terminating.clear()
        if self.interference is not None:
            self.interference.close()
        self.net.remove()
        self.state_file.path.unlink(missing_ok=True)

    def close(self) -> None:
        """Persist the state; pods keep running (the next agent adopts them)."""
        self._save()

    # ------------------------------------------------------------------ pods and policy

    def has_pod(self, uid: str) -> bool:
        """Whether pod ``uid`` runs here or is still terminating."""
        return uid in self.pods or uid in self.terminating

    def is_running(self, uid: str) -> bool:
        """Whether pod ``uid`` runs here (not terminating)."""
        return uid in self.pods

    def pods_on(self, node: str) -> list[str]:
        """Uids of the pods running on ``node``."""
        return list(self.pods) if node in self.index else []

    def running(self, node: str) -> list[PodSpec]:
        """Specs of the pods running on ``node`` (not terminating)."""
        return [p.state.spec for p in self.pods.values()] if node in self.index else []

    def pid_of(self, uid: str) -> int:
        """The pod's main (wrapper) pid, 0 when unknown."""
        pod = self.pods.get(uid) or self.terminating.get(uid)
        return pod.state.pid if pod is not None else 0

    def set_slo(self, slo: NodeSLO) -> bool:
        """Adopt ``slo`` (BE settings such as ``cpu.idle`` are written now); False for another node."""
        if slo.node not in self.index:
            return False
        self.slo = slo
        self._apply_be_settings(self.clock())
        return True

    def start_pod(self, spec: PodSpec, node: str, cpuset: tuple[int, ...] = (),
                  devices: tuple[tuple[int, int], ...] = (), bound_at: float = 0.0) -> bool:
        """Make the pod's group with its limits and start its command inside it; ``cpuset`` the CPUs the
        scheduler chose for an LSE/LSR pod (the next strategy round writes them when valid, docs/topology.md);
        ``devices`` the GPUs it assigned, passed to the process as ``CUDA_VISIBLE_DEVICES`` and
        ``COLO_GPU_DEVICES`` (:func:`~.gpus.gpu_env`, docs/gpu.md).

        False when the node is not ours, the pod is known already or has no command. A pod whose group or
        process cannot be made is accepted and reported Failed (StartError) by the next :meth:`advance`.
        """
        if node not in self.index or self.has_pod(spec.uid) or not spec.command:
            return False
        at = self.clock()
        qos = qos_class_of(spec)
        cg = pod_dir(qos, spec.uid)
        pod = HostPod(PodRecordState(spec=spec, node=node, qos=qos, cgroup=cg, started_at=at, bound_at=bound_at,
                                     cpuset=cpuset_format(cpuset)))
        self.pods[spec.uid] = pod
        try:
            self.tree.ensure(cg)
        except OSError as exc:
            self._start_failed(pod, f"cannot create cgroup {cg}: {exc}", at)
            return True
        self.ex.forget(cg)
        self._record(self.ex.apply(pod_settings(spec, qos), at=at))
        self.net.classify([(cg, qos)], self.slo.net_qos, prune=False)
        if qos == "BE":
            self._apply_be_settings(at)
        self._save()
        try:
            popen = launch(spec, self.tree.procs_files(cg), self.state_dir, gpu_env(tuple(devices)),
                           oom_score_adj=pod_score(spec, qos, self.cap.memory_bytes, self.slo.oom))
        except OSError as exc:
            self._start_failed(pod, f"cannot start {spec.command[0]!r}: {exc}", at)
            return True
        pod.popen = popen
        started = create_time(popen.pid) or at
        pod.state = msgspec.structs.replace(pod.state, pid=popen.pid, create_time=started)
        self._save()
        return True

    def _start_failed(self, pod: HostPod, message: str, at: float) -> None:
        self.pods.pop(pod.uid, None)
        self._purge_group(pod.state.cgroup)
        self._ended.append(self._end(pod, "Failed", "StartError", message, at))
        self._save()

    def evict_pod(self, uid: str, reason: str, message: str, at: float,
                  grace_s: float | None = None) -> PodEnd | None:
        """Stop pod ``uid`` as Failed with ``reason``: SIGTERM to its process group and cgroup members, SIGKILL
        after ``grace_s`` (default ``termination_grace_s``; 0 = SIGKILL now); its group is removed once empty.
        None when it does not run here."""
        pod = self.pods.pop(uid, None)
        if pod is None:
            return None
        grace = self.config.termination_grace_s if grace_s is None else grace_s
        pod.state = msgspec.structs.replace(pod.state, terminating=True)
        pod.kill_at = at + grace
        signal_pod(pod, self._members(pod.state.cgroup), SIGKILL if grace <= 0 else SIGTERM)
        self.terminating[uid] = pod
        self._save()
        return self._end(pod, "Failed", reason, message, at)

    def _end(self, pod: HostPod, phase: PodPhase, reason: str, message: str, at: float) -> PodEnd:
        return PodEnd(pod.uid, pod.state.node, phase, reason, message, at, pod.state.spec)

    def _finish(self, pod: HostPod, at: float) -> PodEnd:
        """A pod whose main process exited: classify how (exit code, OOM), queue its group for cleanup."""
        cg = pod.state.cgroup
        status = exit_status(pod, self.state_dir)
        oom = self.tree.oom_kills(cg) or 0
        peak, limit = self.tree.memory_peak(cg), self.tree.memory_limit(cg)
        at_limit = peak is not None and limit is not None and limit > 0 and peak >= limit - (1 << 20)
        code = status.code
        phase: PodPhase = "Failed"
        if status.start_error:
            reason, message = "StartError", status.start_error
        elif code == 0:
            phase, reason, message = "Succeeded", "Completed", ""
        elif oom > 0 or (code == 137 and at_limit):
            reason = "OOMKilled"
            message = (f"exit code {code}: {oom} OOM kill(s) in the pod's cgroup, "
                       f"peak {peak} of limit {limit} bytes")
            self.counts["oom_kills"] += 1
            self._events.append(QoSEvent(node=pod.state.node, kind="oom", at=at, reason=message,
                                         pods=[pod.uid]))
        elif code is None:
            reason, message = "Error", "exit status unknown: the pod ended while no agent watched it"
        else:
            tail = log_tail(self.state_dir, pod.uid)
            reason, message = "Error", f"exit code {code}" + (f": {tail}" if tail else "")
        if phase == "Succeeded" and pod.state.qos == "BE":
            self.counts["batch_completed"] += 1
        pod.state = msgspec.structs.replace(pod.state, terminating=True)
        pod.kill_at = at
        self.pods.pop(pod.uid, None)
        self.terminating[pod.uid] = pod
        return self._end(pod, phase, reason, message, at)

    def _apply_be_settings(self, at: float) -> None:
        """BE QoS-level settings for the current BE pods and NodeSLO (shares, memory limit, cpu.idle)."""
        be = [p.state.spec for p in self.pods.values() if p.state.qos == "BE"]
        writes = be_qos_settings(be, self.slo.be_cpu_idle, idle_supported=self.features.cpu_idle,
                                 min_shares=self.slo.be_cpu_shares == "min")
        self._record(apply_plan_writes(self.ex, writes, at))

    def _record(self, records: list[WriteRecord]) -> list[WriteRecord]:
        name = self.names[0]
        self.cgroup_failures.extend((name, r) for r in records if not r.ok and not r.skipped)
        return records

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

    def _cleanup(self, now: float) -> None:
        """Remove the groups of terminated pods once empty; SIGKILL those past their grace period."""
        changed = be_changed = False
        for uid, pod in list(self.terminating.items()):
            reap(pod)
            members = self._members(pod.state.cgroup)
            if not members and not alive(pod):
                if self.tree.remove(pod.state.cgroup):
                    self.ex.forget(pod.state.cgroup)
                    shutil.rmtree(pod_paths(self.state_dir, uid)[0], ignore_errors=True)
                    del self.terminating[uid]
                    changed = True
                    be_changed |= pod.state.qos == "BE"
            elif now >= pod.kill_at:
                signal_pod(pod, members, SIGKILL)
        if be_changed:
            self._apply_be_settings(now)
        if changed:
            self._save()

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

    # ------------------------------------------------------------------ reports

    def node_metrics(self, at: float) -> list[NodeMetric]:
        """The node's NodeMetric: usage averaged over the last ``window_s`` (REFERENCE.md §2)."""
        n = self.window_n
        cpu, mem = float(self.node_cpu.mean(n)[0]), float(self.node_mem.mean(n)[0])
        pods: list[PodMetric] = []
        pods_cpu = pods_mem = 0.0
        for pod in self.pods.values():
            thr = self.tree.throttling(pod.state.cgroup)  # over the report interval: read at report time
            if thr is not None:
                periods = thr.nr_periods - pod.last_periods
                throttled = thr.nr_throttled - pod.last_throttled
                pod.throttled_ratio = throttled / periods if periods > 0 else 0.0
                pod.last_periods, pod.last_throttled = thr.nr_periods, thr.nr_throttled
            k = len(pod.samples) or 1
            c = sum(x[0] for x in pod.samples) / k
            m = sum(x[1] for x in pod.samples) / k
            psi = self.tree.pressure(pod.state.cgroup)
            signals = (self.interference.signals(pod.uid, psi)
                       if self.interference is not None and pod.state.qos in LS else None)
            pods.append(PodMetric(uid=pod.uid, cpu=int(c), memory=int(m), qos_class=pod.state.qos,
                                  priority_class=priority_class_of(pod.state.spec),
                                  cpu_throttled_ratio=round(pod.throttled_ratio, 4), pressure=psi,
                                  interference=signals))
            pods_cpu += c
            pods_mem += m
        ls = int(self.ls_cpu.mean(n)[0])
        return [NodeMetric(
            node=self.names[0], at=at, window_s=float(min(self.node_cpu.count, n) * self.config.loop_s),
            node_usage=Usage(cpu=int(cpu), memory=int(mem)),
            system_usage=Usage(cpu=int(max(cpu - pods_cpu, 0)), memory=int(max(mem - pods_mem, 0))),
            pods=pods, aggregated=aggregated(self.node_cpu, self.node_mem, self.config.loop_s)[0],
            be_cpu_allowed=self.be_allowed, ls_cpu_demand=ls, ls_cpu_served=ls,
            pressure=dict(self.pressure), memory_pressure=self._memory_pressure(),
            be_budget=self.memory.be_budget if self.slo.be_budget.enabled else None)]

    def _memory_pressure(self) -> MemoryPressure | None:
        """The BE memory pressure condition on the last sample (strategies/memory_pressure.py)."""
        used = int(self.node_mem.last(1)[0, -1]) if self.node_mem.count else 0
        return condition(self.memory.memory_pressure, used, self.cap.memory_bytes, self.slo.memory_evict)

    def debug(self) -> dict[str, object]:
        """A summary for /debug/state."""
        quota = self.ex.read(BESTEFFORT, "cpu.cfs_quota_us")
        cpus = self.ex.read(BESTEFFORT, "cpuset.cpus")
        idle = self.ex.read(BESTEFFORT, "cpu.idle")
        return {self.names[0]: {
            "backend": "host", "cgroup_version": self.version, "cgroup_parent": self.tree.parent,
            "node_scope": self.config.node_scope, "cpu_capacity_milli": self.cap.cpu_milli,
            "memory_capacity_bytes": self.cap.memory_bytes, "pods": len(self.pods),
            "terminating": len(self.terminating), "pids": {u: p.state.pid for u, p in self.pods.items()},
            "be_cpu_allowed": self.be_allowed, "be_cpus": cpus, "be_quota_us": quota, "be_idle": idle == 1,
            "cgroup_writes": self.ex.written, "cgroup_failures": self.ex.failed, "pressure": self.pressure,
            "interference": None if self.interference is None else {
                "pods": len(self.interference.pods), "perf": self.interference.perf_problem or "counting"},
            "oom_score_writes": self.oom.written, "net_qos": self.net.problem or (
                "installed" if self.net.installed is not None else "off")}}
