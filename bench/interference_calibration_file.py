"""The interference calibration file (``colo.interference-calibration/1``): its schema check and writer.

Written by ``bench/interference_calibration.py``; read by the simulation's interference model
(docs/interference.md "The calibration file"). Shape (JSON object)::

    {"schema": "colo.interference-calibration/1", "measured_at": ISO-8601 UTC, "command": str,
     "machine": {"cpus": int, "cpu_model": str, "kernel": str, "llc_bytes": int},
     "ls": {"work_ms": ms, "rate_per_s": requests/s, "cpu_cores": cores the LS pod used alone,
            "alone_p50_ms": ms, "alone_p99_ms": ms},
     "rows": [{"be_kind": "cpu"|"membw"|"cache", "intensity": BE workers (int ≥ 1),
               "isolation": "none"|"sched_idle"|"qos"|"adaptive", "be_cores": cores, "be_fraction": be_cores/cpus,
               "be_share_of_idle": be_cores / (cpus − LS cores), "p50_ms": ms, "p99_ms": ms,
               "p99_inflation_percent": %, "signals": {"runq_wait_ratio": s waited per s run (−1 unknown),
               "cpu_pressure_some": PSI percent (−1 unknown), "throttled_ratio": 0..1, "cpi": −1 (no perf)}}],
     "noise": {...}}

``noise`` (optional, free-form) says how busy the machine was while it was measured.
"""

from __future__ import annotations

import json
import math
from datetime import datetime
from pathlib import Path
from typing import Any

SCHEMA = "colo.interference-calibration/1"
BE_KINDS = ("cpu", "membw", "cache")
ISOLATIONS = ("none", "sched_idle", "qos", "adaptive")
SIGNALS = ("runq_wait_ratio", "cpu_pressure_some", "throttled_ratio", "cpi")
_MACHINE = {"cpus": int, "cpu_model": str, "kernel": str, "llc_bytes": int}
_LS = ("work_ms", "rate_per_s", "cpu_cores", "alone_p50_ms", "alone_p99_ms")
_ROW_NUMBERS = ("be_cores", "be_fraction", "be_share_of_idle", "p50_ms", "p99_ms", "p99_inflation_percent")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _object(doc: Any, path: str, problems: list[str]) -> dict[str, Any]:
    if not isinstance(doc, dict):
        problems.append(f"{path}: expected an object, got {type(doc).__name__}")
        return {}
    return doc


def _numbers(obj: dict[str, Any], keys: tuple[str, ...], path: str, problems: list[str]) -> None:
    for key in keys:
        if key not in obj:
            problems.append(f"{path}.{key}: missing")
        elif not _number(obj[key]):
            problems.append(f"{path}.{key}: expected a finite number, got {obj[key]!r}")


def _row(row: Any, path: str, problems: list[str]) -> None:
    r = _object(row, path, problems)
    if not r:
        return
    if r.get("be_kind") not in BE_KINDS:
        problems.append(f"{path}.be_kind: expected one of {list(BE_KINDS)}, got {r.get('be_kind')!r}")
    if r.get("isolation") not in ISOLATIONS:
        problems.append(f"{path}.isolation: expected one of {list(ISOLATIONS)}, got {r.get('isolation')!r}")
    n = r.get("intensity")
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        problems.append(f"{path}.intensity: expected an integer >= 1 (BE workers), got {n!r}")
    _numbers(r, _ROW_NUMBERS, path, problems)
    for key in ("be_cores", "be_fraction", "be_share_of_idle", "p50_ms", "p99_ms"):
        if _number(r.get(key)) and r[key] < 0:
            problems.append(f"{path}.{key}: must be >= 0, got {r[key]!r}")
    if "signals" not in r:
        problems.append(f"{path}.signals: missing")
    else:
        _numbers(_object(r["signals"], f"{path}.signals", problems), SIGNALS, f"{path}.signals", problems)


def validate(doc: Any) -> list[str]:
    """Every problem of ``doc`` against the schema (module doc), each as ``path: what``, e.g.
    ``rows[3].signals.cpi: missing``; [] when the document is a valid calibration."""
    problems: list[str] = []
    d = _object(doc, "$", problems)
    if not d:
        return problems
    if d.get("schema") != SCHEMA:
        problems.append(f"schema: expected {SCHEMA!r}, got {d.get('schema')!r}")
    try:
        datetime.fromisoformat(str(d.get("measured_at")))
    except ValueError:
        problems.append(f"measured_at: expected an ISO-8601 time, got {d.get('measured_at')!r}")
    if not isinstance(d.get("command"), str) or not d["command"]:
        problems.append(f"command: expected the command that measured it, got {d.get('command')!r}")
    machine = _object(d.get("machine"), "machine", problems)
    for key, kind in _MACHINE.items():
        if machine and not isinstance(machine.get(key), kind):
            problems.append(f"machine.{key}: expected {kind.__name__}, got {machine.get(key)!r}")
    ls = _object(d.get("ls"), "ls", problems)
    if ls:
        _numbers(ls, _LS, "ls", problems)
    rows = d.get("rows")
    if not isinstance(rows, list) or not rows:
        problems.append(f"rows: expected a non-empty list, got {rows!r}")
        return problems
    seen: dict[tuple[Any, ...], int] = {}
    for i, row in enumerate(rows):
        _row(row, f"rows[{i}]", problems)
        if isinstance(row, dict):
            key = (row.get("be_kind"), row.get("intensity"), row.get("isolation"))
            if key in seen:
                problems.append(f"rows[{i}]: same be_kind/intensity/isolation as rows[{seen[key]}]: {key}")
            seen.setdefault(key, i)
    return problems


def write(path: Path, doc: dict[str, Any]) -> None:
    """Write ``doc`` to ``path`` (indented JSON, one row per line). Raises ValueError listing every problem
    when it is not a valid calibration (nothing is written then)."""
    problems = validate(doc)
    if problems:
        raise ValueError("not a valid interference calibration:\n  " + "\n  ".join(problems))
    head = {k: v for k, v in doc.items() if k != "rows"}
    text = json.dumps(head, indent=1)[:-2] + ',\n "rows": [\n'
    text += ",\n".join("  " + json.dumps(r) for r in doc["rows"]) + "\n ]\n}\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
