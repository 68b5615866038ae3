"""The interference calibration file format (bench/interference_calibration_file.py): a written file passes the
schema check, a bad one lists every problem with its path, and the committed measurement is valid package data."""

from __future__ import annotations

import copy
import importlib.resources
import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import pytest

FORMAT = Path(__file__).resolve().parents[2] / "bench" / "interference_calibration_file.py"


def _format() -> ModuleType:
    spec = importlib.util.spec_from_file_location("interference_calibration_file", FORMAT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


fmt = _format()


def _row(kind: str = "cpu", n: int = 1, iso: str = "qos") -> dict[str, Any]:
    return {"be_kind": kind, "intensity": n, "isolation": iso, "be_cores": 1.2, "be_fraction": 0.6,
            "be_share_of_idle": 0.75, "p50_ms": 3.1, "p99_ms": 7.0, "p99_inflation_percent": -9.0,
            "signals": {"runq_wait_ratio": 0.07, "cpu_pressure_some": 80.0, "throttled_ratio": 0.0, "cpi": -1}}


def _doc() -> dict[str, Any]:
    return {"schema": fmt.SCHEMA, "measured_at": "2026-12-02T07:30:00+00:00",
            "command": "python bench/interference_calibration.py",
            "machine": {"cpus": 2, "cpu_model": "AMD EPYC", "kernel": "6.18.44", "llc_bytes": 33554432},
            "ls": {"work_ms": 1.5, "rate_per_s": 200.0, "cpu_cores": 0.4, "alone_p50_ms": 3.2, "alone_p99_ms": 7.7},
            "rows": [_row("cpu", 1, "none"), _row("cpu", 1, "qos"), _row("membw", 2, "adaptive")],
            "noise": {"other_cpu_cores_mean": 0.1}}


def test_written_file_passes_the_schema_check(tmp_path: Path) -> None:
    path = tmp_path / "data" / "interference-calibration.json"
    fmt.write(path, _doc())
    doc = json.loads(path.read_text())
    assert fmt.validate(doc) == []
    assert doc == _doc()


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """An edit of the document: set (or, with ``...``, delete) the value at a dotted path (``rows.1.signals``)."""

    def edit(doc: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        obj: Any = doc
        for key in parents:
            obj = obj[int(key)] if isinstance(obj, list) else obj[key]
        if value is ...:
            del obj[last]
        else:
            obj[int(last) if isinstance(obj, list) else last] = value

    return edit


BAD = [
    ("wrong schema", [_set("schema", "colo.interference-calibration/0")], ["schema: expected"]),
    ("no time", [_set("measured_at", "yesterday")], ["measured_at: expected an ISO-8601 time"]),
    ("no command", [_set("command", ...)], ["command: expected"]),
    ("machine cpus a string", [_set("machine.cpus", "2")], ["machine.cpus: expected int"]),
    ("ls without p99", [_set("ls.alone_p99_ms", ...)], ["ls.alone_p99_ms: missing"]),
    ("no rows", [_set("rows", [])], ["rows: expected a non-empty list"]),
    ("unknown kind", [_set("rows.0.be_kind", "disk")], ["rows[0].be_kind: expected one of"]),
    ("unknown isolation", [_set("rows.2.isolation", "cgroup")], ["rows[2].isolation: expected one of"]),
    ("zero workers", [_set("rows.1.intensity", 0)], ["rows[1].intensity: expected an integer >= 1"]),
    ("NaN p99", [_set("rows.1.p99_ms", float("nan"))], ["rows[1].p99_ms: expected a finite number"]),
    ("negative BE cores", [_set("rows.0.be_cores", -0.5)], ["rows[0].be_cores: must be >= 0"]),
    ("signal missing", [_set("rows.2.signals.cpi", ...)], ["rows[2].signals.cpi: missing"]),
    ("no signals", [_set("rows.0.signals", ...)], ["rows[0].signals: missing"]),
    ("duplicate cell", [_set("rows.1.isolation", "none")], ["rows[1]: same be_kind/intensity/isolation as rows[0]"]),
    ("every problem listed",
     [_set("schema", ""), _set("machine.kernel", 6), _set("rows.0.p50_ms", ...), _set("rows.2.signals.cpi", "x")],
     ["schema: expected", "machine.kernel: expected str", "rows[0].p50_ms: missing",
      "rows[2].signals.cpi: expected a finite number"]),
]


@pytest.mark.parametrize(("edits", "expected"), [pytest.param(e, x, id=name) for name, e, x in BAD])
def test_bad_file_lists_every_problem_with_its_path(edits: list[Callable[[dict[str, Any]], None]],
                                                    expected: list[str], tmp_path: Path) -> None:
    doc = copy.deepcopy(_doc())
    for edit in edits:
        edit(doc)
    problems = fmt.validate(doc)
    assert len(problems) == len(expected), problems
    for want, got in zip(expected, problems):
        assert got.startswith(want), (want, problems)
    path = tmp_path / "calibration.json"
    with pytest.raises(ValueError) as err:
        fmt.write(path, doc)
    assert all(p in str(err.value) for p in problems)
    assert not path.exists()


def test_not_an_object() -> None:
    assert fmt.validate([1]) == ["$: expected an object, got list"]


def test_committed_calibration_is_valid_package_data() -> None:
    data = importlib.resources.files("colo_node_agent") / "data" / "interference-calibration.json"
    doc = json.loads(data.read_text())
    assert fmt.validate(doc) == []
    assert {r["isolation"] for r in doc["rows"]} == set(fmt.ISOLATIONS)
    assert {r["be_kind"] for r in doc["rows"]} == set(fmt.BE_KINDS)
