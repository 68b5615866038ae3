"""Profiler inputs the fuzz run (tests/fuzz) found mishandled, each a regression test (real servers)."""

from __future__ import annotations

import pytest

from colo import codec, subjects
from colo.clock import VirtualClock
from colo.messages import DeadLetter, NodeMetric, NodeSpec, PodBound, PodSpec, PodStatus, Resources, Usage
from colo.store import Store
from colo.testing.fixtures import BusFactory, service_context
from colo_profiler.service import ProfilerService
from colo_profiler.settings import ProfilerSettings

pytestmark = pytest.mark.integration

G = 1 << 30
CAP = Resources(cpu=16000, memory=64 * G)
HUGE = 2**64  # msgspec decodes it into an int field; msgpack (the checkpoint) cannot encode it


@pytest.mark.parametrize(("subject", "msg", "keys"), [
    pytest.param(subjects.NODE_REGISTERED, NodeSpec(name="n1", capacity=CAP, allocatable=Resources(cpu=HUGE)),
                 {"node": "n1"}, id="node-allocatable"),
    pytest.param(subjects.POD_BOUND, PodBound(spec=PodSpec(uid="p1", name="p1", requests=Resources(cpu=HUGE)),
                                              node="n1", at=1000.0), {"node": "n1"}, id="pod-requests"),
    pytest.param(subjects.POD_STATUS, PodStatus(uid="p1", node="n1", phase="Running", at=1000.0,
                                                requests=Resources(memory=-HUGE)), {"node": "n1"},
                 id="status-requests"),
    pytest.param(subjects.NODE_METRIC, NodeMetric(node="n1", at=1000.0, node_usage=Usage(cpu=HUGE)),
                 {"node": "n1"}, id="metric-usage"),
    # with a metric at 1000 s already taken, 1.7e308 s made the histogram exponents overflow
    pytest.param(subjects.NODE_METRIC, NodeMetric(node="n1", at=1.7e308), {"node": "n1"}, id="metric-time"),
    pytest.param(subjects.POD_BOUND, PodBound(spec=PodSpec(uid="p1", name="p1"), node="n1", at=-1.7e308),
                 {"node": "n1"}, id="bound-time"),
])
async def test_out_of_range_quantities_are_refused_and_the_checkpoint_still_writes(
        bus_factory: BusFactory, store: Store, subject: subjects.Subject[object], msg: object,
        keys: dict[str, str]) -> None:
    """Found by the fuzz run: a NodeSpec or PodBound with 2^64 milli-cores was taken, and every later
    checkpoint (and the one at stop) raised ``OverflowError: can't serialize ints > 2**64 - 1``."""
    clock = VirtualClock(1000.0)
    bus = await bus_factory("profiler", clock=clock, retry_delay_s=0.01)
    client = await bus_factory("client")
    dead: list[DeadLetter] = []

    async def on_dead(m: DeadLetter) -> None:
        dead.append(m)

    await client.subscribe(subjects.DEAD_LETTER, on_dead, durable="dlq")
    service = ProfilerService(ProfilerSettings())
    await service.start(service_context(bus, store, clock))
    await client.publish(subjects.NODE_REGISTERED, NodeSpec(name="n1", capacity=CAP, allocatable=CAP), node="n1")
    await client.publish(subjects.NODE_METRIC, NodeMetric(node="n1", at=1000.0, node_usage=Usage(cpu=1000)),
                         node="n1")
    await client.js.publish(subject.format(**keys), codec.encode(msg))
    await bus.settle()
    await client.settle()
    assert await service.write_checkpoint(1060.0) > 0  # raised OverflowError before the fix
    assert [d.subject for d in dead] == [subject.format(**keys)]
    assert "out of range" in dead[0].reason or "within" in dead[0].reason
