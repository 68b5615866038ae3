"""The profiler's Prometheus metrics (docs/metrics.md "profiler"), defined at import time: prediction vs usage.

Per node, the prod peak predicted by the last NodeProfile computed (published or found unchanged) and the
prod-reclaimable resources it gives (REFERENCE.md §7), beside the prod usage of the last NodeMetric ingested
(Σ usage of the node's pods of priority class prod, as the model classes them). Per tick, for every node whose
usage was reported after its last prediction, the relative error of that prediction
``|observed − predicted| / max(observed, predicted)`` (0 = exact, 1 = one of them 0) goes into a histogram per
resource, and a usage above the predicted peak (a violation: batch was offered room prod then used) is counted.
The error is relative to the larger of the two so that it stays within 0–1: relative to the prediction, one cold
start (a peak of a few milli-cores predicted before a pod's first sample) reads as an error of 70 and swamps the
mean; relative to the usage, an idle node divides by 0. A resource the node's prod pods do not use in the
report (usage 0: no prod pods) is not scored: the prediction there is the histogram's floor (its first bucket,
25 milli-cores / 5 MiB, times the margin), which would read as a 100 % error every tick. It is unsigned because a Prometheus histogram with
negative buckets exposes no ``_sum`` (OpenMetrics); the direction is the exceeded counter. A node whose model
expires loses its series.

Labels: ``node`` (nodes with a model), ``resource`` (cpu, memory), ``kind`` (node, pod, workload). No pod or
workload label: per-pod and per-workload predictions stay in the NodeProfile and WorkloadProfile messages.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from colo import telemetry
from colo.messages import NodeMetric, NodeProfile, Usage
from colo_profiler.model import ProfileModel

RESOURCES = ("cpu", "memory")
ERROR_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 0.9, 1.0)
"""Buckets of the relative error (a ratio 0–1, no unit): ``le=0.1`` within 10 %; a peak predicted at twice the
usage, or usage at twice the peak, has error 0.5."""

PREDICTED_CPU = telemetry.gauge(
    "colo_node_prod_peak_predicted_cpu_cores", "Predicted prod CPU peak of the node (last NodeProfile), cores",
    ("node",))
PREDICTED_MEMORY = telemetry.gauge(
    "colo_node_prod_peak_predicted_memory_bytes", "Predicted prod memory peak of the node (last NodeProfile), bytes",
    ("node",))
RECLAIMABLE_CPU = telemetry.gauge(
    "colo_node_prod_reclaimable_cpu_cores", "Prod-reclaimable CPU of the node (last NodeProfile), cores", ("node",))
RECLAIMABLE_MEMORY = telemetry.gauge(
    "colo_node_prod_reclaimable_memory_bytes", "Prod-reclaimable memory of the node (last NodeProfile), bytes",
    ("node",))
OBSERVED_CPU = telemetry.gauge(
    "colo_node_prod_usage_cpu_cores", "CPU used by the node's prod pods in the last NodeMetric ingested, cores",
    ("node",))
OBSERVED_MEMORY = telemetry.gauge(
    "colo_node_prod_usage_memory_bytes",
    "Memory used by the node's prod pods in the last NodeMetric ingested, bytes", ("node",))
PREDICTION_ERROR = telemetry.histogram(
    "colo_profiler_prod_peak_error_ratio",
    "Relative error of the prod peak prediction, |observed − predicted| / max(observed, predicted), per node and "
    "tick with a usage report newer than the prediction (reports without prod usage left out)", ("resource",), buckets=ERROR_BUCKETS)
PEAK_EXCEEDED = telemetry.counter(
    "colo_profiler_prod_peak_exceeded_total",
    "Scored reports whose prod usage exceeded the predicted prod peak (same scoring as the error histogram)",
    ("resource",))
MODELS = telemetry.gauge("colo_profiler_models", "Models held, by kind (node, pod, workload)", ("kind",))

_PER_NODE = (PREDICTED_CPU, PREDICTED_MEMORY, RECLAIMABLE_CPU, RECLAIMABLE_MEMORY, OBSERVED_CPU, OBSERVED_MEMORY)


def prod_usage(metric: NodeMetric, model: ProfileModel) -> Usage:
    """Σ usage of ``metric``'s prod pods, classed as :meth:`ProfileModel.ingest` classes them (the class the
    model knows from the binding, else the metric's); call after ingesting ``metric``."""
    cpu = memory = 0
    for pm in metric.pods:
        pod = model.pods.get(pm.uid)
        if ((pod.priority_class if pod is not None else None) or pm.priority_class) == "prod":
            cpu += pm.cpu
            memory += pm.memory
    return Usage(cpu=cpu, memory=memory)


def relative_error(observed: int, predicted: int) -> float | None:
    """``|observed − predicted| / max(observed, predicted)``, 0–1; None when nothing was used (``observed`` ≤ 0:
    not scored, see the module docstring)."""
    return None if observed <= 0 else abs(observed - predicted) / max(observed, predicted)


@dataclass
class PredictionMetrics:
    """The last prediction and observation per node, and which observations were scored (one per service)."""

    predicted: dict[str, tuple[float, Usage]] = field(default_factory=dict)
    """node → (NodeProfile.at, prod peak)."""
    observed: dict[str, tuple[float, Usage]] = field(default_factory=dict)
    """node → (NodeMetric.at, prod usage)."""
    scored: dict[str, float] = field(default_factory=dict)
    """node → ``at`` of the last observation scored against a prediction."""

    def observe(self, metric: NodeMetric, model: ProfileModel) -> None:
        """Record the prod usage of ``metric`` (after ingesting it) if it is the node's newest."""
        last = self.observed.get(metric.node)
        if last is not None and last[0] > metric.at:
            return
        usage = prod_usage(metric, model)
        self.observed[metric.node] = (metric.at, usage)
        OBSERVED_CPU.labels(metric.node).set(usage.cpu / 1000)
        OBSERVED_MEMORY.labels(metric.node).set(usage.memory)

    def score(self) -> int:
        """Observe the relative error of every node's last prediction against its usage reported after it (each
        observation once); returns how many nodes were scored. Call before :meth:`predict` in a tick."""
        n = 0
        for node, (obs_at, usage) in self.observed.items():
            pred = self.predicted.get(node)
            if pred is None or obs_at <= pred[0] or self.scored.get(node, -1.0) >= obs_at:
                continue
            self.scored[node] = obs_at
            n += 1
            for resource, obs, peak in (("cpu", usage.cpu, pred[1].cpu), ("memory", usage.memory, pred[1].memory)):
                err = relative_error(obs, peak)
                if err is not None:
                    PREDICTION_ERROR.labels(resource).observe(err)
                    if obs > peak:
                        PEAK_EXCEEDED.labels(resource).inc()
        return n

    def predict(self, profile: NodeProfile) -> None:
        """Record ``profile`` (computed this tick, sent or not) as the node's prediction."""
        self.predicted[profile.node] = (profile.at, profile.prod_peak)
        PREDICTED_CPU.labels(profile.node).set(profile.prod_peak.cpu / 1000)
        PREDICTED_MEMORY.labels(profile.node).set(profile.prod_peak.memory)
        RECLAIMABLE_CPU.labels(profile.node).set(profile.prod_reclaimable.cpu / 1000)
        RECLAIMABLE_MEMORY.labels(profile.node).set(profile.prod_reclaimable.memory)

    def keep(self, nodes: Collection[str], model: ProfileModel) -> None:
        """Forget every node not in ``nodes`` (expired models) and remove its series; set the model counts."""
        for table in (self.predicted, self.observed, self.scored):
            for name in [n for n in table if n not in nodes]:
                del table[name]
        for gauge in _PER_NODE:
            telemetry.prune(gauge, "node", nodes)
        MODELS.labels("node").set(len(model.nodes))
        MODELS.labels("pod").set(len(model.pods))
        MODELS.labels("workload").set(len(model.workloads))


for _resource in RESOURCES:  # the series exist from the start: rate() sees the first observation
    PREDICTION_ERROR.labels(_resource)
    PEAK_EXCEEDED.labels(_resource)
