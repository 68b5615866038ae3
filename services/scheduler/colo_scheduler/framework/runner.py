"""The scheduling cycle: PreFilter → Filter → (PostFilter) → PreScore → Score → NormalizeScore → pick
→ Reserve → Permit; PreBind and Bind run async in the service.

One :class:`Framework` owns the plugins of a profile and the node table. A pod is placed
on the highest total score among nodes passing every filter; ties are broken by a seeded
``random.Random``. Filter masks and raw scores of a pod class are kept across
the pods of a cycle and brought up to date row by row (:mod:`.classcache`), and the
best rows of each class are kept sorted by score (:mod:`.buckets`), so a pod costs a
handful of scalar updates and no pass over all nodes to pick the best one. When no
node passes, the diagnosis and the decision records are built by :mod:`.diagnosis`
(whose :class:`ScheduleResult` is re-exported here).
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Sequence

import numpy as np

from colo_scheduler import kernels
from colo_scheduler.framework.buckets import MOVE_LIMIT, ScoreBuckets
from colo_scheduler.framework.classcache import ClassCache, ClassEntry, check_range, class_key
from colo_scheduler.framework.decision import DETAIL_NODES, DecisionRecord
from colo_scheduler.framework.diagnosis import Diagnosis, Normalized, ScheduleResult
from colo_scheduler.framework.interface import (
    DRY_RUN,
    ERROR,
    SUCCESS,
    UNSCHEDULABLE,
    WAIT,
    BindOutcome,
    CyclePlugin,
    CycleState,
    IntpArray,
    NodeScorePlugin,
    NormalizeScorePlugin,
    ReasonCodesPlugin,
    SparseScores,
    Status,
)
from colo_scheduler.framework.registry import Profile
from colo_scheduler.kernels import kth_of, runner_up, shifted_scores
from colo_scheduler.podinfo import IntArray, PodInfo
from colo_scheduler.table import BoolArray, NodeTable

__all__ = ["Framework", "Normalized", "ScheduleResult"]

_ALLOWED = Status()
"""Every Permit plugin allowed the pod (one frozen instance: Permit runs for every placed pod)."""


class Framework(Diagnosis):
    """Runs a :class:`Profile` over a :class:`NodeTable`; ``seed`` seeds the tie-break generator.

    ``use_class_cache`` False recomputes every filter and score over all nodes for every pod
    (the reference the cache is tested against; same decisions, slower). ``use_score_buckets``
    False picks with passes over the class's score array instead of its score buckets (the
    reference the buckets are tested against: same node, same draws of the tie-break generator,
    same runner-up); buckets are used only with the class cache and without sampling.
    """

    def __init__(self, profile: Profile, table: NodeTable, seed: int = 0, use_class_cache: bool = True,
                 use_score_buckets: bool = True) -> None:
        self.profile = profile
        self.table = table
        self.rng = random.Random(seed)
        """Tie-break generator (Python's: a call costs a tenth of NumPy Generator.integers)."""
        self.placed: dict[str, tuple[PodInfo, int]] = {}
        self.use_class_cache = use_class_cache
        self.cache = ClassCache(profile.filter, profile.score)
        self._normalized = [(j, p, w) for j, (p, w) in enumerate(profile.score)
                            if w and isinstance(p, NormalizeScorePlugin)]
        self._reason_codes = {p.name: isinstance(p, ReasonCodesPlugin) for p in profile.filter}
        self._cycle_plugins = [p for p in profile.plugins.values() if isinstance(p, CyclePlugin)]
        self._range_checked = [j for j, (p, w) in enumerate(profile.score)
                               if w and not isinstance(p, NormalizeScorePlugin)]
        self._keep_classes = all(getattr(p, "tracks_cycle_rows", False) for p in self._cycle_plugins)
        self._next_start = 0
        self._score_meta = tuple((p.name, w) for p, w in profile.score)
        self._score_node = [p.score_node if isinstance(p, NodeScorePlugin) else None for p, _ in profile.score]
        self.use_score_buckets = use_score_buckets and use_class_cache and profile.percentage_of_nodes_to_score >= 100
        kernels.warm_up()  # the row kernels loaded (or compiled) now, not inside the first decision

    def begin_cycle(self, now: float) -> CycleState:
        """A fresh :class:`CycleState` at clock time ``now`` with every plugin's per-cycle arrays.

        Pod-class caches survive into the new cycle when every per-cycle plugin declares
        ``tracks_cycle_rows`` (its ``begin_cycle`` touches the rows whose per-cycle values changed);
        otherwise, or when the change log has grown past a few times the node count, they are
        dropped."""
        table = self.table
        if not self._keep_classes or table.change_log_length > 4 * table.n + 1024:
            table.trim_changes()
            self.cache.clear()
        state = CycleState(now=now, table=table)
        for p in self._cycle_plugins:
            p.begin_cycle(state)
        return state

    # ------------------------------------------------------------------ one pod

    def schedule_one(self, state: CycleState, pod: PodInfo, record: str | None = None) -> ScheduleResult:
        """Pick a node row for ``pod``; does not reserve. ``record`` (a detail level of
        :mod:`.decision`, or None) attaches a :class:`DecisionRecord` to the result.

        Raises ValueError naming a score plugin that returns scores outside 0..100.
        """
        n = self.table.n
        for pre in self.profile.pre_filter:
            st = pre.pre_filter(state, pod)
            if st is not None and not st.ok:
                return self._failed(pod, state, n, {st.reason: n}, frozenset({pre.name}), st.code, record)
        if n == 0:
            return self._failed(pod, state, 0, {}, frozenset(), UNSCHEDULABLE, record)
        entry = self.cache.get(state, pod, class_key(pod) if self.use_class_cache else None)
        feasible = entry.feasible
        for ps in self.profile.pre_score:
            st = ps.pre_score(state, pod, feasible)
            if st is not None and not st.ok:
                return self._failed(pod, state, n, {st.reason: n}, frozenset({ps.name}), ERROR, record)
        normalized: dict[int, Normalized] = {}
        masked = entry.masked  # shared with the cache entry: read only
        if self._normalized:
            final: IntArray | None = None
            sparse: list[tuple[int, int, SparseScores]] = []
            for j, p, w in self._normalized:
                raw = p.score(state, pod) if self.cache.pod_level[j] else entry.raw[j]
                s = p.normalize(state, pod, raw, feasible)
                if isinstance(s, int):  # the same on every node: ranks unchanged, no pass
                    if not 0 <= s <= 100:
                        raise ValueError(f"score plugin {p.name} returned scores outside 0..100")
                elif isinstance(s, SparseScores):  # the same on all but a few nodes
                    if not 0 <= s.base <= 100:
                        raise ValueError(f"score plugin {p.name} returned scores outside 0..100")
                    check_range(p.name, s.values)
                    sparse.append((j, w, s))
                else:
                    check_range(p.name, s)
                    final = entry.total + w * s if final is None else final + w * s
                normalized[j] = s
            if sparse and final is None and self.use_score_buckets:
                got = self._pick_sparse(state, pod, entry, normalized, [(w, sp) for _, w, sp in sparse], record)
                if got is not None:
                    return got
                return self._pick_shifted(state, pod, entry, normalized, [(w, sp) for _, w, sp in sparse], record)
            if sparse:  # as full vectors: the reference path
                for j, w, sp in sparse:
                    dense = normalized[j] = sp.dense(n)  # records read it by row
                    d = w * dense
                    final = entry.total + d if final is None else final + d
            if final is not None:
                masked = np.where(feasible, final, -1)
        if masked is entry.masked and self.use_score_buckets:
            return self._pick_bucket(state, pod, entry, normalized, record)
        if self.profile.percentage_of_nodes_to_score < 100:
            masked = self._sample(masked, feasible)
        pick = int(masked.argmax())
        best_score = masked[pick]
        if best_score < 0:
            return self._diagnose(state, pod, entry, record)
        ties = masked == best_score
        if np.count_nonzero(ties) > 1:
            best = np.flatnonzero(ties)
            pick = int(best[self.rng.randrange(len(best))])
        self._check_range(entry, pick)
        result = ScheduleResult(pick, feasible=-1)
        if record is not None:
            runner_up = _runner_up(masked, pick) if n > 1 else -1
            result.record = self._record(state, pod, entry, normalized, pick, runner_up, record, SUCCESS, "")
        return result

    def _check_range(self, entry: ClassEntry, pick: int) -> None:
        """Raise ValueError naming a score plugin whose raw score on ``pick`` is outside 0..100 (rows
        re-synced since the class's full computation are checked where they decide)."""
        for j in self._range_checked:
            v = entry.raw[j].item(pick)
            if not 0 <= v <= 100:
                raise ValueError(f"score plugin {self.profile.score[j][0].name} returned scores outside 0..100")

    def _pick_sparse(self, state: CycleState, pod: PodInfo, entry: ClassEntry, normalized: dict[int, Normalized],
                     sparse: list[tuple[int, SparseScores]], record: str | None) -> ScheduleResult | None:
        # The pick of schedule_one when the normalised scores differ from a constant on a few rows
        # only: those rows are moved in the entry's score buckets by their weighted difference from
        # the constant (the constant changes no rank), the pick made, and the rows moved back. Same
        # rows, draws and runner-up as the full vectors. None when it cannot tell (too many rows, or
        # every kept row moved below the buckets' floor): the caller takes the full vectors.
        if sum(len(sp.rows) for _, sp in sparse) > MOVE_LIMIT:
            return None
        delta: dict[int, int] = {}
        for w, sp in sparse:
            base = sp.base
            for i, v in zip(sp.rows.tolist(), sp.values.tolist()):
                if v != base:
                    delta[i] = delta.get(i, 0) + w * (v - base)
        if not entry.feasible_count:
            return self._diagnose(state, pod, entry, record)
        buckets = entry.buckets
        if buckets is None or buckets.stale:
            buckets = entry.buckets = ScoreBuckets(entry.masked, entry.feasible_count)
        masked = entry.masked
        moved: list[tuple[int, int, int]] = []
        for i, d in delta.items():
            old = masked.item(i)
            if old >= 0 and d:  # infeasible rows stay out
                buckets.move(i, old, old + d)
                moved.append((i, old, old + d))
        try:
            if buckets.top < 0:
                return None
            pick = buckets.pick(self.rng)
            self._check_range(entry, pick)
            result = ScheduleResult(pick, {}, frozenset(), -1)
            if record is not None:
                runner_up = buckets.runner_up(pick)
                if runner_up is None or (runner_up < 0 and any(new < buckets.floor for _, _, new in moved)):
                    # the runner-up lies below the floor (or was moved there): the full vector, with
                    # the constant added back so that every feasible row scores ≥ 0
                    shift = sum(w * sp.base for w, sp in sparse)
                    adjusted = np.where(entry.feasible, masked + shift, -1)
                    for i, _, new in moved:
                        adjusted[i] = new + shift
                    runner_up = _runner_up(adjusted, pick)
                result.record = self._record(state, pod, entry, normalized, pick, runner_up, record, SUCCESS, "")
            return result
        finally:
            for i, old, new in reversed(moved):
                buckets.move(i, new, old)

    def _pick_shifted(self, state: CycleState, pod: PodInfo, entry: ClassEntry, normalized: dict[int, Normalized],
                      sparse: list[tuple[int, SparseScores]], record: str | None) -> ScheduleResult:
        # The pick of schedule_one over full vectors when the normalised scores are constant but on
        # more rows than the buckets take: one compiled pass builds total + Σ weight × normalised score
        # (the class's masked scores shifted by the constants, the sparse rows by their difference),
        # with its best value and tie count; then the same tie-break draw, chosen row and runner-up
        # as the array path (kernels.py).
        if not entry.feasible_count:
            return self._diagnose(state, pod, entry, record)
        shift = 0
        parts_rows: list[IntpArray] = []
        parts_deltas: list[IntArray] = []
        for w, sp in sparse:
            shift += w * sp.base
            parts_rows.append(sp.rows)
            parts_deltas.append(w * (sp.values - sp.base))
        rows = parts_rows[0] if len(parts_rows) == 1 else np.concatenate(parts_rows)
        deltas = parts_deltas[0] if len(parts_deltas) == 1 else np.concatenate(parts_deltas)
        scores, best, count = shifted_scores(entry.masked, rows, deltas, shift)
        if best < 0:
            return self._diagnose(state, pod, entry, record)
        pick = kth_of(scores, best, self.rng.randrange(count) if count > 1 else 0)
        self._check_range(entry, pick)
        result = ScheduleResult(pick, {}, frozenset(), -1)
        if record is not None:
            result.record = self._record(state, pod, entry, normalized, pick, runner_up(scores, pick), record,
                                         SUCCESS, "")
        return result

    def _pick_bucket(self, state: CycleState, pod: PodInfo, entry: ClassEntry, normalized: dict[int, Normalized],
                     record: str | None) -> ScheduleResult:
        # the pick of schedule_one over the entry's score buckets: the same rows, draws and runner-up
        if not entry.feasible_count:
            return self._diagnose(state, pod, entry, record)
        buckets = entry.buckets
        if buckets is None or buckets.stale:
            buckets = entry.buckets = ScoreBuckets(entry.masked, entry.feasible_count)
        pick = buckets.pick(self.rng)
        if pick < 0:
            return self._diagnose(state, pod, entry, record)
        self._check_range(entry, pick)
        result = ScheduleResult(pick, {}, frozenset(), -1)
        if record is not None:
            runner_up = buckets.runner_up(pick)
            if runner_up is None:  # below the buckets' floor: the array has it
                runner_up = _runner_up(entry.masked, pick)
            result.record = self._record(state, pod, entry, normalized, pick, runner_up, record, SUCCESS, "")
        return result

    def _sample(self, masked: IntArray, feasible: BoolArray) -> IntArray:
        # Kubernetes numFeasibleNodesToFind: look from a rotating start for that many feasible
        # nodes and choose among them only.
        n = len(masked)
        pct = self.profile.percentage_of_nodes_to_score
        want = max(n * pct // 100, self.profile.min_feasible_nodes_to_find)
        if want >= n:
            return masked
        rows = np.flatnonzero(feasible)
        if len(rows) <= want:
            return masked
        start = self._next_start % n
        k = int(np.searchsorted(rows, start))
        order = np.concatenate((rows[k:], rows[:k]))[:want]
        self._next_start = int(order[-1]) + 1
        out = np.full(n, -1, np.int64)
        out[order] = masked[order]
        return out

    # ------------------------------------------------------------------ explainability

    def explain(self, state: CycleState, pod: PodInfo) -> DecisionRecord:
        """A dry-run decision of a queued pod at ``state`` with per-node detail (reserves nothing).

        Neither the tie-break generator nor the sampling window's rotating start moves, so asking
        changes no later placement."""
        saved, start = self.rng.getstate(), self._next_start
        state.data[DRY_RUN] = True
        try:
            result = self.schedule_one(state, pod, DETAIL_NODES)
        finally:
            del state.data[DRY_RUN]
            self.rng.setstate(saved)
            self._next_start = start
        assert result.record is not None
        return result.record

    # ------------------------------------------------------------------ reserve, permit, bind

    def reserve(self, pod: PodInfo, node: int, now: float) -> None:
        """Run every Reserve plugin for ``pod`` on row ``node``; raises ValueError if already placed."""
        if pod.uid in self.placed:
            raise ValueError(f"pod {pod.uid} is already reserved on {self.table.names[self.placed[pod.uid][1]]}")
        for p in self.profile.reserve:
            p.reserve(self.table, pod, node, now)
        self.placed[pod.uid] = (pod, node)

    def unreserve(self, uid: str) -> tuple[PodInfo, int] | None:
        """Undo :meth:`reserve` for pod ``uid`` (reverse order); None when the pod is not placed."""
        entry = self.placed.pop(uid, None)
        if entry is not None:
            pod, node = entry
            for p in reversed(self.profile.reserve):
                p.unreserve(self.table, pod, node)
        return entry

    def permit(self, state: CycleState, pod: PodInfo, node: int) -> Status:
        """Every Permit plugin in order: the first non-success status (UNSCHEDULABLE wins over WAIT,
        the longest WAIT timeout is kept), else SUCCESS."""
        waiting: Status | None = None
        for p in self.profile.permit:
            st = p.permit(state, pod, node)
            if st.code == WAIT:
                if waiting is None or st.timeout_s > waiting.timeout_s:
                    waiting = Status(WAIT, f"{p.name}: {st.reason}", st.timeout_s)
            elif not st.ok:
                return Status(st.code, f"{p.name}: {st.reason}")
        return waiting or _ALLOWED

    async def bind_many(self, placements: Sequence[tuple[PodInfo, str]], now: float,
                        default_bind: Callable[[Sequence[tuple[PodInfo, str]], float],
                                               Awaitable[list[BindOutcome]]]) -> list[BindOutcome]:
        """PreBind plugins, then the profile's Bind plugin (or ``default_bind``, the store's atomic
        bind): one outcome per placement. A PreBind refusal skips binding that pod."""
        outcomes: list[BindOutcome | None] = [None] * len(placements)
        for p in self.profile.pre_bind:
            todo = [k for k, o in enumerate(outcomes) if o is None]
            if not todo:
                break
            statuses = await p.pre_bind_many([placements[k] for k in todo], now)
            for k, st in zip(todo, statuses):
                if not st.ok:
                    outcomes[k] = BindOutcome(False, f"{p.name}: {st.reason}")
        todo = [k for k, o in enumerate(outcomes) if o is None]
        if todo:
            bind = self.profile.bind.bind_many if self.profile.bind is not None else default_bind
            for k, out in zip(todo, await bind([placements[k] for k in todo], now)):
                outcomes[k] = out
        return [o if o is not None else BindOutcome(False, "not bound") for o in outcomes]


def _runner_up(masked: IntArray, pick: int) -> int:
    """The row ``argmax`` gives once ``pick`` is excluded, or −1 when no other row is feasible (score
    ≥ 0). ``masked`` may be a cache entry's array: it is changed in place and restored."""
    best = masked[pick]
    masked[pick] = -1
    try:
        row = int(masked.argmax())
        return row if masked[row] >= 0 else -1
    finally:
        masked[pick] = best
