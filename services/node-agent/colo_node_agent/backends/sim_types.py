"""Value types of the ``sim`` backend: its settings, what advancing time produced, per-node NodeSLO columns."""


from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypedDict

import numpy as np
import numpy.typing as npt

from colo.messages import PodPhase, PodSpec, QoSEvent
from colo_node_agent.backends.interference_model import InterferenceModel
from colo_node_agent.backends.sim_pods import BOOL, F64, I64
from colo_node_agent.cgroups.resources import CgroupVersion


@dataclass(frozen=True)
class SimConfig:
    """``sub_step_s`` seconds per simulated step; system usage as fractions of capacity; cgroup hierarchy;
    ``window_s`` the NodeMetric averaging window (REFERENCE.md §2: 300 s); a clock jump over ``max_gap_s``
    is skipped rather than simulated; ``interference`` the model of LS harm from BE load (None = no harm, signals
    −1; :mod:`.sim_interference`)."""

    sub_step_s: float = 10.0
    system_cpu_fraction: float = 0.02
    system_memory_fraction: float = 0.04
    cgroup_version: CgroupVersion = "v1"
    window_s: float = 300.0
    max_gap_s: float = 900.0
    interference: InterferenceModel | None = None


@dataclass(frozen=True)
class PodEnd:
    """A pod that stopped: ``phase`` Succeeded/Failed, ``reason`` Completed/Evicted/OOMKilled."""

    uid: str
    node: str
    phase: PodPhase
    reason: str
    message: str
    at: float
    spec: PodSpec


@dataclass
class AdvanceResult:
    """What happened while advancing: ended pods, QoS events, stats (see :meth:`SimBackend.advance`) and the
    nodes whose BE memory pressure began (their NodeMetric is published at once, not at the next report)."""

    ended: list[PodEnd] = field(default_factory=list)
    events: list[QoSEvent] = field(default_factory=list)
    stats: dict[str, float] = field(default_factory=dict)
    pressure_started: list[str] = field(default_factory=list)


class SloColumns(TypedDict):
    """Per-node NodeSLO fields as arrays of shape ``(nodes,)``: percents and milli-cores as int64."""

    cpuset: BOOL
    threshold: I64
    min: I64
    cpu_evict: BOOL
    mem_evict: BOOL
    mem_threshold: F64
    reserved: I64
    burst: BOOL
    budget: BOOL
    """NodeSLO ``be_budget.enabled``; the budget's knobs as float64 (percents, seconds) below."""
    budget_target: F64
    budget_max: F64
    budget_step: F64
    budget_hold: F64
    budget_noise: F64
    """The chosen signal's noise floor (strategies/be_budget.py NOISE_FLOOR)."""
    budget_signal: npt.NDArray[np.str_]
    """The chosen signal per node (``be_budget.signal``: runq_wait, cpu_pressure or cpi)."""
