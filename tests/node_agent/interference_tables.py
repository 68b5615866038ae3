"""Small calibration tables for the interference model's tests (the format of bench/'s calibration file)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any


def row(kind: str, isolation: str, be_fraction: float, p99_inflation: float, p50_ms: float, runq: float,
        psi: float, cpi: float = -1.0, intensity: int = 1) -> dict[str, Any]:
    return {"be_kind": kind, "intensity": intensity, "isolation": isolation, "be_cores": be_fraction * 2,
            "be_fraction": be_fraction, "be_share_of_idle": be_fraction / 0.85, "p50_ms": p50_ms,
            "p99_ms": 5.0 * (1 + p99_inflation / 100), "p99_inflation_percent": p99_inflation,
            "signals": {"runq_wait_ratio": runq, "cpu_pressure_some": psi, "throttled_ratio": 0.0, "cpi": cpi}}


TABLE: dict[str, Any] = {
    "schema": "colo.interference-calibration/1", "measured_at": "2026-12-02T06:00:00Z",
    "command": "bench/interference_calibration.py (test table)",
    "machine": {"cpus": 2, "cpu_model": "test", "kernel": "6.18", "llc_bytes": 33554432},
    "ls": {"work_ms": 1.5, "rate_per_s": 200, "cpu_cores": 0.3, "alone_p50_ms": 2.0, "alone_p99_ms": 5.0,
           "signals": {"runq_wait_ratio": 0.05, "cpu_pressure_some": 0.5}},
    "rows": [
        row("cpu", "none", 0.25, 100.0, 4.0, 0.5, 20.0),
        row("cpu", "none", 0.5, 300.0, 6.0, 1.0, 40.0, intensity=2),
        row("cpu", "sched_idle", 0.5, 5.0, 2.0, 0.1, 2.0, intensity=2),
        row("cpu", "qos", 0.25, -9.0, 1.8, 0.08, 1.0),
        row("membw", "none", 0.5, 50.0, 2.5, 0.3, 10.0),
        row("membw", "adaptive", 0.5, 20.0, 2.2, 0.1, 2.0),
    ],
}
"""cpu: 0.25 → +100 %, 0.5 → +300 % without isolation; SCHED_IDLE (with the qos row at 0.25, −9 % = 0) 0.5 →
+5 %. membw: 0.5 → +50 % / +20 %. p50 alone 2 ms; cpi unknown everywhere."""


def table(**changes: Any) -> dict[str, Any]:
    """A deep copy of :data:`TABLE` with top-level keys replaced."""
    doc = copy.deepcopy(TABLE)
    doc.update(changes)
    return doc


def write(path: Path, doc: object) -> Path:
    path.write_text(json.dumps(doc))
    return path
