"""Extension points of the scheduling framework, after the Kubernetes scheduler framework.

Synchronous and pure up to Score (array operations over every node of the
:class:`~colo_scheduler.table.NodeTable` at once); Reserve mutates the table;
Bind is async (the store). A plugin implements any subset of the protocols.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

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
    """Checks a pod once per attempt; a reason string makes the pod unschedulable on every node."""

    name: str

    def pre_filter(self, state: CycleState, pod: PodInfo) -> str | None:
        """None when the pod may proceed, else the reason."""
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
class ScorePlugin(Protocol):
    """Scores every node in 0..100 (int64, (n,)); the framework checks the range and applies weights."""

    name: str

    def score(self, state: CycleState, pod: PodInfo) -> IntArray:
        """(n,) scores; values for infeasible nodes are ignored."""
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


@dataclass(frozen=True, slots=True)
class BindOutcome:
    """Result of binding one pod: ``ok`` or the ``reason`` it was refused."""

    ok: bool
    reason: str = ""


class BindPlugin(Protocol):
    """Binds placed pods, many at once (async: the store)."""

    name: str

    async def bind_many(self, placements: Sequence[tuple[PodInfo, str]], now: float) -> list[BindOutcome]:
        """One outcome per (pod, node name), same order."""
        ...


def count_true(mask: BoolArray) -> int:
    """Number of True entries of a bool mask."""
    return int(np.count_nonzero(mask))
