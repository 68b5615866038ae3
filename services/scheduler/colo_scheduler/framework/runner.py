"""The scheduling cycle: PreFilter → Filter (masks) → Score (weighted) → pick → Reserve.

One :class:`Framework` owns the plugins of a profile and the node table. A pod is
placed on the highest total score among nodes passing every filter; ties are broken
by a seeded ``numpy.random.Generator``. When no node passes, each rejected node is
attributed to the first filter (in profile order) that rejects it, and that filter
explains why — the Kubernetes "0/N nodes are available" diagnosis.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from colo_scheduler.framework.interface import CyclePlugin, CycleState
from colo_scheduler.framework.registry import Profile
from colo_scheduler.podinfo import IntArray, PodInfo
from colo_scheduler.table import BoolArray, NodeTable


@dataclass(slots=True)
class ScheduleResult:
    """Outcome of one attempt: ``node`` row (−1 when none), rejection ``reasons`` (reason → nodes),
    the names of the plugins that rejected (``rejectors``), and the number of feasible nodes
    (−1 when not counted: counting costs an array pass per pod)."""

    node: int
    reasons: dict[str, int] = field(default_factory=dict)
    rejectors: frozenset[str] = frozenset()
    feasible: int = 0
    message: str = ""


class Framework:
    """Runs a :class:`Profile` over a :class:`NodeTable`; ``seed`` seeds the tie-break generator."""

    def __init__(self, profile: Profile, table: NodeTable, seed: int = 0) -> None:
        self.profile = profile
        self.table = table
        self.rng = np.random.default_rng(seed)
        self.placed: dict[str, tuple[PodInfo, int]] = {}
        self._max_total = 100 * sum(w for _, w in profile.score)
        self._cycle_plugins = [p for p in profile.plugins.values() if isinstance(p, CyclePlugin)]

    def begin_cycle(self, now: float) -> CycleState:
        """A fresh :class:`CycleState` at clock time ``now`` with every plugin's per-cycle arrays."""
        state = CycleState(now=now, table=self.table)
        for p in self._cycle_plugins:
            p.begin_cycle(state)
        return state

    def schedule_one(self, state: CycleState, pod: PodInfo) -> ScheduleResult:
        """Pick a node row for ``pod``; does not reserve.

        The framework checks the weighted total per pod against [0, 100 × Σ weights] and,
        when outside, finds the plugin at fault: raises ValueError naming it.
        """
        n = self.table.n
        for pre in self.profile.pre_filter:
            reason = pre.pre_filter(state, pod)
            if reason is not None:
                return ScheduleResult(-1, {reason: n}, frozenset({pre.name}), 0,
                                      f"0/{n} nodes are available: {reason}.")
        if n == 0:
            return ScheduleResult(-1, {}, frozenset(), 0, "0/0 nodes are available.")
        mask: BoolArray | None = None
        for flt in self.profile.filter:
            m = flt.filter(state, pod)
            if m is not None:
                mask = m if mask is None else mask & m
        if mask is not None and not mask.any():
            return self._diagnose(state, pod)
        total: IntArray | None = None
        for p, weight in self.profile.score:
            if weight == 0:
                continue
            s = p.score(state, pod)
            if weight != 1:
                s = s * weight
            total = s if total is None else total + s
        if total is None:
            total = np.zeros(n, np.int64)
        elif total.min() < 0 or total.max() > self._max_total:
            self._check_scores(state, pod)
        if mask is not None:
            total = np.where(mask, total, -1)
        best = np.flatnonzero(total == total.max())
        pick = best[0] if len(best) == 1 else best[self.rng.integers(len(best))]
        return ScheduleResult(int(pick), feasible=n if mask is None else -1)

    def _check_scores(self, state: CycleState, pod: PodInfo) -> None:
        # Only reached when the weighted total is out of range, to name the offending plugin.
        for p, _ in self.profile.score:
            s = p.score(state, pod)
            if s.min() < 0 or s.max() > 100:
                raise ValueError(f"score plugin {p.name} returned scores outside 0..100")
        raise ValueError("weighted score total out of range")

    def _diagnose(self, state: CycleState, pod: PodInfo) -> ScheduleResult:
        remaining = np.ones(self.table.n, np.bool_)
        reasons: dict[str, int] = {}
        rejectors: set[str] = set()
        for p in self.profile.filter:
            ok = p.filter(state, pod)
            if ok is None:
                continue
            rejected = remaining & ~ok
            if rejected.any():
                rejectors.add(p.name)
                for reason, count in p.explain(state, pod, rejected).items():
                    reasons[reason] = reasons.get(reason, 0) + count
            remaining &= ok
        detail = ", ".join(f"{c} {r}" for r, c in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])))
        return ScheduleResult(-1, reasons, frozenset(rejectors), 0,
                              f"0/{self.table.n} nodes are available: {detail}.")

    def explain(self, state: CycleState, pod: PodInfo) -> dict[str, object]:
        """Per filter the number of nodes it rejects, and per score plugin every node's score (by name)."""
        out: dict[str, object] = {}
        names = self.table.names
        for p in self.profile.filter:
            m = p.filter(state, pod)
            ok = np.ones(self.table.n, np.bool_) if m is None else m
            out[f"filter/{p.name}"] = {"rejected": int((~ok).sum()),
                                       "reasons": p.explain(state, pod, ~ok)}
        for scorer, w in self.profile.score:
            s = scorer.score(state, pod)
            out[f"score/{scorer.name}"] = {"weight": w, "scores": dict(zip(names, (int(v) for v in s)))}
        return out

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
