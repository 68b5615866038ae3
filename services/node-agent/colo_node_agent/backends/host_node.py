"""The ``host`` backend's node state: the cgroup tree, executor, capacity, pod tables, report windows.

:class:`HostNode` builds what every part of :class:`~colo_node_agent.backends.host.HostBackend` shares (pod
lifecycle :mod:`.host_lifecycle`, the loop :mod:`.host_loop`, reports :mod:`.host_report`) and the BE QoS-level
settings they all re-apply. Times are wall-clock seconds.
"""

from __future__ import annotations

import math
import time
from collections import deque
from pathlib import Path
from typing import Callable

import msgspec

from colo.messages import NodeSLO, NodeSpec, PodSpec, QoSEvent, Resources
from colo_node_agent.backends.host_cgroups import CgroupTree
from colo_node_agent.backends.host_config import HostConfig, HostConfigError, host_problems
from colo_node_agent.backends.host_interference import InterferenceSampler
from colo_node_agent.backends.host_metrics import NodeSampler, capacity
from colo_node_agent.backends.host_net import NetQoS
from colo_node_agent.backends.host_oom import OOMScores
from colo_node_agent.backends.host_pods import HostPod, StateFile
from colo_node_agent.backends.host_qos import apply_plan_writes, kernel_features, node_topology
from colo_node_agent.backends.sim import PodEnd
from colo_node_agent.cgroups.executor import Executor, WriteRecord
from colo_node_agent.cgroups.fs import HostFS, detect_version
from colo_node_agent.cgroups.layout import QOS_DIRS
from colo_node_agent.gpu_discovery import host_gpus
from colo_node_agent.strategies.cgroup_settings import be_qos_settings
from colo_node_agent.strategies.node import StrategyMemory
from colo_node_agent.windows import Ring

MAX_PODS = 110
"""Pods capacity of the node (the kubelet's default ``maxPods``)."""
LS = ("LSE", "LSR", "LS")
"""QoS classes whose pods get interference signals (``PodMetric.interference``)."""


class HostNode:
    """The state of this machine as node ``config.node_name``; ``default_slo(node)`` until a NodeSLO arrives.

    ``pods`` the running pods and ``terminating`` those being stopped (by uid); ``node_cpu``/``node_mem`` (1 ×
    30 min of loops) and ``ls_cpu`` (1 × ``window_s``) the report windows in milli-cores and bytes. ``tree``
    overrides the cgroup tree (fake trees in tests). Raises HostConfigError listing every problem, OSError
    when the QoS-class groups cannot be made.
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
        # and its GPUs, for DeviceShare (docs/gpu.md "On the node"); read once, at start
        self.spec = msgspec.structs.replace(self.spec, topology=self.topology.message(),
                                            gpus=host_gpus(config.gpus, config.gpu_proc_root))
        self.memory = StrategyMemory()
        self._blkio_devices: tuple[str, ...] = ()
        self.oom = OOMScores()
        self.net = NetQoS(tree, self.state_dir)
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

    # ------------------------------------------------------------------ pod queries

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

    # ------------------------------------------------------------------ shared by the parts

    def _apply_be_settings(self, at: float) -> None:
        """BE QoS-level settings for the current BE pods and NodeSLO (shares, memory limit, cpu.idle)."""
        be = [p.state.spec for p in self.pods.values() if p.state.qos == "BE"]
        writes = be_qos_settings(be, self.slo.be_cpu_idle, idle_supported=self.features.cpu_idle,
                                 min_shares=self.slo.be_cpu_shares == "min")
        self._record(apply_plan_writes(self.ex, writes, at))

    def _record(self, records: list[WriteRecord]) -> list[WriteRecord]:
        """Queue the failed (not skipped) writes of ``records`` for the service to publish; returns ``records``."""
        name = self.names[0]
        self.cgroup_failures.extend((name, r) for r in records if not r.ok and not r.skipped)
        return records
