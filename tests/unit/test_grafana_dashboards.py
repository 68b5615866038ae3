"""Every PromQL expression of every Grafana dashboard in ``deploy/grafana/`` names only metrics Colo exports.

The exported names are read from the Prometheus registry after importing every service's metrics module
(``services/*/colo_*/metrics.py``) and :mod:`colo.bus` — the definitions ``/metrics`` serves — so a renamed or
removed metric fails here, not on an operator's empty panel.
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from colo import telemetry

ROOT = Path(__file__).resolve().parents[2]
DASHBOARDS = sorted((ROOT / "deploy" / "grafana").glob("*.json"))

KEYWORDS = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or",
                      "unless", "offset", "inf", "nan", "atan2"})
"""PromQL keywords and binary operators that look like names (functions are told by the ``(`` after them)."""
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGES = re.compile(r"\[[^\[\]]*\]")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
_VARIABLES = re.compile(r"\$\{[^}]*\}|\$\w+")
_NAME = re.compile(r"(?<![\w.])[a-zA-Z_:][a-zA-Z0-9_:]*")


def metric_names(expr: str) -> set[str]:
    """The metric names ``expr`` (PromQL, Grafana variables allowed) selects: every identifier that is not a
    function or aggregation (followed by ``(``), a keyword, a label name (inside ``{}`` or a grouping clause), a
    duration (inside ``[]``) or part of a number or string."""
    s = _VARIABLES.sub(" ", _STRINGS.sub(" ", expr))
    s = _RANGES.sub(" ", _MATCHERS.sub(" ", s))
    s = _GROUPING.sub(" ", s)
    out = set()
    for m in _NAME.finditer(s):
        name, rest = m.group(), s[m.end():].lstrip()
        if rest.startswith("(") or name.lower() in KEYWORDS:
            continue
        out.add(name)
    return out


def expressions(node: Any) -> Iterator[str]:
    """Every ``expr`` string anywhere in a dashboard (panels, nested rows, targets)."""
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "expr" and isinstance(v, str):
                yield v
            else:
                yield from expressions(v)
    elif isinstance(node, list):
        for v in node:
            yield from expressions(v)


def exported_names() -> set[str]:
    """Sample names the registry serves once every metrics module is imported: ``<name>_total`` of counters,
    ``<name>`` of gauges, ``<name>_bucket|_sum|_count`` of histograms (and ``<name>``, ``_sum``, ``_count`` of
    summaries)."""
    importlib.import_module("colo.bus")
    for path in sorted(ROOT.glob("services/*/colo_*/metrics.py")):
        importlib.import_module(f"{path.parent.name}.metrics")
    names: set[str] = set()
    for family in telemetry.registry().collect():
        n = family.name
        if family.type == "counter":
            names.add(f"{n}_total")
        elif family.type == "histogram":
            names |= {f"{n}_bucket", f"{n}_sum", f"{n}_count"}
        elif family.type == "summary":
            names |= {n, f"{n}_sum", f"{n}_count"}
        else:
            names.add(n)
    return names


def unknown_metrics(dashboard: Any, exported: set[str]) -> list[str]:
    """``"<expr>: <name>"`` for every name an expression of ``dashboard`` selects that is not exported."""
    return [f"{expr}: {name}" for expr in expressions(dashboard) for name in sorted(metric_names(expr) - exported)]


@pytest.mark.parametrize(("expr", "names"), [
    ("sum by (result) (rate(colo_scheduler_schedule_attempts_total[$__rate_interval]))",
     {"colo_scheduler_schedule_attempts_total"}),
    ("histogram_quantile(0.99, sum by (le) (rate(colo_x_seconds_bucket{result=\"scheduled\"}[5m])))",
     {"colo_x_seconds_bucket"}),
    ("sum(rate(a_sum[1m])) / sum(rate(a_count[1m])) > bool 1e-9", {"a_sum", "a_count"}),
    ("up offset 5m and on (instance) group_left (job) node_load1", {"up", "node_load1"}),
    ('count(x{route=~"/v1/.*"}) without (le) or vector(0)', {"x"}),
    ('label_replace(y, "dst", "$1", "src", "(.*)")', {"y"}),
    ("sum(z) by (queue)", {"z"}),
], ids=["rate-by", "quantile-bucket", "sum-count-bool", "offset-on-group", "without-or", "strings", "postfix-by"])
def test_metric_names_of_an_expression(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names


def test_dashboards_exist_and_are_grafana_10_with_a_datasource_variable() -> None:
    assert DASHBOARDS, "no deploy/grafana/*.json"
    for path in DASHBOARDS:
        d = json.loads(path.read_text())
        assert d["schemaVersion"] >= 38, path.name  # Grafana 10.0
        variables = [v for v in d["templating"]["list"] if v["type"] == "datasource"]
        assert variables and variables[0]["query"] == "prometheus", path.name
        assert list(expressions(d)), path.name


@pytest.mark.parametrize("path", DASHBOARDS, ids=[p.name for p in DASHBOARDS])
def test_every_expression_names_an_exported_metric(path: Path) -> None:
    assert unknown_metrics(json.loads(path.read_text()), exported_names()) == []


def test_an_unknown_metric_is_reported() -> None:
    exported = exported_names()
    assert "colo_scheduler_schedule_attempts_total" in exported
    assert "colo_scheduler_scheduling_attempt_duration_seconds_bucket" in exported
    dashboard = {"panels": [{"targets": [
        {"expr": "rate(colo_scheduler_schedule_attempts_total[5m])"},
        {"expr": "rate(colo_scheduler_schedule_attempts[5m])"},  # a counter without _total
        {"expr": "histogram_quantile(0.9, rate(colo_scheduler_scheduling_attempt_duration_seconds[5m]))"},
        {"expr": 'sum(colo_scheduler_pending_podz{queue="active"})'},
    ]}]}
    assert unknown_metrics(dashboard, exported) == [
        "rate(colo_scheduler_schedule_attempts[5m]): colo_scheduler_schedule_attempts",
        "histogram_quantile(0.9, rate(colo_scheduler_scheduling_attempt_duration_seconds[5m])): "
        "colo_scheduler_scheduling_attempt_duration_seconds",
        'sum(colo_scheduler_pending_podz{queue="active"}): colo_scheduler_pending_podz',
    ]
