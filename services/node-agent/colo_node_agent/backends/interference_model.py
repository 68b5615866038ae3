"""The sim's interference model: LS p99 latency inflation and interference signals from BE load, by the
calibration table that ``bench/`` measured on a real machine (docs/scenario.md "The interference model").

The table (schema :data:`SCHEMA`) has one row per BE kind × intensity × isolation with the LS pod's p50/p99,
its p99 inflation over running alone and the signals measured meanwhile. The model keeps, per BE kind and
isolation, a curve over ``be_fraction`` (BE cores used / node CPUs): the rows' points plus the BE-free point
(be_fraction 0: inflation 0; signals the ``ls.signals`` of the table when it has them), and interpolates
linearly between points, clamped at the ends. Isolation: ``none`` rows make the ``none`` curve; ``sched_idle``,
``qos`` and ``adaptive`` rows make the ``sched_idle`` curve (``qos``/``adaptive`` are SCHED_IDLE plus suppress,
and suppress shows only as fewer BE cores, i.e. a smaller measured be_fraction). Inflation is fitted, not
taken point by point: harm does not fall as BE load grows, but one window's p99 moves by tens of percent from
noise alone (the bench's ``ls_alone`` windows: 7.5–16.3 ms p99 on a shared machine), so each inflation curve is
the least-squares non-decreasing fit of the rows' values over be_fraction (isotonic regression by
pool-adjacent-violators, each be_fraction weighted by its row count; Barlow et al., "Statistical Inference under
Order Restrictions", 1972), then floored at 0 (a negative measured inflation is noise: −9 % under SCHED_IDLE in
docs/node-agent.md "Interference"). A signal is modelled only when every point of its curve knows it (a
negative value is unknown); otherwise it is −1.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

F64 = npt.NDArray[np.float64]
BOOL = npt.NDArray[np.bool_]

log = logging.getLogger("colo.node-agent.interference")

SCHEMA = "colo.interference-calibration/1"
"""The ``schema`` value of a calibration file this module reads."""
BE_KINDS: tuple[str, ...] = ("cpu", "membw", "cache")
"""BE work kinds of the benchmark: CPU spin, memory-bandwidth streaming, cache thrashing."""
ISOLATIONS: tuple[str, ...] = ("none", "sched_idle", "qos", "adaptive")
"""Isolation settings of the table's rows."""
MODEL_ISOLATION: dict[str, str] = {"none": "none", "sched_idle": "sched_idle", "qos": "sched_idle",
                                   "adaptive": "sched_idle"}
"""The curve each row isolation belongs to (``qos``/``adaptive`` = SCHED_IDLE + suppress)."""
SIGNALS: tuple[str, ...] = ("runq_wait_ratio", "cpu_pressure_some", "throttled_ratio", "cpi")
"""Signals every row carries (``signals``); negative = unknown."""
PACKAGED_CALIBRATION = Path(__file__).resolve().parent.parent / "data" / "interference-calibration.json"
"""The calibration shipped with the package (measured by ``bench/``); absent = no model."""


class CalibrationError(ValueError):
    """A calibration file that cannot be read or is invalid; ``problems`` lists every problem with its path."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = problems
        super().__init__(f"interference calibration {source}: " + "; ".join(problems))


@dataclass(frozen=True)
class Curve:
    """One BE kind × model isolation: ascending ``be_fraction`` points from 0 (shape ``(k,)``), the LS p99 and
    p50 inflation in percent at each, and each known signal (name → ``(k,)``; unknown signals absent)."""

    be_fraction: F64
    p99_inflation_pct: F64
    p50_inflation_pct: F64
    signals: dict[str, F64]

    def at(self, be_fraction: F64) -> dict[str, F64]:
        """Values at ``be_fraction`` (any shape; linear interpolation, clamped at the ends): keys
        ``p99_inflation_pct``, ``p50_inflation_pct`` and the known signals."""
        x = self.be_fraction
        out = {"p99_inflation_pct": np.interp(be_fraction, x, self.p99_inflation_pct),
               "p50_inflation_pct": np.interp(be_fraction, x, self.p50_inflation_pct)}
        out.update({k: np.interp(be_fraction, x, v) for k, v in self.signals.items()})
        return out


@dataclass(frozen=True)
class Calibration:
    """A validated calibration table: where it came from (``source``, ``measured_at``, ``command``,
    ``machine``) and its curves by (BE kind, model isolation ``none``/``sched_idle``)."""

    source: str
    measured_at: str
    command: str
    machine: dict[str, Any]
    curves: dict[tuple[str, str], Curve]

    def curve(self, kind: str, isolation: str) -> Curve:
        """The curve of BE ``kind`` under ``isolation`` (any of :data:`ISOLATIONS`). Raises ValueError for an
        unknown kind or isolation, or one the table has no rows for."""
        if kind not in BE_KINDS or isolation not in MODEL_ISOLATION:
            raise ValueError(f"unknown BE kind {kind!r} or isolation {isolation!r}: kinds {', '.join(BE_KINDS)}; "
                             f"isolations {', '.join(ISOLATIONS)}")
        key = (kind, MODEL_ISOLATION[isolation])
        if key not in self.curves:
            raise ValueError(f"{self.source} has no rows for BE kind {kind!r} under isolation {key[1]!r}")
        return self.curves[key]


def _number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _check(doc: dict[str, Any], key: str, path: str, problems: list[str], *, positive: bool = False,
           lo: float | None = None, hi: float | None = None) -> float | None:
    """The number at ``doc[key]``, or None with a problem naming ``path.key``."""
    v = doc.get(key)
    where = f"{path}{key}"
    if not _number(v):
        problems.append(f"{where}: expected a finite number, got {v!r}" if key in doc else f"{where}: missing")
        return None
    f = float(v)  # type: ignore[arg-type]
    if positive and f <= 0:
        problems.append(f"{where}: must be > 0, got {f}")
    elif lo is not None and f < lo or hi is not None and f > hi:
        bounds = f"within [{lo}, {hi}]" if hi is not None else f">= {lo}"
        problems.append(f"{where}: must be {bounds}, got {f}")
    return f


def _row_problems(row: object, path: str, problems: list[str]) -> bool:
    """Check one row; True when it is usable."""
    if not isinstance(row, dict):
        problems.append(f"{path}: expected an object, got {type(row).__name__}")
        return False
    n = len(problems)
    if row.get("be_kind") not in BE_KINDS:
        problems.append(f"{path}.be_kind: expected one of {', '.join(BE_KINDS)}, got {row.get('be_kind')!r}")
    if row.get("isolation") not in ISOLATIONS:
        problems.append(f"{path}.isolation: expected one of {', '.join(ISOLATIONS)}, got {row.get('isolation')!r}")
    intensity = row.get("intensity")
    if not isinstance(intensity, int) or isinstance(intensity, bool) or intensity < 0:
        problems.append(f"{path}.intensity: expected an integer >= 0, got {intensity!r}")
    _check(row, "be_cores", f"{path}.", problems, lo=0.0)
    _check(row, "be_fraction", f"{path}.", problems, lo=0.0, hi=1.0)
    _check(row, "be_share_of_idle", f"{path}.", problems)
    _check(row, "p50_ms", f"{path}.", problems, positive=True)
    _check(row, "p99_ms", f"{path}.", problems, positive=True)
    _check(row, "p99_inflation_percent", f"{path}.", problems)
    signals = row.get("signals")
    if not isinstance(signals, dict):
        problems.append(f"{path}.signals: expected an object with {', '.join(SIGNALS)}, got {signals!r}")
    else:
        for name in SIGNALS:
            _check(signals, name, f"{path}.signals.", problems)
    return len(problems) == n


def calibration_problems(doc: object) -> list[str]:
    """Every problem of a decoded calibration document, each with its path (``rows[3].p99_ms: …``); empty
    when valid. Keys beyond the format are allowed (later schema revisions add, never rename)."""
    if not isinstance(doc, dict):
        return [f"expected a JSON object, got {type(doc).__name__}"]
    problems: list[str] = []
    if doc.get("schema") != SCHEMA:
        problems.append(f"schema: expected {SCHEMA!r}, got {doc.get('schema')!r}")
    for key in ("measured_at", "command"):
        if not isinstance(doc.get(key), str):
            problems.append(f"{key}: expected a string, got {doc.get(key)!r}")
    if not isinstance(doc.get("machine"), dict):
        problems.append(f"machine: expected an object, got {doc.get('machine')!r}")
    ls = doc.get("ls")
    if not isinstance(ls, dict):
        problems.append(f"ls: expected an object, got {ls!r}")
    else:
        _check(ls, "alone_p50_ms", "ls.", problems, positive=True)
        _check(ls, "alone_p99_ms", "ls.", problems, positive=True)
        alone = ls.get("signals", {})
        if not isinstance(alone, dict):
            problems.append(f"ls.signals: expected an object, got {alone!r}")
        else:
            for name in sorted(set(alone) & set(SIGNALS)):
                _check(alone, name, "ls.signals.", problems)
    rows = doc.get("rows")
    if not isinstance(rows, list) or not rows:
        problems.append(f"rows: expected a non-empty list, got {rows!r}")
    else:
        for i, row in enumerate(rows):
            _row_problems(row, f"rows[{i}]", problems)
    return problems


def isotonic(values: list[float], weights: list[float]) -> F64:
    """The weighted least-squares non-decreasing fit of ``values`` (in order; shape ``(k,)``) with positive
    ``weights``: pool-adjacent-violators, O(k). ``[3, 1, 2]`` with weights 1 → ``[2, 2, 2]``."""
    blocks: list[list[float]] = []  # [weighted mean, weight, count]
    for v, w in zip(values, weights):
        blocks.append([v, w, 1.0])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            m2, w2, n2 = blocks.pop()
            m1, w1, n1 = blocks.pop()
            blocks.append([(m1 * w1 + m2 * w2) / (w1 + w2), w1 + w2, n1 + n2])
    return np.array([m for m, _, n in blocks for _ in range(int(n))], dtype=np.float64)


def _curve(rows: list[dict[str, Any]], alone_p50_ms: float, alone: dict[str, float]) -> Curve:
    """The curve of ``rows`` (one kind × model isolation): rows at the same be_fraction averaged, rows at
    be_fraction 0 left to the BE-free point."""
    points: dict[float, list[dict[str, Any]]] = {}
    for r in rows:
        if float(r["be_fraction"]) > 0:
            points.setdefault(float(r["be_fraction"]), []).append(r)
    xs = sorted(points)

    def col(get: Any) -> list[float]:
        return [float(np.mean([get(r) for r in points[x]])) for x in xs]

    weights = [float(len(points[x])) for x in xs]
    p99 = np.maximum(isotonic(col(lambda r: float(r["p99_inflation_percent"])), weights), 0.0)
    p50 = np.maximum(isotonic(col(lambda r: (float(r["p50_ms"]) / alone_p50_ms - 1.0) * 100.0), weights), 0.0)
    signals: dict[str, F64] = {}
    for name in SIGNALS:
        values = [float(r["signals"][name]) for x in xs for r in points[x]]
        if any(v < 0 for v in values) or alone.get(name, 0.0) < 0:
            continue
        ys = col(lambda r, n=name: float(r["signals"][n]))
        first = alone.get(name, ys[0] if ys else 0.0)
        signals[name] = np.array([first, *ys])
    return Curve(np.array([0.0, *xs]), np.array([0.0, *p99]), np.array([0.0, *p50]), signals)


def parse_calibration(doc: object, source: str = "<calibration>") -> Calibration:
    """A :class:`Calibration` from a decoded document. Raises CalibrationError listing every problem."""
    problems = calibration_problems(doc)
    if problems:
        raise CalibrationError(source, problems)
    assert isinstance(doc, dict)
    ls = doc["ls"]
    alone = {k: float(v) for k, v in ls.get("signals", {}).items() if k in SIGNALS}
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in doc["rows"]:
        groups.setdefault((row["be_kind"], MODEL_ISOLATION[row["isolation"]]), []).append(row)
    curves = {key: _curve(rows, float(ls["alone_p50_ms"]), alone) for key, rows in groups.items()}
    return Calibration(source, doc["measured_at"], doc["command"], dict(doc["machine"]), curves)


def load_calibration(path: str | Path) -> Calibration:
    """Read and validate the calibration file at ``path``. Raises CalibrationError (unreadable, not JSON, or
    every problem of the content with its path)."""
    try:
        doc = json.loads(Path(path).read_text())
    except OSError as exc:
        raise CalibrationError(str(path), [f"cannot read: {exc.strerror or exc}"]) from exc
    except json.JSONDecodeError as exc:
        raise CalibrationError(str(path), [f"not JSON: {exc}"]) from exc
    return parse_calibration(doc, str(path))


@dataclass(frozen=True)
class Harm:
    """The model's output per node, each ``(nodes,)``: LS p99 and p50 latency inflation (percent) and the
    signals (``runq_wait_ratio`` s waited per s run, ``cpu_pressure_some`` percent, ``cpi``; −1 unknown)."""

    p99_inflation_pct: F64
    p50_inflation_pct: F64
    runq_wait_ratio: F64
    cpu_pressure_some: F64
    cpi: F64

    def served_fraction(self) -> F64:
        """The share of its CPU demand a latency-bound LS pod is served: 1 / (1 + p50 inflation / 100).

        Little's law for a server with a fixed number of requests in flight: throughput = in-flight / latency,
        so when each request takes (1 + i) times as long the pod does 1 / (1 + i) of the work per second. The
        table has no mean latency; its p50 stands for it (the tail inflation is reported, not served)."""
        out: F64 = 1.0 / (1.0 + self.p50_inflation_pct / 100.0)
        return out


MODELLED: tuple[str, ...] = ("p99_inflation_pct", "p50_inflation_pct", "runq_wait_ratio", "cpu_pressure_some", "cpi")


class InterferenceModel:
    """The calibration applied to a BE kind mix ``be_kinds`` (kind → share of BE CPU, normalised to sum 1;
    default all ``cpu``): each output is the mix-weighted sum of the kinds' curves at the node's total
    be_fraction. Raises ValueError listing every unknown kind, bad share, or kind the table has no
    ``none``/``sched_idle`` rows for."""

    def __init__(self, calibration: Calibration, be_kinds: Mapping[str, float] | None = None) -> None:
        mix = dict(be_kinds) if be_kinds is not None else {"cpu": 1.0}
        problems = be_kind_problems(mix)
        for kind, share in mix.items():
            for iso in ("none", "sched_idle"):
                if kind in BE_KINDS and share > 0 and (kind, iso) not in calibration.curves:
                    problems.append(f"be kind {kind!r}: {calibration.source} has no rows under isolation {iso!r}")
        if problems:
            raise ValueError("; ".join(problems))
        total = sum(mix.values())
        self.calibration = calibration
        self.mix = {k: v / total for k, v in mix.items() if v > 0}

    def predict(self, be_fraction: F64, sched_idle: BOOL) -> Harm:
        """Per node: ``be_fraction`` BE cores used / node CPUs ``(nodes,)``; ``sched_idle`` whether the BE
        group is SCHED_IDLE (``cpu.idle`` = 1, NodeSLO ``be_cpu_idle``) ``(nodes,)``, else isolation ``none``."""
        f = np.clip(np.asarray(be_fraction, dtype=np.float64), 0.0, 1.0)
        out: dict[str, F64] = {}
        for name in MODELLED:
            total = np.zeros_like(f)
            known = True
            for kind, w in self.mix.items():
                parts = []
                for iso in ("none", "sched_idle"):
                    values = self.calibration.curves[(kind, iso)].at(f)
                    known = known and name in values
                    parts.append(values.get(name, f))
                total += w * np.where(sched_idle, parts[1], parts[0])
            out[name] = total if known else np.full_like(f, -1.0)
        return Harm(**out)


def be_kind_problems(mix: Mapping[str, float]) -> list[str]:
    """Every problem of a BE kind mix (kind → share): unknown kinds, shares not finite ≥ 0, all shares 0."""
    problems = [f"be kind {k!r}: unknown (kinds: {', '.join(BE_KINDS)})" for k in mix if k not in BE_KINDS]
    problems += [f"be kind {k!r}: share must be a finite number >= 0, got {v!r}" for k, v in mix.items()
                 if not _number(v) or v < 0]
    if not problems and not sum(mix.values()) > 0:
        problems.append(f"be kinds: the shares must sum to more than 0, got {dict(mix)}")
    return problems


def load_model(setting: str, be_kinds: Mapping[str, float] | None = None,
               packaged: Path = PACKAGED_CALIBRATION) -> InterferenceModel | None:
    """The model for the node agent setting ``interference_calibration``: ``""`` = the packaged file (absent →
    None, "no model", said in one log line), ``"off"`` = None, else that path. Raises CalibrationError for a
    named file that is missing or bad and for a bad packaged file; ValueError for a bad ``be_kinds``."""
    if setting == "off":
        return None
    path = Path(setting) if setting else packaged
    if not setting and not path.exists():
        log.info("no interference calibration at %s: the sim models no interference harm (signals -1)", path)
        return None
    model = InterferenceModel(load_calibration(path), be_kinds)
    log.info("interference model from %s (measured %s), BE kinds %s", path, model.calibration.measured_at,
             model.mix)
    return model
