"""What node agents measure: :class:`NodeMetric` and its per-pod, aggregated and memory-pressure parts
(REFERENCE.md §2)."""

from __future__ import annotations

from typing import Literal

from colo.messages.base import Message, PriorityClass, QoSClass
from colo.messages.resources import Usage


class InterferenceSignals(Message, frozen=True):
    """How much one pod's CPU work was delayed by others over the report window; −1 where unknown.

    ``runq_wait_ratio`` seconds its threads waited for a CPU per second they ran (``/proc/<pid>/schedstat``
    fields 2 / 1, summed over the pod's processes); ``cpu_pressure_some`` PSI ``cpu.some`` avg10 of the pod group
    (percent of wall time; cgroup v2 only); ``cpi`` cycles per instruction (``perf`` events, where the machine
    has them); ``latency_inflation_percent`` the modelled rise of the pod's p99 latency over running alone (the
    sim's interference model; −1 on real nodes).
    """

    runq_wait_ratio: float = -1.0
    cpu_pressure_some: float = -1.0
    cpi: float = -1.0
    latency_inflation_percent: float = -1.0


class BEBudgetState(Message, frozen=True):
    """The SLO-driven BE budget of one node (NodeSLO ``be_budget``): ``threshold_percent`` the suppress threshold
    in force (percent of capacity); ``phase`` ``grow``, ``hold``, ``cut`` or ``fallback`` (signals missing: the
    static threshold); ``signal``/``baseline`` the LS signal now and BE-free (units of the chosen signal);
    ``since`` when the phase began (seconds); ``baseline_samples`` how many BE-free loops the baseline was
    learned from; ``cut_at`` when the budget was last cut (seconds; None = never), the start of the hold;
    ``cut_from_percent`` the threshold in force at that cut (−1 = never), which growth stays below for a while.
    The rule: docs/node-agent.md "BE budget"."""

    threshold_percent: float
    phase: Literal["grow", "hold", "cut", "fallback"] = "fallback"
    signal: float = -1.0
    baseline: float = -1.0
    since: float = 0.0
    baseline_samples: int = 0
    cut_at: float | None = None
    cut_from_percent: float = -1.0


class PodMetric(Message, frozen=True):
    """Usage of one pod over the report window; ``cpu`` milli-cores, ``memory`` bytes.

    ``cpu_throttled_ratio`` share of CFS periods throttled since the previous report; ``pressure`` the pod
    group's PSI where the kernel has it per group (``cpu.some``, ``memory.full`` ...: the kernel's avg10, percent
    of wall time stalled over the last 10 s; empty elsewhere); ``interference`` its interference signals (LS
    pods; None where not measured).
    """

    uid: str
    cpu: int = 0
    memory: int = 0
    qos_class: QoSClass | None = None
    priority_class: PriorityClass | None = None
    cpu_throttled_ratio: float = 0.0
    pressure: dict[str, float] = {}
    interference: InterferenceSignals | None = None


class AggregatedUsage(Message, frozen=True):
    """Node usage statistic ``stat`` (avg, p50, p90, p95, p99) over ``window_s`` seconds."""

    window_s: int
    stat: Literal["avg", "p50", "p90", "p95", "p99"]
    cpu: int = 0
    memory: int = 0


class MemoryPressure(Message, frozen=True):
    """BE memory pressure of a node, as its node agent sees it (docs/node-agent.md "BE memory pressure").

    The condition starts (``since``, seconds) when node memory reaches the eviction threshold or the agent
    evicts a BE pod for memory, and holds until memory has stayed below the lower threshold for ``hold_s``
    seconds: ``until`` is when that hold ends if memory stays below (0 while memory is at or above the lower
    threshold). ``last_evict_at`` the last BE memory eviction (0 = none); ``used_percent`` node memory used
    ⌊used × 100 / capacity⌋ at the report; thresholds as the NodeSLO's ``memory_evict`` (REFERENCE.md §5).
    """

    since: float
    until: float = 0.0
    last_evict_at: float = 0.0
    used_percent: int = 0
    threshold_percent: int = 70
    lower_percent: int = 68
    hold_s: float = 300.0


class NodeMetric(Message, frozen=True):
    """A node agent's report (REFERENCE.md §2): averages over ``window_s`` ending at ``at``.

    ``node_usage`` = node used; ``system_usage`` = max(node − Σpods − Σhost apps, 0);
    ``pods`` per-pod usage; ``aggregated`` percentiles of node usage; ``be_cpu_allowed``
    the CPU suppress budget in milli-cores (−1 when suppress is off); ``pressure`` the node's PSI
    (``/proc/pressure``: ``cpu.some``, ``memory.full`` ... avg10 percent; empty where the kernel has none
    or the backend is simulated); ``be_budget`` the SLO-driven BE budget's state (None while NodeSLO
    ``be_budget`` is off).
    """

    node: str
    at: float
    window_s: float = 300.0
    node_usage: Usage = Usage()
    system_usage: Usage = Usage()
    host_apps_usage: Usage = Usage()
    pods: list[PodMetric] = []
    aggregated: list[AggregatedUsage] = []
    be_cpu_allowed: int = -1
    ls_cpu_demand: int = 0
    ls_cpu_served: int = 0
    pressure: dict[str, float] = {}
    memory_pressure: MemoryPressure | None = None
    """The node's BE memory pressure condition at ``at``; None when the node is not under it."""
    be_budget: BEBudgetState | None = None
    """The SLO-driven BE budget's state after the last agent loop; None while NodeSLO ``be_budget`` is off."""
