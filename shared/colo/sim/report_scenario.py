"""The report's scenario section: the scenario description (``summary.json`` ``scenario``) as readable tables.

Keys are grouped into sections (:data:`SECTIONS`; keys no section names go under "Other"), each a two-column
table of what and value. Values are given in the units a reader expects, chosen by the key's name: ``_milli``
and CPU resources in cores, ``_bytes`` and memory resources in GiB, ``_fraction`` in percent; a nested mapping
(the parameters, the teams' jobs) is a table of its own, the quotas (team → min/max → resource) a grid of a
row per team; a long list shows its first entries and its length.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

MILLI_PER_CORE = 1000.0
BYTES_PER_GIB = float(1 << 30)
LIST_SHOWN = 6
"""Entries of a list shown before "… (N in all)"."""

SECTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Cluster and traces", ("nodes", "cluster_cpu_milli", "cluster_memory_bytes", "traces", "traces_dir")),
    ("Parameters", ("params",)),
    ("Online (LS) pods", ("ls_pods", "ls_apps", "ls_instances_in_trace", "ls_cpu_requested_milli",
                          "ls_cpu_requested_fraction", "ls_memory_requested_fraction", "bitbrains_vms_used")),
    ("Batch pods", ("batch_tasks_in_trace", "batch_tasks_in_window", "batch_pods", "batch_instance_scale",
                    "v2017_machine_memory_normalized", "v2017_machine_memory_bytes", "batch_offered_cpu_fraction",
                    "batch_offered_memory_fraction")),
    ("Jobs, gangs and quotas", ("jobs", "gangs", "gang_pods", "gang_largest", "gangs_partial_min_member",
                                "high_priority_jobs", "jobs_per_team", "batch_offer_estimate_cpu_milli",
                                "batch_offer_estimate_memory_bytes", "batch_pool_cpu_milli", "batch_pool_memory_bytes",
                                "quotas", "baseline_quotas")),
    ("Settings from the environment", ("settings_env",)),
)
"""(section title, description keys in order)."""

_CPU = ("cpu", "batch_cpu", "mid_cpu")
_MEMORY = ("memory", "batch_memory", "mid_memory")


def label(key: str) -> str:
    """A key as a heading: ``ls_cpu_requested_milli`` → ``ls cpu requested`` (the value gives the unit)."""
    for suffix in ("_milli", "_bytes"):
        if key.endswith(suffix):
            key = key[: -len(suffix)]
    return key.replace("_", " ")


def value_text(key: str, value: object) -> str:
    """A scalar or list value as text in its unit (see the module docstring); HTML-escaped."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        if key.endswith("_milli") or key in _CPU:
            return f"{value / MILLI_PER_CORE:,.1f} cores"
        if key.endswith("_bytes") or key in _MEMORY:
            return f"{value / BYTES_PER_GIB:,.1f} GiB"
        if key.endswith("_fraction"):
            return f"{value:.1%}"
        return f"{value:,}" if isinstance(value, int) else f"{value:g}"
    if isinstance(value, (list, tuple)):
        if not value:
            return "none"
        sep = "<br>" if any(len(str(v)) > 24 for v in value) else ", "  # paths one a line
        shown = sep.join(html.escape(str(v)) for v in value[:LIST_SHOWN])
        return shown + (f"{sep}… ({len(value)} in all)" if len(value) > LIST_SHOWN else "")
    return html.escape(str(value)) if value != "" else "—"


def _is_grid(value: Mapping[str, Any]) -> bool:
    """Rows of parts of scalars, like the quotas (team → min/max → resource → amount)."""
    return bool(value) and all(isinstance(v, Mapping) and v and all(
        isinstance(p, Mapping) and not any(isinstance(x, Mapping) for x in p.values()) for p in v.values())
        for v in value.values())


def grid_table(value: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> str:
    """A row per key of ``value``, a column per (part, resource): ``team-a | min batch cpu | …``."""
    cols: list[tuple[str, str]] = []
    for parts in value.values():
        for part, amounts in parts.items():
            cols.extend((part, k) for k in amounts if (part, k) not in cols)
    head = "<tr><th></th>" + "".join(f"<th>{html.escape(f'{p} {label(k)}')}</th>" for p, k in cols) + "</tr>"
    rows = "".join(f"<tr><th>{html.escape(str(name))}</th>"
                   + "".join(f"<td>{value_text(k, parts.get(p, {}).get(k, ''))}</td>" for p, k in cols) + "</tr>"
                   for name, parts in value.items())
    return f"<table class='grid'>{head}{rows}</table>"


def _cell(key: str, value: object) -> str:
    if isinstance(value, Mapping):
        if not value:
            return "none"
        return grid_table(value) if _is_grid(value) else kv_table(value)
    return value_text(key, value)


def kv_table(items: Mapping[str, Any], keys: tuple[str, ...] | None = None) -> str:
    """A two-column table (what, value) of ``items``, in ``keys`` order when given (absent keys skipped);
    nested mappings become nested tables."""
    order = [k for k in keys if k in items] if keys is not None else list(items)
    rows = "".join(f"<tr><th>{html.escape(label(str(k)))}</th><td>{_cell(str(k), items[k])}</td></tr>" for k in order)
    return f"<table class='kv'>{rows}</table>"


def scenario_html(description: Mapping[str, Any]) -> str:
    """The scenario section's tables, one per :data:`SECTIONS` entry that has a key in ``description``, then
    "Other" for the keys of no section."""
    known = {k for _, keys in SECTIONS for k in keys}
    parts = []
    for title, keys in SECTIONS:
        if any(k in description for k in keys):
            if len(keys) == 1 and isinstance(description.get(keys[0]), Mapping):
                body = kv_table(description[keys[0]]) if description[keys[0]] else "<p>none</p>"
            else:
                body = kv_table(description, keys)
            parts.append(f"<div class='scenario-part'><h3>{html.escape(title)}</h3>{body}</div>")
    rest = {k: v for k, v in description.items() if k not in known}
    if rest:
        parts.append(f"<div class='scenario-part'><h3>Other</h3>{kv_table(rest)}</div>")
    return "<div class='scenario'>" + "".join(parts) + "</div>"
