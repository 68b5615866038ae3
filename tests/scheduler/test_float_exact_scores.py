"""The float64 quotients of LeastAllocated and LoadAware equal integer floor division exactly.

Both plugins take floor(100 × x / a) in float64 when every allocatable is below
``FLOAT_EXACT_BELOW``. The cases that would break a careless float version are quotients that are
exact integers and those just below or above one, on large divisors: the nodes here are built
so that 100 × x / a lands on k − 1/a, k or k + 1/a, and the scores are checked against Python
integers.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from sched_helpers import metric, node, pod

from colo.messages import Resources
from colo_scheduler.core import Scheduler
from colo_scheduler.framework.registry import ProfileConfig
from colo_scheduler.settings import SchedulerSettings
from colo_scheduler.table import FLOAT_EXACT_BELOW

NOW = 1000.0
PROFILE = ProfileConfig(filter=("NodeResourcesFit",), score={"LoadAware": 1, "NodeResourcesLeastAllocated": 1})

allocatable = st.one_of(st.integers(1, 1000), st.integers(1, FLOAT_EXACT_BELOW - 1),
                        st.integers(1, FLOAT_EXACT_BELOW // 100 - 1).map(lambda m: 100 * m),  # exact quotients
                        st.integers(FLOAT_EXACT_BELOW - 10**6, FLOAT_EXACT_BELOW - 1),
                        st.sampled_from([100, 3 * 10**12, 7 * 2**40, 2**45 + 1]))


def _near(a: int, k: int, d: int) -> int:
    """x in 0..a with 100 x / a at (or one step off) the integer k."""
    return min(max(-(-a * k // 100) + d, 0), a)


@st.composite
def column(draw: st.DrawFn) -> tuple[int, int]:
    """(allocatable, x): 100 x / a at or beside an integer."""
    a = draw(allocatable)
    k = draw(st.one_of(st.sampled_from([0, 25, 50, 100]), st.integers(0, 100)))
    return a, _near(a, k, draw(st.integers(-1, 1)))


@settings(max_examples=150, deadline=None)
@given(nodes=st.lists(st.tuples(column(), column()), min_size=1, max_size=6), request=st.integers(1, 3))
def test_least_allocated_equals_integer_floor(nodes: list[tuple[tuple[int, int], tuple[int, int]]],
                                              request: int) -> None:
    core = Scheduler(SchedulerSettings(), PROFILE)
    want = []
    for i, ((a_cpu, x_cpu), (a_mem, x_mem)) in enumerate(nodes):
        core.on_node(node(f"n{i}", cpu=a_cpu, memory=a_mem), NOW)
        # free − request = x: allocated = a − x − request (floored at 0: then x = a − request)
        used_cpu, used_mem = max(a_cpu - x_cpu - request, 0), max(a_mem - x_mem - request, 0)
        core.table.set_allocated(f"n{i}", Resources(cpu=used_cpu, memory=used_mem), 0)
        s_cpu = max(a_cpu - used_cpu - request, 0) * 100 // a_cpu
        s_mem = max(a_mem - used_mem - request, 0) * 100 // a_mem
        want.append((s_cpu + s_mem) // 2)
    state = core.framework.begin_cycle(NOW)
    info = core.pod_info(pod("p", cpu=request, memory=request), NOW)
    plugin = next(p for p, _ in core.framework.profile.score if p.name == "NodeResourcesLeastAllocated")
    assert plugin.score(state, info).tolist() == want
    assert plugin.score_rows(state, info, np.arange(len(nodes))).tolist() == want  # type: ignore[attr-defined]
    assert [plugin.score_node(state, info, i) for i in range(len(nodes))] == want  # type: ignore[attr-defined]


@settings(max_examples=150, deadline=None)
@given(nodes=st.lists(st.tuples(column(), column()), min_size=1, max_size=6))
def test_load_aware_score_equals_integer_floor(nodes: list[tuple[tuple[int, int], tuple[int, int]]]) -> None:
    core = Scheduler(SchedulerSettings(), PROFILE)
    info = core.pod_info(pod("p", cpu=1000, memory=2**20, lim_cpu=1000, lim_memory=2**20), NOW)
    e_cpu, e_mem = info.estimate_ints
    want = []
    for i, ((a_cpu, x_cpu), (a_mem, x_mem)) in enumerate(nodes):
        core.on_node(node(f"n{i}", cpu=a_cpu, memory=a_mem), NOW)
        # room − estimate = x: usage = a − x − estimate (floored at 0)
        u_cpu, u_mem = max(a_cpu - x_cpu - e_cpu, 0), max(a_mem - x_mem - e_mem, 0)
        core.on_metric(metric(f"n{i}", NOW - 1, cpu=u_cpu, memory=u_mem), NOW)
        s_cpu = max(a_cpu - u_cpu - e_cpu, 0) * 100 // a_cpu
        s_mem = max(a_mem - u_mem - e_mem, 0) * 100 // a_mem
        want.append((s_cpu + s_mem) // 2)
    state = core.framework.begin_cycle(NOW)
    plugin = next(p for p, _ in core.framework.profile.score if p.name == "LoadAware")
    assert plugin.score(state, info).tolist() == want
    assert [plugin.score_node(state, info, i) for i in range(len(nodes))] == want  # type: ignore[attr-defined]


def test_allocatable_beyond_the_exact_range_takes_integer_division() -> None:
    """A node past FLOAT_EXACT_BELOW switches the cycle to the int64 path; scores stay exact."""
    core = Scheduler(SchedulerSettings(), PROFILE)
    big = FLOAT_EXACT_BELOW * 4 + 3
    core.on_node(node("huge", cpu=1000, memory=big), NOW)
    core.table.set_allocated("huge", Resources(cpu=0, memory=big - big * 37 // 100 - 1), 0)
    state = core.framework.begin_cycle(NOW)
    info = core.pod_info(pod("p", cpu=1, memory=1), NOW)
    plugin = next(p for p, _ in core.framework.profile.score if p.name == "NodeResourcesLeastAllocated")
    free_mem = big - (big - big * 37 // 100 - 1) - 1
    assert plugin.score(state, info).tolist() == [(999 * 100 // 1000 + free_mem * 100 // big) // 2]
