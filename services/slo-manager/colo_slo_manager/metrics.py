"""The slo-manager's Prometheus metrics (docs/metrics.md "slo-manager"), defined at import time.

* Batch and mid allocatable per node: the last :class:`~colo.messages.NodeResource` published for each node
  (what the scheduler sees, REFERENCE.md §3), updated after every tick and every pressure publish. The series
  of a node that is no longer known are removed (no stale series).
* The configuration in force: ``colo_slo_manager_config_generation`` (how many configurations were put in force
  since the process started: 1 after start, +1 per hot reload; a step on a graph is a reload),
  ``colo_slo_manager_config_info{version}`` (one series, the version's hex digits) and when it came in force;
  ``colo_config_applied_total`` / ``colo_config_rejected_total`` count hot reloads (names kept from before).
  Every ``service``/``trigger`` and ``result`` combination is exported at 0 from import.
* Admission outcomes by result.

Labels: ``node`` (the nodes of the cluster), ``result`` (admitted, rejected), ``service`` and ``trigger``
(start, file, kv: what brought a configuration), ``version`` (one series at a time).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from colo import telemetry
from colo.messages import NodeResource

SERVICE = "slo-manager"
"""``service`` of the config counters (the only service with a hot-reloaded configuration)."""
TRIGGERS = ("file", "kv")
"""``trigger`` of a hot reload: the configuration file changed, or the key-value bucket's key."""

BATCH_CPU = telemetry.gauge(
    "colo_node_batch_allocatable_cpu_cores",
    "Batch CPU offered on the node (kubernetes.io/batch-cpu of the last NodeResource), cores", ("node",))
BATCH_MEMORY = telemetry.gauge(
    "colo_node_batch_allocatable_memory_bytes",
    "Batch memory offered on the node (kubernetes.io/batch-memory of the last NodeResource), bytes", ("node",))
MID_CPU = telemetry.gauge(
    "colo_node_mid_allocatable_cpu_cores",
    "Mid CPU offered on the node (kubernetes.io/mid-cpu of the last NodeResource), cores", ("node",))
MID_MEMORY = telemetry.gauge(
    "colo_node_mid_allocatable_memory_bytes",
    "Mid memory offered on the node (kubernetes.io/mid-memory of the last NodeResource), bytes", ("node",))
RESOURCE_RESET = telemetry.gauge(
    "colo_node_batch_resource_reset",
    "1 while the node's batch/mid offer is reset (its NodeMetric went stale), else 0", ("node",))
CONFIG_GENERATION = telemetry.gauge(
    "colo_slo_manager_config_generation",
    "Configurations put in force since the process started (1 after start, +1 per hot reload)")
CONFIG_INFO = telemetry.gauge(
    "colo_slo_manager_config_info", "Always 1: the version of the configuration in force (one series)",
    ("version",))
CONFIG_SINCE = telemetry.gauge(
    "colo_slo_manager_config_applied_timestamp_seconds",
    "When the configuration in force came in force, clock seconds (virtual seconds under a simulation)")
APPLIED = telemetry.counter("colo_config_applied_total", "Configurations put in force while running",
                            ("service", "trigger"))
REJECTED = telemetry.counter("colo_config_rejected_total", "New configurations refused (the old one stays)",
                             ("service", "trigger"))
ADMISSIONS = telemetry.counter("colo_slo_manager_admissions_total",
                               "Admission outcomes of submitted pods, by result (admitted, rejected)", ("result",))

_PER_NODE = (BATCH_CPU, BATCH_MEMORY, MID_CPU, MID_MEMORY, RESOURCE_RESET)

for _trigger in TRIGGERS:  # exported from the start, at 0 until the first reload
    APPLIED.labels(SERVICE, _trigger)
    REJECTED.labels(SERVICE, _trigger)
for _result in ("admitted", "rejected"):
    ADMISSIONS.labels(_result)


def config_in_force(version: str, since: float, generation: int) -> None:
    """Show ``version`` (a :func:`colo_slo_manager.config.version_of` digest) in force since ``since``, the
    ``generation``-th configuration put in force since start (1 + the hot reloads applied)."""
    CONFIG_GENERATION.set(generation)
    telemetry.prune(CONFIG_INFO, "version", {version})
    CONFIG_INFO.labels(version).set(1)
    CONFIG_SINCE.set(since)


def admissions(admitted: int, rejected: int) -> None:
    """Count ``admitted`` and ``rejected`` admission outcomes."""
    if admitted:
        ADMISSIONS.labels("admitted").inc(admitted)
    if rejected:
        ADMISSIONS.labels("rejected").inc(rejected)


def offered(published: Mapping[str, NodeResource], nodes: Iterable[str]) -> None:
    """Set the per-node gauges from the last NodeResource ``published`` for each of ``nodes`` (the nodes known);
    series of any other node are removed. A node known but never published has no series yet."""
    known = {n for n in nodes if n in published}
    for gauge in _PER_NODE:
        telemetry.prune(gauge, "node", known)
    for name in known:
        r = published[name]
        BATCH_CPU.labels(name).set(r.batch_cpu / 1000)
        BATCH_MEMORY.labels(name).set(r.batch_memory)
        MID_CPU.labels(name).set(r.mid_cpu / 1000)
        MID_MEMORY.labels(name).set(r.mid_memory)
        RESOURCE_RESET.labels(name).set(1 if r.reset else 0)
