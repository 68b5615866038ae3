"""The node agent's Prometheus metrics (docs/metrics.md "node-agent"), defined at import time.

Every figure comes from what the service publishes, so ``/metrics`` says what the bus says and both backends
(``sim``: many nodes per process; ``host``: this machine) are covered by the same code:

* each NodeMetric sets the node's gauges (usage by QoS class, the BE CPU budget of suppress, what suppress
  takes away from BE) — values as of the node's last report (``report_interval_s``, 60 s by default);
* each QoS event of a tick counts an action (suppress, burst), OOM kills, failed cgroup writes and the agent's
  own evictions (BE memory / BE CPU eviction, REFERENCE.md §5); an eviction ordered over ``pod.evict``
  (descheduler, preemption) counts with reason ``order``. A deletion (``colo delete``) is not an eviction.

* each NodeMetric also sets the node's LS interference gauges: the max and mean over its LS pods of each signal
  of ``PodMetric.interference`` that is known (not −1); a signal no LS pod has leaves no series.

Labels: ``node`` (the nodes this process hosts, fixed at start), ``qos`` (:data:`QOS_LABELS`), ``reason``
(:data:`EVICTION_REASONS`), ``action`` (:data:`QOS_ACTIONS`), ``stat`` (:data:`SIGNAL_STATS`). No pod, uid or
workload label: per-pod signals are in the NodeMetric, not in Prometheus.
"""

from __future__ import annotations

from collections.abc import Iterable

from colo import telemetry
from colo.messages import NodeMetric, NodeSpec, QoSEvent

QOS_LABELS = ("ls", "be", "system")
"""``qos`` of a usage series: ``ls`` = pods of class LSE, LSR, LS or unknown (suppress counts unknown pods as
non-BE, REFERENCE.md §5); ``be`` = BE pods; ``system`` = the node's system usage, host applications and
SYSTEM-class pods."""
EVICTION_REASONS = ("memory", "cpu", "order")
"""``reason`` of an eviction: BE memory eviction (node memory ≥ threshold), BE CPU eviction (BE CPU satisfaction
low), an eviction ordered over ``pod.evict`` (descheduler migration, preemption)."""
QOS_ACTIONS = ("suppress", "burst")
"""``action`` of a QoS action: ``suppress`` = the BE cpuset or CFS quota changed (a new BE CPU budget);
``burst`` = CPU burst scaled LS pods' CFS quota (REFERENCE.md §5)."""

SIGNAL_STATS = ("max", "mean")
"""``stat`` of an LS interference gauge: over the node's LS pods whose signal is known."""

_AGENT_EVICTIONS = {"BE memory eviction": "memory", "BE cpu eviction": "cpu"}
"""QoSEvent.reason of the backends' evictions → ``reason`` label."""

CPU_USAGE = telemetry.gauge(
    "colo_node_cpu_usage_cores",
    "CPU used on the node by QoS class (ls, be, system), cores, averaged over the last NodeMetric's window",
    ("node", "qos"))
MEMORY_USAGE = telemetry.gauge(
    "colo_node_memory_usage_bytes",
    "Memory used on the node by QoS class (ls, be, system), bytes, averaged over the last NodeMetric's window",
    ("node", "qos"))
LAST_REPORT = telemetry.gauge(
    "colo_node_last_report_timestamp_seconds",
    "When the node last published its NodeMetric (its ``at``), clock seconds (virtual under a simulation); "
    "time() minus it is the report's age", ("node",))
CPU_CAPACITY = telemetry.gauge("colo_node_cpu_capacity_cores", "CPU capacity of the node, cores", ("node",))
MEMORY_CAPACITY = telemetry.gauge("colo_node_memory_capacity_bytes", "Memory capacity of the node, bytes",
                                  ("node",))
BE_CPU_ALLOWED = telemetry.gauge(
    "colo_node_be_cpu_allowed_cores",
    "BE CPU budget in force (CPU suppress BEAllowed, enforced by cpuset or CFS quota), cores; absent while "
    "suppress is off", ("node",))
BE_CPU_SUPPRESSED = telemetry.gauge(
    "colo_node_be_cpu_suppressed_cores",
    "CPU taken away from BE by suppress: capacity − BE CPU budget, cores (0 while suppress is off)", ("node",))
EVICTIONS = telemetry.counter(
    "colo_node_agent_evictions_total",
    "Pods evicted by the node agent, by reason (memory, cpu: BE eviction strategies; order: pod.evict)",
    ("node", "reason"))
QOS_ACTIONS_TOTAL = telemetry.counter(
    "colo_node_agent_qos_actions_total",
    "QoS actions applied, by action (suppress: new BE cpuset/CFS quota; burst: LS CFS quota scaled)",
    ("node", "action"))
OOM_KILLS = telemetry.counter("colo_node_agent_oom_kills_total", "Pods OOM-killed (cgroup limit or node memory)",
                              ("node",))
BE_BUDGET_THRESHOLD = telemetry.gauge(
    "colo_node_be_budget_threshold_percent",
    "The SLO-driven BE budget's CPU suppress threshold in force, percent of node capacity (NodeMetric.be_budget); "
    "no series while the budget is off", ("node",))
CGROUP_FAILURES = telemetry.counter("colo_node_agent_cgroup_write_failures_total",
                                    "cgroup writes that failed (each also a QoSEvent of kind cgroup)", ("node",))

LS_RUNQ_WAIT = telemetry.gauge(
    "colo_node_ls_runq_wait_ratio",
    "Run-queue wait per second on a CPU of the node's LS pods (/proc/<tid>/schedstat over the NodeMetric's "
    "window), max or mean over LS pods; seconds per second", ("node", "stat"))
LS_CPU_PRESSURE = telemetry.gauge(
    "colo_node_ls_cpu_pressure_ratio",
    "PSI cpu.some avg10 of the node's LS pod groups as a fraction of wall time (0-1), max or mean over LS pods",
    ("node", "stat"))
LS_CPI = telemetry.gauge(
    "colo_node_ls_cycles_per_instruction",
    "Cycles per instruction of the node's LS pods (perf events, where the machine has them), max or mean",
    ("node", "stat"))
LS_LATENCY_INFLATION = telemetry.gauge(
    "colo_node_ls_latency_inflation_ratio",
    "Modelled p99 latency rise of the node's LS pods over running alone (sim), fraction (0.1 = +10 %), max or "
    "mean", ("node", "stat"))
_SIGNAL_GAUGES = ((LS_RUNQ_WAIT, "runq_wait_ratio", 1.0), (LS_CPU_PRESSURE, "cpu_pressure_some", 0.01),
                  (LS_CPI, "cpi", 1.0), (LS_LATENCY_INFLATION, "latency_inflation_percent", 0.01))
"""(gauge, InterferenceSignals field, scale to the gauge's unit)."""


def register_nodes(nodes: Iterable[NodeSpec]) -> None:
    """Capacity gauges and zeroed counters for every node hosted (a counter series exists from the start, so
    that ``rate()`` sees its first increment)."""
    for spec in nodes:
        CPU_CAPACITY.labels(spec.name).set(spec.capacity.cpu / 1000)
        MEMORY_CAPACITY.labels(spec.name).set(spec.capacity.memory)
        for reason in EVICTION_REASONS:
            EVICTIONS.labels(spec.name, reason)
        for action in QOS_ACTIONS:
            QOS_ACTIONS_TOTAL.labels(spec.name, action)
        OOM_KILLS.labels(spec.name)
        CGROUP_FAILURES.labels(spec.name)


def usage_by_qos(metric: NodeMetric) -> dict[str, tuple[int, int]]:
    """``qos`` label → (CPU milli-cores, memory bytes) of ``metric`` (see :data:`QOS_LABELS`)."""
    out = {q: [0, 0] for q in QOS_LABELS}
    for pod in metric.pods:
        key = "be" if pod.qos_class == "BE" else "system" if pod.qos_class == "SYSTEM" else "ls"
        out[key][0] += pod.cpu
        out[key][1] += pod.memory
    out["system"][0] += metric.system_usage.cpu + metric.host_apps_usage.cpu
    out["system"][1] += metric.system_usage.memory + metric.host_apps_usage.memory
    return {q: (cpu, mem) for q, (cpu, mem) in out.items()}


def ls_signal_stats(metric: NodeMetric) -> dict[str, tuple[float, float]]:
    """InterferenceSignals field → (max, mean) over ``metric``'s LS pods (LSE, LSR, LS, no class) whose value
    is known (≥ 0), in the message's units; fields no LS pod knows are absent."""
    values: dict[str, list[float]] = {}
    for pod in metric.pods:
        sig = pod.interference
        if sig is None or pod.qos_class in ("BE", "SYSTEM"):
            continue
        for _, field, _ in _SIGNAL_GAUGES:
            v = getattr(sig, field)
            if v >= 0:
                values.setdefault(field, []).append(v)
    return {f: (max(v), sum(v) / len(v)) for f, v in values.items()}


def observe_interference(metric: NodeMetric) -> None:
    """Set (or remove, when no LS pod knows the signal) the node's LS interference gauges."""
    stats = ls_signal_stats(metric)
    for gauge, field, scale in _SIGNAL_GAUGES:
        pair = stats.get(field)
        for stat, i in zip(SIGNAL_STATS, (0, 1)):
            if pair is None:
                gauge.remove(metric.node, stat)  # removing a missing series is a no-op
            else:
                gauge.labels(metric.node, stat).set(pair[i] * scale)


def observe_node_metric(metric: NodeMetric, cpu_capacity_milli: int) -> None:
    """Set the node's gauges from the NodeMetric just published (``cpu_capacity_milli``: the node's)."""
    node = metric.node
    LAST_REPORT.labels(node).set(metric.at)
    observe_interference(metric)
    if metric.be_budget is None:
        BE_BUDGET_THRESHOLD.remove(node)
    else:
        BE_BUDGET_THRESHOLD.labels(node).set(metric.be_budget.threshold_percent)
    for qos, (cpu, mem) in usage_by_qos(metric).items():
        CPU_USAGE.labels(node, qos).set(cpu / 1000)
        MEMORY_USAGE.labels(node, qos).set(mem)
    if metric.be_cpu_allowed < 0:
        BE_CPU_ALLOWED.remove(node)  # no budget while suppress is off: no series (removing none is a no-op)
        BE_CPU_SUPPRESSED.labels(node).set(0)
        return
    BE_CPU_ALLOWED.labels(node).set(metric.be_cpu_allowed / 1000)
    BE_CPU_SUPPRESSED.labels(node).set(max(cpu_capacity_milli - metric.be_cpu_allowed, 0) / 1000)


def observe_events(events: Iterable[QoSEvent]) -> None:
    """Count the QoS events a tick publishes (the backends' own evictions, suppress, burst, OOM, cgroup)."""
    for ev in events:
        if ev.kind == "evict":
            # the backends evict for memory or cpu only (strategies/node.py); anything else is an order
            EVICTIONS.labels(ev.node, _AGENT_EVICTIONS.get(ev.reason, "order")).inc(len(ev.pods))
        elif ev.kind in QOS_ACTIONS:
            QOS_ACTIONS_TOTAL.labels(ev.node, ev.kind).inc()
        elif ev.kind == "oom":
            OOM_KILLS.labels(ev.node).inc(len(ev.pods) or 1)
        elif ev.kind == "cgroup":
            CGROUP_FAILURES.labels(ev.node).inc()


def ordered_eviction(node: str) -> None:
    """Count one eviction ordered over ``pod.evict`` (not a deletion) on ``node``."""
    EVICTIONS.labels(node, "order").inc()

