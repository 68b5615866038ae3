"""The Grafana dashboards do not mix units on one axis, show CPU in cores and are titled as the docs name them
(issue 14 follow-up: "API requests" drew req/s and p99 seconds on one axis, the bind conflict ratio shared the
binds/s axis, CPU panels had no unit)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
DASHBOARDS = sorted((ROOT / "deploy" / "grafana").glob("*.json"))


def _kind(expr: str) -> str:
    """What a target draws: ``seconds`` (a latency quantile or mean), ``ratio`` (a share of two rates) or
    ``amount`` (anything else: a rate, a count, a gauge in the panel's unit)."""
    if "histogram_quantile" in expr and "_seconds_bucket" in expr or "_seconds_sum" in expr:
        return "seconds"
    if "clamp_min" in expr or ("rate(" in expr and ") / " in expr and "_total" in expr.split(") / ")[0]):
        return "ratio"
    return "amount"


def _panels() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in DASHBOARDS:
        for p in json.loads(path.read_text())["panels"]:
            if p.get("type") == "timeseries":
                out.append((f"{path.name}: {p['title']}", p))
    return out


@pytest.mark.parametrize(("title", "panel"), _panels(), ids=[t for t, _ in _panels()])
def test_one_unit_per_axis(title: str, panel: dict[str, Any]) -> None:
    """Targets of different kinds share a panel only when each minority kind has a unit override."""
    overridden = {o["matcher"]["options"] for o in panel["fieldConfig"].get("overrides", [])
                  if o["matcher"]["id"] == "byFrameRefID" and any(p["id"] == "unit" for p in o["properties"])}
    kinds: dict[str, list[str]] = {}
    for t in panel["targets"]:
        if t["refId"] not in overridden:
            kinds.setdefault(_kind(t["expr"]), []).append(t["refId"])
    assert len(kinds) <= 1, f"{title}: one axis for {kinds}"


@pytest.mark.parametrize(("title", "panel"), _panels(), ids=[t for t, _ in _panels()])
def test_cpu_in_cores(title: str, panel: dict[str, Any]) -> None:
    exprs = [t["expr"] for t in panel["targets"]]
    if all("_cores" in e for e in exprs) and not any(" / " in e for e in exprs):
        assert panel["fieldConfig"]["defaults"]["unit"] == "suffix: cores", title


def test_titles_as_the_docs_name_them() -> None:
    docs = (ROOT / "docs" / "metrics.md").read_text()
    for path in DASHBOARDS:
        title = json.loads(path.read_text())["title"]
        assert title.startswith("Colo: "), title
        assert f'"{title}"' in docs, title
