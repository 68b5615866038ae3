"""Queueing hints: which unschedulable pods a change of some nodes may help (Kubernetes QueueingHint).

A pod parked as unschedulable failed every filter on every node at its last attempt.
Within the scheduler a node only becomes *more* accommodating through a cluster event
(node spec, NodeResource, metric, a pod released / unreserved on it) or through time
(metric expiry, covered by the timed retry of the queue). So after changes to the rows
``rows`` it is enough — and exact, at the state the next cycle starts from — to wake the
pods that now pass every filter profile on at least one of those rows; every other pod
would fail again without anything being placed.

Filter plugins may provide, to make the check cheap over the whole pool:

* ``pool_filter(state, pods, rows) -> (P, d) bool`` — vectorised over pods and rows, or
* ``pool_key(pod) -> hashable`` — the plugin's mask depends only on this key, so the
  mask is computed once per distinct key.

Any other filter is evaluated pod by pod (correct, only slower).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from colo_scheduler.framework.interface import CycleState
from colo_scheduler.podinfo import PodInfo
from colo_scheduler.table import BoolArray


def _mask_rows(mask: BoolArray | None, rows: npt.NDArray[np.intp]) -> BoolArray:
    if mask is None:
        return np.ones(len(rows), np.bool_)
    out: BoolArray = mask[rows]
    return out


def plugin_pool_mask(plugin: Any, state: CycleState, pods: Sequence[PodInfo],
                     rows: npt.NDArray[np.intp]) -> BoolArray:
    """(P, d) True where ``plugin``'s filter passes pod p on row ``rows[j]``."""
    pool_filter = getattr(plugin, "pool_filter", None)
    if pool_filter is not None:
        out: BoolArray = pool_filter(state, pods, rows)
        return out
    res = np.empty((len(pods), len(rows)), np.bool_)
    pool_key = getattr(plugin, "pool_key", None)
    if pool_key is None:
        for k, p in enumerate(pods):
            res[k] = _mask_rows(plugin.filter(state, p), rows)
        return res
    by_key: dict[object, BoolArray] = {}
    for k, p in enumerate(pods):
        key = pool_key(p)
        m = by_key.get(key)
        if m is None:
            m = by_key[key] = _mask_rows(plugin.filter(state, p), rows)
        res[k] = m
    return res


def fits_any_row(filters: Sequence[Any], state: CycleState, pods: Sequence[PodInfo],
                 rows: npt.NDArray[np.intp]) -> BoolArray:
    """(P,) True where a pod passes every filter of ``filters`` on at least one row of ``rows``.

    ``rows`` are node rows of ``state.table`` (intp, any order); an empty ``rows`` or pool
    gives all False. Filters run in order and stop early once no (pod, row) pair is left.
    """
    if not len(pods) or not len(rows):
        return np.zeros(len(pods), np.bool_)
    ok = np.ones((len(pods), len(rows)), np.bool_)
    for plugin in filters:
        ok &= plugin_pool_mask(plugin, state, pods, rows)
        if not ok.any():
            break
    out: BoolArray = np.asarray(ok.any(axis=1))
    return out
