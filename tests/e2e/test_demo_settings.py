"""The demo passes the caller's COLO_* settings to its services, records them, and reports a bad one plainly."""

from __future__ import annotations

import argparse
import io
import json
import os
from pathlib import Path

import pytest
from rich.console import Console

from colo.sim import traces as tr
from colo.sim.demo import add_arguments, run_demo

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not (tr.traces_dir() / tr.NODE_LIST).exists(),
                       reason=f"traces not found in {tr.traces_dir()}: set COLO_TRACES_DIR or run `make traces`"),
]


def _demo(out: Path) -> tuple[int, str]:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--nodes", "4", "--hours", "0.1", "--out", str(out)])
    buf = io.StringIO()
    code = run_demo(args, Console(file=buf, width=200))
    return code, buf.getvalue()


def test_a_mistyped_setting_stops_the_demo_with_the_settings_error(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLO_DESCHEDULER_HIGH_THRESHOLD__CPU", "40")
    code, out = _demo(tmp_path)
    assert code == 2
    assert "run failed: descheduler exited with code 2" in out
    assert "unknown setting 'high_threshold'" in out and "Traceback" not in out


def test_settings_from_the_environment_are_recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [k for k in os.environ if k.startswith("COLO_") and k != "COLO_TRACES_DIR"]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("COLO_DESCHEDULER_HIGH_THRESHOLDS__CPU", "50")
    code, _ = _demo(tmp_path)
    assert code == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["scenario"]["settings_env"] == {"COLO_DESCHEDULER_HIGH_THRESHOLDS__CPU": "50"}
    assert (tmp_path / "colo-migrations.jsonl").exists() and (tmp_path / "baseline-migrations.jsonl").exists()
