"""Per node, the requests of its pods by priority, kept up to date from the table's change log.

The candidate bound of preemption (:mod:`.plugin`) needs, for a preemptor of priority p, the Σ requests of the
pods below p on every node. Building that from every assigned pod costs a pass over all of them (tens of
milliseconds at 50,000 pods) at every failed attempt; instead the index keeps per row the priorities and
requests of its pods and the (n, 7) sums below a few *thresholds*, and refreshes only the rows the table logged
as changed since (:meth:`colo_scheduler.table.NodeTable.changes_since`: every placement, release and eviction
touches its row). A trimmed log or a grown table rebuilds everything.

A preemptor of priority p reads the sums below ``threshold(p)`` = p rounded up to a multiple of
:data:`PRIORITY_STEP`: an upper bound of what its victims can free (pods in [p, threshold) are counted too),
which is all the bound needs — the victims are then chosen exactly — and keeps the thresholds few (about a
hundred over the priority ranges of REFERENCE.md §1), so that every one is computed once per rebuild.
"""

from __future__ import annotations

import numpy as np

from colo_scheduler.podinfo import N_RES, IntArray
from colo_scheduler.table import NodeTable

PRIORITY_STEP = 100
"""Granularity of the thresholds (priority units)."""


def threshold(priority: int) -> int:
    """``priority`` rounded up to a multiple of :data:`PRIORITY_STEP`."""
    return -(-priority // PRIORITY_STEP) * PRIORITY_STEP


class PriorityIndex:
    """Requests of each row's pods by priority over ``table`` (see the module docstring)."""

    def __init__(self, table: NodeTable) -> None:
        self.table = table
        self._seq = -1
        self._n = -1
        self._prio: list[IntArray] = []
        self._req: list[IntArray] = []
        self._thresholds: list[int] = []
        self._sums = np.zeros((0, 0, N_RES), np.int64)
        """(thresholds, n, 7) Σ requests per row of the pods below each threshold."""
        self.rebuilds = 0
        """Full rebuilds so far (a statistic for tests and benches)."""

    def _row(self, i: int) -> None:
        pods = self.table.node_pods[i]
        k = len(pods)
        prio = self._prio[i] = np.fromiter((ap.pod.priority for ap in pods.values()), np.int64, k)
        req = self._req[i] = (np.array([ap.pod.request_ints for ap in pods.values()], np.int64) if k
                              else np.zeros((0, N_RES), np.int64))
        if self._thresholds:
            below = prio[None, :] < np.array(self._thresholds, np.int64)[:, None]
            self._sums[:, i, :] = below.astype(np.int64) @ req

    def _sync(self) -> None:
        t = self.table
        changed = t.changes_since(self._seq) if self._seq >= 0 and self._n == t.n else None
        if changed is None:
            self._n = t.n
            self._thresholds = []
            self._sums = np.zeros((0, t.n, N_RES), np.int64)
            self._prio = [np.zeros(0, np.int64)] * t.n
            self._req = [np.zeros((0, N_RES), np.int64)] * t.n
            for i in range(t.n):
                self._row(i)
            self.rebuilds += 1
        else:
            for i in set(changed):
                self._row(i)
        self._seq = t.change_seq

    def removable(self, priority: int) -> IntArray:
        """(n, 7) int64 Σ requests per row of the pods of priority below ``threshold(priority)`` (the pods
        column counts them), as the table stands now: at least what the pods below ``priority`` free."""
        self._sync()
        th = threshold(priority)
        if th in self._thresholds:
            out: IntArray = self._sums[self._thresholds.index(th)]
            return out
        lengths = [len(p) for p in self._prio]
        sums = np.zeros((1, self._n, N_RES), np.int64)
        if sum(lengths):
            prio, req = np.concatenate(self._prio), np.concatenate(self._req)
            rows = np.repeat(np.arange(self._n), lengths)
            below = prio < th
            np.add.at(sums[0], rows[below], req[below])
        self._thresholds.append(th)
        self._sums = np.concatenate((self._sums, sums))
        new: IntArray = sums[0]
        return new
