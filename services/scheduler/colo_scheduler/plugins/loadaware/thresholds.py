"""The thresholds each node gets: the arguments', or a node annotation's (Koordinator
``CustomUsageThresholds``)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from colo_scheduler.plugins.loadaware.args import AGGREGATION_TYPES, LOAD_RESOURCES, LoadAwareArgs

CUSTOM_THRESHOLDS_ANNOTATION = "scheduling.koordinator.sh/custom-usage-thresholds"
"""Node annotation overriding the thresholds (Koordinator ``AnnotationCustomUsageThresholds``)."""


Pair = tuple[int, int]
"""(cpu, memory) thresholds in percent, 0 = none."""


@dataclass(frozen=True, slots=True)
class NodeThresholds:
    """The thresholds one node gets: plain ``usage``; ``prod`` (None = no prod-only check);
    ``aggregated`` (thresholds, statistic, duration seconds) or None."""

    usage: Pair
    prod: Pair | None
    aggregated: tuple[Pair, str, int] | None


def _pair(values: Mapping[str, int]) -> Pair:
    return int(values.get("cpu", 0)), int(values.get("memory", 0))


def args_thresholds(args: LoadAwareArgs) -> NodeThresholds:
    """The thresholds of a node without override."""
    agg = args.aggregated
    prod = _pair(args.prod_usage_thresholds)
    return NodeThresholds(
        _pair(args.usage_thresholds), prod if any(prod) else None,
        (_pair(agg.usage_thresholds), agg.usage_aggregation_type, agg.usage_aggregated_duration_s)
        if agg.filter_active else None)


_DURATION = re.compile(r"(\d+(?:\.\d*)?)(ns|us|µs|ms|s|m|h)")
_UNIT_S = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration_s(value: object) -> int:
    """Seconds of a Go duration string (``"5m"``, ``"1h30m"``, ``"300s"``) or a number of seconds;
    ValueError otherwise."""
    if isinstance(value, bool):
        raise ValueError(f"bad duration {value!r}")
    if isinstance(value, int | float):
        return int(value)
    if not isinstance(value, str) or not value:
        raise ValueError(f"bad duration {value!r}")
    if value == "0":
        return 0
    pos, total = 0, 0.0
    for m in _DURATION.finditer(value):
        if m.start() != pos:
            raise ValueError(f"bad duration {value!r}")
        total += float(m.group(1)) * _UNIT_S[m.group(2)]
        pos = m.end()
    if pos != len(value):
        raise ValueError(f"bad duration {value!r}")
    return int(total)


def _percent_map(raw: object, where: str) -> Pair:
    if raw is None:
        return 0, 0
    if not isinstance(raw, dict):
        raise ValueError(f"{where} must be an object")
    out = []
    for r in LOAD_RESOURCES:
        v = raw.get(r, 0)
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 100:
            raise ValueError(f"{where}.{r} must be an integer within 0..100")
        out.append(v)
    return out[0], out[1]


def parse_custom_thresholds(text: str, args: LoadAwareArgs) -> NodeThresholds:
    """The thresholds of a node carrying :data:`CUSTOM_THRESHOLDS_ANNOTATION` = ``text``: Koordinator
    CustomUsageThresholds JSON ``{"usageThresholds": {"cpu": 70, "memory": 90},
    "prodUsageThresholds": {…}, "aggregatedUsage": {"usageThresholds": {…},
    "usageAggregationType": "p95", "usageAggregatedDuration": "5m"}}``. An absent or empty map keeps
    the args' value; an aggregated part without thresholds or type is ignored (then the args'
    aggregated thresholds apply). Raises ValueError for unreadable text."""
    try:
        doc: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise ValueError("must be a JSON object")
    base = args_thresholds(args)
    usage = _percent_map(doc.get("usageThresholds"), "usageThresholds")
    prod = _percent_map(doc.get("prodUsageThresholds"), "prodUsageThresholds")
    aggregated = base.aggregated
    agg_doc = doc.get("aggregatedUsage")
    if agg_doc is not None:
        if not isinstance(agg_doc, dict):
            raise ValueError("aggregatedUsage must be an object")
        agg_t = _percent_map(agg_doc.get("usageThresholds"), "aggregatedUsage.usageThresholds")
        stat = agg_doc.get("usageAggregationType", "") or ""
        if stat and stat not in AGGREGATION_TYPES:
            raise ValueError(f"aggregatedUsage.usageAggregationType: unknown statistic {stat!r}")
        duration = parse_duration_s(agg_doc.get("usageAggregatedDuration", 0) or 0)
        if any(agg_t) and stat:
            aggregated = (agg_t, str(stat), duration)
    return NodeThresholds(usage if any(usage) else base.usage, prod if any(prod) else base.prod, aggregated)
