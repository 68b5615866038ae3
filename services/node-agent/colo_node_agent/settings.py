"""Node agent settings, from ``COLO_NODE_AGENT_*`` environment variables (or ``COLO_NODE_AGENT_CONFIG`` YAML).

Examples::

    COLO_NODE_AGENT_NODES_FILE=/tmp/run/nodes.json      # JSON list of NodeSpec for the sim backend
    COLO_NODE_AGENT_SUB_STEP_S=10
    COLO_NODE_AGENT_CPU_SUPPRESS__POLICY=cfsQuota       # default NodeSLO until slo-manager sends one
    COLO_NODE_AGENT_MEMORY_EVICT__THRESHOLD_PERCENT=70

Policy defaults are Koordinator v1.8's (REFERENCE.md §5) except BE memory eviction, which is on.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from colo.messages import CPUEvictStrategy, CPUSuppressStrategy, MemoryEvictStrategy, NodeSLO

ENV_PREFIX = "COLO_NODE_AGENT"
"""Environment variable prefix of :class:`NodeAgentSettings`."""


def validate_slo_values(slo: NodeSLO | NodeAgentSettings) -> list[str]:
    """Every out-of-range policy value of a NodeSLO (or of the settings' default policy); empty when valid."""
    out: list[str] = []
    percents = {
        "cpu_suppress.threshold_percent": slo.cpu_suppress.threshold_percent,
        "cpu_suppress.min_percent": slo.cpu_suppress.min_percent,
        "memory_evict.threshold_percent": slo.memory_evict.threshold_percent,
        "memory_evict.lower_percent": slo.memory_evict.lower_percent,
        "cpu_evict.upper_percent": slo.cpu_evict.upper_percent,
        "cpu_evict.lower_percent": slo.cpu_evict.lower_percent,
        "cpu_evict.usage_threshold_percent": slo.cpu_evict.usage_threshold_percent,
    }
    for name, value in percents.items():
        if value is not None and not 0 <= value <= 100:
            out.append(f"{name} must be within 0..100, got {value}")
    if slo.memory_evict.cooldown_s < 0 or slo.cpu_evict.cooldown_s < 0 or slo.cpu_evict.window_s <= 0:
        out.append("eviction cool-downs must be >= 0 and cpu_evict.window_s > 0")
    return out


class NodeAgentSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Settings of the node agent service."""

    backend: Literal["sim", "host"] = "sim"
    """``sim``: many virtual nodes in this process; ``host``: this Linux machine (not available yet)."""
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
    system_cpu_fraction: float = 0.02
    """System (non-pod) CPU usage of a virtual node, fraction of its capacity."""
    system_memory_fraction: float = 0.04
    """System (non-pod) memory usage of a virtual node, fraction of its capacity."""
    cgroup_version: Literal["v1", "v2"] = "v1"
    """Hierarchy of the sim backend's in-memory cgroup trees."""
    cpu_suppress: CPUSuppressStrategy = CPUSuppressStrategy()
    """CPU suppress policy used until a NodeSLO arrives."""
    memory_evict: MemoryEvictStrategy = MemoryEvictStrategy()
    """BE memory eviction policy used until a NodeSLO arrives (on; threshold 70 %)."""
    cpu_evict: CPUEvictStrategy = CPUEvictStrategy()
    """BE CPU eviction by satisfaction used until a NodeSLO arrives (off)."""
    be_cpu_idle: bool = True
    """Put the BE QoS group in SCHED_IDLE (``cpu.idle`` = 1) until a NodeSLO says otherwise."""

    def __post_init__(self) -> None:
        problems = validate_slo_values(self)
        if self.backend == "host":
            problems.append("backend 'host' is not available yet: use 'sim'")
        if self.sub_step_s <= 0:
            problems.append(f"sub_step_s must be > 0, got {self.sub_step_s}")
        if self.report_interval_s < self.sub_step_s:
            problems.append(f"report_interval_s ({self.report_interval_s}) must be >= sub_step_s")
        if self.window_s < self.sub_step_s:
            problems.append(f"window_s ({self.window_s}) must be >= sub_step_s")
        for name, v in (("system_cpu_fraction", self.system_cpu_fraction),
                        ("system_memory_fraction", self.system_memory_fraction)):
            if not 0 <= v < 1:
                problems.append(f"{name} must be within [0, 1), got {v}")
        if problems:
            raise ValueError("; ".join(problems))

    def default_slo(self, node: str) -> NodeSLO:
        """The NodeSLO a node uses until slo-manager publishes one."""
        return NodeSLO(node=node, cpu_suppress=self.cpu_suppress, memory_evict=self.memory_evict,
                       cpu_evict=self.cpu_evict, be_cpu_idle=self.be_cpu_idle)
