"""LoadAware estimate, score and filter against REFERENCE.md §10 oracle tables O3, O4, O5."""

from __future__ import annotations

import pytest
from sched_helpers import GI, MI, metric, node, node_resource, pod, scheduler

from colo.messages import PodSpec
from colo_scheduler.plugins.loadaware import LoadAware
from colo_scheduler.podinfo import estimate_pod

NOW = 10_000.0

# O3: pod estimate (factors 85/70 unless noted).
O3 = [
    ("no-requests", pod("p"), {}, (250, 209715200)),
    ("req-eq-lim-4cpu-8Gi", pod("p", 4000, 8 * GI, 4000, 8 * GI), {}, (3400, 6012954214)),
    ("req4-lim8-cpu", pod("p", 4000, 8 * GI, 8000, 8 * GI), {}, (6800, 6012954214)),
    ("cpu-factor-110-capped", pod("p", 4000, 8 * GI, 4000, 8 * GI), {"cpu_factor_percent": 110},
     (4000, 6012954214)),
    ("be-batch-resources", pod("p", batch_cpu=4000, batch_memory=8 * GI), {}, (3400, 6012954214)),
    ("request-only-factors-80", pod("p", 4000, 8 * GI), {"cpu_factor_percent": 80,
                                                        "memory_factor_percent": 80},
     (3200, 6871947674)),
]


@pytest.mark.parametrize(("spec", "kwargs", "expected"), [c[1:] for c in O3], ids=[c[0] for c in O3])
def test_o3_pod_estimate(spec: PodSpec, kwargs: dict[str, int], expected: tuple[int, int]) -> None:
    assert estimate_pod(spec, **kwargs) == expected


def _load_score(spec: PodSpec, usage: tuple[int, int] | None, age_s: float = 0.0,
                assigned: PodSpec | None = None) -> int:
    s = scheduler()
    s.on_node(node("n1"), NOW)
    if usage is not None:
        s.on_metric(metric("n1", NOW - age_s, *usage), NOW)
    if assigned is not None:
        s.framework.reserve(s.pod_info(assigned, NOW), 0, NOW)
    state = s.framework.begin_cycle(NOW)
    plugin = s.framework.profile.plugins["LoadAware"]
    assert isinstance(plugin, LoadAware)
    return int(plugin.score(state, s.pod_info(spec, NOW))[0])


INCOMING = pod("in", 16_000, 32 * GI, 16_000, 32 * GI)

# O4: node 96 CPU / 512Gi; incoming pod req=lim 16 CPU / 32Gi.
O4 = [
    ("expired-180s", INCOMING, (0, 0), 180.0, None, 0),
    ("missing-metric", INCOMING, None, 0.0, None, 0),
    ("usage-0", INCOMING, (0, 0), 0.0, None, 90),
    ("usage-32cpu-10Gi", INCOMING, (32_000, 10 * GI), 0.0, None, 72),
    ("usage-32cpu-10Gi-plus-assigned-16cpu", INCOMING, (32_000, 10 * GI), 0.0,
     pod("a", 16_000, 32 * GI, 16_000, 32 * GI), 63),
    ("be-batch-pod-usage-0", pod("be", batch_cpu=16_000, batch_memory=32 * GI), (0, 0), 0.0, None, 90),
    ("no-requests-usage-0", pod("nr"), (0, 0), 0.0, None, 99),
]


@pytest.mark.parametrize(("spec", "usage", "age", "assigned", "expected"), [c[1:] for c in O4],
                         ids=[c[0] for c in O4])
def test_o4_score(spec: PodSpec, usage: tuple[int, int] | None, age: float, assigned: PodSpec | None,
                  expected: int) -> None:
    assert _load_score(spec, usage, age, assigned) == expected


# O5: node 96 CPU / 512Gi, thresholds 65/95, expired metrics not filtered.
O5 = [
    ("60cpu-256Gi-fits", (60_000, 256 * GI), pod("p"), True, {}),
    ("70cpu-rejected-cpu", (70_000, 256 * GI), pod("p"), False, {"load too high: cpu": 1}),
    ("500Gi-rejected-memory", (30_000, 500 * GI), pod("p"), False, {"load too high: memory": 1}),
    ("mid-pod-66pct-rejected-cpu", (53_000, 0), pod("m", mid_cpu=12_000), False,
     {"load too high: cpu": 1}),
]


@pytest.mark.parametrize(("usage", "spec", "fits", "reasons"), [c[1:] for c in O5], ids=[c[0] for c in O5])
def test_o5_filter(usage: tuple[int, int], spec: PodSpec, fits: bool, reasons: dict[str, int]) -> None:
    s = scheduler(filter_expired_metrics=False)
    s.on_node(node("n1"), NOW)
    s.on_node_resource(node_resource("n1", mid_cpu=50_000, mid_memory=100 * GI), NOW)
    s.on_metric(metric("n1", NOW, *usage), NOW)
    s.add_pod(spec, NOW)
    out = s.schedule_cycle(NOW)
    assert bool(out.placements) == fits
    if not fits:
        assert out.failures[0].result.reasons == reasons


@pytest.mark.parametrize(
    ("filter_expired", "fits", "reasons"),
    [(True, False, {"node(s) nodeMetric expired": 1}), (False, True, {})],
    ids=["expired-rejected", "expired-passes-when-not-filtered"],
)
def test_expired_metric_filter(filter_expired: bool, fits: bool, reasons: dict[str, int]) -> None:
    s = scheduler(filter_expired_metrics=filter_expired)
    s.on_node(node("n1"), NOW)
    s.on_metric(metric("n1", NOW - 200, 90_000, 0), NOW)
    s.add_pod(pod("p", 1000, MI), NOW)
    out = s.schedule_cycle(NOW)
    assert bool(out.placements) == fits
    assert (out.failures[0].result.reasons if out.failures else {}) == reasons
