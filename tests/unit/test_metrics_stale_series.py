"""No stale series: a node that disappears takes its series with it (slo-manager, profiler, telemetry.prune);
the profiler scores each usage report once, against a prediction made before it.

The metrics are the real prometheus_client objects of the process registry; node names are unique per test.
"""

from __future__ import annotations

import uuid

import pytest

from colo import telemetry
from colo.messages import NodeMetric, NodeProfile, NodeResource, PodMetric, Usage
from colo_profiler import metrics as profiler_metrics
from colo_profiler.model import ProfileModel
from colo_slo_manager import metrics as slo_metrics

G = 10**9


def names(n: int) -> list[str]:
    prefix = uuid.uuid4().hex[:8]
    return [f"{prefix}-{i}" for i in range(n)]


def series(metric: telemetry.MetricWrapperBase, node: str) -> list[float]:
    """Values of ``metric``'s samples whose ``node`` label is ``node``."""
    return [s.value for family in metric.collect() for s in family.samples if s.labels.get("node") == node]


def test_prune_removes_only_the_label_values_not_kept() -> None:
    g = telemetry.gauge("colo_test_prune_gauge", "test", ("node", "qos"))
    a, b, c = names(3)
    for node in (a, b, c):
        for qos in ("ls", "be"):
            g.labels(node, qos).set(1)
    assert telemetry.prune(g, "node", {a, c}) == 2
    assert series(g, b) == [] and len(series(g, a)) == 2 and len(series(g, c)) == 2
    assert telemetry.prune(g, "node", {a, c}) == 0
    with pytest.raises(ValueError, match="no label 'pod'"):
        telemetry.prune(g, "pod", set())


def test_slo_manager_offer_series_follow_the_known_nodes() -> None:
    a, b, never = names(3)
    published = {a: NodeResource(node=a, batch_cpu=2500, batch_memory=3 * G, mid_cpu=500, mid_memory=G),
                 b: NodeResource(node=b, reset=True)}
    slo_metrics.offered(published, [a, b, never])
    assert series(slo_metrics.BATCH_CPU, a) == [2.5] and series(slo_metrics.MID_MEMORY, a) == [G]
    assert series(slo_metrics.RESOURCE_RESET, b) == [1] and series(slo_metrics.BATCH_CPU, b) == [0]
    assert series(slo_metrics.BATCH_CPU, never) == []  # known, nothing published yet: no series
    slo_metrics.offered(published, [a])  # b is gone
    for gauge in (slo_metrics.BATCH_CPU, slo_metrics.BATCH_MEMORY, slo_metrics.MID_CPU, slo_metrics.MID_MEMORY,
                  slo_metrics.RESOURCE_RESET):
        assert series(gauge, b) == [], gauge
    assert series(slo_metrics.BATCH_CPU, a) == [2.5]


def _metric(node: str, at: float, cpu: int, memory: int) -> NodeMetric:
    return NodeMetric(node=node, at=at, pods=[PodMetric(uid=f"{node}-web", cpu=cpu, memory=memory,
                                                        priority_class="prod"),
                                              PodMetric(uid=f"{node}-job", cpu=999, memory=999,
                                                        priority_class="batch")])


def _profile(node: str, at: float, cpu: int, memory: int) -> NodeProfile:
    return NodeProfile(node=node, at=at, prod_peak=Usage(cpu=cpu, memory=memory))


def _counts() -> dict[str, float]:
    out = {}
    for family in profiler_metrics.PREDICTION_ERROR.collect():
        for s in family.samples:
            if s.name.endswith("_count"):
                out[s.labels["resource"]] = s.value
    return out


def test_profiler_scores_each_report_once_against_an_earlier_prediction_and_forgets_expired_nodes() -> None:
    a, b = names(2)
    model = ProfileModel()
    pm = profiler_metrics.PredictionMetrics()
    start = _counts()

    def scored() -> dict[str, float]:
        now = _counts()
        return {r: now[r] - start.get(r, 0.0) for r in now}

    for node in (a, b):
        m = _metric(node, 60, 1000, G)
        model.ingest(m)
        pm.observe(m, model)
    assert series(profiler_metrics.OBSERVED_CPU, a) == [1.0]  # the batch pod is not prod
    assert pm.score() == 0  # nothing predicted yet
    pm.predict(_profile(a, 60, 2000, 0))
    pm.predict(_profile(b, 60, 800, 2 * G))
    assert pm.score() == 0  # the reports are not newer than the predictions
    for node in (a, b):
        m = _metric(node, 120, 1000, G)
        model.ingest(m)
        pm.observe(m, model)
    assert pm.score() == 2 and pm.score() == 0  # once per report
    assert scored() == {"cpu": 2, "memory": 2}
    assert series(profiler_metrics.PREDICTED_CPU, b) == [0.8]
    pm.keep({a}, model)  # b's model expired
    for gauge in (profiler_metrics.PREDICTED_CPU, profiler_metrics.OBSERVED_MEMORY):
        assert series(gauge, b) == []
    assert series(profiler_metrics.PREDICTED_CPU, a) == [2.0] and b not in pm.observed


@pytest.mark.parametrize(("observed", "predicted", "error"), [
    (1000, 2000, 0.5), (4000, 2000, 0.5), (2000, 2000, 0.0), (2000, 28, 0.986), (2000, 0, 1.0), (0, 28, None),
    (0, 0, None),
], ids=["half-used", "exceeded-twice", "exact", "cold-start", "nothing-predicted", "no-prod-usage", "nothing"])
def test_relative_error(observed: int, predicted: int, error: float | None) -> None:
    assert profiler_metrics.relative_error(observed, predicted) == pytest.approx(error)
