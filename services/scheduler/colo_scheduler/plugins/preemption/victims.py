"""The victims on one node (Kubernetes DefaultPreemption ``selectVictimsOnNode``).

Every potential victim (:mod:`.rules`) is removed from a simulated copy of the row; if the preemptor
then passes the row's pod-dependent filters, the potential victims are *reprieved* one by one, most
important first (higher priority, then earlier start — Kubernetes ``MoreImportantPod``), those whose
eviction would break a disruption budget before the others: a reprieved pod is added back and stays
when the preemptor still fits, else it is a victim. The victims are thus the lowest-priority pods,
as few as the reprieve order allows, and among equals the most recently started (the least work is
lost; the same preference as criterion 5 of :mod:`.pick`).

The simulation writes the row's ``allocated``/``free`` and the app counts of MaxInstancePerNode in
place, and has every :class:`PreemptionRemovalSimulator` among the filters (DeviceShare: the victims'
GPU bookings) take the pod off its own state, and restores all of it exactly before returning (nothing
else reads the table meanwhile), so the filters' own ``filter_node`` checks run unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from colo_scheduler.framework.interface import CycleState, PreemptionRemovalSimulator
from colo_scheduler.plugins.preemption.rules import violating
from colo_scheduler.podinfo import IntArray, PodInfo
from colo_scheduler.table import AssignedPod, NodeTable

APP_ROW = "app_row"
"""``PodInfo.extra`` key under which MaxInstancePerNode / SelectorSpread booked the pod's app count."""


def importance(ap: AssignedPod) -> tuple[int, float, str]:
    """Sort key, most important first: higher priority, then earlier start, then uid."""
    return (-ap.pod.priority, ap.assigned_at, ap.pod.uid)


@dataclass(frozen=True, slots=True)
class NodeVictims:
    """The victims on ``row`` (most important first) and how many of them break a budget."""

    row: int
    victims: tuple[AssignedPod, ...]
    violations: int


class RowSimulation:
    """Removes pods from row ``row`` of ``table`` in place (and from the state of ``simulators``);
    :meth:`restore` puts back what is still out."""

    def __init__(self, table: NodeTable, row: int,
                 simulators: Sequence[PreemptionRemovalSimulator] = ()) -> None:
        self.table = table
        self.row = row
        self.simulators = tuple(simulators)
        self.out: dict[str, AssignedPod] = {}
        self._allocated = table.allocated[row]  # (7,) views of the row: written in place
        self._free = table.free[row]
        self._apps: dict[str, IntArray] = {}

    def _apply(self, ap: AssignedPod, sign: int) -> None:
        pod = ap.pod
        if sign > 0:
            self._allocated -= pod.request
            self._free += pod.request
            for s in self.simulators:
                s.simulate_remove(self.table, self.row, pod)
        else:
            self._allocated += pod.request
            self._free -= pod.request
            for s in self.simulators:
                s.simulate_add(self.table, self.row, pod)
        app = pod.spec.app
        if app and pod.extra.get(APP_ROW) == self.row:
            counts = self._apps.get(app)
            if counts is None:
                counts = self._apps[app] = self.table.app_count(app)
            counts[self.row] -= sign

    def remove(self, ap: AssignedPod) -> None:
        """Take ``ap`` off the row."""
        self._apply(ap, 1)
        self.out[ap.pod.uid] = ap

    def add(self, ap: AssignedPod) -> None:
        """Put a removed ``ap`` back."""
        del self.out[ap.pod.uid]
        self._apply(ap, -1)

    def restore(self) -> None:
        """Put back every pod still removed."""
        for ap in list(self.out.values()):
            self.add(ap)


def passes(filters: Sequence[Any], state: CycleState, pod: PodInfo, row: int) -> bool:
    """True when every filter of ``filters`` passes ``pod`` on ``row`` (``filter_node`` when the plugin
    has it, else its full mask)."""
    for f in filters:
        one = getattr(f, "filter_node", None)
        if one is not None:
            if not one(state, pod, row):
                return False
        else:
            mask = f.filter(state, pod)
            if mask is not None and not bool(mask[row]):
                return False
    return True


def _reprieve(row: int, ordered: Sequence[AssignedPod], flags: Sequence[bool],
              fits_without: Callable[[AssignedPod], bool], keep: Callable[[AssignedPod], None]) -> NodeVictims:
    """The reprieve loop of both paths over ``ordered`` (most important first) with their budget-breaking
    ``flags``: breaking pods first; a pod is kept (``keep``) when the preemptor still fits with it back
    (``fits_without``), else it is a victim."""
    victims: list[AssignedPod] = []
    violations = 0
    for breaks in (True, False):
        for ap, flag in zip(ordered, flags):
            if flag is not breaks:
                continue
            if fits_without(ap):
                keep(ap)
            else:
                victims.append(ap)
                violations += breaks
    victims.sort(key=importance)
    return NodeVictims(row, tuple(victims), violations)


def select_victims_fit(state: CycleState, pod: PodInfo, row: int, potential: Sequence[AssignedPod],
                       leaving: Mapping[str, int]) -> NodeVictims | None:
    """:func:`select_victims` when the pod-dependent filters are NodeResourcesFit and MaxInstancePerNode,
    with Python ints: the same arithmetic as their ``filter_node`` (free ≥ request on every requested
    column; fewer pods of the app than its cap), without writing the row for every pod tried. Equal to
    :func:`select_victims` with those filters (tests/scheduler/test_preemption_oracle.py)."""
    cols = pod.request_col_ints
    request = pod.request_ints
    free = state.table.free[row].tolist()
    ordered = sorted(potential, key=importance)
    room = [free[c] for c in cols]
    app, cap = pod.spec.app, pod.spec.max_instance_per_node
    capped = bool(app) and cap >= 0
    same_app = 0
    for ap in ordered:
        r = ap.pod.request_ints
        for j, c in enumerate(cols):
            room[j] += r[c]
        if capped and ap.pod.spec.app == app and ap.pod.extra.get(APP_ROW) == row:
            same_app += 1
    count = [int(state.table.app_count(app).item(row)) - same_app] if capped else [0]
    need = [request[c] for c in cols]
    if any(room[j] < need[j] for j in range(len(cols))) or (capped and count[0] >= cap):
        return None

    def counted(ap: AssignedPod) -> int:
        return 1 if capped and ap.pod.spec.app == app and ap.pod.extra.get(APP_ROW) == row else 0

    def fits_without(ap: AssignedPod) -> bool:  # the pod still fits with ap put back
        r = ap.pod.request_ints
        for j, c in enumerate(cols):
            if room[j] - r[c] < need[j]:
                return False
        return not capped or count[0] + counted(ap) < cap

    def keep(ap: AssignedPod) -> None:
        r = ap.pod.request_ints
        for j, c in enumerate(cols):
            room[j] -= r[c]
        count[0] += counted(ap)

    return _reprieve(row, ordered, violating([ap.pod for ap in ordered], leaving), fits_without, keep)


def select_victims(state: CycleState, pod: PodInfo, row: int, potential: Sequence[AssignedPod],
                   filters: Sequence[Any], leaving: Mapping[str, int]) -> NodeVictims | None:
    """The minimal victims on ``row`` for ``pod`` among ``potential`` (any order), checked against the
    pod-dependent ``filters`` (those that are :class:`PreemptionRemovalSimulator` see the pods removed from
    their own state too); None when even removing all of them does not let the pod pass.
    ``leaving``: owner key → pods already being evicted for earlier preemptions (budgets, :mod:`.rules`)."""
    ordered = sorted(potential, key=importance)
    sim = RowSimulation(state.table, row, [f for f in filters if isinstance(f, PreemptionRemovalSimulator)])
    try:
        for ap in ordered:
            sim.remove(ap)
        if not passes(filters, state, pod, row):
            return None

        def fits_without(ap: AssignedPod) -> bool:
            sim.add(ap)
            ok = passes(filters, state, pod, row)
            sim.remove(ap)
            return ok

        return _reprieve(row, ordered, violating([ap.pod for ap in ordered], leaving), fits_without, sim.add)
    finally:
        sim.restore()
