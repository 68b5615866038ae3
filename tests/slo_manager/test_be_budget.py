"""The slo-manager and the SLO-driven BE budget: the switch ``be_budget_enabled`` (and the knobs through
``node_slo.be_budget``) in the rendered NodeSLO, bad values listed together, and the batch-cpu offer following the
threshold the node reports (docs/slo-manager.md "BE budget")."""

from __future__ import annotations

import msgspec
import pytest

from colo.messages import BEBudgetState, BEBudgetStrategy, NodeMetric, NodeSLO, NodeSpec, Resources, Usage
from colo.settings import SettingsError, load_settings
from colo_slo_manager.allocatable import NodePods, compute_allocatable_of, node_reserved
from colo_slo_manager.be_budget import cpu_reclaim_percent
from colo_slo_manager.nodeslo import cluster_of, render_node_slo
from colo_slo_manager.settings import ENV_PREFIX, BatchConfig, NodePool, SloManagerSettings

NODE = NodeSpec(name="n1", capacity=Resources(cpu=100_000, memory=100 * 2**30),
                allocatable=Resources(cpu=100_000, memory=100 * 2**30), labels={"pool": "quiet"})
ON = NodeSLO(node="n1", be_budget=BEBudgetStrategy(enabled=True))
OFF = NodeSLO(node="n1")


def metric(threshold: float | None, phase: str = "grow") -> NodeMetric:
    budget = None if threshold is None else BEBudgetState(threshold_percent=threshold, phase=phase)  # type: ignore[arg-type]
    return NodeMetric(node="n1", at=1.0, system_usage=Usage(cpu=5_000), be_budget=budget)


@pytest.mark.parametrize(("slo", "m", "want"), [
    pytest.param(ON, metric(80.0), 80, id="follows the reported threshold"),
    pytest.param(ON, metric(80.7, "hold"), 80, id="whole percents, never above it"),
    pytest.param(ON, metric(69.0, "cut"), 69, id="after a cut"),
    pytest.param(ON, metric(55.0, "cut"), 60, id="never below the static reclaim threshold"),
    pytest.param(ON, metric(90.0, "fallback"), 60, id="fallback: the static threshold"),
    pytest.param(ON, metric(None), 60, id="no budget reported"),
    pytest.param(OFF, metric(80.0), 60, id="budget off in the rendered NodeSLO"),
    pytest.param(None, metric(80.0), 60, id="no NodeSLO rendered yet"),
])
def test_cpu_reclaim_percent(slo: NodeSLO | None, m: NodeMetric, want: int) -> None:
    assert cpu_reclaim_percent(BatchConfig(), m, slo) == want


def test_batch_cpu_offer_follows_the_budget() -> None:
    m = metric(85.0)
    args = (NODE, node_reserved(NODE), m, NodePods.of([]), None, BatchConfig(), SloManagerSettings().mid)
    static = compute_allocatable_of(*args)
    adaptive = compute_allocatable_of(*args, cpu_reclaim_percent=cpu_reclaim_percent(BatchConfig(), m, ON))
    # usage policy: capacity × reclaim% − system used (5 cores), no HP pods
    assert (static.batch_cpu, adaptive.batch_cpu) == (55_000, 80_000)
    assert adaptive.batch_memory == static.batch_memory


def test_env_switch_and_knobs_reach_the_nodeslo() -> None:
    env = {f"{ENV_PREFIX}_BE_BUDGET_ENABLED": "1", f"{ENV_PREFIX}_NODE_SLO__BE_BUDGET__MAX_PERCENT": "90",
           f"{ENV_PREFIX}_NODE_SLO__BE_BUDGET__SIGNAL": "cpu_pressure"}
    s = load_settings(SloManagerSettings, ENV_PREFIX, env=env)
    slo = render_node_slo(NODE, cluster_of(s), s.node_pools, now=1.0)
    assert slo.be_budget == BEBudgetStrategy(enabled=True, max_percent=90, signal="cpu_pressure")
    assert not render_node_slo(NODE, cluster_of(SloManagerSettings()), [], now=1.0).be_budget.enabled


def test_a_pool_may_switch_the_budget_off() -> None:
    s = SloManagerSettings(be_budget_enabled=True,
                           node_pools=[NodePool(name="quiet", node_selector={"pool": "quiet"},
                                                be_budget={"enabled": False})])
    slo = render_node_slo(NODE, cluster_of(s), s.node_pools, now=1.0)
    assert (slo.pool, slo.be_budget.enabled) == ("quiet", False)
    other = msgspec.structs.replace(NODE, name="n2", labels={})
    assert render_node_slo(other, cluster_of(s), s.node_pools, now=1.0).be_budget.enabled


def test_bad_values_fail_listing_every_problem() -> None:
    env = {f"{ENV_PREFIX}_BE_BUDGET_ENABLED": "1", f"{ENV_PREFIX}_NODE_SLO__BE_BUDGET__MAX_PERCENT": "50",
           f"{ENV_PREFIX}_NODE_SLO__BE_BUDGET__STEP_PERCENT": "0",
           f"{ENV_PREFIX}_NODE_SLO__BE_BUDGET__HOLD_S": "-5"}
    with pytest.raises(SettingsError) as err:
        load_settings(SloManagerSettings, ENV_PREFIX, env=env)
    text = "\n".join(err.value.errors)
    assert "node_slo.be_budget.step_percent must be within 1..100, got 0" in text
    assert "node_slo.be_budget.hold_s must be a finite number >= 0, got -5.0" in text
    env = {f"{ENV_PREFIX}_BE_BUDGET_ENABLED": "1", f"{ENV_PREFIX}_NODE_SLO__BE_BUDGET__MAX_PERCENT": "50",
           f"{ENV_PREFIX}_DIFF_THRESHOLD_PERCENT": "-1"}
    with pytest.raises(SettingsError) as err:
        load_settings(SloManagerSettings, ENV_PREFIX, env=env)
    text = "\n".join(err.value.errors)
    assert "diff_threshold_percent must be within 0..1000, got -1" in text
    assert ("be_budget_enabled: node_slo.be_budget.max_percent 50 must not be below "
            "cpu_suppress.threshold_percent 65") in text
    with pytest.raises(SettingsError) as err:
        NodePool(name="p", be_budget={"step_percent": "fast", "nope": 1})
    assert len(err.value.errors) == 2 and "be_budget.nope: unknown field" in err.value.errors[1]
    env = {f"{ENV_PREFIX}_NODE_POOLS": '[{"name": "p", "be_budget": {"max_percent": 120}}]'}
    with pytest.raises(SettingsError) as err:
        load_settings(SloManagerSettings, ENV_PREFIX, env=env)
    assert "node_pools[0] (p) merged onto the cluster: be_budget.max_percent must be within 0..100" in str(err.value)
