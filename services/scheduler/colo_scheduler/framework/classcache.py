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

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import cast

import msgspec
import numpy as np

from colo.messages import PodSpec
from colo_scheduler.framework.buckets import MOVE_LIMIT, ScoreBuckets
from colo_scheduler.framework.decision import FilterRecord
from colo_scheduler.framework.interface import (
    CycleState,
    FilterPlugin,
    IntpArray,
    NodeFilterPlugin,
    NodeScorePlugin,
    NormalizeScorePlugin,
    RowFilterPlugin,
    RowScorePlugin,
    ScorePlugin,
)
from colo_scheduler.kernels import outside, set_feasible_rows, set_total_rows, sync_bool_rows
from colo_scheduler.podinfo import IntArray, PodInfo
from colo_scheduler.table import BoolArray

SCALAR_ROWS = 6
"""Up to this many changed rows are re-synced with the plugins' one-row scalar methods
(``filter_node`` / ``score_node``) when every dynamic plugin has them: a NumPy call costs about a
microsecond whatever its size, a scalar check a fraction of that."""

FULL_RECOMPUTE_FRACTION = 8
"""When more than n / this many rows changed since a class was last synced, recompute it
over all rows (a few full passes cost less than many scattered row updates)."""

CACHE_BYTES = 128 * 2**20
"""Bound of the class entries' arrays (bytes); beyond it the least recently used class is dropped.
Finished workloads' classes would otherwise hold memory for the rest of the cycle chain, and fresh
arrays cost page faults that reused ones do not (bench/scheduler_inprocess.py: the first run in a
process was ×0.9 the second before this bound)."""

ENTRY_BYTES_PER_ROW = 8 * 4 + 6
"""Bytes a class entry holds per node row: four int64 arrays (two raw scores, total, masked) and
about six bool masks."""

_NO_FLOOR = 2**62
"""A floor no masked score reaches: no bucket moves to report."""


FEASIBLE_SCORING_FRACTION = 2
"""A class's first computation scores only its feasible rows when fewer than n / this many pass the
filters (a gather and a scatter cost about what a full pass saves at half the rows)."""

_IDENTITY_FIELDS = {"uid": "", "name": "", "created_at": 0.0, "command": [], "env": {}, "sim": None}
"""PodSpec fields no scheduling plugin reads; blanked in the class key so that replicas of one
workload share a class."""

_encoder = msgspec.msgpack.Encoder()


def class_key(pod: PodInfo) -> bytes:
    """The pod's scheduling class: its spec without identity fields, msgpack-encoded (cached in
    ``pod.extra``; set there by the scheduler core with its profile's :attr:`ClassCache.ignores_app`).
    Any other field difference makes a different class, so sharing arrays within a class is safe
    for any plugin that reads only the pod's spec and priority."""
    key = pod.extra.get("class")
    if key is None:
        key = pod.extra["class"] = spec_class_key(pod.spec, pod.priority)
    return key  # type: ignore[return-value]


def spec_class_key(spec: PodSpec, priority: int, ignore_app: bool = False) -> bytes:
    """:func:`class_key` of a spec with its priority value, before a PodInfo exists. With
    ``ignore_app`` (every class-cached plugin is :data:`APP_BLIND`) the app of a pod without a
    per-node cap is blanked too: same-sized workloads of different apps share a class."""
    blank = _IDENTITY_FIELDS if not ignore_app or spec.max_instance_per_node >= 0 else _APP_FIELDS
    return _encoder.encode((msgspec.structs.replace(spec, **blank), priority))


_APP_FIELDS = {**_IDENTITY_FIELDS, "app": ""}

APP_BLIND = "app_blind"
"""Attribute a Filter or Score plugin sets to True when its per-class masks and scores never read
``PodSpec.app`` of a pod with ``max_instance_per_node`` < 0."""

SETTLED_NONE = "settled_none"
"""Attribute a Filter plugin sets to True when, once its ``filter`` returns None for a pod (no node
rejected), it does so at every table state (the verdict hangs on the pod alone: no app or no cap,
a DaemonSet pod): the pod's class then skips it when re-syncing rows."""

POD_LEVEL = "pod_level"
"""Attribute a Score plugin with NormalizeScore sets to True when its raw scores are cheap to read
at each decision (a table array): they are not kept per class, and the class key need not hold
what they read. The framework calls its ``score`` per decision (runner.py)."""


_NOT_KEPT = np.zeros(0, np.int64)
"""The raw scores of a pod-level plugin in a class entry: read per decision instead."""

STATIC = "static"
"""Attribute a Filter plugin sets to True when its verdict depends only on the pod and on node
labels/taints (or anything else that bumps :attr:`NodeTable.version` when it changes): its
mask is never re-synced row by row and is shared, not copied."""


@dataclass(slots=True)
class ClassEntry:
    """Arrays of one pod class at table change position ``seq`` and table ``version``.

    ``masks`` per filter (n,) bool (None = the filter rejects no node; static filters' masks are
    shared with the table's mask cache and must not be written); ``static`` (n,) the AND of the
    static masks (None when they reject nothing); ``feasible`` (n,) the AND of all; ``raw`` per
    score plugin (n,) int64 (empty for a :data:`POD_LEVEL` plugin: read per decision); ``total`` (n,) int64 = Σ weight × raw over score plugins without
    NormalizeScore; ``masked`` (n,) = total where feasible, else −1. ``lent`` holds the indices
    of masks a decision record references: they are copied before their next change
    (copy-on-write), so records share a mask for as long as no verdict in it flips.
    ``buckets`` the best rows of ``masked`` by score (:mod:`.buckets`), built by the first pick
    that uses them and moved with every re-synced row (None: not built, or dropped).
    ``feasible_count`` = count_nonzero(``feasible``), kept in step; ``filter_records`` the masks
    and filter records that placed pods' decision records of this class share (runner.py).
    """

    seq: int
    version: int
    masks: list[BoolArray | None]
    static: BoolArray | None
    feasible: BoolArray
    raw: list[IntArray]
    total: IntArray
    masked: IntArray
    feasible_count: int = 0
    lent: set[int] = field(default_factory=set)
    buckets: ScoreBuckets | None = None
    filter_records: tuple[tuple[BoolArray | None, ...], list[FilterRecord]] | None = None
    settled: frozenset[int] = frozenset()
    """Dynamic filters that reject no node for this class at any table state (:data:`SETTLED_NONE`):
    not re-synced."""

    def lend(self, k: int) -> BoolArray | None:
        """Mask ``k`` for a record to keep: the entry copies it before changing it."""
        self.lent.add(k)
        return self.masks[k]

    def writable(self, k: int) -> BoolArray | None:
        """Mask ``k`` safe to write in place (a copy when lent)."""
        m = self.masks[k]
        if k in self.lent:
            self.lent.discard(k)
            if m is not None:
                m = self.masks[k] = m.copy()
        return m


class ClassCache:
    """Class entries of the current cycle for one profile's filters and weighted scores."""

    def __init__(self, filters: list[FilterPlugin], scores: list[tuple[ScorePlugin, int]]) -> None:
        self.filters = filters
        self.scores = scores
        # protocol checks are slow: decide once how each plugin is called
        self.static = [bool(getattr(f, STATIC, False)) for f in filters]
        self._settled_none = [bool(getattr(f, SETTLED_NONE, False)) and not self.static[k]
                              for k, f in enumerate(filters)]
        self._dynamic = [(k, f, f.filter_rows if isinstance(f, RowFilterPlugin) else None)
                         for k, f in enumerate(filters) if not self.static[k]]
        self.normalized = [isinstance(p, NormalizeScorePlugin) for p, _ in scores]
        self.pod_level = [bool(w) and self.normalized[j] and bool(getattr(p, POD_LEVEL, False))
                          for j, (p, w) in enumerate(scores)]
        """Per score plugin: raw scores read per decision, not kept in class entries (a plugin of weight
        0 is never called: its raw scores are kept as zeros, which decision records read)."""
        self.ignores_app = all(getattr(f, APP_BLIND, False) for f in filters) and all(
            not w or getattr(p, APP_BLIND, False) or self.pod_level[j] for j, (p, w) in enumerate(scores))
        """True when class keys may leave out the app of uncapped pods (:func:`spec_class_key`)."""
        self._row_scores = [(j, p, w, p.score_rows if isinstance(p, RowScorePlugin) else None)
                            for j, (p, w) in enumerate(scores) if w and not self.normalized[j]]
        self._normalized_rows = [(j, p, p.score_rows if isinstance(p, RowScorePlugin) else None)
                                 for j, (p, w) in enumerate(scores)
                                 if w and self.normalized[j] and not self.pod_level[j]]
        dyn = [f for k, f in enumerate(filters) if not self.static[k]]
        row_scored = [p for j, (p, w) in enumerate(scores) if w and not self.pod_level[j]]
        self._scalar: tuple[list[tuple[int, object]], list[tuple[int, object, int, bool]]] | None = None
        if all(isinstance(f, NodeFilterPlugin) for f in dyn) and all(isinstance(p, NodeScorePlugin)
                                                                       for p in row_scored):
            self._scalar = ([(k, cast(NodeFilterPlugin, f).filter_node) for k, f in enumerate(filters)
                             if not self.static[k]],
                            [(j, cast(NodeScorePlugin, p).score_node, w, self.normalized[j])
                             for j, (p, w) in enumerate(scores) if w and not self.pod_level[j]])
        self._sparse_scores = {j for j, (p, w) in enumerate(scores)
                               if w and not self.normalized[j] and isinstance(p, RowScorePlugin)}
        self.entries: OrderedDict[bytes, ClassEntry] = OrderedDict()  # least recently used first
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
                self._bound(table.n)
            return entry
        self.entries.move_to_end(key)  # type: ignore[arg-type]
        changed = table.changes_since(entry.seq)
        if changed is None or entry.version != table.version:
            return self._refull(state, pod, key)  # type: ignore[arg-type]
        if not changed:
            self.stats["hits"] += 1
            return entry
        limit = table.n // FULL_RECOMPUTE_FRACTION + 1
        if len(changed) > 8 * limit:  # surely too many rows: do not even count them
            return self._refull(state, pod, key)  # type: ignore[arg-type]
        distinct = set(changed)  # a placement logs its row several times
        if len(distinct) > limit:
            return self._refull(state, pod, key)  # type: ignore[arg-type]
        self.stats["incremental"] += 1
        if self._scalar is not None and len(distinct) <= SCALAR_ROWS:
            for i in distinct:
                self._one(state, pod, entry, i)
        else:
            self._rows(state, pod, entry, np.fromiter(distinct, np.intp, len(distinct)))
        entry.seq = table.change_seq
        return entry

    def _refull(self, state: CycleState, pod: PodInfo, key: bytes) -> ClassEntry:
        """A full recomputation of the (most recently used) entry of ``key``, within the byte bound."""
        fresh = self.entries[key] = self._full(state, pod)
        self._bound(state.table.n)
        return fresh

    def _bound(self, n: int) -> None:
        """Drop the least recently used classes while the entries' arrays of n rows exceed
        :data:`CACHE_BYTES` (one is always kept): also after the table grew, when every kept entry
        recomputed at the new size would exceed it."""
        entries = self.entries
        while len(entries) > 1 and len(entries) * n * ENTRY_BYTES_PER_ROW > CACHE_BYTES:
            entries.popitem(last=False)

    def _full(self, state: CycleState, pod: PodInfo) -> ClassEntry:
        self.stats["full"] += 1
        n = state.table.n
        masks: list[BoolArray | None] = []
        static: BoolArray | None = None
        dynamic: BoolArray | None = None
        for k, f in enumerate(self.filters):
            m = f.filter(state, pod)
            if m is not None:
                if self.static[k]:
                    static = m if static is None else static & m
                else:
                    m = m.copy()  # plugins may return cached arrays; this entry updates its own rows
                    dynamic = m.copy() if dynamic is None else dynamic & m
            masks.append(m)
        if dynamic is None:
            feasible = np.ones(n, np.bool_) if static is None else static.copy()
        else:
            feasible = dynamic if static is None else static & dynamic
        count = int(np.count_nonzero(feasible))
        # weighted scores of infeasible rows are never read (masked −1; a row turning feasible is a
        # logged change, re-synced with its scores): below half the rows, score the feasible ones
        sub = np.flatnonzero(feasible) if count * FEASIBLE_SCORING_FRACTION < n else None
        raw: list[IntArray] = []
        total = np.zeros(n, np.int64)
        for j, (p, w) in enumerate(self.scores):
            if self.pod_level[j]:
                s = _NOT_KEPT  # read per decision (runner.py)
            elif not w:
                s = np.zeros(n, np.int64)
            elif sub is not None and j in self._sparse_scores:
                s = np.zeros(n, np.int64)
                if count:
                    s[sub] = p.score_rows(state, pod, sub)  # type: ignore[attr-defined]
            else:
                s = np.array(p.score(state, pod), np.int64)
            if w and not self.normalized[j]:
                check_range(p.name, s)
                total += w * s
            raw.append(s)
        settled = frozenset(k for k, m in enumerate(masks) if m is None and self._settled_none[k])
        return ClassEntry(state.table.change_seq, state.table.version, masks, static, feasible, raw, total,
                          np.where(feasible, total, -1), count, settled=settled)

    def _one(self, state: CycleState, pod: PodInfo, entry: ClassEntry, i: int) -> None:
        assert self._scalar is not None
        filters, scores = self._scalar
        ok = entry.static is None or entry.static.item(i)
        masks = entry.masks
        settled = entry.settled
        for k, filter_node in filters:
            if k in settled:
                continue
            v = filter_node(state, pod, i)  # type: ignore[operator]
            m = masks[k]
            if m is None:
                if v:
                    continue
                m = masks[k] = np.ones(state.table.n, np.bool_)
            elif m.item(i) != v:  # item(): a NumPy bool scalar compares ten times slower
                m = entry.writable(k)
                assert m is not None
            else:
                ok = ok and v
                continue
            m[i] = v
            ok = ok and v
        if entry.feasible.item(i) != ok:
            entry.feasible[i] = ok
            entry.feasible_count += 1 if ok else -1
        total = 0
        for j, score_node, w, normalized in scores:
            v = score_node(state, pod, i)  # type: ignore[operator]
            entry.raw[j][i] = v
            if not normalized:
                if not 0 <= v <= 100:
                    check_range(self.scores[j][0].name, np.array([v], np.int64))
                total += w * v
        entry.total[i] = total
        new = total if ok else -1
        buckets = entry.buckets
        if buckets is not None:
            old = entry.masked.item(i)
            if old != new:
                buckets.move(i, old, new)
        entry.masked[i] = new

    def _rows(self, state: CycleState, pod: PodInfo, entry: ClassEntry, rows: IntpArray) -> None:
        old: IntArray | None = None
        floor = _NO_FLOOR
        buckets = entry.buckets
        if buckets is not None:
            if len(rows) > MOVE_LIMIT:
                entry.buckets = buckets = None
            else:
                old = entry.masked[rows]
                floor = buckets.floor
        moved = self._rows_arrays(state, pod, entry, rows, floor)
        if buckets is not None and old is not None and len(moved):
            masked = entry.masked
            for k in moved.tolist():
                i = rows.item(k)
                buckets.move(i, old.item(k), masked.item(i))

    def _rows_arrays(self, state: CycleState, pod: PodInfo, entry: ClassEntry, rows: IntpArray,
                     floor: int = _NO_FLOOR) -> IntpArray:
        # Re-derive ``rows`` of the entry: every dynamic filter's verdicts (a lent mask copied before
        # it changes), feasibility and its count, raw and total scores, masked scores. Returns the
        # positions in ``rows`` whose masked score changed with the old or new value ≥ ``floor`` (the
        # buckets' moves). The bookkeeping runs in compiled loops (kernels.py): a handful of rows costs
        # NumPy a microsecond a call in overhead alone.
        feasible_rows = entry.static[rows] if entry.static is not None else None
        settled = entry.settled
        lent = entry.lent
        for k, f, filter_rows in self._dynamic:
            if k in settled:
                continue
            m: BoolArray | None
            if filter_rows is not None:
                m = filter_rows(state, pod, rows)
            else:
                full = f.filter(state, pod)
                m = None if full is None else full[rows]
            current = entry.masks[k]
            if m is None or (current is None and m.all()):
                if current is not None and not current[rows].all():
                    current = entry.writable(k)
                    assert current is not None
                    current[rows] = True
                continue
            if current is None:
                current = entry.masks[k] = np.ones(state.table.n, np.bool_)
                current[rows] = m
            elif k not in lent:
                sync_bool_rows(current, rows, m, True)
            elif sync_bool_rows(current, rows, m, False):  # lent to a record: copy, then write
                current = entry.writable(k)
                assert current is not None
                current[rows] = m
            feasible_rows = m if feasible_rows is None else feasible_rows & m
        if feasible_rows is None:
            feasible_rows = np.ones(len(rows), np.bool_)
        entry.feasible_count += set_feasible_rows(entry.feasible, rows, feasible_rows)
        total_rows: IntArray | None = None
        for j, p, w, score_rows in self._row_scores:
            s = score_rows(state, pod, rows) if score_rows is not None else p.score(state, pod)[rows]
            entry.raw[j][rows] = s  # range: checked over all rows in _full, on the chosen row per decision
            s = s * w if w != 1 else s
            total_rows = s if total_rows is None else total_rows + s
        for j, p, score_rows in self._normalized_rows:
            entry.raw[j][rows] = score_rows(state, pod, rows) if score_rows is not None else p.score(state, pod)[rows]
        if total_rows is None:
            total_rows = np.zeros(len(rows), np.int64)
        moved: IntpArray = set_total_rows(entry.total, entry.masked, rows, total_rows, feasible_rows, floor)
        return moved


def check_range(name: str, scores: IntArray) -> None:
    """Raise ValueError naming plugin ``name`` when any of ``scores`` is outside 0..100 (the
    framework, not the plugins, enforces the range, as the Kubernetes framework does)."""
    if scores.dtype == np.int64 and scores.ndim == 1:
        bad = outside(scores, 0, 100)  # one compiled pass instead of two reductions (kernels.py)
    else:
        bad = bool(len(scores)) and (scores.min() < 0 or scores.max() > 100)
    if bad:
        raise ValueError(f"score plugin {name} returned scores outside 0..100")
