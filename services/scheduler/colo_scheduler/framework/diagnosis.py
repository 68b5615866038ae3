"""Why no node took a pod, and the decision records of a :class:`~colo_scheduler.framework.runner.Framework`.

When no node passes, each rejected node is attributed to the first filter (in profile order) that rejects it,
and that filter explains why — the Kubernetes "0/N nodes are available" diagnosis — then PostFilter plugins
may nominate a node. A :class:`~colo_scheduler.framework.decision.DecisionRecord` of an attempt keeps the
chosen node and runner-up with their raw and normalised scores, and the filters' masks (per-node reasons
with the ``nodes`` detail). :class:`Diagnosis` is part of the Framework, which sets the state below at
construction.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from colo_scheduler.framework.classcache import ClassCache, ClassEntry
from colo_scheduler.framework.decision import (
    DETAIL_NODES,
    PREEMPTION_RECORD,
    DecisionRecord,
    FilterRecord,
    PreemptionRecord,
)
from colo_scheduler.framework.interface import (
    FILTER_MASKS,
    SUCCESS,
    UNSCHEDULABLE,
    CycleState,
    SparseScores,
)
from colo_scheduler.framework.registry import Profile
from colo_scheduler.podinfo import IntArray, PodInfo
from colo_scheduler.table import NodeTable

Normalized = IntArray | int | SparseScores
"""What a NormalizeScore plugin returned for a decision."""


@dataclass(slots=True)
class ScheduleResult:
    """Outcome of one attempt: ``node`` row (−1 when none), rejection ``reasons`` (reason → nodes),
    the names of the plugins that rejected (``rejectors``), the number of ``feasible`` nodes,
    the Kubernetes-style ``message``, the status ``code``, a row ``nominated`` by a PostFilter
    (−1 when none) and the :class:`DecisionRecord` when recording."""

    node: int
    reasons: dict[str, int] = field(default_factory=dict)
    rejectors: frozenset[str] = frozenset()
    feasible: int = 0
    message: str = ""
    code: str = SUCCESS
    nominated: int = -1
    record: DecisionRecord | None = None


class Diagnosis:
    """The diagnosis and record-building part of :class:`~colo_scheduler.framework.runner.Framework`."""

    profile: Profile
    table: NodeTable
    cache: ClassCache
    _reason_codes: dict[str, bool]
    _score_meta: tuple[tuple[str, int], ...]
    _score_node: list[Callable[[CycleState, PodInfo, int], int] | None]

    def _failed(self, pod: PodInfo, state: CycleState, n: int, reasons: dict[str, int],
                rejectors: frozenset[str], code: str, record: str | None) -> ScheduleResult:
        detail = ", ".join(f"{c} {r}" if c else r for r, c in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])))
        message = f"0/{n} nodes are available: {detail}." if detail else f"0/{n} nodes are available."
        result = ScheduleResult(-1, reasons, rejectors, 0, message, code)
        if record is not None:
            result.record = DecisionRecord(pod.uid, pod.attempts, state.now, -1, -1, n, 0, code, message, record)
        return result

    def _diagnose(self, state: CycleState, pod: PodInfo, entry: ClassEntry, record: str | None) -> ScheduleResult:
        remaining = np.ones(self.table.n, np.bool_)
        reasons: dict[str, int] = {}
        rejectors: set[str] = set()
        per_filter: dict[str, dict[str, int]] = {}
        for k, p in enumerate(self.profile.filter):
            ok = entry.masks[k]
            if ok is None:
                continue
            rejected = remaining & ~ok
            if rejected.any():
                rejectors.add(p.name)
                per_filter[p.name] = p.explain(state, pod, rejected)
                for reason, count in per_filter[p.name].items():
                    reasons[reason] = reasons.get(reason, 0) + count
            remaining &= ok
        result = self._failed(pod, state, self.table.n, reasons, frozenset(rejectors), UNSCHEDULABLE, None)
        state.data[FILTER_MASKS] = entry.masks
        for post in self.profile.post_filter:
            row = post.post_filter(state, pod, reasons)
            if row is not None:
                result.nominated = row
                break
        del state.data[FILTER_MASKS]
        preemption = state.data.pop(PREEMPTION_RECORD, None)
        if record is not None:
            result.record = self._record(state, pod, entry, {}, -1, -1, record, UNSCHEDULABLE, result.message)
            for fr in result.record.filters:  # the diagnosis' reason counts, whatever the detail
                fr.reasons = fr.reasons or per_filter.get(fr.plugin, {})
            result.record.nominated = result.nominated
            result.record.preemption = preemption if isinstance(preemption, PreemptionRecord) else None
        return result

    def _pod_raw(self, state: CycleState, pod: PodInfo, j: int, row: int) -> int:
        """Raw score of pod-level score plugin ``j`` on ``row`` now (the decision's table state)."""
        score_node = self._score_node[j]
        if score_node is not None:
            return score_node(state, pod, row)
        return int(self.profile.score[j][0].score(state, pod)[row])

    def _record(self, state: CycleState, pod: PodInfo, entry: ClassEntry, normalized: dict[int, Normalized],
                node: int, runner_up: int, detail: str, status: str, message: str) -> DecisionRecord:
        n = self.table.n
        if not normalized and status == SUCCESS and detail != DETAIL_NODES:  # the common case, built at once
            raw = entry.raw
            raw_scores = {node: tuple([r.item(node) for r in raw])}
            scores: dict[int, tuple[int, ...]] = {node: ()}
            if runner_up >= 0:
                raw_scores[runner_up] = tuple([r.item(runner_up) for r in raw])
                scores[runner_up] = ()
            return DecisionRecord(pod.uid, pod.attempts, state.now, node, runner_up, n, entry.feasible_count, status,
                                  message, detail, self._placed_filters(entry), self._score_meta, raw_scores, scores)
        raw_scores = {}
        scores = {}
        pod_level = self.cache.pod_level
        for row in (node, runner_up):
            if row >= 0:
                scores[row] = tuple([_at(normalized[j], row) if j in normalized else -1
                                     for j in range(len(entry.raw))]) if normalized else ()
                raw_scores[row] = tuple([self._pod_raw(state, pod, j, row) if pod_level[j] else r.item(row)
                                         for j, r in enumerate(entry.raw)])
        nodes_detail = detail == DETAIL_NODES
        if not nodes_detail and status == SUCCESS:
            return DecisionRecord(pod.uid, pod.attempts, state.now, node, runner_up, n, entry.feasible_count, status,
                                  message, detail, self._placed_filters(entry), self._score_meta, raw_scores, scores)
        rec = DecisionRecord(pod.uid, pod.attempts, state.now, node, runner_up, n, entry.feasible_count, status,
                             message, detail, [], self._score_meta, raw_scores, scores)
        remaining = np.ones(n, np.bool_) if nodes_detail else None
        for k, p in enumerate(self.profile.filter):
            ok = entry.masks[k]
            if ok is None:
                continue
            # keep a reference: static masks are immutable (shared with the table's cache), dynamic
            # ones are lent by the class entry, which copies them before a verdict in them flips
            fr = FilterRecord(p.name, ok if self.cache.static[k] else entry.lend(k))
            if remaining is not None:  # per-node reasons of the nodes this filter rejected first
                rejected = remaining & ~ok
                remaining &= ok
                fr.rows = np.flatnonzero(rejected)
                if not len(fr.rows):
                    continue
                fr.reasons = p.explain(state, pod, rejected)
                if self._reason_codes[p.name]:
                    fr.codes, fr.labels = p.reason_codes(state, pod, fr.rows)  # type: ignore[attr-defined]
                else:
                    fr.labels = (", ".join(sorted(fr.reasons)) or p.name,)
                    fr.codes = np.zeros(len(fr.rows), np.uint8)
            rec.filters.append(fr)
        return rec

    def _placed_filters(self, entry: ClassEntry) -> list[FilterRecord]:
        # Filter records of a placed pod in summary detail only reference the entry's masks and are
        # never written after, so the pods of a class share them (and the list) until a mask is replaced (a static
        # mask never changes; a dynamic one stays lent, and the entry copies it before writing)
        masks = entry.masks
        kept = entry.filter_records
        if kept is not None:
            for a, b in zip(kept[0], masks):
                if a is not b:
                    break
            else:
                return kept[1]
        static = self.cache.static
        records = [FilterRecord(p.name, ok if static[k] else entry.lend(k))
                   for k, (p, ok) in enumerate(zip(self.profile.filter, masks)) if ok is not None]
        entry.filter_records = (tuple(masks), records)
        return records


def _at(scores: Normalized, row: int) -> int:
    """A normalised score on ``row``: an int is the same on every node."""
    if isinstance(scores, int):
        return scores
    if isinstance(scores, SparseScores):
        return scores.at(row)
    return int(scores[row])
