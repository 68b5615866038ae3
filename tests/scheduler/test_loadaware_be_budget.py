"""LoadAware and the SLO-driven BE budget (``LoadAwareArgs.follow_be_budget``): a BE pod's CPU threshold is the
node's BE budget threshold (``NodeMetric.be_budget.threshold_percent``, floored) where that is above the plain
one; LS pods, nodes without a budget and ``follow_be_budget`` off keep the plain 65 %.

Node 96 CPU / 512 Gi; the incoming pod's CPU estimate is 85 % of its 1-core limit (850 m); the filter passes
while round(100 × (usage + estimate) / allocatable) ≤ threshold."""

from __future__ import annotations

import dataclasses
from typing import Any

import msgspec
import pytest
from sched_helpers import GI, node, node_resource, pod

from colo.messages import BEBudgetState, NodeMetric, PodSpec, Usage
from colo_scheduler.core import Scheduler
from colo_scheduler.plugins import default_profile_config
from colo_scheduler.plugins.loadaware import be_budget_percent
from colo_scheduler.settings import SchedulerSettings

NOW = 10_000.0
CPU = 1000


def sched(args: dict[str, Any] | None = None) -> Scheduler:
    s = SchedulerSettings()
    profile = default_profile_config(s)
    if args is not None:
        profile = dataclasses.replace(profile, plugin_args={"LoadAware": args})
    return Scheduler(s, profile)


def be_pod() -> PodSpec:
    return pod("be", batch_cpu=CPU, batch_memory=GI)


def ls_pod() -> PodSpec:
    return msgspec.structs.replace(pod("ls", CPU, GI, CPU, GI), priority_class="prod", qos_class="LS")


def metric(cpu_cores: float, budget: float | None) -> NodeMetric:
    return NodeMetric(node="n", at=NOW, node_usage=Usage(cpu=round(cpu_cores * CPU), memory=100 * GI),
                      be_budget=None if budget is None else BEBudgetState(threshold_percent=budget, phase="grow"))


def outcome(s: Scheduler, spec: PodSpec, m: NodeMetric) -> tuple[bool, dict[str, int]]:
    s.on_node(node("n"), NOW)
    s.on_node_resource(node_resource("n", batch_cpu=64 * CPU, batch_memory=64 * GI), NOW)
    s.on_metric(m, NOW)
    s.add_pod(spec, NOW)
    out = s.schedule_cycle(NOW)
    return bool(out.placements), (out.failures[0].result.reasons if out.failures else {})


TOO_HIGH = {"load too high: cpu": 1}

CASES = [
    # (usage cores, budget %, pod, args, fits, reasons); 80 cores + 0.85 = 84.2 % → 84 %
    ("be-no-budget-rejected-at-65", 80, None, be_pod, None, False, TOO_HIGH),
    ("be-budget-89-admits-84", 80, 89.6, be_pod, None, True, {}),
    ("be-budget-84.9-floors-to-84-admits", 80, 84.9, be_pod, None, True, {}),
    ("be-budget-83.9-floors-to-83-rejects", 80, 83.9, be_pod, None, False, TOO_HIGH),
    ("be-budget-below-65-keeps-65", 60, 50.0, be_pod, None, True, {}),
    ("be-budget-above-but-usage-higher", 90, 89.6, be_pod, None, False, TOO_HIGH),
    ("ls-ignores-the-budget", 80, 89.6, ls_pod, None, False, TOO_HIGH),
    ("be-follow-off-keeps-65", 80, 89.6, be_pod, {"follow_be_budget": False}, False, TOO_HIGH),
]


@pytest.mark.parametrize(("usage", "budget", "make", "args", "fits", "reasons"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_be_threshold_follows_the_node_budget(usage: float, budget: float | None, make: Any,
                                              args: dict[str, Any] | None, fits: bool,
                                              reasons: dict[str, int]) -> None:
    placed, got = outcome(sched(args), make(), metric(usage, budget))
    assert placed is fits
    assert {k: v for k, v in got.items() if k.startswith("load")} == reasons


def test_budget_change_in_a_later_metric_moves_the_threshold() -> None:
    s = sched()
    placed, _ = outcome(s, be_pod(), metric(80, None))
    assert not placed
    s.on_metric(msgspec.structs.replace(metric(80, 89.6), at=NOW + 1), NOW + 1)
    assert s.schedule_cycle(NOW + 1).placements


@pytest.mark.parametrize(("m", "expected"), [
    pytest.param(None, 0, id="no-metric"),
    pytest.param(metric(0, None), 0, id="no-budget"),
    pytest.param(metric(0, 89.99), 89, id="floored"),
    pytest.param(metric(0, -1.0), 0, id="negative-is-none"),
])
def test_be_budget_percent(m: NodeMetric | None, expected: int) -> None:
    assert be_budget_percent(m) == expected
