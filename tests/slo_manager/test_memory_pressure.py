"""Batch-memory under BE memory pressure (memory_pressure.py, publish.py) and the threshold checks of the
policy (thresholds.py): admission never looser than BE memory eviction (REFERENCE.md §11, first bullet)."""

from __future__ import annotations

import pytest

from colo.messages import (
    AggregatedUsage,
    MemoryEvictStrategy,
    MemoryPressure,
    NodeMetric,
    NodeResource,
    Resources,
    Usage,
)
from colo.settings import SettingsError
from colo_slo_manager.allocatable import Allocatable, NodePods, PodView
from colo_slo_manager.memory_pressure import eviction_headroom, under_pressure
from colo_slo_manager.publish import decide
from colo_slo_manager.settings import BatchConfig, NodePool, NodeSLOStrategy, SloManagerSettings
from colo_slo_manager.thresholds import settings_warnings

GI = 1 << 30
PRESSURE = MemoryPressure(since=950.0, last_evict_at=950.0, used_percent=69)
COMPUTED = Allocatable(batch_cpu=10000, batch_memory=4 * GI, mid_cpu=2000, mid_memory=GI)


def test_under_pressure_zeroes_batch_memory_only() -> None:
    m = NodeMetric(node="n1", at=1000.0, memory_pressure=PRESSURE)
    assert under_pressure(COMPUTED, m) == Allocatable(batch_cpu=10000, batch_memory=0, mid_cpu=2000, mid_memory=GI,
                                                      memory_pressure=True)
    assert under_pressure(COMPUTED, NodeMetric(node="n1", at=1000.0)) is COMPUTED


LAST = NodeResource(node="n1", batch_cpu=10000, batch_memory=4 * GI, mid_cpu=2000, mid_memory=GI, at=990.0)
LAST_PRESSURE = NodeResource(node="n1", batch_cpu=10000, batch_memory=0, mid_cpu=2000, mid_memory=GI, at=990.0,
                             memory_pressure=True)
CALM = Allocatable(batch_cpu=10000, batch_memory=4 * GI, mid_cpu=2000, mid_memory=GI)
UNDER = Allocatable(batch_cpu=10000, batch_memory=0, mid_cpu=2000, mid_memory=GI, memory_pressure=True)

# (case, last published, computed now, diff threshold %, reason published (None = nothing))
PUBLISH = [
    ("pressure-starts-at-once", LAST, UNDER, 10, "memory pressure"),
    ("pressure-starts-whatever-the-threshold", LAST, UNDER, 1000, "memory pressure"),
    ("pressure-stays-quiet", LAST_PRESSURE, UNDER, 10, None),
    ("pressure-over-at-once", LAST_PRESSURE, CALM, 1000, "memory pressure over"),
    ("drop-to-zero-at-once", LAST, Allocatable(batch_cpu=10000, mid_cpu=2000, mid_memory=GI), 1000,
     "batch_memory to 0"),
    ("small-change-damped", LAST, Allocatable(batch_cpu=10500, batch_memory=4 * GI, mid_cpu=2000, mid_memory=GI), 10,
     None),
]


@pytest.mark.parametrize(("last", "computed", "threshold", "reason"), [c[1:] for c in PUBLISH],
                         ids=[c[0] for c in PUBLISH])
def test_publish_pressure_changes_at_once(last: NodeResource, computed: Allocatable, threshold: int,
                                          reason: str | None) -> None:
    out = decide("n1", last, NodeMetric(node="n1", at=1000.0), computed, 1000.0, enabled=True,
                 diff_threshold_percent=threshold, max_age_s=300.0, stale_after_s=900.0)
    if reason is None:
        assert out is None
        return
    assert out is not None and out.reason == reason
    assert out.memory_pressure == computed.memory_pressure
    assert out.batch_memory == computed.batch_memory


def settings(reclaim: int = 65, policy: str = "usage", **memory_evict: object) -> SloManagerSettings:
    return SloManagerSettings(batch=BatchConfig(memory_reclaim_threshold_percent=reclaim, memory_policy=policy),  # type: ignore[arg-type]
                              node_slo=NodeSLOStrategy(memory_evict=MemoryEvictStrategy(**memory_evict)))  # type: ignore[arg-type]


REJECTED = [
    ("reclaim-at-threshold", dict(reclaim=70),
     "batch.memory_reclaim_threshold_percent 70 >= node_slo.memory_evict.threshold_percent 70: batch-memory "
     "would be offered up to 70 % of node memory while BE memory eviction starts at 70 %"),
    ("reclaim-above-threshold", dict(reclaim=80, threshold_percent=75, lower_percent=60),
     "batch.memory_reclaim_threshold_percent 80 >= node_slo.memory_evict.threshold_percent 75"),
]


@pytest.mark.parametrize(("kwargs", "message"), [c[1:] for c in REJECTED], ids=[c[0] for c in REJECTED])
def test_admission_looser_than_eviction_is_rejected(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(SettingsError) as err:
        settings(**kwargs)  # type: ignore[arg-type]
    assert message in str(err.value)


def test_pool_that_lowers_eviction_below_admission_is_rejected() -> None:
    with pytest.raises(SettingsError) as err:
        SloManagerSettings(node_pools=[NodePool(name="tight", memory_evict={"threshold_percent": 60,
                                                                             "lower_percent": 55})])
    assert ("batch.memory_reclaim_threshold_percent 65 >= node_pools[0] (tight).memory_evict.threshold_percent 60"
            in str(err.value))


WARNED = [
    ("default-is-quiet", dict(), []),
    ("eviction-off-is-quiet", dict(reclaim=90, enabled=False), []),
    ("reclaim-between-lower-and-threshold", dict(reclaim=69),
     ["batch.memory_reclaim_threshold_percent 69 > node_slo.memory_evict lower threshold 68: a node filled with "
      "BE memory to 69 % stays under BE memory pressure after one eviction (evictions stop at 68 %)"]),
    ("request-policy", dict(policy="request"),
     ["batch.memory_policy request: batch-memory follows online requests, not usage; online pods above their "
      "requests can take a node to node_slo.memory_evict.threshold_percent 70 whatever the reclaim threshold (65)"]),
]


@pytest.mark.parametrize(("kwargs", "warnings"), [c[1:] for c in WARNED], ids=[c[0] for c in WARNED])
def test_overlapping_thresholds_are_warned(kwargs: dict[str, object], warnings: list[str]) -> None:
    assert settings_warnings(settings(**kwargs)) == warnings  # type: ignore[arg-type]


def test_negative_hold_is_rejected() -> None:
    with pytest.raises(SettingsError) as err:
        settings(pressure_hold_s=-1)
    assert "node_slo.memory_evict.pressure_hold_s must be a finite number >= 0, got -1" in str(err.value)


CAP = 64 * GI
EVICT = MemoryEvictStrategy()  # 70 % / lower 68 %


def usage_metric(mean_pct: float, p99_pct: float | None = None) -> NodeMetric:
    agg = [] if p99_pct is None else [AggregatedUsage(window_s=300, stat="p99", memory=int(CAP * p99_pct / 100)),
                                      AggregatedUsage(window_s=600, stat="p99", memory=CAP)]
    return NodeMetric(node="n1", at=1000.0, node_usage=Usage(memory=int(CAP * mean_pct / 100)), aggregated=agg)


# (case, metric, Σ BE batch-memory requests, formula's batch-memory, policy, batch-memory offered)
HEADROOM = [
    ("formula-below-headroom", usage_metric(60.0), 0, 3 * GI, EVICT, 3 * GI),
    ("capped-at-room-below-lower", usage_metric(67.0), GI, 3 * GI, EVICT, GI + CAP * 68 // 100 - int(CAP * 0.67)),
    ("p99-counts-when-above-mean", usage_metric(60.0, p99_pct=67.5), 0, 3 * GI, EVICT,
     CAP * 68 // 100 - int(CAP * 0.675)),
    ("above-lower-keeps-requested-only", usage_metric(69.0), 2 * GI, 3 * GI, EVICT, 2 * GI),
    ("custom-lower", usage_metric(60.0), 0, 9 * GI, MemoryEvictStrategy(threshold_percent=80, lower_percent=70),
     CAP * 70 // 100 - int(CAP * 0.60)),
    ("eviction-off-uncapped", usage_metric(69.0), 0, 3 * GI, MemoryEvictStrategy(enabled=False), 3 * GI),
]


@pytest.mark.parametrize(("metric", "requested", "formula", "policy", "offered"), [c[1:] for c in HEADROOM],
                         ids=[c[0] for c in HEADROOM])
def test_eviction_headroom(metric: NodeMetric, requested: int, formula: int, policy: MemoryEvictStrategy,
                           offered: int) -> None:
    computed = Allocatable(batch_cpu=1000, batch_memory=formula)
    assert eviction_headroom(computed, metric, CAP, requested, policy) == Allocatable(batch_cpu=1000,
                                                                                     batch_memory=offered)


def test_node_pods_sum_batch_memory_of_active_be_pods() -> None:
    def view(uid: str, phase: str, prio: str, qos: str, **req: int) -> PodView:
        return PodView(uid=uid, phase=phase, priority_class=prio, qos_class=qos, requests=Resources(**req))  # type: ignore[arg-type]

    pods = NodePods.of([view("b1", "Running", "batch", "BE", batch_memory=GI),
                        view("b2", "Pending", "free", "BE", batch_memory=2 * GI),
                        view("b3", "Succeeded", "batch", "BE", batch_memory=4 * GI),
                        view("ls", "Running", "prod", "LS", memory=8 * GI)])
    assert pods.be_memory_request == 3 * GI
