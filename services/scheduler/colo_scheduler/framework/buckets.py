"""Score buckets: the best feasible rows of a pod class grouped by total score.

The pick of :meth:`Framework.schedule_one` wants the highest total score among feasible
nodes, every node tied at it (in row order, for the seeded tie-break) and, for the decision
record, the runner-up (the first row of the best score among the other nodes: what
``argmax`` returns). Over a class entry's ``masked`` array that is four or five passes over
all n nodes per pod, each touching an array last used many pods ago. Between two pods of a
class only the rows re-synced by the class cache change (after a placement, one), so the
entry can instead keep its best rows sorted by score and move the changed rows.

Only rows scoring at least a ``floor`` are kept: the :data:`TOP_ROWS` best at build time
(all feasible rows when there are fewer). Invariant: every row whose masked score is ≥
``floor`` is in exactly one bucket, and each bucket's rows are ascending. So the highest
bucket is the global best while any bucket is left; when the last one empties the entry
rebuilds from the array (the best is now below the floor), and a runner-up below the floor
is unknown (the caller looks in the array). With ``floor`` 0 the buckets hold every
feasible row and an empty set means no feasible node.
"""

from __future__ import annotations

import random
from bisect import bisect_left, insort

import numpy as np

from colo_scheduler.podinfo import IntArray

TOP_ROWS = 64
"""Rows kept at build time (more when the 64th best score is tied). A build costs about as
much as one array pick (a partition and a comparison over n); a placement moves its row down
by a few points, so a floor this deep lasts for most pods of a class."""

MOVE_LIMIT = 32
"""A re-sync of more rows than this drops the buckets (rebuilt at the next pick) instead of
moving the rows one by one."""

_SCAN = 16
"""Scores tried one by one below an emptied best bucket before taking the max of the keys."""


class ScoreBuckets:
    """Rows of one class entry with masked score ≥ ``floor``: ``rows`` score → ascending row
    indices, ``top`` the highest score held (−1 when none).

    Built from ``masked`` (n,) int64 (total score of feasible rows, −1 elsewhere; scores of
    well-behaved plugins are 0..Σ weight × 100, anything ≥ 0 is accepted)."""

    __slots__ = ("floor", "rows", "top")

    def __init__(self, masked: IntArray, feasible: int | None = None) -> None:
        n = len(masked)
        # with at most TOP_ROWS feasible rows (``feasible``: their count, when known) floor 0 keeps them all
        few = n <= TOP_ROWS or (feasible is not None and feasible <= TOP_ROWS)
        tied = False
        if few:
            floor = 0
        else:  # the TOP_ROWS-th best score: the best itself when that many rows tie at it (common)
            floor = int(masked.max())
            tied = int(np.count_nonzero(masked == floor)) >= TOP_ROWS
            if not tied:
                floor = int(np.partition(masked, n - TOP_ROWS)[n - TOP_ROWS])
        self.floor = max(floor, 0)
        sel = np.flatnonzero(masked >= self.floor)  # ascending rows
        rows: dict[int, list[int]] = {}
        if len(sel):
            scores = masked[sel]
            if tied:  # the kept rows are the best ones, all tied: one bucket
                rows[floor] = sel.tolist()
            elif len(sel) <= 2 * TOP_ROWS:  # few rows: appended in row order, each bucket ascending
                for i, score in zip(sel.tolist(), scores.tolist()):
                    lst = rows.get(score)
                    if lst is None:
                        rows[score] = [i]
                    else:
                        lst.append(i)
            else:  # many rows, several scores: a stable sort keeps each score's rows ascending
                order = np.argsort(scores, kind="stable")
                ordered = scores[order]
                cuts = (np.flatnonzero(ordered[1:] != ordered[:-1]) + 1).tolist()
                kept = sel[order].tolist()
                starts = [0, *cuts]
                for a, b, score in zip(starts, [*cuts, len(kept)], ordered[starts].tolist()):
                    rows[score] = kept[a:b]
        self.rows = rows
        self.top: int = max(rows) if rows else -1

    @property
    def stale(self) -> bool:
        """True when every kept row fell below a floor above 0: the best is unknown, rebuild."""
        return self.top < 0 < self.floor

    def move(self, i: int, old: int, new: int) -> None:
        """Row ``i``'s masked score changed from ``old`` to ``new`` (−1: infeasible)."""
        rows = self.rows
        floor = self.floor
        if old >= floor:
            lst = rows[old]
            if len(lst) == 1:
                del rows[old]
            else:
                del lst[bisect_left(lst, i)]
        if new >= floor:
            lst = rows.get(new)  # type: ignore[assignment]
            if lst is None:
                rows[new] = [i]
            else:
                insort(lst, i)
            if new > self.top:
                self.top = new
                return
        if old == self.top and old not in rows:
            self.top = self._below(old)

    def _below(self, score: int) -> int:
        """The highest kept score under ``score``, −1 when none."""
        rows = self.rows
        for s in range(score - 1, max(score - 1 - _SCAN, self.floor - 1), -1):
            if s in rows:
                return s
        lower = [s for s in rows if s < score]
        return max(lower) if lower else -1

    def pick(self, rng: random.Random) -> int:
        """A row of the best bucket: ``rng.randrange`` over its rows when tied (the array path's
        draw over the same rows in the same order), else its only row; −1 when empty."""
        if self.top < 0:
            return -1
        lst = self.rows[self.top]
        return lst[rng.randrange(len(lst))] if len(lst) > 1 else lst[0]

    def runner_up(self, pick: int) -> int | None:
        """The first row of the best score among rows other than ``pick`` (``pick`` in the best
        bucket): −1 when there is none, None when it lies below the floor (unknown here)."""
        lst = self.rows[self.top]
        if len(lst) > 1:
            return lst[0] if lst[0] != pick else lst[1]
        below = self._below(self.top)
        if below >= 0:
            return self.rows[below][0]
        return -1 if self.floor == 0 else None
