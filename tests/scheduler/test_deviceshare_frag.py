"""FGD's fragmentation measure (plugins/deviceshare/frag.py) against its definition written out plainly,
on random nodes and target workloads, and the ΔF cache against fresh computation."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from colo_scheduler.plugins.deviceshare.frag import DeltaCache, fragment_deltas, node_fragmentation
from colo_scheduler.plugins.deviceshare.state import (
    MAX_GPUS,
    GpuNodeTable,
    PodShape,
    TargetWorkload,
    allocate,
    fits,
    pick_devices,
)

MODELS = ("A", "B", "C")


def plain_fragmentation(free: list[int], cpu: int, model: str, shapes: list[tuple[int, int, int, set[str], float]]
                        ) -> float:
    """Weng et al. §4: each target shape (cpu, milli per device, devices, allowed models, probability) sees as
    fragment the free GPU of devices too small for it when the shape fits the node, else all free GPU."""
    all_free = sum(free)
    expected = 0.0
    for s_cpu, s_milli, s_num, s_models, p in shapes:
        if s_milli == 0:  # CPU-only shapes use no GPU: all of it is a fragment to them (authors' code)
            fragment = all_free
        elif s_models and model not in s_models:
            fragment = all_free
        elif cpu < s_cpu or len([f for f in free if f >= s_milli]) < s_num:
            fragment = all_free
        else:
            fragment = sum(f for f in free if f < s_milli)
        expected += p * fragment
    return expected


node_st = st.tuples(st.integers(0, 64_000), st.integers(1, MAX_GPUS), st.sampled_from(MODELS),
                    st.lists(st.integers(0, 1000), min_size=MAX_GPUS, max_size=MAX_GPUS))
shape_st = st.tuples(st.integers(0, 40_000), st.sampled_from([0, 1, 50, 230, 470, 500, 810, 1000]),
                     st.sampled_from([1, 2, 4, 8]), st.sets(st.sampled_from(MODELS), max_size=2),
                     st.floats(0.01, 1.0))


def _build(nodes: list[tuple[int, int, str, list[int]]],
           shapes: list[tuple[int, int, int, set[str], float]]) -> tuple[GpuNodeTable, TargetWorkload,
                                                                        list[tuple[int, int, int, set[str], float]]]:
    table = GpuNodeTable.from_nodes([(cpu, 10**6, count, model) for cpu, count, model, _ in nodes])
    for i, (_, count, _, free) in enumerate(nodes):
        table.gpu_free[i, :count] = free[:count]
    plain = [(c, m, (1 if m < 1000 else k) if m else 0, models, p) for c, m, k, models, p in shapes]
    counts = {(c, m, k, sum(1 << table.model_names.index(x) for x in models if x in table.model_names)
               if models else 0): p for c, m, k, models, p in plain}
    target = TargetWorkload.from_counts(counts)
    # the target keeps shapes whose mask maps (models absent from the table map to no bit): rebuild the plain
    # list from the target so both sides see the same shapes and probabilities
    names = table.model_names
    plain = [(int(c), int(m), int(k), {names[b] for b in range(len(names)) if int(mask) >> b & 1}
              if mask else set(), float(p))
             for c, m, k, mask, p in zip(target.cpu, target.gpu_milli, target.num_gpu, target.models, target.prob,
                                         strict=True)]
    return table, target, plain


@settings(max_examples=80, deadline=None)
@given(st.lists(node_st, min_size=1, max_size=6), st.lists(shape_st, min_size=1, max_size=6))
def test_fragmentation_equals_plain_definition(nodes: list[tuple[int, int, str, list[int]]],
                                               shapes: list[tuple[int, int, int, set[str], float]]) -> None:
    table, target, plain = _build(nodes, shapes)
    got = node_fragmentation(table, target)
    for i, (cpu, count, model, free) in enumerate(nodes):
        if model not in table.model_names:
            continue
        assert abs(got[i] - plain_fragmentation(free[:count], cpu, model, plain)) < 1e-6


pod_st = st.tuples(st.integers(0, 20_000), st.sampled_from([(0, 0), (1, 100), (1, 470), (1, 810), (1, 1000),
                                                           (2, 1000), (4, 1000)]))


@settings(max_examples=80, deadline=None)
@given(st.lists(node_st, min_size=1, max_size=5), st.lists(shape_st, min_size=1, max_size=5), pod_st)
def test_delta_is_fragmentation_after_minus_before(nodes: list[tuple[int, int, str, list[int]]],
                                                   shapes: list[tuple[int, int, int, set[str], float]],
                                                   pod_spec: tuple[int, tuple[int, int]]) -> None:
    table, target, plain = _build(nodes, shapes)
    pod = PodShape(pod_spec[0], 0, pod_spec[1][0], pod_spec[1][1])
    delta, dev = fragment_deltas(table, pod, target)
    ok = fits(table, pod)
    for i, (cpu, count, model, _) in enumerate(nodes):
        free = [int(x) for x in table.gpu_free[i, :count]]
        before = plain_fragmentation(free, cpu, model, plain)
        if not ok[i]:
            assert delta[i] == np.inf
            continue
        if pod.is_share:  # the best device: least fragmentation after, lowest index on ties
            options = []
            for d in range(count):
                if free[d] >= pod.gpu_milli:
                    after = list(free)
                    after[d] -= pod.gpu_milli
                    options.append((plain_fragmentation(after, cpu - pod.cpu, model, plain), d))
            best = min(o[0] for o in options)
            assert abs(delta[i] - (best - before)) < 1e-6
            assert any(d == dev[i] and abs(f - best) < 1e-6 for f, d in options)
        else:
            after = list(free)
            for d in pick_devices(table.gpu_free[i], pod):
                after[d] -= pod.gpu_milli
            assert abs(delta[i] - (plain_fragmentation(after, cpu - pod.cpu, model, plain) - before)) < 1e-6


def test_cache_matches_fresh_computation_as_nodes_fill() -> None:
    rng = np.random.default_rng(7)
    table = GpuNodeTable.from_nodes([(int(rng.integers(8, 97)) * 1000, 10**6, int(rng.choice([1, 2, 4, 8])), "A")
                                     for _ in range(40)])
    pods = [PodShape(int(rng.integers(0, 12)) * 1000, 0, *[(1, 300), (1, 470), (1, 1000), (2, 1000), (0, 0)][
        int(rng.integers(0, 5))]) for _ in range(300)]
    target = TargetWorkload.from_pods(pods)
    cache = DeltaCache(40, target)
    for pod in pods:
        cached, cdev = fragment_deltas(table, pod, target, cache)
        fresh, fdev = fragment_deltas(table, pod, target)
        assert np.array_equal(cached, fresh) and np.array_equal(cdev, fdev)
        finite = np.flatnonzero(np.isfinite(cached))
        if finite.size:
            node = int(finite[np.argmin(cached[finite])])
            allocate(table, node, pod, pick_devices(table.gpu_free[node], pod, int(cdev[node])))
