"""deploy/grafana/colo-nodes.json is a Grafana 10+ dashboard whose every expression names metrics (and labels of
them) that the node agent, slo-manager and profiler export (their ``metrics`` modules, imported here)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import prometheus_client
import pytest

import colo_node_agent.metrics
import colo_profiler.metrics
import colo_slo_manager.metrics

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "colo-nodes.json"
MODULES = (colo_node_agent.metrics, colo_slo_manager.metrics, colo_profiler.metrics)
SELECTOR = re.compile(r"\b(colo_[a-z0-9_]+)(\{[^}]*\})?")
MATCHER = re.compile(r"(\w+)\s*(?:=~|!=|!~|=)\s*\"")
SUFFIXES = {"_total": (), "_bucket": ("le",), "_sum": (), "_count": ()}


def load() -> dict[str, Any]:
    with open(DASHBOARD, encoding="utf-8") as f:
        data: dict[str, Any] = json.load(f)
    return data


def exported() -> dict[str, tuple[str, ...]]:
    """Every sample name the three services' metrics modules register → its label names."""
    out: dict[str, tuple[str, ...]] = {}
    for module in MODULES:
        for obj in vars(module).values():
            if isinstance(obj, prometheus_client.metrics.MetricWrapperBase):
                name, labels = obj._name, tuple(obj._labelnames)
                kind = obj._type
                out[name if kind != "counter" else f"{name}_total"] = labels
                if kind == "histogram":
                    for suffix, extra in SUFFIXES.items():
                        if suffix != "_total":
                            out[name + suffix] = labels + extra
    return out


def targets(data: dict[str, Any]) -> list[tuple[str, str]]:
    return [(p["title"], t["expr"]) for p in data["panels"] for t in p.get("targets", [])]


def test_dashboard_schema_and_variables() -> None:
    data = load()
    assert data["schemaVersion"] >= 36 and data["uid"] == "colo-nodes"  # Grafana 10 writes 37+
    variables = {v["name"]: v for v in data["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    node = variables["node"]
    assert node["type"] == "query" and node["multi"] and node["includeAll"]
    assert re.fullmatch(r"label_values\((colo_[a-z0-9_]+), node\)", node["definition"])
    ids = [p["id"] for p in data["panels"]]
    assert len(ids) == len(set(ids))
    for p in data["panels"]:
        if p["type"] != "row":
            assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
            assert p["targets"], p["title"]


def test_every_expression_names_exported_metrics_and_their_labels() -> None:
    data = load()
    names = exported()
    variable = re.search(r"label_values\((\w+),", data["templating"]["list"][1]["definition"])
    assert variable is not None and "node" in names[variable.group(1)]
    problems = []
    for title, expr in targets(data):
        if expr.count("(") != expr.count(")") or expr.count("{") != expr.count("}"):
            problems.append(f"{title}: unbalanced brackets in {expr}")
        found = SELECTOR.findall(expr)
        if not found:
            problems.append(f"{title}: no colo metric in {expr}")
        for name, selector in found:
            if name not in names:
                problems.append(f"{title}: {name} is not exported")
                continue
            for label in MATCHER.findall(selector):
                if label not in names[name]:
                    problems.append(f"{title}: {name} has no label {label!r}")
    assert problems == []


@pytest.mark.parametrize("name", [
    "colo_node_cpu_usage_cores", "colo_node_memory_usage_bytes", "colo_node_batch_allocatable_cpu_cores",
    "colo_node_mid_allocatable_cpu_cores", "colo_node_be_cpu_suppressed_cores", "colo_node_agent_evictions_total",
    "colo_node_prod_peak_predicted_cpu_cores", "colo_node_prod_usage_cpu_cores",
    "colo_profiler_prod_peak_error_ratio_bucket", "colo_slo_manager_config_generation",
])
def test_the_figures_the_dashboard_exists_for_are_on_it(name: str) -> None:
    assert any(name in expr for _, expr in targets(load()))
