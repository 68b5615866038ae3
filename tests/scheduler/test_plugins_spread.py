"""SelectorSpread: normalization table, spreading decides between otherwise preferred nodes, and the app
count is booked once with MaxInstancePerNode."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from sched_helpers import MI, node, pod, scheduler

from colo_scheduler.plugins.selectorspread import normalize_spread

NOW = 100.0

NORMALIZE = [
    ("counts-0-1-2-4", [0, 1, 2, 4], [True] * 4, [100, 75, 50, 0]),
    ("no-pods-anywhere", [0, 0, 0], [True] * 3, [100, 100, 100]),
    ("thirds-rounded-down", [0, 1, 3], [True] * 3, [100, 66, 0]),
    ("infeasible-maximum-ignored", [5, 1, 2], [False, True, True], [0, 50, 0]),
    ("max-1-fast-path", [0, 1, 3], [True, True, False], [100, 0, 0]),
    ("infeasible-zero-count", [0, 4, 2], [False, True, True], [100, 0, 50]),
    ("nothing-feasible", [3, 1], [False, False], [100, 100]),
]


@pytest.mark.parametrize(("raw", "feasible", "expected"), [c[1:] for c in NORMALIZE], ids=[c[0] for c in NORMALIZE])
def test_normalize_table(raw: list[int], feasible: list[bool], expected: list[int]) -> None:
    out = normalize_spread(np.array(raw, np.int64), np.array(feasible))
    assert out.tolist() == expected


@pytest.mark.parametrize(("app", "expected"), [("web", ["big", "small", "big", "small"]), ("", ["big"] * 4)],
                         ids=["app-spread", "no-app-packs-by-least-allocated"])
def test_spreading_overrides_least_allocated(app: str, expected: list[str]) -> None:
    """The big node wins on LeastAllocated alone; pods of one app alternate because the node already
    holding more of them scores 0 on spreading (weight 2) against 100."""
    s = scheduler()
    s.on_node(node("big", cpu=192_000), NOW)
    s.on_node(node("small", cpu=24_000), NOW)
    placed = []
    for i in range(4):
        s.add_pod(pod(f"p{i}", 4000, MI, app=app), NOW)
        placed += [p.node for p in s.schedule_cycle(NOW).placements]
    assert placed == expected


def test_app_count_booked_once_and_given_back() -> None:
    s = scheduler()
    s.on_node(node("a"), NOW)
    s.add_pod(pod("p", 100, MI, app="web", max_per_node=3), NOW)
    assert len(s.schedule_cycle(NOW).placements) == 1
    assert int(s.table.app_count("web")[0]) == 1  # MaxInstancePerNode and SelectorSpread both reserve
    s.release("p", NOW)
    assert int(s.table.app_count("web")[0]) == 0


def test_score_rows_equal_score() -> None:
    s = scheduler()
    for i in range(5):
        s.on_node(node(f"n{i}"), NOW)
    for i in range(7):
        s.add_pod(pod(f"p{i}", 100, MI, app="web"), NOW)
    s.schedule_cycle(NOW)
    state = s.framework.begin_cycle(NOW)
    plugin: Any = s.framework.profile.plugins["SelectorSpread"]
    info = s.pod_info(pod("q", 100, MI, app="web"), NOW)
    rows = np.array([4, 0, 2], np.intp)
    assert plugin.score(state, info).sum() == 7
    assert np.array_equal(plugin.score_rows(state, info, rows), plugin.score(state, info)[rows])
