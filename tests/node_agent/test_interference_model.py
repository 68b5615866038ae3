"""The sim's interference model: interpolation over the calibration table, BE kind mix, loading and its errors."""

from __future__ import annotations

import copy
import logging
from pathlib import Path

import numpy as np
import pytest
from interference_tables import TABLE, row, table, write

from colo.settings import load_settings
from colo_node_agent.backends.interference_model import (
    CalibrationError,
    InterferenceModel,
    isotonic,
    load_calibration,
    load_model,
    parse_calibration,
)
from colo_node_agent.settings import ENV_PREFIX, NodeAgentSettings

CAL = parse_calibration(TABLE, "test-table")


@pytest.mark.parametrize(("kind", "isolation", "be_fraction", "field", "want"), [
    ("cpu", "none", 0.25, "p99_inflation_pct", 100.0),
    ("cpu", "none", 0.5, "p99_inflation_pct", 300.0),
    ("cpu", "none", 0.375, "p99_inflation_pct", 200.0),
    ("cpu", "none", 0.125, "p99_inflation_pct", 50.0),
    ("cpu", "none", 0.9, "p99_inflation_pct", 300.0),
    ("cpu", "none", 0.0, "p99_inflation_pct", 0.0),
    ("cpu", "none", 0.5, "p50_inflation_pct", 200.0),
    ("cpu", "sched_idle", 0.25, "p99_inflation_pct", 0.0),
    ("cpu", "sched_idle", 0.375, "p99_inflation_pct", 2.5),
    ("cpu", "qos", 0.5, "p99_inflation_pct", 5.0),
    ("cpu", "adaptive", 1.0, "p99_inflation_pct", 5.0),
    ("cpu", "none", 0.375, "runq_wait_ratio", 0.75),
    ("cpu", "none", 0.0, "runq_wait_ratio", 0.05),
    ("cpu", "none", 0.125, "cpu_pressure_some", 10.25),
    ("membw", "sched_idle", 0.25, "p99_inflation_pct", 10.0),
], ids=["exact-row", "exact-last-row", "between-rows", "between-zero-and-first-row", "clamped-above",
        "zero-at-no-be", "p50-from-p50-ms", "qos-row-is-sched-idle-negative-read-as-0", "sched-idle-between",
        "qos-lookup-is-sched-idle", "adaptive-lookup-clamped", "signal-between-rows", "signal-be-free-from-ls",
        "psi-between-be-free-and-row", "membw-adaptive-row"])
def test_interpolation(kind: str, isolation: str, be_fraction: float, field: str, want: float) -> None:
    got = CAL.curve(kind, isolation).at(np.array([be_fraction]))[field]
    assert got[0] == pytest.approx(want)


@pytest.mark.parametrize(("kind", "isolation", "match"), [
    ("gpu", "none", "unknown BE kind 'gpu'"),
    ("cpu", "cgroup", "isolation 'cgroup'"),
    ("cache", "none", "no rows for BE kind 'cache'"),
], ids=["unknown-kind", "unknown-isolation", "kind-not-in-table"])
def test_unknown_curve_is_an_error(kind: str, isolation: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        CAL.curve(kind, isolation)


@pytest.mark.parametrize(("mix", "be_fraction", "sched_idle", "want_p99", "want_served"), [
    ({"cpu": 1.0}, [0.0, 0.5, 0.5], [False, False, True], [0.0, 300.0, 5.0], [1.0, 1 / 3, 1.0]),
    # p50 inflation at 0.5: cpu none +200 %, membw none +25 % → +112.5 %; sched_idle 0 % and +10 % → +5 %
    ({"cpu": 1.0, "membw": 1.0}, [0.5, 0.5], [False, True], [175.0, 12.5], [1 / 2.125, 1 / 1.05]),
    ({"membw": 2.0, "cpu": 0.0}, [0.5], [False], [50.0], [1 / 1.25]),
], ids=["cpu-per-isolation", "half-cpu-half-membw", "zero-share-ignored"])
def test_model_per_node(mix: dict[str, float], be_fraction: list[float], sched_idle: list[bool],
                        want_p99: list[float], want_served: list[float]) -> None:
    harm = InterferenceModel(CAL, mix).predict(np.array(be_fraction), np.array(sched_idle))
    assert harm.p99_inflation_pct == pytest.approx(want_p99)
    assert harm.served_fraction() == pytest.approx(want_served)
    assert (harm.cpi == -1).all()  # the table knows no cpi


def test_model_refuses_a_mix_the_table_cannot_model() -> None:
    with pytest.raises(ValueError) as err:
        InterferenceModel(CAL, {"cache": 1.0, "gpu": 1.0, "membw": -1.0})
    msg = str(err.value)
    for part in ("'gpu': unknown", "'membw': share must be", "'cache': test-table has no rows under isolation 'none'",
                 "'cache': test-table has no rows under isolation 'sched_idle'"):
        assert part in msg


def test_bad_file_lists_every_problem_with_its_path(tmp_path: Path) -> None:
    doc = table(schema="colo.other/2", ls={"alone_p50_ms": 0})
    doc["rows"][1] = dict(doc["rows"][1], be_kind="disk", be_fraction=1.5)
    doc["rows"][2]["signals"] = dict(doc["rows"][2]["signals"], runq_wait_ratio="x")
    del doc["rows"][3]["p99_ms"]
    doc["rows"].append("not a row")
    with pytest.raises(CalibrationError) as err:
        load_calibration(write(tmp_path / "bad.json", doc))
    problems = err.value.problems
    assert problems == [
        "schema: expected 'colo.interference-calibration/1', got 'colo.other/2'",
        "ls.alone_p50_ms: must be > 0, got 0.0",
        "ls.alone_p99_ms: missing",
        "rows[1].be_kind: expected one of cpu, membw, cache, got 'disk'",
        "rows[1].be_fraction: must be within [0.0, 1.0], got 1.5",
        "rows[2].signals.runq_wait_ratio: expected a finite number, got 'x'",
        "rows[3].p99_ms: missing",
        "rows[6]: expected an object, got str",
    ]
    assert str(tmp_path / "bad.json") in str(err.value)


@pytest.mark.parametrize(("content", "match"), [
    (None, "cannot read"),
    ("{not json", "not JSON"),
    ("[]", "expected a JSON object, got list"),
], ids=["missing-named-file", "not-json", "not-an-object"])
def test_unreadable_file(tmp_path: Path, content: str | None, match: str) -> None:
    path = tmp_path / "cal.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(CalibrationError, match=match):
        load_model(str(path))


def test_missing_packaged_file_means_no_model_said_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="colo.node-agent.interference"):
        assert load_model("", packaged=tmp_path / "absent.json") is None
    assert [r.getMessage() for r in caplog.records] == [
        f"no interference calibration at {tmp_path / 'absent.json'}: the sim models no interference harm "
        "(signals -1)"]
    assert load_model("off") is None


def test_packaged_or_named_file_gives_a_model(tmp_path: Path) -> None:
    path = write(tmp_path / "cal.json", TABLE)
    assert load_model("", {"cpu": 1.0}, packaged=path) is not None
    model = load_model(str(path), {"membw": 1.0})
    assert model is not None and model.mix == {"membw": 1.0}


def test_signal_unknown_in_one_row_is_unknown_for_the_curve() -> None:
    doc = copy.deepcopy(TABLE)
    doc["rows"].append(row("cpu", "none", 0.75, 400.0, 8.0, -1.0, 50.0))
    cal = parse_calibration(doc)
    values = cal.curve("cpu", "none").at(np.array([0.6]))
    assert "runq_wait_ratio" not in values and "cpu_pressure_some" in values
    assert values["p99_inflation_pct"][0] == pytest.approx(340.0)


def test_without_be_free_signals_the_first_row_holds_below_it() -> None:
    doc = table(ls={"alone_p50_ms": 2.0, "alone_p99_ms": 5.0})
    values = parse_calibration(doc).curve("cpu", "none").at(np.array([0.0, 0.1]))
    assert values["runq_wait_ratio"] == pytest.approx([0.5, 0.5])
    assert values["p99_inflation_pct"] == pytest.approx([0.0, 40.0])


def test_settings_kind_mix_from_env_and_its_errors() -> None:
    s = load_settings(NodeAgentSettings, ENV_PREFIX, env={
        "COLO_NODE_AGENT_INTERFERENCE_BE_KINDS": '{"cpu": 0.5, "membw": 0.5}',
        "COLO_NODE_AGENT_INTERFERENCE_CALIBRATION": "off"})
    assert s.interference_be_kinds == {"cpu": 0.5, "membw": 0.5} and s.interference_calibration == "off"
    assert NodeAgentSettings().interference_be_kinds == {"cpu": 1.0}
    with pytest.raises(ValueError) as err:
        NodeAgentSettings(interference_be_kinds={"disk": 1.0, "cpu": -2.0})
    assert "interference_be_kinds: be kind 'disk': unknown" in str(err.value)
    assert "interference_be_kinds: be kind 'cpu': share must be a finite number >= 0, got -2.0" in str(err.value)


def test_the_sim_agent_refuses_a_bad_table_before_it_connects(tmp_path: Path) -> None:
    from colo_node_agent.service import NodeAgentService

    bad = write(tmp_path / "bad.json", table(rows=[]))
    with pytest.raises(CalibrationError, match=r"rows: expected a non-empty list, got \[\]"):
        NodeAgentService(NodeAgentSettings(interference_calibration=str(bad)))
    good = NodeAgentService(NodeAgentSettings(interference_calibration=str(write(tmp_path / "ok.json", TABLE))))
    assert good._interference is not None


def test_the_transcribed_example_table_loads() -> None:
    """examples/interference-calibration-transcribed.json (docs/scenario.md "The interference model", measured)."""
    path = Path(__file__).parents[2] / "examples" / "interference-calibration-transcribed.json"
    harm = InterferenceModel(load_calibration(path)).predict(np.array([0.625, 0.625]), np.array([False, True]))
    assert harm.p99_inflation_pct.tolist() == pytest.approx([287.0, 0.0])


@pytest.mark.parametrize(("values", "weights", "want"), [
    pytest.param([1.0, 2.0, 3.0], [1, 1, 1], [1.0, 2.0, 3.0], id="already-non-decreasing"),
    pytest.param([3.0, 1.0, 2.0], [1, 1, 1], [2.0, 2.0, 2.0], id="a-high-first-point-pools-with-the-rest"),
    pytest.param([1.0, 5.0, 3.0], [1, 1, 1], [1.0, 4.0, 4.0], id="a-dip-pools-with-its-neighbour"),
    pytest.param([1.0, 5.0, 3.0], [1, 1, 3], [1.0, 3.5, 3.5], id="weights-pull-the-pooled-mean"),
    pytest.param([], [], [], id="empty"),
])
def test_isotonic_fit(values: list[float], weights: list[float], want: list[float]) -> None:
    assert isotonic(values, weights) == pytest.approx(want)


def test_one_noisy_window_does_not_make_harm_under_sched_idle() -> None:
    """A shared machine's table: one SCHED_IDLE window +16 % p99 (noise) before windows of −20 to −37 %. The
    curve is the non-decreasing fit, so the outlier pools with the rest and the model says no harm, instead of
    +16 % at that BE load and 0 around it."""
    doc = table(rows=[row("cpu", "none", 0.25, 444.0, 5.4, 0.6, 90.0),
                      row("cpu", "sched_idle", 0.084, 16.2, 2.1, 0.4, 90.0),
                      row("cpu", "sched_idle", 0.18, -20.1, 1.9, 0.4, 90.0),
                      row("cpu", "sched_idle", 0.25, -36.6, 1.9, 0.4, 90.0)],
                ls={"alone_p50_ms": 2.0, "alone_p99_ms": 5.0})
    values = parse_calibration(doc).curve("cpu", "sched_idle").at(np.array([0.084, 0.2]))
    assert values["p99_inflation_pct"] == pytest.approx([0.0, 0.0])
    assert values["p50_inflation_pct"] == pytest.approx([0.0, 0.0])  # p50 +5 %, −5 %, −5 %: pooled −1.7 %, floored
