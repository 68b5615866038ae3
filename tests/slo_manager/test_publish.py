"""Publish decision (diff threshold, max age, stale reset) and NodeSLO rendering."""

from __future__ import annotations

import pytest

from colo.messages import (
    CPUSuppressStrategy,
    MemoryEvictStrategy,
    NodeMetric,
    NodeResource,
    NodeSpec,
    Resources,
)
from colo_slo_manager.allocatable import Allocatable
from colo_slo_manager.nodeslo import render_node_slo, same_policy
from colo_slo_manager.publish import decide, differs
from colo_slo_manager.settings import NodePool, NodeSLOStrategy

LAST = NodeResource(node="n1", batch_cpu=10000, batch_memory=10**10, mid_cpu=2000, mid_memory=10**9, at=1000.0)
SAME = Allocatable(batch_cpu=10000, batch_memory=10**10, mid_cpu=2000, mid_memory=10**9)


def metric(at: float) -> NodeMetric:
    return NodeMetric(node="n1", at=at)


def run(last: NodeResource | None, computed: Allocatable | None, now: float, metric_at: float | None = None,
        enabled: bool = True) -> NodeResource | None:
    m = metric(now if metric_at is None else metric_at)
    return decide("n1", last, m, computed, now, enabled=enabled, diff_threshold_percent=10, max_age_s=300.0,
                  stale_after_s=900.0)


@pytest.mark.parametrize(
    ("old", "new", "want"),
    [
        pytest.param(100, 110, False, id="exactly-10-percent-up-is-not-more"),
        pytest.param(100, 111, True, id="11-percent-up"),
        pytest.param(100, 89, True, id="11-percent-down"),
        pytest.param(100, 90, False, id="exactly-10-percent-down"),
        pytest.param(0, 0, False, id="zero-to-zero"),
        pytest.param(0, 1, True, id="zero-to-positive"),
    ],
)
def test_differs(old: int, new: int, want: bool) -> None:
    assert differs(old, new, 10) is want


@pytest.mark.parametrize(
    ("last", "computed", "now", "metric_at", "want_reason", "want_reset"),
    [
        pytest.param(None, SAME, 1000.0, None, "initial", False, id="first-publish"),
        pytest.param(LAST, SAME, 1060.0, None, None, False, id="unchanged-quiet"),
        pytest.param(LAST, Allocatable(batch_cpu=10900, batch_memory=10**10, mid_cpu=2000, mid_memory=10**9),
                     1060.0, None, None, False, id="9-percent-change-quiet"),
        pytest.param(LAST, Allocatable(batch_cpu=11500, batch_memory=10**10, mid_cpu=2000, mid_memory=10**9),
                     1060.0, None, "changed batch_cpu", False, id="15-percent-batch-cpu"),
        pytest.param(LAST, Allocatable(batch_cpu=10000, batch_memory=10**10, mid_cpu=2000, mid_memory=5 * 10**8),
                     1060.0, None, "changed mid_memory", False, id="mid-memory-halved"),
        pytest.param(LAST, SAME, 1300.0, None, None, False, id="age-300-not-older"),
        pytest.param(LAST, SAME, 1301.0, None, "refresh", False, id="age-301-refresh"),
        pytest.param(LAST, SAME, 1200.0, 300.0, None, False, id="metric-900s-old-not-stale"),
        pytest.param(LAST, SAME, 2000.0, 1099.0, "metric stale", True, id="metric-901s-old-reset"),
        pytest.param(NodeResource(node="n1", reset=True, at=1900.0), SAME, 2000.0, 1000.0, None, False,
                     id="stale-after-reset-quiet"),
        pytest.param(NodeResource(node="n1", reset=True, at=1900.0), SAME, 2000.0, None, "recovered", False,
                     id="fresh-metric-after-reset"),
    ],
)
def test_decide(last: NodeResource | None, computed: Allocatable, now: float, metric_at: float | None,
                want_reason: str | None, want_reset: bool) -> None:
    out = run(last, computed, now, metric_at)
    if want_reason is None:
        assert out is None
        return
    assert out is not None
    assert out.reason.startswith(want_reason)
    assert out.reset is want_reset
    assert out.at == now
    if want_reset:
        assert (out.batch_cpu, out.batch_memory, out.mid_cpu, out.mid_memory) == (0, 0, 0, 0)
    else:
        assert (out.batch_cpu, out.batch_memory, out.mid_cpu, out.mid_memory) == (
            computed.batch_cpu, computed.batch_memory, computed.mid_cpu, computed.mid_memory)


@pytest.mark.parametrize(
    ("last", "want_reset"),
    [
        pytest.param(LAST, True, id="withdraws-earlier-resources"),
        pytest.param(None, False, id="nothing-to-withdraw"),
        pytest.param(NodeResource(node="n1", reset=True), False, id="already-withdrawn"),
    ],
)
def test_colocation_disabled(last: NodeResource | None, want_reset: bool) -> None:
    out = run(last, None, 2000.0, enabled=False)
    assert (out is not None and out.reset) is want_reset


def test_no_metric_no_publish() -> None:
    assert decide("n1", None, None, None, 10.0, enabled=True, diff_threshold_percent=10, max_age_s=300.0,
                  stale_after_s=900.0) is None


NODE = NodeSpec(name="n1", capacity=Resources(cpu=1000, memory=1), allocatable=Resources(cpu=1000, memory=1),
                labels={"pool": "gpu", "zone": "a"})


@pytest.mark.parametrize(
    ("pools", "want_pool", "want_threshold", "want_mem_threshold"),
    [
        pytest.param([], "", 65, 70, id="cluster-defaults"),
        pytest.param([NodePool(name="gpu", node_selector={"pool": "gpu"},
                               cpu_suppress=CPUSuppressStrategy(threshold_percent=50))],
                     "gpu", 50, 70, id="pool-overrides-one-strategy"),
        pytest.param([NodePool(name="other", node_selector={"pool": "cpu"},
                               cpu_suppress=CPUSuppressStrategy(threshold_percent=40)),
                      NodePool(name="zone-a", node_selector={"zone": "a"},
                               memory_evict=MemoryEvictStrategy(threshold_percent=60))],
                     "zone-a", 65, 60, id="first-matching-pool"),
    ],
)
def test_render_node_slo(pools: list[NodePool], want_pool: str, want_threshold: int,
                         want_mem_threshold: int) -> None:
    slo = render_node_slo(NODE, NodeSLOStrategy(), pools, now=5.0)
    assert slo.node == "n1" and slo.at == 5.0 and slo.pool == want_pool
    assert slo.cpu_suppress.threshold_percent == want_threshold
    assert slo.memory_evict.threshold_percent == want_mem_threshold


def test_be_cpu_shares_from_the_cluster_and_a_pool() -> None:
    assert render_node_slo(NODE, NodeSLOStrategy(), [], now=1.0).be_cpu_shares == "requests"
    assert render_node_slo(NODE, NodeSLOStrategy(be_cpu_shares="min"), [], now=1.0).be_cpu_shares == "min"
    pool = NodePool(name="gpu", node_selector={"pool": "gpu"}, be_cpu_shares="min")
    assert render_node_slo(NODE, NodeSLOStrategy(), [pool], now=1.0).be_cpu_shares == "min"


def test_same_policy_ignores_time() -> None:
    a = render_node_slo(NODE, NodeSLOStrategy(), [], now=1.0)
    b = render_node_slo(NODE, NodeSLOStrategy(), [], now=2.0)
    c = render_node_slo(NODE, NodeSLOStrategy(be_cpu_idle=False), [], now=2.0)
    assert same_policy(a, b)
    assert not same_policy(a, c)
    assert not same_policy(None, a)
