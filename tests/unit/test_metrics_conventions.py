"""The conventions of docs/metrics.md hold for every metric the services define: ``colo_`` names, counters
ending ``_total``, histograms in base units, and no label that names a pod (bounded cardinality)."""

from __future__ import annotations

import importlib
from pathlib import Path

import prometheus_client

from colo import telemetry

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN_LABELS = frozenset({"pod", "uid", "name", "namespace", "pod_name", "instance_id", "path", "job_id"})
"""Labels whose values grow with the pods (or the concrete URLs) seen: never allowed."""
BASE_UNITS = ("_seconds", "_bytes", "_cores", "_ratio")


def _definitions() -> dict[str, object]:
    importlib.import_module("colo.bus")
    for path in sorted(ROOT.glob("services/*/colo_*/metrics.py")):
        importlib.import_module(f"{path.parent.name}.metrics")
    return dict(telemetry.definitions())


def test_every_service_metrics_module_defines_colo_metrics_by_convention() -> None:
    defs = _definitions()
    for svc in ("scheduler", "descheduler", "api", "bus"):
        assert any(n.startswith(f"colo_{svc}_") for n in defs), svc
    problems = []
    for name, metric in defs.items():
        labels = set(getattr(metric, "_labelnames", ()))
        if not name.startswith("colo_"):
            problems.append(f"{name}: not colo_<service>_…")
        if isinstance(metric, prometheus_client.Counter) != name.endswith("_total"):
            problems.append(f"{name}: counters, and only counters, end in _total")
        if isinstance(metric, prometheus_client.Histogram) and not name.endswith(BASE_UNITS):
            problems.append(f"{name}: a histogram's name ends in its base unit {BASE_UNITS}")
        if labels & FORBIDDEN_LABELS:
            problems.append(f"{name}: unbounded labels {sorted(labels & FORBIDDEN_LABELS)}")
    assert problems == []
