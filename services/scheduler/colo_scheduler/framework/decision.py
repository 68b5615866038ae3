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
    """The nodes one filter rejected, over all ``nodes`` rows: ``passed`` (n,) bool, the filter's
    mask at decision time (shared, never written again: static filters' masks come from the
    table's cache, dynamic ones are copied by their class entry before they change), or
    ``packed`` a rejection mask (``numpy.packbits``, 1 bit a node). In ``"nodes"`` detail also
    ``rows`` (k,) the nodes it rejected first (no earlier filter did), ``codes`` (k,) uint8 into
    ``labels`` (their reasons) and ``reasons`` reason → node count."""

    plugin: str
    passed: npt.NDArray[np.bool_] | None = None
    packed: npt.NDArray[np.uint8] | None = None
    rows: npt.NDArray[np.intp] | None = None
    codes: npt.NDArray[np.uint8] | None = None
    labels: tuple[str, ...] = ()
    reasons: dict[str, int] = field(default_factory=dict)

    def mask(self, n: int) -> npt.NDArray[np.bool_]:
        """(n,) True where this filter rejected the node."""
        if self.passed is not None:
            return ~self.passed[:n]
        assert self.packed is not None
        out: npt.NDArray[np.bool_] = np.unpackbits(self.packed, count=n).astype(np.bool_)
        return out


PREEMPTION_RECORD = "framework.preemption_record"
"""``CycleState.data`` key under which a PostFilter leaves the :class:`PreemptionRecord` of its
nomination; the framework moves it into the attempt's record."""


@dataclass(frozen=True, slots=True)
class VictimRecord:
    """A pod evicted to make room: ``uid``, ``name``, ``priority``, ``started_at`` (clock seconds)."""

    uid: str
    name: str
    priority: int
    started_at: float


@dataclass(frozen=True, slots=True)
class PreemptionRecord:
    """Why a preemptor was nominated where it was: the nominated ``node`` row and its ``victims``;
    ``criteria`` names and the values of the chosen node (``values``) and of the runner-up
    (``runner_up`` row, −1 when none, ``runner_up_values``); ``candidates`` the nodes evaluated;
    ``kept`` True when an earlier nomination whose victims are still leaving was kept (no new
    evictions)."""

    node: int
    victims: tuple[VictimRecord, ...]
    criteria: tuple[str, ...]
    values: tuple[float, ...]
    runner_up: int = -1
    runner_up_values: tuple[float, ...] = ()
    candidates: int = 0
    kept: bool = False

    def to_json(self, names: list[str]) -> dict[str, object]:
        """JSON form; ``names`` maps rows to node names."""
        def values(v: tuple[float, ...]) -> dict[str, float | None]:
            return {k: (None if x == float("inf") else x) for k, x in zip(self.criteria, v)}

        return {
            "node": names[self.node] if 0 <= self.node < len(names) else None,
            "victims": [{"uid": v.uid, "name": v.name, "priority": v.priority, "started_at": v.started_at}
                        for v in self.victims],
            "criteria": values(self.values),
            "runner_up": names[self.runner_up] if 0 <= self.runner_up < len(names) else None,
            "runner_up_criteria": values(self.runner_up_values) if self.runner_up_values else None,
            "candidates": self.candidates, "kept": self.kept,
        }


@dataclass(slots=True)
class DecisionRecord:
    """One scheduling attempt of pod ``uid`` at clock time ``at`` (seconds).

    ``node`` / ``runner_up`` are table rows (−1 when none); ``nodes`` the number of nodes
    considered, ``feasible`` how many passed every filter; ``filters`` the rejected nodes per
    filter; ``score_plugins`` (name, weight) per score plugin; ``raw_scores`` row → raw score per
    plugin and ``scores`` row → normalised score per plugin (−1 or empty: no NormalizeScore, the
    raw score counts), for the chosen node and the runner-up; ``message`` the outcome in
    Kubernetes words; ``status`` the framework status code. Kept compact: JSON is built on demand.
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
    score_plugins: tuple[tuple[str, int], ...] = ()
    raw_scores: dict[int, tuple[int, ...]] = field(default_factory=dict)
    scores: dict[int, tuple[int, ...]] = field(default_factory=dict)
    decision_ms: float = 0.0
    nominated: int = -1
    """The row a PostFilter nominated the pod to (−1 when none)."""
    preemption: PreemptionRecord | None = None
    """The preemption behind the nomination (victims, criteria), when one was made or kept."""

    def for_attempt(self, uid: str, attempt: int) -> DecisionRecord:
        """This record as pod ``uid``'s attempt ``attempt`` (an equivalent pod decided the same): a
        shallow copy sharing filters and scores, at a tenth of ``copy.copy``'s cost on a slots class."""
        return DecisionRecord(uid, attempt, self.at, self.node, self.runner_up, self.nodes, self.feasible,
                              self.status, self.message, self.detail, self.filters, self.score_plugins,
                              self.raw_scores, self.scores, self.decision_ms, self.nominated, self.preemption)

    def score_table(self, row: int) -> dict[str, dict[str, int]]:
        """Plugin → raw, normalized, weight, weighted score on ``row`` (chosen node or runner-up)."""
        raw = self.raw_scores.get(row, ())
        norm = self.scores.get(row, ())
        out: dict[str, dict[str, int]] = {}
        for j, (name, w) in enumerate(self.score_plugins):
            r = raw[j]
            v = norm[j] if norm and norm[j] >= 0 else r
            out[name] = {"raw": r, "normalized": v, "weight": w, "weighted": w * v}
        return out

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
            if not len(rows):
                continue
            filters[f.plugin] = {"rejected": len(rows), "reasons": dict(f.reasons)}
            only = next(iter(f.reasons)) if len(f.reasons) == 1 else None
            for k, row in enumerate(rows.tolist()):
                entry = {"plugin": f.plugin}
                if f.codes is not None:
                    entry["reason"] = f.labels[int(f.codes[k])]
                elif only is not None:  # the filter's one reason holds for every node it rejected
                    entry["reason"] = only
                rejected[names[row]] = entry
        scores: dict[str, object] = {}
        for row in (self.node, self.runner_up):
            if row in self.raw_scores:
                table = self.score_table(row)
                scores[names[row]] = {"total": sum(v["weighted"] for v in table.values()), "plugins": table}
        message = self.message
        if not message and self.node >= 0:
            total = sum(v["weighted"] for v in self.score_table(self.node).values())
            message = f"placed on {names[self.node]}: {self.feasible}/{self.nodes} nodes feasible, score {total}"
        return {
            "uid": self.uid, "attempt": self.attempt, "at": self.at, "status": self.status,
            "node": name(self.node), "runner_up": name(self.runner_up),
            "nodes": self.nodes, "feasible": self.feasible, "message": message,
            "detail": self.detail, "decision_ms": round(self.decision_ms, 4),
            "filters": filters, "rejected_nodes": rejected, "scores": scores,
            "nominated_node": name(self.nominated),
            "preemption": self.preemption.to_json(names) if self.preemption is not None else None,
        }


class DecisionLog:
    """The last ``capacity`` pods' latest records (uid → record, least recently decided dropped)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        # an OrderedDict: dropping a plain dict's first key again and again walks over the deleted
        # slots before it (8 µs an add at 10,000 records, against 1 µs here)
        self._records: OrderedDict[str, DecisionRecord] = OrderedDict()

    def __len__(self) -> int:
        return len(self._records)

    def add(self, record: DecisionRecord) -> None:
        """Keep ``record`` as its pod's latest, evicting the oldest beyond capacity."""
        if self.capacity <= 0:
            return
        records = self._records
        uid = record.uid
        if uid in records:
            records.move_to_end(uid)
        records[uid] = record
        if len(records) > self.capacity:
            records.popitem(last=False)

    def get(self, uid: str) -> DecisionRecord | None:
        """The latest record of pod ``uid`` or None."""
        return self._records.get(uid)
