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

import random
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from random_cluster import GI, NOW, node_st, pod_st

from colo.messages import (
    NodeMetric,
    NodeResource,
    NodeSpec,
    PodMetric,
    PodSpec,
    Resources,
    Taint,
    Toleration,
    Usage,
)
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
    return kind, draw(st.sampled_from((0.0, 1.0, 4.0, 175.0, 200.0)))  # metrics expire after 180 s


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


def _expiry_run(use_cache: bool) -> list[list[tuple[str, str | None]]]:
    core = Scheduler(SchedulerSettings(seed=0), use_class_cache=use_cache)
    for i in range(16):
        labels = {"pool": "y"} if i < 2 else {}
        core.on_node(NodeSpec(name=f"n{i}", capacity=Resources(cpu=64_000, memory=256 * GI),
                              allocatable=Resources(cpu=64_000, memory=256 * GI), labels=labels), 0.0)
        core.on_metric(NodeMetric(node=f"n{i}", at=0.0, node_usage=Usage(cpu=1_000, memory=GI)), 0.0)
    x = PodSpec(uid="x1", name="x1", requests=Resources(cpu=100, memory=GI), created_at=0.0)
    core.add_pod(x, 10.0)
    for k in range(10):  # many placements on two rows: a long change log, few distinct rows
        core.add_pod(PodSpec(uid=f"y{k}", name=f"y{k}", requests=Resources(cpu=100, memory=GI),
                             node_selector={"pool": "y"}, created_at=1.0 + k), 10.0)
    trace = []
    out = core.schedule_cycle(10.0)
    trace.append(sorted([(p.pod.uid, p.node) for p in out.placements] + [(f.pod.uid, None) for f in out.failures]))
    core.add_pod(msgspec.structs.replace(x, uid="x2", name="x2"), 200.0)
    out = core.schedule_cycle(200.0)  # every metric is 200 s old now: expired (180 s)
    trace.append(sorted([(p.pod.uid, p.node) for p in out.placements] + [(f.pod.uid, None) for f in out.failures]))
    return trace


def test_metrics_expiring_between_cycles_after_a_busy_cycle_reach_kept_class_entries() -> None:
    """A class entry kept from the previous cycle must see the rows whose metric expired meanwhile, also
    when the previous cycle logged many changes (LoadAware then recomputed its per-cycle arrays in full,
    which did not mark the rows whose freshness flipped: the entry kept them feasible)."""
    cached, full = _expiry_run(True), _expiry_run(False)
    assert full[1] == [("x2", None)]  # every node's metric expired
    assert cached == full


@pytest.mark.parametrize("seed", [1, 4, 9, 16])
def test_cache_equals_full_recomputation_on_busy_cycles_with_time_jumps(seed: int) -> None:
    """Hundreds of nodes and pods of a few classes (Permit rejections and waits among them), up to 200
    admitted per cycle, metrics, relabels and releases between cycles and clock jumps of up to 179 s (metrics
    expire): kept class entries must give the decisions and records of full recomputation."""
    rng = random.Random(seed)
    scalar = rng.random() < 0.5
    detail = rng.choice(["summary", "nodes"])
    cores = [_core(True, seed, scalar, detail), _core(False, seed, scalar, detail)]
    n = rng.choice([50, 200, 400])
    now = 1000.0
    for i in range(n):
        cpu, mem = rng.choice([0, 4_000, 8_000, 16_000]), rng.choice([0, 8, 16]) * GI
        taints = [Taint(key="gpu", value="1", effect="NoSchedule")] if rng.random() < 0.1 else []
        spec = NodeSpec(name=f"n{i}", capacity=Resources(cpu=cpu, memory=mem, pods=rng.choice([0, 3, 8])),
                        allocatable=Resources(cpu=cpu, memory=mem, pods=rng.choice([0, 3, 8])),
                        labels={"zone": rng.choice("abc")}, taints=taints)
        events: list[Any] = [("node", spec)]
        if rng.random() < 0.5:
            events.append(("resource", NodeResource(node=spec.name, batch_cpu=rng.randrange(0, 8_000),
                                                    batch_memory=rng.randrange(0, 8) * GI)))
        if rng.random() < 0.7:
            events.append(("metric", NodeMetric(node=spec.name, at=now - rng.choice([1, 400]),
                                                node_usage=Usage(cpu=rng.randrange(0, 6_000),
                                                                 memory=rng.randrange(0, 8) * GI))))
        for core in cores:
            for kind, ev in events:
                {"node": core.on_node, "resource": core.on_node_resource, "metric": core.on_metric}[kind](ev, now)
    classes = []
    for _ in range(rng.randint(2, 8)):
        cpu, mem, app = rng.choice([100, 500, 1_000, 2_000]), rng.choice([1, 2, 4]) * GI // 4, rng.choice(["", "web"])
        suffix = rng.choice(["", "", "", "-no", "-wait"])
        if rng.random() < 0.3:
            spec = PodSpec(uid="c", name="c", requests=Resources(batch_cpu=cpu, batch_memory=mem),
                           limits=Resources(batch_cpu=cpu, batch_memory=mem), priority_class="batch",
                           qos_class="BE", app=app)
        else:
            spec = PodSpec(uid="c", name="c", requests=Resources(cpu=cpu, memory=mem),
                           limits=Resources(cpu=2 * cpu), app=app,
                           max_instance_per_node=rng.choice([-1, 1, 2]) if app else -1,
                           node_selector={"zone": rng.choice("abcz")} if rng.random() < 0.3 else {},
                           tolerations=[Toleration(key="gpu", operator="Exists")] if rng.random() < 0.3 else [],
                           daemonset=rng.random() < 0.1)
        classes.append((spec, suffix))
    uid = 0
    for cycle in range(8):
        for _ in range(rng.randint(0, 200)):
            spec, suffix = rng.choice(classes)
            pod_spec = msgspec.structs.replace(spec, uid=f"p{uid}{suffix}", name=f"p{uid}")
            uid += 1
            for core in cores:
                core.add_pod(pod_spec, now)
        for _ in range(rng.randint(0, 10)):
            i, r = rng.randrange(n), rng.random()
            if r < 0.3:
                m = NodeMetric(node=f"n{i}", at=now, node_usage=Usage(cpu=rng.randrange(0, 6_000),
                                                                      memory=rng.randrange(0, 8) * GI))
                for core in cores:
                    core.on_metric(m, now)
            elif r < 0.5:
                relabelled = msgspec.structs.replace(cores[0].table.specs[i], labels={"zone": rng.choice("abc")})
                for core in cores:
                    core.on_node(relabelled, now)
            elif cores[0].framework.placed:
                victim = sorted(cores[0].framework.placed)[rng.randrange(len(cores[0].framework.placed))]
                for core in cores:
                    core.release(victim, now)
        outs = [core.schedule_cycle(now) for core in cores]
        assert _outcome(cores[0], outs[0]) == _outcome(cores[1], outs[1]), cycle
        for u, _, _ in _outcome(cores[0], outs[0]):
            assert _record(cores[0], u) == _record(cores[1], u), (cycle, u)
        now += rng.choice([0.5, 1, 5, 100, 179])
    assert cores[0].framework.cache.stats["incremental"] > 0
