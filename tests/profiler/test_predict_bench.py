"""bench/prediction.py: the scores, the day cutting, the price rule and no look-ahead of every method."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from colo.sim.traces import VMSamples

DAY = 86_400.0
STEP = 300.0


def _load_bench() -> ModuleType:
    path = Path(__file__).resolve().parents[2] / "bench" / "prediction.py"
    spec = importlib.util.spec_from_file_location("bench_prediction", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


bench = _load_bench()


def _vm(name: str, cpu_fraction: list[np.ndarray], cores: float = 2.0, mem_kb: float = 1e6,
        mem_used: list[np.ndarray] | None = None) -> VMSamples:
    """A synthetic VM: one array of CPU usage fractions per day (288 samples = a full day)."""
    at = np.concatenate([d * DAY + np.arange(len(c)) * STEP for d, c in enumerate(cpu_fraction)])
    frac = np.concatenate(cpu_fraction)
    used = np.concatenate(mem_used) if mem_used is not None else 0.5 * mem_kb * np.ones_like(frac)
    return VMSamples(name, at_s=at, cores=np.full_like(at, cores), cpu_capacity_mhz=np.full_like(at, cores * 2600.0),
                     cpu_usage_mhz=frac * cores * 2600.0, memory_provisioned_kb=np.full_like(at, mem_kb),
                     memory_usage_kb=used, gap_rows=0)


# ---------------------------------------------------------------------------- scores


@pytest.mark.parametrize(
    ("predicted", "actual", "violated"),
    [(1.0, 0.5, False), (1.0, 1.0, False), (1.0, 1.0001, True), (0.0, 0.1, True)],
    ids=["under", "equal", "just-over", "zero-prediction"],
)
def test_violation_when_actual_exceeds_prediction(predicted: float, actual: float, violated: bool) -> None:
    assert bool(bench.violations(np.array([predicted]), np.array([actual]))[0]) is violated


def test_slack_and_score_by_hand() -> None:
    pred = np.array([[2.0, 1.0, 3.0, 9.0]])
    act = np.array([[1.0, 2.0, 3.0, 0.0]])
    prov = np.array([[4.0, 4.0, 2.0, 1.0]])
    mask = np.array([[True, True, True, False]])  # the last day is not scored
    assert list(bench.slack(pred, act, prov)[0]) == [0.25, -0.25, 0.0, 9.0]
    s = bench.score(pred, act, prov, mask)
    assert s["violation_rate"] == pytest.approx(1 / 3)
    assert s["slack"] == pytest.approx(0.0)
    assert s["waste"] == pytest.approx(0.25 / 3) and s["shortfall"] == pytest.approx(0.25 / 3)
    assert s["vm_days"] == 3
    with pytest.raises(ValueError, match="no VM-day"):
        bench.score(pred, act, prov, np.zeros_like(mask))


def test_pooled_weights_by_vm_days_and_beats_rule() -> None:
    a = {"violation_rate": 0.1, "slack": 0.2, "waste": 0.2, "shortfall": 0.0, "vm_days": 10}
    b = {"violation_rate": 0.4, "slack": -0.1, "waste": 0.0, "shortfall": 0.1, "vm_days": 30}
    p = bench.pooled([a, b])
    assert p["violation_rate"] == pytest.approx(0.325) and p["slack"] == pytest.approx(-0.025)
    assert bench.beats({"violation_rate": 0.1, "slack": 0.1}, {"violation_rate": 0.1, "slack": 0.2})
    assert not bench.beats({"violation_rate": 0.1, "slack": 0.2}, {"violation_rate": 0.1, "slack": 0.2})
    assert not bench.beats({"violation_rate": 0.2, "slack": 0.0}, {"violation_rate": 0.1, "slack": 0.2})


def test_choose_price_fewest_violations_within_reference_slack() -> None:
    def s(v: float, sl: float) -> dict[str, dict[str, dict[str, float]]]:
        return {"tuning": {"cpu_p95": {"violation_rate": v, "slack": sl}}}

    ref = s(0.10, 0.05)
    sweep = {0.1: s(0.20, 0.01), 0.5: s(0.08, 0.05), 1.0: s(0.05, 0.06)}
    assert bench.choose_price(sweep, ref, "cpu_p95") == 0.5  # 1.0 misses less but spends more than koordinator
    assert bench.choose_price({1.0: s(0.05, 0.06), 2.0: s(0.01, 0.09)}, ref, "cpu_p95") == 1.0


# ---------------------------------------------------------------------------- days


def test_actuals_cut_days_and_flag_incomplete_ones() -> None:
    full = np.linspace(0.0, 1.0, 288)
    half = np.full(143, 0.3)  # < 50 % of 288 samples: not scored
    vm = bench.to_days(_vm("1", [full, half]), 0.0)
    act = bench.actuals([vm], 2)
    assert act.actual["cpu_p95"][0, 0] == pytest.approx(2.0 * np.quantile(full, 0.95, method="inverted_cdf"))
    assert act.actual["cpu_p99"][0, 0] == pytest.approx(2.0 * np.quantile(full, 0.99, method="inverted_cdf"))
    assert act.actual["memory_max"][0, 0] == pytest.approx(0.5e6 * 1024)
    assert act.provisioned["cpu_p95"][0, 0] == 2.0 and act.provisioned["memory_max"][0, 0] == 1e6 * 1024
    assert list(act.complete[0]) == [True, False]


def test_parse_range() -> None:
    assert bench.parse_range("1-3,7") == {"1", "2", "3", "7"}
    with pytest.raises(ValueError, match="bad VM range"):
        bench.parse_range("1-x")


# ---------------------------------------------------------------------------- no look-ahead


def _two_vms(spike_day: int | None) -> list[Any]:
    rng = np.random.default_rng(5)
    days = [0.2 + 0.05 * rng.random(288) for _ in range(6)]
    if spike_day is not None:
        days[spike_day] = days[spike_day].copy()
        days[spike_day][100:140] = 1.0
    steady = [np.full(288, 0.1) for _ in range(6)]
    return [bench.to_days(_vm("1", days), 0.0), bench.to_days(_vm("2", steady), 0.0)]


def _all_methods(vms: list[Any]) -> dict[str, np.ndarray]:
    act = bench.actuals(vms, 6)
    from colo_profiler.model import CPU_BUCKETS

    out = {
        "koordinator": bench.predict_histogram(vms, act, 0.0, 6, "cpu", CPU_BUCKETS, 12 * 3600.0, 0.95, 1.1,
                                               bench.COLD_START_S),
        "vpa": bench.predict_histogram(vms, act, 0.0, 6, "cpu", CPU_BUCKETS, 24 * 3600.0, 0.90, 1.15, None),
    }
    runs = bench.predict_ours(vms, act, 0.0, 6, [0.1, 2.0])
    out.update({f"ours@{p}/{t}": r.peak[t] for p, r in runs.items() for t in bench.TARGETS})
    return out


def test_a_spike_on_day_d_changes_no_prediction_up_to_day_d() -> None:
    d = 3
    calm, spiky = _all_methods(_two_vms(None)), _all_methods(_two_vms(d))
    for name in calm:
        np.testing.assert_array_equal(calm[name][:, : d + 1], spiky[name][:, : d + 1], err_msg=name)
    # ...and the spike is seen the day after (so the check above is not vacuous)
    assert spiky["koordinator"][0, d + 1] > calm["koordinator"][0, d + 1]
    assert spiky["ours@2.0/cpu_p99"][0, d + 1] > calm["ours@2.0/cpu_p99"][0, d + 1]
    # the other VM is untouched throughout
    np.testing.assert_array_equal(calm["koordinator"][1], spiky["koordinator"][1])


def test_cold_start_and_request() -> None:
    vms = _two_vms(None)
    preds = _all_methods(vms)
    act = bench.actuals(vms, 6)
    assert (preds["koordinator"][:, 0] == 2.0).all()  # younger than 24 h: the provisioned 2 cores
    assert (bench.predict_request(act)["cpu_p95"] == 2.0).all()
    # steady VM 2 at 0.2 cores: koordinator pays bucket rounding × 1.1, ours only its floor margin
    assert preds["koordinator"][1, 5] > 0.2 * 1.1
    assert preds["ours@0.1/cpu_p95"][1, 5] == pytest.approx(0.2 + 0.002 * 2.0)
