"""Decision records: why a pod went where it went, kept per pod for ``GET /debug/pods/{uid}/decision``.

A record is taken at decision time from the arrays the decision used, so it shows the
state the scheduler saw, not today's. For every node a filter rejected it holds the first
rejecting filter in profile order (as the Kubernetes scheduler, which stops at the first
failing filter of a node) and, in ``"nodes"`` detail, that filter's reason for the node;
for the chosen node and the runner-up (the best other feasible node) every score plugin's
raw, normalised and weighted score. Arrays are kept compact (row indices, uint8 reason
codes) and turned into JSON only when asked for.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

DETAIL_NODES = "nodes"
"""Record the reason of every rejected node."""
DETAIL_SUMMARY = "summary"
"""Record per filter the rejected nodes and reason counts, without per-node reasons."""


@dataclass(slots=True)
class FilterRecord:
    """The nodes one filter rejected: ``packed`` its rejection mask over all ``nodes`` rows
    (``numpy.packbits``, 1 bit a node). In ``"nodes"`` detail also ``rows`` (k,) the nodes it
    rejected first (no earlier filter did), ``codes`` (k,) uint8 into ``labels`` (their reasons)
    and ``reasons`` reason → node count; empty in summary detail."""

    plugin: str
    packed: npt.NDArray[np.uint8]
    rows: npt.NDArray[np.intp] | None = None
    codes: npt.NDArray[np.uint8] | None = None
    labels: tuple[str, ...] = ()
    reasons: dict[str, int] = field(default_factory=dict)

    def mask(self, n: int) -> npt.NDArray[np.bool_]:
        """(n,) True where this filter rejected the node."""
        out: npt.NDArray[np.bool_] = np.unpackbits(self.packed, count=n).astype(np.bool_)
        return out


@dataclass(slots=True)
class ScoreRecord:
    """One score plugin on one node: ``raw`` (plugin output), ``normalized`` (0..100 after
    NormalizeScore, = raw without it), ``weight`` and ``weighted`` = weight × normalized."""

    plugin: str
    raw: int
    normalized: int
    weight: int

    @property
    def weighted(self) -> int:
        """weight × normalized."""
        return self.weight * self.normalized


@dataclass(slots=True)
class DecisionRecord:
    """One scheduling attempt of pod ``uid`` at clock time ``at`` (seconds).

    ``node`` / ``runner_up`` are table rows (−1 when none); ``nodes`` the number of nodes
    considered, ``feasible`` how many passed every filter; ``filters`` the rejected nodes per
    filter; ``scores`` row → per-plugin scores (chosen node and runner-up); ``message`` the
    outcome in Kubernetes words; ``status`` the framework status code.
    """

    uid: str
    attempt: int
    at: float
    node: int
    runner_up: int
    nodes: int
    feasible: int
    status: str
    message: str
    detail: str
    filters: list[FilterRecord] = field(default_factory=list)
    scores: dict[int, list[ScoreRecord]] = field(default_factory=dict)
    decision_ms: float = 0.0

    def to_json(self, names: list[str]) -> dict[str, object]:
        """JSON form; ``names`` maps rows to node names (the table's, which only grows)."""
        def name(row: int) -> str | None:
            return names[row] if 0 <= row < len(names) else None

        rejected: dict[str, dict[str, str]] = {}
        filters: dict[str, object] = {}
        remaining = np.ones(self.nodes, np.bool_)
        for f in self.filters:
            first = f.mask(self.nodes) & remaining
            remaining &= ~first
            rows = f.rows if f.rows is not None else np.flatnonzero(first)
            filters[f.plugin] = {"rejected": len(rows), "reasons": dict(f.reasons)}
            for k, row in enumerate(rows.tolist()):
                entry = {"plugin": f.plugin}
                if f.codes is not None:
                    entry["reason"] = f.labels[int(f.codes[k])]
                rejected[names[row]] = entry
        scores: dict[str, object] = {}
        for row, recs in self.scores.items():
            scores[names[row]] = {
                "total": sum(r.weighted for r in recs),
                "plugins": {r.plugin: {"raw": r.raw, "normalized": r.normalized, "weight": r.weight,
                                       "weighted": r.weighted} for r in recs},
            }
        return {
            "uid": self.uid, "attempt": self.attempt, "at": self.at, "status": self.status,
            "node": name(self.node), "runner_up": name(self.runner_up),
            "nodes": self.nodes, "feasible": self.feasible, "message": self.message,
            "detail": self.detail, "decision_ms": round(self.decision_ms, 4),
            "filters": filters, "rejected_nodes": rejected, "scores": scores,
        }


class DecisionLog:
    """The last ``capacity`` pods' latest records (uid → record, least recently decided dropped)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._records: OrderedDict[str, DecisionRecord] = OrderedDict()

    def __len__(self) -> int:
        return len(self._records)

    def add(self, record: DecisionRecord) -> None:
        """Keep ``record`` as its pod's latest, evicting the oldest beyond capacity."""
        if self.capacity <= 0:
            return
        self._records.pop(record.uid, None)
        self._records[record.uid] = record
        while len(self._records) > self.capacity:
            self._records.popitem(last=False)

    def get(self, uid: str) -> DecisionRecord | None:
        """The latest record of pod ``uid`` or None."""
        return self._records.get(uid)
