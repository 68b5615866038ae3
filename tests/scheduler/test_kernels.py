"""The compiled row kernels (colo_scheduler/kernels.py) against the same formulas in Python ints, on
random rows and quantities up to the kernels' bound, and the plugins' row methods against their
full passes where quantities pass that bound (the array path)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from colo.messages import NodeSpec, PodSpec, Resources
from colo_scheduler import kernels
from colo_scheduler.framework.interface import CycleState
from colo_scheduler.kernels import KERNEL_QUANTITY_BELOW
from colo_scheduler.plugins.noderesources import NodeResourcesFit
from colo_scheduler.podinfo import make_pod_info
from colo_scheduler.table import NodeTable

Q = st.integers(0, KERNEL_QUANTITY_BELOW - 1)


def _rows(n: int, data: st.DataObject) -> np.ndarray:
    picked = data.draw(st.lists(st.integers(0, n - 1), min_size=0, max_size=12))
    return np.array(picked, np.intp)


@settings(max_examples=150, deadline=None)
@given(st.data(), st.integers(1, 6))
def test_least_allocated_rows_equal_python_ints(data: st.DataObject, n: int) -> None:
    # divisor = allocatable floored at 1, free ≤ allocatable (what the table holds)
    divisor = np.array(data.draw(st.lists(st.lists(st.integers(1, KERNEL_QUANTITY_BELOW - 1), min_size=3, max_size=3),
                                          min_size=n, max_size=n)), np.int64)
    free = np.array([[data.draw(st.integers(-2**40, int(d))) for d in row] for row in divisor.tolist()], np.int64)
    request = np.array(data.draw(st.lists(Q, min_size=3, max_size=3)), np.int64)
    cols = np.array(data.draw(st.lists(st.integers(0, 2), min_size=1, max_size=3, unique=True)), np.intp)
    weights = np.array(data.draw(st.lists(st.integers(0, 5), min_size=len(cols), max_size=len(cols))), np.int64)
    per_row = data.draw(st.booleans())
    den = (np.array(data.draw(st.lists(st.integers(1, 9), min_size=n, max_size=n)), np.int64) if per_row
           else np.array([data.draw(st.integers(1, 9))], np.int64))
    rows = _rows(n, data)
    got = kernels.least_allocated_rows(free, divisor, rows, cols, weights, request, den)
    for k, i in enumerate(rows.tolist()):
        num = sum(int(w) * (max(int(free[i, c]) - int(request[c]), 0) * 100 // int(divisor[i, c]))
                  for c, w in zip(cols.tolist(), weights.tolist()) if w)
        assert got[k] == num // int(den[i] if per_row else den[0])


@settings(max_examples=150, deadline=None)
@given(st.data(), st.integers(1, 6))
def test_load_rows_equal_python_ints(data: st.DataObject, n: int) -> None:
    big = 2**61
    # room ≤ allocatable (= divisor where the metric is fresh), −2^61 where it is not
    divisor = np.array(data.draw(st.lists(st.lists(st.integers(1, KERNEL_QUANTITY_BELOW - 1), min_size=2, max_size=2),
                                          min_size=n, max_size=n)), np.int64)
    room = np.array([[data.draw(st.one_of(st.just(-big), st.integers(-2**40, int(d)))) for d in row]
                     for row in divisor.tolist()], np.int64)
    e_cpu, e_mem = data.draw(Q), data.draw(Q)
    w_cpu, w_mem = data.draw(st.integers(0, 5)), data.draw(st.integers(1, 5))
    rows = _rows(n, data)
    got = kernels.load_score_rows(room, divisor, rows, e_cpu, e_mem, w_cpu, w_mem, w_cpu + w_mem)
    slack = room
    under = kernels.under_rows(slack, rows, e_cpu, e_mem)
    for k, i in enumerate(rows.tolist()):
        r0, r1 = int(room[i, 0]), int(room[i, 1])
        s = (w_cpu * (max(r0 - e_cpu, 0) * 100 // int(divisor[i, 0]))
             + w_mem * (max(r1 - e_mem, 0) * 100 // int(divisor[i, 1])))
        assert got[k] == s // (w_cpu + w_mem)
        assert bool(under[k]) == (r0 > e_cpu and r1 > e_mem)


@settings(max_examples=100, deadline=None)
@given(st.data(), st.integers(1, 6))
def test_fit_rows_equal_python_ints(data: st.DataObject, n: int) -> None:
    free = np.array(data.draw(st.lists(st.lists(st.integers(-2**62, 2**62), min_size=7, max_size=7),
                                       min_size=n, max_size=n)), np.int64)
    fit = np.array(data.draw(st.lists(st.integers(-2**62, 2**62), min_size=7, max_size=7)), np.int64)
    rows = _rows(n, data)
    got = kernels.fit_rows(free, rows, fit)
    for k, i in enumerate(rows.tolist()):
        assert bool(got[k]) == all(int(free[i, c]) >= int(fit[c]) for c in range(7))


def test_least_allocated_rows_beyond_the_kernel_bound_take_the_exact_array_path() -> None:
    # memory of 2^58 bytes: 100 × free overflows the kernel's int64 arithmetic; the row method must
    # still equal the full pass (and Python ints)
    table = NodeTable()
    for name, mem in (("small", 64 * 2**30), ("huge", 2**58)):
        table.upsert_node(NodeSpec(name=name, allocatable=Resources(cpu=8000, memory=mem, pods=110),
                                   capacity=Resources(cpu=8000, memory=mem, pods=110)))
    plugin = NodeResourcesFit()
    state = CycleState(now=0.0, table=table)
    plugin.begin_cycle(state)
    pod = make_pod_info(PodSpec(uid="p", name="p", requests=Resources(cpu=1000, memory=2**57)), 0.0)
    rows = np.array([1, 0, 1], np.intp)
    assert plugin.score_rows(state, pod, rows).tolist() == plugin.score(state, pod)[rows].tolist()
    want_huge = ((8000 - 1000) * 100 // 8000 + (2**58 - 2**57) * 100 // 2**58) // 2
    assert plugin.score_rows(state, pod, rows).tolist()[0] == want_huge


def test_warm_up_compiles_every_kernel() -> None:
    kernels.warm_up()
    for k in (kernels.fit_rows, kernels.least_allocated_rows, kernels.under_rows, kernels.load_score_rows):
        assert k.signatures, k


def test_outside_finds_any_score_beyond_the_range() -> None:
    scores = np.array([0, 100, 50], np.int64)
    assert not kernels.outside(scores, 0, 100)
    for bad in (-1, 101, -2**63, 2**63 - 1):
        assert kernels.outside(np.array([0, 100, bad, 3], np.int64), 0, 100), bad
    frozen = np.array([7, 101], np.int64)
    frozen.setflags(write=False)
    assert kernels.outside(frozen, 0, 100)
    assert not kernels.outside(np.zeros(0, np.int64), 0, 100)
