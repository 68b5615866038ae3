"""NodeSLO validation covers every strategy switch; the agent's default policy carries every strategy."""

from __future__ import annotations

import msgspec
import pytest

from colo.messages import NodeSLO
from colo.settings import SettingsError, load_settings
from colo_node_agent.settings import ENV_PREFIX, NodeAgentSettings, validate_slo_values


@pytest.mark.parametrize(("patch", "problem"), [
    ({"cpu_burst": {"quota_scale_max_percent": 90}}, "quota_scale_max_percent must be >= 100"),
    ({"cpu_burst": {"share_pool_threshold_percent": 101}}, "share_pool_threshold_percent"),
    ({"cpu_burst": {"quota_burst_period_s": -2}}, "quota_burst_period_s"),
    ({"cpu_burst": {"burst_percent": -1}}, "burst_percent"),
    ({"cpu_burst": {"scale_down_unthrottled_rounds": -1}}, "scale_down_unthrottled_rounds must be >= 0"),
    ({"memory_qos": {"min_percent": 120}}, "memory_qos.min_percent"),
    ({"memory_qos": {"be": {"throttling_percent": -1}}}, "memory_qos.be.throttling_percent"),
    ({"resctrl": {"be": {"l3_start_percent": 40, "l3_end_percent": 30}}}, "resctrl.be"),
    ({"resctrl": {"ls": {"mba_percent": 0}}}, "resctrl.ls.mba_percent"),
    ({"blkio": {"be": [{"device": "sda"}]}}, "MAJOR:MINOR"),
    ({"blkio": {"be": [{"device": "8:0", "read_bps": -5}]}}, "limits must be >= 0"),
    ({"system": {"enabled": True, "watermark_scale_factor": 1000}}, "watermark_scale_factor"),
    ({"system": {"enabled": True, "min_free_kbytes_factor": 0}}, "min_free_kbytes_factor"),
    ({"be_budget": {"target_increase_percent": 0}}, "be_budget.target_increase_percent must be a finite number > 0"),
    ({"be_budget": {"target_increase_percent": float("nan")}}, "be_budget.target_increase_percent"),
    ({"be_budget": {"max_percent": 120}}, "be_budget.max_percent must be within 0..100"),
    ({"be_budget": {"step_percent": 0}}, "be_budget.step_percent must be within 1..100"),
    ({"be_budget": {"hold_s": -1}}, "be_budget.hold_s must be a finite number >= 0"),
    ({"be_budget": {"enabled": True, "max_percent": 60}}, "must not be below cpu_suppress.threshold_percent 65"),
], ids=lambda v: str(v) if isinstance(v, str) else "")
def test_bad_nodeslo_values_are_named(patch: dict[str, object], problem: str) -> None:
    slo = msgspec.convert({"node": "n", **patch}, NodeSLO)
    problems = validate_slo_values(slo)
    assert len(problems) == 1 and problem in problems[0], problems


def test_defaults_are_valid_and_carried_into_the_default_nodeslo() -> None:
    assert validate_slo_values(NodeSLO(node="n")) == []
    env = {f"{ENV_PREFIX}_CPU_BURST__POLICY": "auto", f"{ENV_PREFIX}_MEMORY_QOS__ENABLED": "true",
           f"{ENV_PREFIX}_CPUSET__ENABLED": "false", f"{ENV_PREFIX}_RESCTRL__ENABLED": "true",
           f"{ENV_PREFIX}_SYSTEM__ENABLED": "true", f"{ENV_PREFIX}_BE_BUDGET__ENABLED": "true"}
    slo = load_settings(NodeAgentSettings, ENV_PREFIX, env=env).default_slo("n")
    assert (slo.cpu_burst.policy, slo.memory_qos.enabled, slo.cpuset.enabled, slo.resctrl.enabled,
            slo.system.enabled, slo.resctrl.be.l3_end_percent, slo.be_budget.enabled) == (
        "auto", True, False, True, True, 30, True)


def test_bad_default_policy_fails_at_start_listing_every_problem() -> None:
    env = {f"{ENV_PREFIX}_CPU_BURST__QUOTA_SCALE_MAX_PERCENT": "50",
           f"{ENV_PREFIX}_MEMORY_QOS__LOW_PERCENT": "200"}
    with pytest.raises(SettingsError) as err:
        load_settings(NodeAgentSettings, ENV_PREFIX, env=env)
    assert "quota_scale_max_percent" in str(err.value) and "memory_qos.low_percent" in str(err.value)
