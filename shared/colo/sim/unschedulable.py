"""Why pods stayed unschedulable: the scheduler's diagnosis reasons, grouped, per tick and at the end of a run.

Every ``PodUnschedulable`` carries the Kubernetes-style diagnosis of its attempt: reason → nodes rejected for
it (``{"Insufficient batch-memory": 15, "Too many pods": 5}``, "0/20 nodes are available: …"), or one Permit
reason naming a gang or a quota (``"gang job-7-1: 2 of 4 members placed, …"``). :func:`reason_label` folds the
per-gang, per-quota and numeric parts away, so that reasons of different pods add up; :func:`category` maps a
label to what ran out (memory, cpu, pod count, gang, quota, placement). A pod counts once, under its
**dominant** reason (:func:`dominant`: the one that rejected most nodes; ties by name), so that the counts of
a tick add up to the pods unschedulable then. Pure bookkeeping, fed by :class:`colo.sim.metrics.RunMetrics`.
"""

from __future__ import annotations

import re
from collections.abc import Container, Mapping
from dataclasses import dataclass, field
from functools import lru_cache

CATEGORIES: tuple[str, ...] = ("memory", "cpu", "gpu", "pods", "gang", "quota", "placement")
"""What a reason says ran out, in report order: memory (native, batch or mid requests; LoadAware memory load;
BE memory pressure), cpu (requests or LoadAware load), GPUs (DeviceShare's ``Insufficient nvidia.com/gpu``,
``Insufficient GPU share``, ``no GPUs``, ``no GPU of model …``), the node's pod count (``Too many pods``), a gang's
``min_member`` (Coscheduling), an elastic quota, or a placement constraint (affinity, taints, cordon, max
instances, anything else)."""

_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^quota \S+: exceeds max quota (\S+)"), r"quota: would exceed max \1"),
    (re.compile(r"^quota \S+: insufficient runtime quota (\S+)"), r"quota: insufficient runtime \1"),
    (re.compile(r"^quota \S+: (.*?)(?: \(.*)?$"), r"quota: \1"),
    (re.compile(r"^gang \S+ has \d+ of \d+ members"), "gang: fewer members known than min_member"),
    (re.compile(r"^gang \S+: \d+ of \d+ members placed"), "gang: min_member not placed"),
    (re.compile(r"^gang \S+: gang \S+ of its group has no members yet"), "gang: a gang of its group has no members"),
    (re.compile(r"^gang \S+: member .*(?:not placed|fits no node|sent back)"), "gang: sent back (a member fits no node)"),
    (re.compile(r"^gang \S+: member .* released while waiting"), "gang: released while waiting (timeout)"),
    (re.compile(r"^(?:waiting for )?gang \S+.*"), "gang: other"),
    (re.compile(r"^(no GPU of model \S+)$"), r"\1"),  # a model name's digits are part of it (V100M32)
)
"""(pattern, label) tried in order on a reason; the first match gives its label (names and figures dropped)."""


@lru_cache(maxsize=1 << 16)  # a run repeats a few thousand reason strings at every tick
def reason_label(reason: str) -> str:
    """The reason without the names and figures of one gang or quota (``"gang: min_member not placed"``);
    a node filter's reason (``"Insufficient batch-memory"``, ``"Too many pods"``) is its own label."""
    for pattern, label in _RULES:
        m = pattern.match(reason)
        if m:
            return m.expand(label)
    return re.sub(r"\d+", "N", reason)


def category(label: str) -> str:
    """One of :data:`CATEGORIES` for a label of :func:`reason_label`."""
    low = label.lower()
    if low.startswith("gang"):
        return "gang"
    if low.startswith("quota"):
        return "quota"
    if low == "too many pods":
        return "pods"
    if "gpu" in low:
        return "gpu"
    # Insufficient cpu / batch-cpu / mid-cpu, load too high: cpu (LoadAware), BE memory pressure, …
    return "memory" if "memory" in low else "cpu" if "cpu" in low else "placement"


def dominant(reasons: Mapping[str, int]) -> str:
    """The label of the reason that rejected most nodes (ties: the first label by name); ``"unknown"`` when
    ``reasons`` is empty."""
    if not reasons:
        return "unknown"
    labels: dict[str, int] = {}
    for reason, nodes in reasons.items():
        label = reason_label(reason)
        labels[label] = labels.get(label, 0) + nodes
    return min(labels, key=lambda k: (-labels[k], k))


def count_labels(top: Mapping[str, str], bound: Container[str]) -> dict[str, int]:
    """Pods per dominant label, most pods first (ties by name), from pod uid → its :func:`dominant` label,
    leaving out the pods in ``bound``; what each time-series sample records (cheap: one pass, no parsing)."""
    counts: dict[str, int] = {}
    for uid, label in top.items():
        if uid not in bound:
            counts[label] = counts.get(label, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def by_category(labels: Mapping[str, int]) -> dict[str, int]:
    """Pods per :data:`CATEGORIES` entry (every category, 0 when none) from pods per label."""
    out = dict.fromkeys(CATEGORIES, 0)
    for label, pods in labels.items():
        out[category(label)] += pods
    return out


@dataclass
class ReasonRow:
    """One label of the end-of-run table: ``pods`` that have it as dominant reason, ``pods_any`` that have it
    on at least one node, ``nodes`` the Σ of nodes it rejected over those pods' last attempts."""

    label: str
    category: str
    pods: int = 0
    pods_any: int = 0
    nodes: int = 0


@dataclass
class UnschedulableBreakdown:
    """The pods unschedulable now (uid → the reasons of their last failed attempt), grouped by reason."""

    rows: dict[str, ReasonRow] = field(default_factory=dict)

    @classmethod
    def of(cls, unschedulable: Mapping[str, Mapping[str, int]], bound: Container[str]) -> UnschedulableBreakdown:
        """The breakdown of the pods of ``unschedulable`` not in ``bound`` (bound since their last attempt)."""
        out = cls()
        for uid, reasons in unschedulable.items():
            if uid in bound:
                continue
            top = dominant(reasons)
            seen: set[str] = set()
            for reason, nodes in reasons.items():
                label = reason_label(reason)
                row = out._row(label)
                row.nodes += nodes
                if label not in seen:
                    row.pods_any += 1
                    seen.add(label)
            out._row(top).pods += 1
        return out

    def _row(self, label: str) -> ReasonRow:
        row = self.rows.get(label)
        if row is None:
            row = self.rows[label] = ReasonRow(label, category(label))
        return row

    def pods_by_label(self) -> dict[str, int]:
        """Dominant label → pods (labels with at least one pod), most pods first."""
        ranked = sorted(self.rows.values(), key=lambda r: (-r.pods, r.label))
        return {r.label: r.pods for r in ranked if r.pods}

    def table(self) -> list[dict[str, object]]:
        """The rows as plain dicts (``label``, ``category``, ``pods``, ``pods_any``, ``nodes``), most pods first
        (then most pods with the reason anywhere): the ``unschedulable_reasons`` of ``summary.json``."""
        ranked = sorted(self.rows.values(), key=lambda r: (-r.pods, -r.pods_any, r.label))
        return [{"label": r.label, "category": r.category, "pods": r.pods, "pods_any": r.pods_any,
                 "nodes": r.nodes} for r in ranked]
