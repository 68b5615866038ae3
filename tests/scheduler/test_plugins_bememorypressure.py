"""BEMemoryPressure (Filter): no BE pod and no batch-memory pod on a node under BE memory pressure
(REFERENCE.md §11, first bullet), through the core scheduler with the default profile; one row per case."""

from __future__ import annotations

import msgspec
import pytest
from sched_helpers import GI, MI, node, node_resource, scheduler

from colo.messages import NodeResource, PodSpec, Resources
from colo_scheduler.plugins.bememorypressure import REASON

NOW = 100.0


def spec(uid: str, qos: str | None, prio: str | None, **req: int) -> PodSpec:
    return PodSpec(uid=uid, name=uid, qos_class=qos, priority_class=prio, requests=Resources(**req))  # type: ignore[arg-type]


def resource(name: str, pressure: bool, reset: bool = False) -> NodeResource:
    """batch-memory stays offered so that the rows test this filter alone (the slo-manager also sets it to 0
    under pressure, which NodeResourcesFit would reject first)."""
    nr = node_resource(name, batch_cpu=32_000, batch_memory=32 * GI, mid_cpu=8000, mid_memory=8 * GI)
    return msgspec.structs.replace(nr, memory_pressure=pressure, reset=reset)


BE = spec("be", "BE", "batch", batch_cpu=1000, batch_memory=GI)
BE_CPU_ONLY = spec("be-cpu", "BE", "batch", batch_cpu=1000)
LS = spec("ls", "LS", "prod", cpu=1000, memory=GI)
MID = spec("mid", "LS", "mid", mid_cpu=1000, mid_memory=512 * MI)

# (case, pod, pressure on node "a", pressure on node "b", nodes the pod may go to)
CASES = [
    ("be-no-pressure-anywhere", BE, False, False, {"a", "b"}),
    ("be-avoids-pressured-node", BE, True, False, {"b"}),
    ("be-cpu-only-is-still-be", BE_CPU_ONLY, True, False, {"b"}),
    ("be-every-node-pressured", BE, True, True, set()),
    ("ls-ignores-pressure", LS, True, True, {"a", "b"}),
    ("mid-ignores-pressure", MID, True, True, {"a", "b"}),
]


@pytest.mark.parametrize(("pod_spec", "pa", "pb", "allowed"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_be_memory_pressure(pod_spec: PodSpec, pa: bool, pb: bool, allowed: set[str]) -> None:
    s = scheduler()
    for name, pressure in (("a", pa), ("b", pb)):
        s.on_node(node(name, cpu=64_000, memory=128 * GI), NOW)
        s.on_node_resource(resource(name, pressure), NOW)
    s.add_pod(pod_spec, NOW)
    out = s.schedule_cycle(NOW)
    if allowed:
        assert [p.node for p in out.placements] and out.placements[0].node in allowed
        return
    assert not out.placements
    result = out.failures[0].result
    assert result.reasons == {REASON: 2}


def test_pressure_over_lets_be_back_and_reset_clears_it() -> None:
    s = scheduler()
    s.on_node(node("a", cpu=64_000, memory=128 * GI), NOW)
    s.on_node_resource(resource("a", True), NOW)
    s.add_pod(BE, NOW)
    assert not s.schedule_cycle(NOW).placements
    assert s.on_node_resource(resource("a", False), NOW + 60)  # the pressure-over NodeResource is a change
    assert [p.node for p in s.schedule_cycle(NOW + 61).placements] == ["a"]
    assert s.table.memory_pressure.tolist() == [False]
    s.on_node_resource(resource("a", True, reset=True), NOW + 120)
    assert s.table.memory_pressure.tolist() == [False]  # a reset offers nothing at all: no pressure to keep


def test_explain_names_the_pressure() -> None:
    s = scheduler()
    s.on_node(node("a", cpu=64_000, memory=128 * GI), NOW)
    s.on_node_resource(resource("a", True), NOW)
    s.add_pod(BE, NOW)
    s.schedule_cycle(NOW)
    record = s.explain("be", NOW)
    assert record is not None
    assert REASON in str(record.to_json(s.table.names))  # what `colo explain` prints
