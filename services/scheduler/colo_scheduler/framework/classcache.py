"""Per-pod-class filter masks and raw scores, kept across the pods of one cycle.

Pods of one class (equal :func:`class_key`) read the same pod fields, so every Filter
and Score plugin gives them the same per-node answers at the same table state. By the
row-local contract (framework/interface.py) a row's answer changes only when that row
changes, and the table logs every row it changes. So a class's arrays, computed once
over all nodes, are brought up to date for a later pod of the class by recomputing only
the rows changed since (``filter_rows`` / ``score_rows`` over a handful of rows) instead
of full passes over every node. After a reservation that is one row.

The result is exactly what a full recomputation gives: tests/scheduler compare both.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec
import numpy as np

from colo_scheduler.framework.interface import (
    CycleState,
    FilterPlugin,
    IntpArray,
    NormalizeScorePlugin,
    RowFilterPlugin,
    RowScorePlugin,
    ScorePlugin,
)
from colo_scheduler.podinfo import IntArray, PodInfo
from colo_scheduler.table import BoolArray

FULL_RECOMPUTE_FRACTION = 8
"""When more than n / this many rows changed since a class was last synced, recompute it
over all rows (a few full passes cost less than many scattered row updates)."""

_IDENTITY_FIELDS = {"uid": "", "name": "", "created_at": 0.0, "command": [], "env": {}, "sim": None}
"""PodSpec fields no scheduling plugin reads; blanked in the class key so that replicas of one
workload share a class."""

_encoder = msgspec.msgpack.Encoder()


def class_key(pod: PodInfo) -> bytes:
    """The pod's scheduling class: its spec without identity fields, msgpack-encoded (cached in
    ``pod.extra``). Any other field difference makes a different class, so sharing arrays within
    a class is safe for any plugin that reads only the pod's spec and priority."""
    key = pod.extra.get("class")
    if key is None:
        spec = msgspec.structs.replace(pod.spec, **_IDENTITY_FIELDS)
        key = pod.extra["class"] = _encoder.encode((spec, pod.priority))
    return key  # type: ignore[return-value]


@dataclass(slots=True)
class ClassEntry:
    """Arrays of one pod class at table change position ``seq``.

    ``masks`` per filter (n,) bool (None = the filter rejects no node); ``feasible`` (n,) their
    AND; ``raw`` per score plugin (n,) int64; ``total`` (n,) int64 = Σ weight × raw over score
    plugins without NormalizeScore (the others are normalised at every decision).
    """

    seq: int
    masks: list[BoolArray | None]
    feasible: BoolArray
    raw: list[IntArray]
    total: IntArray


class ClassCache:
    """Class entries of the current cycle for one profile's filters and weighted scores."""

    def __init__(self, filters: list[FilterPlugin], scores: list[tuple[ScorePlugin, int]]) -> None:
        self.filters = filters
        self.scores = scores
        # protocol checks are slow: decide once how each plugin is called
        self._filter_rows = [f.filter_rows if isinstance(f, RowFilterPlugin) else None for f in filters]
        self._score_rows = [p.score_rows if isinstance(p, RowScorePlugin) else None for p, _ in scores]
        self.normalized = [isinstance(p, NormalizeScorePlugin) for p, _ in scores]
        self.entries: dict[bytes, ClassEntry] = {}
        self.stats = {"full": 0, "incremental": 0, "hits": 0}
        """Class syncs over all rows, syncs over changed rows only, and syncs with nothing to do."""

    def clear(self) -> None:
        """Forget every entry (a new cycle: per-cycle plugin state changed)."""
        self.entries.clear()

    def get(self, state: CycleState, pod: PodInfo, key: bytes | None) -> ClassEntry:
        """The up-to-date entry of ``pod``'s class (``key`` None: a fresh entry, not kept)."""
        table = state.table
        entry = self.entries.get(key) if key is not None else None
        if entry is None:
            entry = self._full(state, pod)
            if key is not None:
                self.entries[key] = entry
            return entry
        changed = table.changes_since(entry.seq)
        if changed is None or len(changed) > table.n // FULL_RECOMPUTE_FRACTION + 1:
            fresh = self._full(state, pod)
            self.entries[key] = fresh  # type: ignore[index]
            return fresh
        if not changed:
            self.stats["hits"] += 1
            return entry
        self.stats["incremental"] += 1
        rows = np.fromiter(set(changed), np.intp) if len(changed) > 1 else np.array(changed, np.intp)
        self._rows(state, pod, entry, rows)
        entry.seq = table.change_seq
        return entry

    def _full(self, state: CycleState, pod: PodInfo) -> ClassEntry:
        self.stats["full"] += 1
        n = state.table.n
        masks: list[BoolArray | None] = []
        feasible: BoolArray | None = None
        for f in self.filters:
            m = f.filter(state, pod)
            if m is not None:
                m = m.copy()  # cached masks are shared; this entry updates its own rows
                feasible = m.copy() if feasible is None else feasible & m
            masks.append(m)
        raw: list[IntArray] = []
        total = np.zeros(n, np.int64)
        for p, w in self.scores:
            s = np.array(p.score(state, pod), np.int64) if w else np.zeros(n, np.int64)
            if w and not self.normalized[len(raw)]:
                check_range(p.name, s)
            raw.append(s)
            if w and not self.normalized[len(raw) - 1]:
                total += w * s
        return ClassEntry(state.table.change_seq, masks,
                          np.ones(n, np.bool_) if feasible is None else feasible, raw, total)

    def _rows(self, state: CycleState, pod: PodInfo, entry: ClassEntry, rows: IntpArray) -> None:
        feasible_rows = np.ones(len(rows), np.bool_)
        for k, f in enumerate(self.filters):
            fr = self._filter_rows[k]
            if fr is not None:
                m = fr(state, pod, rows)
            else:
                full = f.filter(state, pod)
                m = np.ones(len(rows), np.bool_) if full is None else full[rows]
            current = entry.masks[k]
            if current is None:
                if m.all():
                    continue
                current = entry.masks[k] = np.ones(state.table.n, np.bool_)
            current[rows] = m
            feasible_rows &= m
        entry.feasible[rows] = feasible_rows
        total_rows = np.zeros(len(rows), np.int64)
        for j, (p, w) in enumerate(self.scores):
            if not w:
                continue
            sr = self._score_rows[j]
            s = sr(state, pod, rows) if sr is not None else p.score(state, pod)[rows]
            entry.raw[j][rows] = s
            if not self.normalized[j]:
                check_range(p.name, s)
                total_rows += w * s
        entry.total[rows] = total_rows



def check_range(name: str, scores: IntArray) -> None:
    """Raise ValueError naming plugin ``name`` when any of ``scores`` is outside 0..100 (the
    framework, not the plugins, enforces the range, as the Kubernetes framework does)."""
    if len(scores) and (scores.min() < 0 or scores.max() > 100):
        raise ValueError(f"score plugin {name} returned scores outside 0..100")
