"""Extension points of the scheduling framework, after the Kubernetes scheduler framework.

QueueSort → PreFilter → Filter → (PostFilter when no node passes) → PreScore → Score →
NormalizeScore → Reserve → Permit → PreBind → Bind. Synchronous and pure up to Score
(array operations over every node of the :class:`~colo_scheduler.table.NodeTable` at
once); Reserve mutates the table; PreBind and Bind are async (the store). A plugin
implements any subset of the protocols.

**Row-local contract.** A Filter's verdict and a Score's raw value for row ``i`` depend
only on the pod, row ``i`` of the table and per-cycle state (``begin_cycle``, and the
pod's PreFilter/PreScore state). Every table mutation of a row is recorded by the table
(:meth:`NodeTable.changes_since`), so the framework may keep a pod class's masks and
scores across pods of a cycle and recompute only the rows that changed
(``filter_rows`` / ``score_rows``). Anything that depends on other rows (the maximum over
all nodes, say) belongs in ``normalize``, which runs over the full score vector at every
decision.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from colo_scheduler.podinfo import IntArray, PodInfo
from colo_scheduler.table import BoolArray, NodeTable

# Cluster events a rejected pod may wait for (Kubernetes "EventsToRegister").
NODE_ADD = "NodeAdd"
"""A node registered or its spec (labels, taints, allocatable) changed."""
NODE_RESOURCE = "NodeResource"
"""A node's batch/mid allocatable changed."""
NODE_METRIC = "NodeMetric"
"""A node reported fresh usage."""
POD_DELETE = "PodDelete"
"""A pod released its node (succeeded, failed, evicted)."""


DRY_RUN = "framework.dry_run"
"""``CycleState.data`` key set while the framework explains a pod without deciding (``colo explain``):
a PostFilter then computes its answer but changes nothing (no nomination, no eviction)."""

FILTER_MASKS = "framework.filter_masks"
"""``CycleState.data`` key under which the framework lends the PostFilters the failed pod's filter masks: one
per profile filter, in profile order, (n,) bool or None where the filter passes every node (read only)."""

IntpArray = npt.NDArray[np.intp]
"""Row indices into the node table."""

# Status codes (Kubernetes framework.Code): what the queue does with the pod next.
SUCCESS = "Success"
UNSCHEDULABLE = "Unschedulable"
"""No node fits now; a cluster event may help (the pod waits in the unschedulable pool)."""
UNSCHEDULABLE_AND_UNRESOLVABLE = "UnschedulableAndUnresolvable"
"""No cluster event can help (an invalid pod); the pod is parked until the timed retry."""
WAIT = "Wait"
"""Permit: hold the reserved pod until allowed or until ``timeout_s``."""
SKIP = "Skip"
"""PreFilter/PreScore: the plugin has nothing to do for this pod."""
ERROR = "Error"
"""An internal failure; the pod goes to backoff."""


@dataclass(frozen=True, slots=True)
class Status:
    """A plugin's verdict: ``code`` (one of the constants above), ``reason`` and, for WAIT, ``timeout_s``."""

    code: str = SUCCESS
    reason: str = ""
    timeout_s: float = 0.0

    @property
    def ok(self) -> bool:
        """True for SUCCESS and SKIP."""
        return self.code in (SUCCESS, SKIP)


@dataclass(slots=True)
class CycleState:
    """Scratch state of one scheduling cycle at clock time ``now`` (seconds).

    ``data`` holds per-plugin arrays computed once per cycle by :meth:`CyclePlugin.begin_cycle`
    (e.g. which metrics are fresh); the table does not change shape during a cycle.
    """

    now: float
    table: NodeTable
    data: dict[str, object] = field(default_factory=dict)


class Plugin(Protocol):
    """Every plugin has a unique ``name`` and the cluster ``events`` that can undo its rejections."""

    name: str
    events: frozenset[str]


@runtime_checkable
class CyclePlugin(Protocol):
    """Prepares per-cycle arrays once before any pod of the cycle is filtered."""

    name: str

    def begin_cycle(self, state: CycleState) -> None:
        """Store arrays in ``state.data`` (keyed by the plugin name)."""
        ...


@runtime_checkable
class QueueSortPlugin(Protocol):
    """Orders the active queue: smaller key first."""

    name: str

    def sort_key(self, pod: PodInfo) -> tuple[float, ...]:
        """The pod's position key in the active queue."""
        ...


@runtime_checkable
class PreFilterPlugin(Protocol):
    """Checks a pod once per attempt; a non-ok :class:`Status` makes it unschedulable on every node."""

    name: str

    def pre_filter(self, state: CycleState, pod: PodInfo) -> Status | None:
        """None (or an ok status) when the pod may proceed, else UNSCHEDULABLE[_AND_UNRESOLVABLE]."""
        ...


@runtime_checkable
class FilterPlugin(Protocol):
    """Rejects nodes: a (n,) bool mask of the nodes that pass, and on demand the reasons of the others."""

    name: str

    def filter(self, state: CycleState, pod: PodInfo) -> BoolArray | None:
        """(n,) True where the pod may go; None when no node is rejected (saves an array pass)."""
        ...

    def explain(self, state: CycleState, pod: PodInfo, rejected: BoolArray) -> dict[str, int]:
        """Reason → number of nodes among ``rejected`` (n,) that this plugin rejects for it."""
        ...


@runtime_checkable
class RowFilterPlugin(Protocol):
    """Optional for a Filter: its mask over some rows only; must equal ``filter(state, pod)[rows]``
    (all True where ``filter`` returns None)."""

    name: str

    def filter_rows(self, state: CycleState, pod: PodInfo, rows: IntpArray) -> BoolArray:
        """(len(rows),) True where the pod may go."""
        ...


@runtime_checkable
class NodeFilterPlugin(Protocol):
    """Optional for a Filter: its verdict on one row with Python scalars, for the framework's
    updates of one or two changed rows, where NumPy's per-call cost dominates; must equal
    ``filter(state, pod)[i]`` (True where ``filter`` returns None)."""

    name: str

    def filter_node(self, state: CycleState, pod: PodInfo, i: int) -> bool:
        """True when the pod may go to row ``i``."""
        ...


@runtime_checkable
class NodeScorePlugin(Protocol):
    """Optional for a Score: the raw score of one row with Python scalars; must equal
    ``score(state, pod)[i]``."""

    name: str

    def score_node(self, state: CycleState, pod: PodInfo, i: int) -> int:
        """Raw score of row ``i``."""
        ...


@runtime_checkable
class ReasonCodesPlugin(Protocol):
    """Optional for a Filter: why each of some rejected rows is rejected, as codes into labels."""

    name: str

    def reason_codes(self, state: CycleState, pod: PodInfo, rows: IntpArray) -> tuple[npt.NDArray[np.uint8],
                                                                                      tuple[str, ...]]:
        """(len(rows),) uint8 codes and the labels they index (a label may join several reasons)."""
        ...


@runtime_checkable
class PostFilterPlugin(Protocol):
    """Runs when no node passes the filters (Kubernetes PostFilter, e.g. preemption)."""

    name: str

    def post_filter(self, state: CycleState, pod: PodInfo, reasons: dict[str, int]) -> int | None:
        """A row the pod may be nominated to after the plugin made room, or None."""
        ...


@runtime_checkable
class PreemptionVictimFilter(Protocol):
    """Optional for any plugin of a profile: whether ``preemptor`` may preempt ``victim`` (e.g. the
    ElasticQuota plugin: a pod never takes room from another quota's pods while that quota is
    within its min). Preemption (:mod:`colo_scheduler.plugins.preemption`) asks every plugin of the
    profile that has it; one False keeps the victim."""

    name: str

    def victim_allowed(self, state: CycleState, preemptor: PodInfo, victim: PodInfo) -> bool:
        """True when ``victim`` may be evicted to make room for ``preemptor``."""
        ...


@runtime_checkable
class PreemptionVictimsFilter(Protocol):
    """Optional for any plugin of a profile: whether ``preemptor`` may preempt all of ``victims`` (one node's
    chosen set) together (e.g. the ElasticQuota plugin: two pods of a quota, each allowed alone, must not take
    that quota below its min together). One False drops the node from the candidates."""

    name: str

    def victims_allowed(self, state: CycleState, preemptor: PodInfo, victims: Sequence[PodInfo]) -> bool:
        """True when every pod of ``victims`` may be evicted at once to make room for ``preemptor``."""
        ...


@runtime_checkable
class PreemptionRemovalSimulator(Protocol):
    """Optional for a pod-dependent filter whose verdict rests on per-node state of its own (DeviceShare's GPU
    bookings), the counterpart of Kubernetes ``PreFilterExtensions.RemovePod``/``AddPod``: preemption
    (:mod:`colo_scheduler.plugins.preemption`) takes a potential victim's share of that state off a row before
    re-running the plugin's ``filter_node`` and puts it back exactly after, so a node the plugin rejects only for
    pods of lower priority is a candidate; and holds the state a nominated pod will take (the nominator calls
    :meth:`preemption_hold` / :meth:`preemption_unhold` with its own hold of the requests)."""

    name: str

    def preemption_applies(self, pod: PodInfo) -> bool:
        """True when removing pods can change this plugin's verdict for ``pod`` (False: skip it, its filter
        passes the pod everywhere)."""
        ...

    def preemption_candidates(self, state: CycleState, pod: PodInfo, below: int) -> BoolArray:
        """(n,) a cheap upper bound: False where even removing every pod of priority below ``below`` leaves
        ``pod`` failing this plugin's filter (such rows are never candidates)."""
        ...

    def simulate_remove(self, table: NodeTable, row: int, victim: PodInfo) -> None:
        """Take ``victim``'s share of the plugin's state off ``row`` (in place, undone by :meth:`simulate_add`)."""
        ...

    def simulate_add(self, table: NodeTable, row: int, victim: PodInfo) -> None:
        """Put back what :meth:`simulate_remove` took off."""
        ...

    def preemption_hold(self, table: NodeTable, row: int, pod: PodInfo, victims: Sequence[str]) -> None:
        """Hold for nominated ``pod`` on ``row`` the share of the plugin's state it will take once the pods
        ``victims`` (uids) left, so that no pod placed meanwhile takes it (the table holds the requests)."""
        ...

    def preemption_unhold(self, table: NodeTable, row: int, pod: PodInfo) -> None:
        """Release :meth:`preemption_hold`'s hold before ``pod`` is scheduled (no-op without one)."""
        ...


@runtime_checkable
class PreScorePlugin(Protocol):
    """Prepares per-pod score state once per decision, given the feasible rows."""

    name: str

    def pre_score(self, state: CycleState, pod: PodInfo, feasible: BoolArray) -> Status | None:
        """Store per-pod state in ``state.data``; a non-ok status fails the attempt (ERROR)."""
        ...


@runtime_checkable
class ScorePlugin(Protocol):
    """Scores every node in 0..100 (int64, (n,)); the framework checks the range and applies weights."""

    name: str

    def score(self, state: CycleState, pod: PodInfo) -> IntArray:
        """(n,) scores; values for infeasible nodes are ignored."""
        ...


@runtime_checkable
class RowScorePlugin(Protocol):
    """Optional for a Score: raw scores of some rows; must equal ``score(state, pod)[rows]``."""

    name: str

    def score_rows(self, state: CycleState, pod: PodInfo, rows: IntpArray) -> IntArray:
        """(len(rows),) raw scores."""
        ...


@dataclass(frozen=True, slots=True)
class SparseScores:
    """Normalised scores that equal ``base`` on every node except ``rows`` (k,) intp, which get
    ``values`` (k,) int64: what a NormalizeScore plugin returns when few nodes differ (an app's pods
    sit on few nodes). A constant changes no node's rank, so the framework moves only those rows."""

    base: int
    rows: IntpArray
    values: IntArray

    def dense(self, n: int) -> IntArray:
        """(n,) int64 the full score vector."""
        out = np.full(n, self.base, np.int64)
        out[self.rows] = self.values
        return out

    def at(self, row: int) -> int:
        """The score of ``row`` (a binary search of the ascending rows: a NumPy searchsorted call
        costs more than the few element reads of :func:`bisect.bisect_left`)."""
        rows = self.rows
        k = bisect.bisect_left(rows, row)
        return self.values.item(k) if k < len(rows) and rows.item(k) == row else self.base


@runtime_checkable
class NormalizeScorePlugin(Protocol):
    """Optional for a Score (Kubernetes ScoreExtensions.NormalizeScore): maps raw scores of every
    node into 0..100 using all of them (e.g. divide by the maximum over feasible nodes)."""

    name: str

    def normalize(self, state: CycleState, pod: PodInfo, raw: IntArray,
                  feasible: BoolArray) -> IntArray | int | SparseScores:
        """(n,) 0..100 from (n,) raw scores, or one int in 0..100 when every node gets the same
        (the framework then skips the pass: a constant changes no node's rank), or
        :class:`SparseScores` (ascending rows) when only a few nodes differ from one value; must
        not modify ``raw``."""
        ...


@runtime_checkable
class ReservePlugin(Protocol):
    """Books a placed pod in the table before binding; Unreserve undoes it exactly."""

    name: str

    def reserve(self, table: NodeTable, pod: PodInfo, node: int, now: float) -> None:
        """Account ``pod`` on row ``node`` at clock time ``now``."""
        ...

    def unreserve(self, table: NodeTable, pod: PodInfo, node: int) -> None:
        """Undo :meth:`reserve`."""
        ...


@runtime_checkable
class PermitPlugin(Protocol):
    """Approves, rejects or delays a reserved pod before binding (Kubernetes Permit)."""

    name: str

    def permit(self, state: CycleState, pod: PodInfo, node: int) -> Status:
        """SUCCESS, UNSCHEDULABLE (unreserve, retry later) or WAIT (hold up to ``timeout_s``)."""
        ...


class SchedulerHandle(Protocol):
    """What the scheduler core lends a :class:`BatchPlugin` (Kubernetes framework.Handle: the
    waiting pods and the queue)."""

    def allow(self, uid: str) -> bool:
        """Let a pod held at Permit proceed to binding (in the current cycle); False when not waiting."""
        ...

    def reject_waiting(self, uid: str, now: float, reason: str = "rejected while waiting") -> bool:
        """Unreserve a pod held at Permit and park it as unschedulable; False when not waiting."""
        ...

    def take_queued(self, uid: str) -> PodInfo | None:
        """Remove pod ``uid`` from whichever queue pool holds it; None when not queued."""
        ...

    def park(self, uid: str, now: float, rejectors: frozenset[str], reasons: dict[str, int]) -> bool:
        """Re-park an unschedulable pod with other rejectors (they decide which events wake it);
        False when the pod is not in the unschedulable pool."""
        ...


@runtime_checkable
class BatchPlugin(Protocol):
    """Shapes a cycle's batch (e.g. takes every member of a gang together) and sees the cycle end."""

    name: str

    def attach(self, handle: SchedulerHandle) -> None:
        """Called once by the scheduler core with its handle."""
        ...

    def complete_batch(self, pods: list[PodInfo], now: float) -> list[PodInfo]:
        """The batch to schedule in QueueSort order: ``pods`` (popped from the active queue, in order)
        plus any pods the plugin takes from the queue with the handle; must return ``pods`` itself
        when it adds nothing."""
        ...

    def end_batch(self, now: float) -> None:
        """After the last pod of the cycle's batch (before the cycle's allowed pods are placed)."""
        ...


@runtime_checkable
class PreBindPlugin(Protocol):
    """Async work before binding (e.g. provisioning); a refusal unreserves the pod and backs it off."""

    name: str

    async def pre_bind_many(self, placements: Sequence[tuple[PodInfo, str]], now: float) -> list[Status]:
        """One status per (pod, node name), same order."""
        ...


@dataclass(frozen=True, slots=True)
class BindOutcome:
    """Result of binding one pod: ``ok`` or the ``reason`` it was refused."""

    ok: bool
    reason: str = ""


@runtime_checkable
class BindPlugin(Protocol):
    """Binds placed pods, many at once (async: the store)."""

    name: str

    async def bind_many(self, placements: Sequence[tuple[PodInfo, str]], now: float) -> list[BindOutcome]:
        """One outcome per (pod, node name), same order."""
        ...


def count_true(mask: BoolArray) -> int:
    """Number of True entries of a bool mask."""
    return int(np.count_nonzero(mask))
