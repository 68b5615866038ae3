"""DefaultPreemption (PostFilter): make room for a pod that fits nowhere by evicting lower-priority pods.

Kubernetes DefaultPreemption (``pkg/scheduler/framework/plugins/defaultpreemption``) over the node
table, in four steps, run only for a pod no node passes:

1. **Candidates.** A node is a candidate when every filter that removing pods cannot help passes it
   (node selector, affinity, taints, unschedulable, memory pressure, LoadAware — whose measured usage
   drops only once the victims stop — and any filter not listed in ``pod_dependent_filters``) and
   its free room plus the requests of its lower-priority pods covers the pod's request (one vectorised
   bound over all nodes from :mod:`.index`; the filters' masks are the failed decision's, lent by the
   framework under ``FILTER_MASKS``), and every pod-dependent :class:`PreemptionRemovalSimulator` that
   applies to the pod (DeviceShare for a GPU pod) keeps it in its own bound. At most max(``min_candidate_nodes_absolute``, ``min_candidate_nodes_percentage``
   % of the nodes) candidates with victims are evaluated, from a rotating start (Kubernetes
   ``GetOffsetAndNumCandidates``, defaults 100 and 10 %).
2. **Victims** on each candidate: :mod:`.victims` (reprieve from the most important down) over the
   potential victims of :mod:`.rules`; the simulators take each victim off their own state too (DeviceShare:
   its GPU bookings).
3. **Node**: :mod:`.pick`.
4. **Nomination**: :mod:`.nominator` holds the room and queues the evictions, which the core emits.

A preemptor with ``preemption_policy == "Never"`` preempts nothing. Under ``DRY_RUN`` (``colo explain``)
the answer is computed and recorded, and nothing is changed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Container, Sequence
from typing import Any

import msgspec
import numpy as np

from colo_scheduler.framework.decision import PREEMPTION_RECORD, PreemptionRecord, VictimRecord
from colo_scheduler.framework.interface import (
    DRY_RUN,
    FILTER_MASKS,
    CycleState,
    PreemptionRemovalSimulator,
    PreemptionVictimFilter,
    PreemptionVictimsFilter,
)
from colo_scheduler.plugins.maxinstance import MaxInstancePerNode
from colo_scheduler.plugins.noderesources import NodeResourcesFit
from colo_scheduler.plugins.preemption.index import PriorityIndex
from colo_scheduler.plugins.preemption.nominator import Nominator
from colo_scheduler.plugins.preemption.pick import CRITERIA, criteria, pick
from colo_scheduler.plugins.preemption.rules import allowed_by_plugins, protection
from colo_scheduler.plugins.preemption.victims import NodeVictims, select_victims, select_victims_fit
from colo_scheduler.podinfo import IntArray, PodInfo
from colo_scheduler.table import AssignedPod, NodeTable

POD_DEPENDENT_FILTERS = ("NodeResourcesFit", "MaxInstancePerNode", "DeviceShare")
"""Filters whose verdict on a node depends on the pods assigned to it (requests, pod count, app counts, the
GPUs they hold)."""


class DefaultPreemptionArgs(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Arguments of DefaultPreemption: ``min_candidate_nodes_percentage`` (0..100) and
    ``min_candidate_nodes_absolute`` (≥ 1) as Kubernetes DefaultPreemptionArgs (defaults 10 and 100);
    ``nomination_timeout_s`` (> 0) how long a nomination holds its room at most (default 120 s: four
    times Kubernetes' default termination grace period of 30 s, time for the victims to leave);
    ``pod_dependent_filters`` the filters re-run with the victims removed."""

    min_candidate_nodes_percentage: int = 10
    min_candidate_nodes_absolute: int = 100
    nomination_timeout_s: float = 120.0
    pod_dependent_filters: list[str] = msgspec.field(default_factory=lambda: list(POD_DEPENDENT_FILTERS))

    def problems(self) -> list[str]:
        """Every argument out of range."""
        errors = []
        if not 0 <= self.min_candidate_nodes_percentage <= 100:
            errors.append("min_candidate_nodes_percentage must be within 0..100")
        if self.min_candidate_nodes_absolute < 1:
            errors.append("min_candidate_nodes_absolute must be >= 1")
        if not self.nomination_timeout_s > 0:
            errors.append("nomination_timeout_s must be > 0")
        return errors


class DefaultPreemption:
    """The PostFilter; see the module docstring. Usable once :meth:`attach` gave it the table and profile."""

    name = "DefaultPreemption"
    events: frozenset[str] = frozenset()

    def __init__(self, args: DefaultPreemptionArgs | None = None) -> None:
        self.args = args or DefaultPreemptionArgs()
        self.nominator: Nominator | None = None
        self._filters: list[Any] = []
        self._dependent_names: frozenset[str] = frozenset()
        self._dependent: list[Any] = []
        self._victim_filters: list[PreemptionVictimFilter] = []
        self._set_filters: list[PreemptionVictimsFilter] = []
        self._offset = 0
        self.fit_arithmetic = True
        """Reprieve with Python ints when the pod-dependent filters are the in-tree NodeResourcesFit and
        MaxInstancePerNode (:func:`select_victims_fit`); False always writes the row and re-runs the
        filters (:func:`select_victims`, the reference the arithmetic is tested against)."""
        self._arithmetic = False
        self._simulators: list[Any] = []
        """The pod-dependent filters with their own per-node state (:class:`PreemptionRemovalSimulator`)."""
        self._index: PriorityIndex | None = None

    def attach(self, table: NodeTable, filters: Sequence[Any], plugins: Sequence[Any],
               unbound: Container[str]) -> Nominator:
        """Bind to the scheduler's ``table``, the profile's ``filters`` (in order) and ``plugins`` (those
        with ``victim_allowed`` are asked about every victim); ``unbound`` the uids of placed pods not
        bound yet (never victims). Returns the :class:`Nominator` the core drives."""
        dependent = self._dependent_names = frozenset(self.args.pod_dependent_filters)
        self._filters = list(filters)
        self._dependent = [f for f in filters if f.name in dependent]
        self._simulators = [f for f in self._dependent if isinstance(f, PreemptionRemovalSimulator)]
        self._arithmetic = all(isinstance(f, (NodeResourcesFit, MaxInstancePerNode)) for f in self._dependent
                               if f not in self._simulators)
        self._victim_filters = [p for p in plugins if isinstance(p, PreemptionVictimFilter)]
        self._set_filters = [p for p in plugins if isinstance(p, PreemptionVictimsFilter)]
        self.nominator = Nominator(table, self.args.nomination_timeout_s)
        self.nominator.unbound = unbound
        self.nominator.holders = tuple(self._simulators)
        return self.nominator

    def post_filter(self, state: CycleState, pod: PodInfo, reasons: dict[str, int]) -> int | None:
        """The row ``pod`` is nominated to after its victims are chosen, or None (no preemption helps)."""
        nominator = self.nominator
        if nominator is None or pod.spec.preemption_policy == "Never":
            return None
        dry = bool(state.data.get(DRY_RUN))
        nom = nominator.get(pod.uid)
        if nom is not None:
            if nominator.still_leaving(nom):  # no second eviction for the same room
                if not dry:
                    nominator.hold(nom)
                state.data[PREEMPTION_RECORD] = dataclasses.replace(nom.record, kept=True)
                return nom.row
            if not dry:
                nominator.drop(pod.uid)
        rows = self._candidate_rows(state, pod)
        if not len(rows):
            return None
        found, last = self._evaluate(state, pod, rows, nominator)
        best, runner_up = pick(found)
        if best is None:
            return None
        record = self._record(best, runner_up, len(found))
        state.data[PREEMPTION_RECORD] = record
        if not dry:
            self._offset = last + 1
            nominator.nominate(pod, best.row, [ap.pod for ap in best.victims], state.now, record)
        return best.row

    # ------------------------------------------------------------------ steps

    def _candidate_rows(self, state: CycleState, pod: PodInfo) -> np.ndarray[Any, np.dtype[np.intp]]:
        """Rows passing every filter removal cannot help whose free room plus the requests of pods
        of lower priority covers the request (ascending)."""
        table = state.table
        ok = np.ones(table.n, np.bool_)
        lent = state.data.get(FILTER_MASKS)  # the diagnosis' masks, when the framework lends them
        masks = list(lent) if isinstance(lent, list) and len(lent) == len(self._filters) else None
        for k, f in enumerate(self._filters):  # first: when they rule out every node, no index is needed
            if f.name in self._dependent_names:
                continue
            mask = masks[k] if masks is not None else f.filter(state, pod)
            if mask is not None:
                ok &= mask
                if not ok.any():
                    return np.zeros(0, np.intp)
        removable = self._removable(state, pod.priority)
        if removable is None:
            return np.zeros(0, np.intp)
        ok &= removable[:, -1] > 0  # rows with a pod of lower priority
        cols = list(pod.request_col_ints)
        if cols:
            ok &= (table.free[:, cols] + removable[:, cols] >= pod.request[cols]).all(axis=1)
        for sim in self._applying(pod):
            if not ok.any():
                break
            ok &= sim.preemption_candidates(state, pod, pod.priority)
        return np.flatnonzero(ok)

    def _applying(self, pod: PodInfo) -> list[Any]:
        """The simulators whose verdict removing pods can change for ``pod``."""
        return [s for s in self._simulators if s.preemption_applies(pod)]

    def _removable(self, state: CycleState, priority: int) -> IntArray | None:
        """(n, 7) Σ requests of the assigned pods of priority below ``priority`` per row (the pods column
        counts them), None when there are none (:class:`PriorityIndex`)."""
        if self._index is None or self._index.table is not state.table:
            self._index = PriorityIndex(state.table)
        sums = self._index.removable(priority)
        return sums if bool(sums[:, -1].any()) else None

    def _evaluate(self, state: CycleState, pod: PodInfo, rows: np.ndarray[Any, np.dtype[np.intp]],
                  nominator: Nominator) -> tuple[list[NodeVictims], int]:
        """Victims on candidate rows from the rotating start until enough candidates are found; the
        candidates and the last row evaluated."""
        table = state.table
        n = table.n
        want = max(n * self.args.min_candidate_nodes_percentage // 100, self.args.min_candidate_nodes_absolute)
        k = int(np.searchsorted(rows, self._offset % max(n, 1)))
        order = np.concatenate((rows[k:], rows[:k])).tolist()
        leaving = nominator.leaving_by_owner()
        simulated = bool(self._applying(pod))
        arithmetic = self._arithmetic and self.fit_arithmetic and not simulated
        dependent = [f for f in self._dependent if simulated or f not in self._simulators]
        found: list[NodeVictims] = []
        last = order[0]
        for row in order:
            last = row
            potential = [ap for ap in table.node_pods[row].values() if self._eligible(state, pod, ap, nominator)]
            if not potential:
                continue
            nv = (select_victims_fit(state, pod, row, potential, leaving) if arithmetic
                  else select_victims(state, pod, row, potential, dependent, leaving))
            if nv is None or not nv.victims:
                continue
            if self._set_filters and not all(f.victims_allowed(state, pod, [ap.pod for ap in nv.victims])
                                             for f in self._set_filters):
                continue
            found.append(nv)
            if len(found) >= want:
                break
        return found, last

    def _eligible(self, state: CycleState, pod: PodInfo, ap: AssignedPod, nominator: Nominator) -> bool:
        victim = ap.pod
        if ap.assigned_at >= state.now or victim.uid in nominator.unbound:
            return False  # placed this cycle or waiting at Permit: not running, nothing to evict
        if protection(pod, victim) is not None or nominator.leaving(victim.uid):
            return False
        return allowed_by_plugins(self._victim_filters, state, pod, victim)

    def _record(self, best: NodeVictims, runner_up: NodeVictims | None, candidates: int) -> PreemptionRecord:
        return PreemptionRecord(
            best.row,
            tuple(VictimRecord(ap.pod.uid, ap.pod.spec.name, ap.pod.priority, ap.assigned_at) for ap in best.victims),
            CRITERIA, criteria(best),
            runner_up.row if runner_up is not None else -1,
            criteria(runner_up) if runner_up is not None else (),
            candidates)
