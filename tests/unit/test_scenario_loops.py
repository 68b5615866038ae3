"""The evict→rebind counter of the memory loop scenario (colo.sim.loops): one row per named event sequence."""

from __future__ import annotations

from typing import Any

import pytest

from colo.messages import NodeResource, PodBound, PodSpec, QoSEvent
from colo.sim.loops import MEMORY_EVICTION_REASON, EvictRebindCounter, memory_loop_scenario


def evicted(node: str, at: float, *uids: str, reason: str = MEMORY_EVICTION_REASON) -> QoSEvent:
    return QoSEvent(node=node, kind="evict", at=at, reason=reason, pods=list(uids))


def bound(uid: str, node: str, at: float) -> PodBound:
    return PodBound(spec=PodSpec(uid=uid, name=uid), node=node, at=at)


def pressure(node: str, on: bool) -> NodeResource:
    return NodeResource(node=node, memory_pressure=on)


CASES: list[tuple[str, list[Any], int]] = [
    ("rebound-same-node-within-hold", [evicted("x", 100, "p"), bound("p", "x", 160)], 1),
    ("rebound-after-hold", [evicted("x", 100, "p"), bound("p", "x", 401)], 0),
    ("rebound-after-hold-under-pressure", [evicted("x", 100, "p"), pressure("x", True), bound("p", "x", 900)], 1),
    ("pressure-over-then-rebound", [evicted("x", 100, "p"), pressure("x", True), pressure("x", False),
                                    bound("p", "x", 900)], 0),
    ("rebound-elsewhere", [evicted("x", 100, "p"), bound("p", "y", 160)], 0),
    ("cpu-eviction-not-counted", [evicted("x", 100, "p", reason="BE cpu eviction"), bound("p", "x", 160)], 0),
    ("one-cycle-per-eviction", [evicted("x", 100, "p", "q"), bound("p", "x", 160), bound("p", "x", 170),
                                bound("q", "x", 200)], 2),
]


@pytest.mark.parametrize(("events", "cycles"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_evict_rebind_counter(events: list[Any], cycles: int) -> None:
    c = EvictRebindCounter()
    for e in events:
        if isinstance(e, QoSEvent):
            c.on_qos(e)
        elif isinstance(e, PodBound):
            c.on_bound(e)
        else:
            c.on_resource(e)
    assert c.count == cycles


def test_memory_loop_scenario_shape() -> None:
    s = memory_loop_scenario(minutes=30.0, be_pods=12)
    assert s.duration_s == 1800.0 and [n.name for n in s.nodes] == ["memloop-0"]
    ls, *be = [a.pod for a in s.arrivals]
    assert ls.qos_class == "LS" and len(be) == 12 and all(p.qos_class == "BE" for p in be)
    assert all(p.sim is not None and p.sim.memory_bytes == 3 * p.requests.memory for p in be)
