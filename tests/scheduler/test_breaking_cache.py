"""The per-class cache against full recomputation over random sequences of cluster events and cycles.

Two cores, one with ``use_class_cache=False`` (every filter and score over every node for every
pod), get the same seed and the same sequence: nodes registered, relabelled, retainted, resized or
annotated between cycles, NodeResource and metric events, releases, pods of a few classes
interleaved (so that more than n/8 rows change between two pods of a class), DaemonSet pods,
selectors that match nothing, nodes with allocatable 0, zero nodes, Permit rejections and waits
that release rows in the middle of a cycle, dry runs. Every cycle must place and fail the same pods
on the same nodes with the same diagnosis, and every decision record must read the same.
"""

from __future__ import annotations

from typing import Any

import msgspec
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from random_cluster import GI, NOW, node_st, pod_st

from colo.messages import NodeMetric, NodeResource, NodeSpec, PodMetric, Resources, Usage
from colo_scheduler.core import Scheduler
from colo_scheduler.framework.interface import UNSCHEDULABLE, WAIT, CycleState, Status
from colo_scheduler.framework.registry import ProfileConfig, build_profile
from colo_scheduler.framework.runner import Framework
from colo_scheduler.plugins import default_profile_config, new_in_tree_registry
from colo_scheduler.podinfo import PodInfo
from colo_scheduler.settings import SchedulerSettings


class _Gate:
    """Permit: pods named ``*-no`` are rejected (their reservation is undone mid-cycle), pods named
    ``*-wait`` wait 3 s."""

    name = "Gate"
    events: frozenset[str] = frozenset()

    def permit(self, state: CycleState, pod: PodInfo, node: int) -> Status:
        if pod.uid.endswith("-no"):
            return Status(UNSCHEDULABLE, "gate closed")
        if pod.uid.endswith("-wait"):
            return Status(WAIT, "gate waits", timeout_s=3.0)
        return Status()


def _core(use_cache: bool, seed: int, scalar: bool, detail: str) -> Scheduler:
    s = SchedulerSettings(seed=seed, max_pods_per_cycle=25, decision_detail=detail)
    core = Scheduler(s, use_class_cache=use_cache)
    registry = new_in_tree_registry()
    gate = _Gate()
    registry.register(gate.name, lambda a, st_: gate)
    cfg = ProfileConfig(**{**default_profile_config(s).__dict__, "permit": ("Gate",)})
    core.framework = Framework(build_profile(cfg, registry, s), core.table, seed, use_cache)
    if not scalar:
        core.framework.cache._scalar = None  # re-sync changed rows with filter_rows / score_rows
    return core


def _outcome(core: Scheduler, out: Any) -> list[tuple[str, str | None, str]]:
    return sorted([(p.pod.uid, p.node, "") for p in out.placements]
                  + [(f.pod.uid, None, f.result.message) for f in out.failures])


def _record(core: Scheduler, uid: str) -> dict[str, object] | None:
    rec = core.decision(uid)
    if rec is None:
        return None
    js: dict[str, object] = rec.to_json(core.table.names)
    js.pop("decision_ms")
    return js


@st.composite
def _op(draw: st.DrawFn, k: int) -> tuple[str, Any]:
    kind = draw(st.sampled_from(("pods", "pods", "pods", "cycle", "cycle", "cycle", "cycle", "node", "relabel", "resize",
                                 "resource", "metric", "release", "explain")))
    if kind == "pods":
        spec = draw(pod_st(f"c{k}", small=draw(st.integers(0, 2)) > 0))
        if draw(st.integers(0, 5)) == 0:  # a selector no node matches
            spec = msgspec.structs.replace(spec, node_selector={"zone": "nowhere"})
        suffix = draw(st.sampled_from(("", "", "", "-no", "-wait")))
        return kind, (spec, draw(st.integers(1, 12)), suffix)
    if kind == "node":
        node_spec = draw(node_st(1000 + k))
        if draw(st.integers(0, 4)) == 0:  # a node with nothing allocatable
            node_spec = msgspec.structs.replace(node_spec, capacity=Resources(), allocatable=Resources())
        return kind, node_spec
    if kind in ("relabel", "resize"):
        return kind, (draw(st.integers(0, 10_000)), draw(node_st(0)))
    if kind == "resource":
        return kind, (draw(st.integers(0, 10_000)), draw(st.integers(0, 64)), draw(st.integers(0, 64)),
                      draw(st.booleans()))
    if kind == "metric":
        return kind, (draw(st.integers(0, 10_000)), draw(st.integers(0, 100)), draw(st.integers(0, 100)),
                      draw(st.sampled_from((0.0, 5.0, 400.0))))
    if kind == "release":
        return kind, draw(st.integers(0, 10_000))
    if kind == "explain":
        return kind, draw(st.integers(0, 10_000))
    return kind, draw(st.sampled_from((0.0, 1.0, 4.0)))


def _apply(core: Scheduler, op: tuple[str, Any], now: float, k: int) -> object:
    kind, arg = op
    t = core.table
    if kind == "pods":
        spec, count, suffix = arg
        for r in range(count):
            uid = f"{spec.uid}-{r}{suffix}"
            core.add_pod(msgspec.structs.replace(spec, uid=uid, name=uid, created_at=now), now)
        return None
    if kind == "node":
        return core.on_node(arg, now)
    if kind in ("relabel", "resize"):
        if not t.n:
            return None
        i, other = arg
        old = t.specs[i % t.n]
        if kind == "relabel":
            new = msgspec.structs.replace(old, labels=other.labels, taints=other.taints,
                                          annotations=other.annotations)
        else:
            new = msgspec.structs.replace(old, capacity=other.capacity, allocatable=other.allocatable)
        return core.on_node(new, now)
    if kind == "resource":
        if not t.n:
            return None
        i, cpu, mem, reset = arg
        return core.on_node_resource(NodeResource(node=t.names[i % t.n], batch_cpu=cpu * 1000,
                                                  batch_memory=mem * GI, mid_cpu=cpu * 500,
                                                  mid_memory=mem * GI // 2, reset=reset), now)
    if kind == "metric":
        if not t.n:
            return None
        i, cpu_pct, mem_pct, age = arg
        row = i % t.n
        a = t.specs[row].allocatable
        pods = [PodMetric(uid=u, cpu=100, memory=GI // 4) for u in list(t.node_pods[row])[:2]]
        return core.on_metric(NodeMetric(node=t.names[row], at=now - age,
                                         node_usage=Usage(cpu=a.cpu * cpu_pct // 100,
                                                          memory=a.memory * mem_pct // 100),
                                         pods=pods), now)
    if kind == "release":
        placed = sorted(core.framework.placed)
        if not placed:
            return None
        uid = placed[arg % len(placed)]
        core.release(uid, now)
        return uid
    if kind == "explain":
        queued = sorted(p.uid for p in core.queue.pods())
        if not queued:
            return None
        rec = core.explain(queued[arg % len(queued)], now)
        assert rec is not None
        js = rec.to_json(t.names)
        js.pop("decision_ms")
        return js
    out = core.schedule_cycle(now)
    for p in out.placements:  # every placement names a node that passes the filters
        assert p.node in t.index
    return _outcome(core, out), {u: _record(core, u) for u, _, _ in _outcome(core, out)}


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.data_too_large])
@given(nodes=st.lists(node_st(0), min_size=8, max_size=40), empty=st.integers(0, 9), data=st.data(),
       seed=st.integers(0, 3),
       scalar=st.booleans(), detail=st.sampled_from(("summary", "nodes")))
def test_cache_equals_full_recomputation_over_random_event_sequences(
        nodes: list[NodeSpec], empty: int, data: st.DataObject, seed: int, scalar: bool, detail: str) -> None:
    cores = [_core(True, seed, scalar, detail), _core(False, seed, scalar, detail)]
    if empty == 9:
        nodes = []  # zero nodes until a "node" event registers one
    for i, spec in enumerate(nodes):  # taints on a third of the nodes
        spec = msgspec.structs.replace(spec, name=f"n{i}", taints=spec.taints if i % 3 == 0 else [])
        for core in cores:
            core.on_node(spec, NOW)
    ops = []
    for k, (kind, arg) in enumerate(data.draw(st.lists(_op(0), min_size=4, max_size=30), label="ops")):
        if kind == "pods":  # one class per event: pods of earlier events keep theirs
            arg = (msgspec.structs.replace(arg[0], uid=f"c{k}"), arg[1], arg[2])
        elif kind == "node":
            arg = msgspec.structs.replace(arg, name=f"x{k}")
        ops.append((kind, arg))
    ops.append(("cycle", 0.0))
    now = NOW
    for k, op in enumerate(ops):
        if op[0] == "cycle":
            now += op[1]
        got = [_apply(core, op, now, k) for core in cores]
        assert got[0] == got[1], (k, op[0])
    cached = cores[0].framework.cache.stats
    event(f"incremental syncs: {min(cached['incremental'], 20) // 5 * 5}+")
    event(f"placed: {min(len(cores[0].framework.placed), 40) // 10 * 10}+")
