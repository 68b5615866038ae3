"""Node agent settings, from ``COLO_NODE_AGENT_*`` environment variables (or ``COLO_NODE_AGENT_CONFIG`` YAML).

Examples::

    COLO_NODE_AGENT_NODES_FILE=/tmp/run/nodes.json      # JSON list of NodeSpec for the sim backend
    COLO_NODE_AGENT_SUB_STEP_S=10
    COLO_NODE_AGENT_CPU_SUPPRESS__POLICY=cfsQuota       # default NodeSLO until slo-manager sends one
    COLO_NODE_AGENT_MEMORY_EVICT__THRESHOLD_PERCENT=70

Policy defaults are Koordinator v1.8's (REFERENCE.md §5) except BE memory eviction, which is on.

The ``host`` backend (this Linux machine, docs/node-agent.md "host backend")::

    COLO_NODE_AGENT_BACKEND=host
    COLO_NODE_AGENT_CGROUP_PARENT=colo                  # groups under /sys/fs/cgroup/<controller>/colo
    COLO_NODE_AGENT_STATE_DIR=/var/lib/colo/node-agent  # pods.json, pod logs and exit files
    COLO_NODE_AGENT_LOOP_S=1
"""

from __future__ import annotations

import re
from typing import Literal

import msgspec

from colo.messages import (
    BEBudgetStrategy,
    BlkIOStrategy,
    CPUBurstStrategy,
    CPUEvictStrategy,
    CPUSetStrategy,
    CPUSuppressStrategy,
    MemoryEvictStrategy,
    MemoryQoSStrategy,
    NetQoSStrategy,
    NodeSLO,
    OOMStrategy,
    ResctrlStrategy,
    SystemStrategy,
)
from colo.slo import strategies_of, strategy_problems
from colo_node_agent.backends.interference_model import be_kind_problems
from colo_node_agent.gpu_discovery import gpu_setting_problems

ENV_PREFIX = "COLO_NODE_AGENT"
"""Environment variable prefix of :class:`NodeAgentSettings`."""


CGROUP_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
"""One component of a cgroup parent path (no ``.``/``..``, no separators or spaces)."""
NODE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
"""A Kubernetes node name (DNS-1123 subdomain, lowercase)."""


def host_setting_problems(s: NodeAgentSettings) -> list[str]:
    """Every problem of the ``host`` backend's settings that needs no machine access (empty when valid)."""
    out: list[str] = []
    parent = s.cgroup_parent
    parts = parent.split("/")
    if not parent or parent.startswith("/") or parent.endswith("/"):
        out.append(f"cgroup_parent must be a relative path such as 'colo', got {parent!r}")
    elif any(not CGROUP_NAME.match(p) for p in parts):
        out.append(f"cgroup_parent {parent!r}: each component must match {CGROUP_NAME.pattern} "
                   "(no '.', '..', empty components or spaces)")
    elif parts[0] in ("kubepods", "kubepods.slice", "system.slice", "user.slice", "init.scope"):
        out.append(f"cgroup_parent {parent!r} would share the host's own {parts[0]!r} group: "
                   "choose another name")
    if not s.cgroup_root.startswith("/"):
        out.append(f"cgroup_root must be an absolute path, got {s.cgroup_root!r}")
    if not s.state_dir.startswith("/"):
        out.append(f"state_dir must be an absolute path, got {s.state_dir!r}")
    if s.node_name and not NODE_NAME.match(s.node_name):
        out.append(f"node_name {s.node_name!r} is not a valid node name (lowercase DNS-1123 subdomain)")
    if s.loop_s <= 0:
        out.append(f"loop_s must be > 0, got {s.loop_s}")
    elif s.report_interval_s < s.loop_s or s.window_s < s.loop_s:
        out.append(f"report_interval_s and window_s must be >= loop_s ({s.loop_s})")
    if s.termination_grace_s < 0:
        out.append(f"termination_grace_s must be >= 0, got {s.termination_grace_s}")
    if s.cpu_capacity_milli < 0 or s.memory_capacity_bytes < 0:
        out.append("cpu_capacity_milli and memory_capacity_bytes must be >= 0 (0 = measured)")
    out += gpu_setting_problems(s.gpus)
    return out


def validate_slo_values(slo: NodeSLO | NodeAgentSettings) -> list[str]:
    """Every out-of-range policy value of a NodeSLO (or of the settings' default policy); empty when valid
    (:func:`colo.slo.strategy_problems`, the checks the slo-manager applies where a policy is configured)."""
    return strategy_problems(strategies_of(slo))


class NodeAgentSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Settings of the node agent service."""

    backend: Literal["sim", "host"] = "sim"
    """``sim``: many virtual nodes in this process; ``host``: this Linux machine, pods as real processes."""
    nodes_file: str = ""
    """Path of a JSON list of NodeSpec: the virtual nodes the sim backend hosts (required for ``sim``)."""
    report_interval_s: float = 60.0
    """Seconds between NodeMetric reports per node (REFERENCE.md §2: 60 s)."""
    window_s: float = 300.0
    """Averaging window of NodeMetric usage, seconds (REFERENCE.md §2: 300 s)."""
    sub_step_s: float = 10.0
    """Simulated seconds per sub-step; strategies run after every sub-step (the reference: every 1 s)."""
    max_gap_s: float = 900.0
    """A clock jump larger than this (seconds) is skipped instead of simulated (e.g. first virtual tick)."""
    reconcile_interval_s: float = 10.0
    """Seconds between reconciliations of the store with what the nodes run (:mod:`colo_node_agent.reconcile`):
    a node missing from the store is registered again, a running pod without a binding gets it back, a copy
    bound elsewhere is stopped, a binding here with no pod is released; 0 = never (docs/operations.md
    "Recovery")."""
    reconcile_grace_s: float = 30.0
    """A binding on one of our nodes whose pod does not run here is released only once it is this many seconds
    old (its PodBound may still be on its way)."""
    system_cpu_fraction: float = 0.02
    """System (non-pod) CPU usage of a virtual node, fraction of its capacity."""
    system_memory_fraction: float = 0.04
    """System (non-pod) memory usage of a virtual node, fraction of its capacity."""
    interference_calibration: str = ""
    """sim: the interference calibration table the sim's LS harm model reads (docs/scenario.md "The interference
    model"): ``""`` = the one packaged with the agent (``colo_node_agent/data/interference-calibration.json``,
    measured by ``bench/``; when absent the sim models no harm and says so in one log line), ``off`` = no model,
    else a file path (must exist and be valid: every problem is listed)."""
    interference_be_kinds: dict[str, float] = msgspec.field(default_factory=lambda: {"cpu": 1.0})
    """sim: what kind of work the BE pods do, as shares of BE CPU per kind (``cpu`` spin, ``membw`` memory
    bandwidth, ``cache`` cache thrashing; normalised to sum 1), e.g. ``'{"cpu": 0.5, "membw": 0.5}'``. The traces
    do not say, so all ``cpu`` by default (the kind the bench measured first)."""
    cgroup_version: Literal["v1", "v2"] = "v1"
    """Hierarchy of the sim backend's in-memory cgroup trees (the host backend detects the machine's)."""
    cgroup_root: str = "/sys/fs/cgroup"
    """host: where the cgroup hierarchies are mounted (v1: a directory per controller; v2: the unified tree)."""
    cgroup_parent: str = "colo"
    """host: the group, relative to each hierarchy's root, holding the agent's QoS-class and pod groups."""
    state_dir: str = "/var/lib/colo/node-agent"
    """host: the state file (pods.json) and each pod's log and exit file; must survive agent restarts."""
    node_name: str = ""
    """host: the node's name (default: the machine's hostname, lowercased)."""
    loop_s: float = 1.0
    """host: seconds between usage samples, exit checks and strategy rounds (REFERENCE.md §2: 1 s)."""
    node_scope: Literal["machine", "parent"] = "machine"
    """host: ``machine`` = the node is this machine (/proc/stat, /proc/meminfo); ``parent`` = the node is the
    parent group (its quota/limit as capacity, its own usage), for a slice of a shared machine."""
    termination_grace_s: float = 30.0
    """host: SIGTERM → SIGKILL delay for eviction orders (Kubernetes terminationGracePeriodSeconds: 30 s);
    QoS evictions (memory, CPU satisfaction) kill at once."""
    cpu_capacity_milli: int = 0
    """host: node CPU capacity in milli-cores (0 = measured, see node_scope)."""
    memory_capacity_bytes: int = 0
    """host: node memory capacity in bytes (0 = measured, see node_scope)."""
    gpus: str = "auto"
    """host: the GPUs the node registers (``NodeSpec.gpus``; docs/gpu.md "On the node"): ``auto`` = discovered
    from the NVIDIA driver's procfs and ``nvidia-smi`` (:mod:`colo_node_agent.gpu_discovery`), ``off`` = none,
    else a JSON list of ``{index, model, memory_bytes}`` registered as given, e.g.
    ``'[{"index": 0, "model": "V100M16", "memory_bytes": 17179869184}]'`` (every problem is listed)."""
    interference_signals: bool = True
    """host: measure every LS pod's interference signals (run-queue wait from ``/proc/<tid>/schedstat``, PSI
    ``cpu.some``, CPI where perf events exist) into ``PodMetric.interference`` (docs/node-agent.md
    "Interference signals"); false = None there, nothing read."""
    cpu_suppress: CPUSuppressStrategy = CPUSuppressStrategy()
    """CPU suppress policy used until a NodeSLO arrives."""
    memory_evict: MemoryEvictStrategy = MemoryEvictStrategy()
    """BE memory eviction policy used until a NodeSLO arrives (on; threshold 70 %)."""
    cpu_evict: CPUEvictStrategy = CPUEvictStrategy()
    """BE CPU eviction by satisfaction used until a NodeSLO arrives (off)."""
    be_cpu_idle: bool = True
    """Put the BE QoS group in SCHED_IDLE (``cpu.idle`` = 1) until a NodeSLO says otherwise."""
    be_cpu_shares: Literal["requests", "min"] = "requests"
    """The BE QoS group's cpu.shares until a NodeSLO arrives: Σ batch-cpu requests, or ``min`` = 2 (the kubelet's
    MinShares for kubepods/besteffort)."""
    cpu_burst: CPUBurstStrategy = CPUBurstStrategy()
    """CPU burst of LS pods until a NodeSLO arrives (policy none)."""
    memory_qos: MemoryQoSStrategy = MemoryQoSStrategy()
    """memory.min/low/high until a NodeSLO arrives (off)."""
    cpuset: CPUSetStrategy = CPUSetStrategy()
    """LSE exclusive / LSR reserved cpusets until a NodeSLO arrives (on)."""
    resctrl: ResctrlStrategy = ResctrlStrategy()
    """LLC / memory bandwidth groups until a NodeSLO arrives (off; BE 0-30 % of L3 when on)."""
    blkio: BlkIOStrategy = BlkIOStrategy()
    """BE block I/O throttles until a NodeSLO arrives (off)."""
    system: SystemStrategy = SystemStrategy()
    """min_free_kbytes / watermark_scale_factor until a NodeSLO arrives (off)."""
    be_budget: BEBudgetStrategy = BEBudgetStrategy()
    """The SLO-driven BE budget until a NodeSLO arrives (off; docs/node-agent.md "BE budget")."""
    oom: OOMStrategy = OOMStrategy()
    """OOM priority (oom_score_adj by QoS class) until a NodeSLO arrives (on; host backend)."""
    net_qos: NetQoSStrategy = NetQoSStrategy()
    """Egress network QoS until a NodeSLO arrives (off; host backend, cgroup v1 net_cls + tc)."""

    def __post_init__(self) -> None:
        problems = validate_slo_values(self)
        if self.backend == "host":
            problems += host_setting_problems(self)
        if self.sub_step_s <= 0:
            problems.append(f"sub_step_s must be > 0, got {self.sub_step_s}")
        elif self.backend == "sim" and self.report_interval_s < self.sub_step_s:
            problems.append(f"report_interval_s ({self.report_interval_s}) must be >= sub_step_s")
        if self.sub_step_s > 0 and self.backend == "sim" and self.window_s < self.sub_step_s:
            problems.append(f"window_s ({self.window_s}) must be >= sub_step_s")
        if self.reconcile_interval_s < 0 or self.reconcile_grace_s < 0:
            problems.append(f"reconcile_interval_s and reconcile_grace_s must be >= 0, got "
                            f"{self.reconcile_interval_s}, {self.reconcile_grace_s}")
        for name, v in (("system_cpu_fraction", self.system_cpu_fraction),
                        ("system_memory_fraction", self.system_memory_fraction)):
            if not 0 <= v < 1:
                problems.append(f"{name} must be within [0, 1), got {v}")
        problems += [f"interference_be_kinds: {p}" for p in be_kind_problems(self.interference_be_kinds)]
        if problems:
            raise ValueError("; ".join(problems))

    def default_slo(self, node: str) -> NodeSLO:
        """The NodeSLO a node uses until slo-manager publishes one."""
        return NodeSLO(node=node, cpu_suppress=self.cpu_suppress, memory_evict=self.memory_evict,
                       cpu_evict=self.cpu_evict, be_cpu_idle=self.be_cpu_idle, be_cpu_shares=self.be_cpu_shares,
                       cpu_burst=self.cpu_burst,
                       memory_qos=self.memory_qos, cpuset=self.cpuset, resctrl=self.resctrl, blkio=self.blkio,
                       system=self.system, oom=self.oom, net_qos=self.net_qos, be_budget=self.be_budget)
