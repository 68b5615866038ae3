"""slo-manager against real nats-server and redis-server (fixtures of colo.testing)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import msgspec
import pytest
import pytest_asyncio

from colo import subjects
from colo.clock import VirtualClock, WallClock
from colo.messages import (
    BEBudgetState,
    DeadLetter,
    MemoryPressure,
    NodeMetric,
    NodeResource,
    NodeSLO,
    NodeSpec,
    PodAdmitted,
    PodBound,
    PodMetric,
    PodRejected,
    PodSpec,
    PodStatus,
    Resources,
    Tick,
    Usage,
)
from colo.runtime import ServiceRunner
from colo.settings import RuntimeSettings, load_settings
from colo.store import Store
from colo.testing.fixtures import BusFactory, service_context
from colo.testing.rig import TickRig
from colo_slo_manager.service import SloManagerService
from colo_slo_manager.settings import SloManagerSettings

pytestmark = pytest.mark.integration

G = 10**9
T0 = 1000.0


@dataclass(kw_only=True)
class Harness(TickRig[SloManagerService]):
    """The service on its own bus, and a client bus collecting what it publishes."""

    store: Store


def _collector(sink: list[Any]) -> Callable[[Any], Awaitable[None]]:
    async def collect(msg: Any) -> None:
        sink.append(msg)

    return collect


async def _harness(bus_factory: BusFactory, store: Store, settings: SloManagerSettings,
                   clock: Any = None) -> Harness:
    clock = VirtualClock(T0) if clock is None else clock
    bus = await bus_factory("slo-manager", clock=clock, retry_delay_s=0.01)
    client = await bus_factory("test-client")
    ctx = service_context(bus, store, clock)
    service = SloManagerService(settings)
    h = Harness(service=service, bus=bus, client=client, store=store, clock=clock)
    for key, subject in (("admitted", subjects.POD_ADMITTED), ("rejected", subjects.POD_REJECTED),
                         ("resource", subjects.NODE_RESOURCE), ("slo", subjects.NODE_SLO),
                         ("dlq", subjects.DEAD_LETTER)):
        await client.subscribe(subject, _collector(h.seen.setdefault(key, [])), durable=key)
    await service.start(ctx)
    return h


@pytest_asyncio.fixture
async def harness(bus_factory: BusFactory, store: Store) -> AsyncIterator[Harness]:
    yield await _harness(bus_factory, store, SloManagerSettings())


NODE = NodeSpec(name="n1", capacity=Resources(cpu=100_000, memory=120 * G, pods=110),
                allocatable=Resources(cpu=100_000, memory=120 * G, pods=110))


async def test_submitted_pod_admitted_with_batch_resources(harness: Harness) -> None:
    pod = PodSpec(uid="job-1", name="job-1", qos_class="BE", priority=5500,
                  requests=Resources(cpu=2000, memory=4 * G), limits=Resources(cpu=4000, memory=4 * G))
    bad = PodSpec(uid="bad-1", name="bad-1", qos_class="LSR", priority_class="batch",
                  requests=Resources(cpu=1500))
    await harness.client.publish(subjects.POD_SUBMITTED, pod, msg_id="job-1")
    await harness.client.publish(subjects.POD_SUBMITTED, bad, msg_id="bad-1")
    stats = await harness.tick(T0 + 1)
    admitted: list[PodAdmitted] = harness.seen["admitted"]
    rejected: list[PodRejected] = harness.seen["rejected"]
    assert [a.spec.uid for a in admitted] == ["job-1"]
    assert admitted[0].profile == "batch"
    assert admitted[0].spec.requests == Resources(batch_cpu=2000, batch_memory=4 * G)
    assert admitted[0].spec.limits == Resources(batch_cpu=4000, batch_memory=4 * G)
    assert [r.uid for r in rejected] == ["bad-1"]
    assert "requires priority class prod" in rejected[0].reason
    assert "whole, non-zero number of cores" in rejected[0].reason
    assert (stats["pods_admitted"], stats["pods_rejected"]) == (1, 1)


async def test_metric_to_node_resource_and_store(harness: Harness) -> None:
    h = harness
    await h.client.publish(subjects.NODE_REGISTERED, NODE, node="n1")
    ls = PodSpec(uid="ls-1", name="ls-1", priority=9500, requests=Resources(cpu=20_000, memory=20 * G),
                 limits=Resources(cpu=20_000, memory=20 * G))
    await h.client.publish(subjects.POD_BOUND, PodBound(spec=ls, node="n1", at=T0), node="n1")
    await h.client.publish(subjects.POD_STATUS, PodStatus(uid="ls-1", node="n1", phase="Running", at=T0 + 5),
                           node="n1")
    metric = NodeMetric(node="n1", at=T0 + 30, node_usage=Usage(cpu=30_000, memory=23 * G),  # system + ls-1
                        system_usage=Usage(cpu=7_000, memory=12 * G),
                        pods=[PodMetric(uid="ls-1", cpu=11_000, memory=11 * G)])
    await h.client.publish(subjects.NODE_METRIC, metric, node="n1")
    stats = await h.tick(T0 + 60)
    # usage policy, thresholds 60/65: 100 − 40 − 7 − 11 = 42 CPU; 120 − 42 − 12 − 11 = 55G
    want = (42_000, 55 * G)
    resources: list[NodeResource] = h.seen["resource"]
    assert [(r.node, r.batch_cpu, r.batch_memory, r.reset) for r in resources] == [("n1", *want, False)]
    stored = await h.store.get_node_resource("n1")
    assert stored is not None and (stored.batch_cpu, stored.batch_memory) == want
    assert (stats["nodes"], stats["batch_cpu"], stats["batch_memory"]) == (1, *want)
    slos: list[NodeSLO] = h.seen["slo"]
    assert [s.node for s in slos] == ["n1"]

    # Within the diff threshold and max age: nothing new; policy unchanged: no new NodeSLO.
    await h.client.publish(subjects.NODE_METRIC, NodeMetric(
        node="n1", at=T0 + 90, system_usage=Usage(cpu=8_000, memory=12 * G),
        pods=[PodMetric(uid="ls-1", cpu=12_000, memory=11 * G)]), node="n1")
    await h.tick(T0 + 120)
    assert len(h.seen["resource"]) == 1 and len(h.seen["slo"]) == 1

    # No fresh metric for more than 15 min: one reset, in the store too, and not repeated.
    await h.tick(T0 + 90 + 901)
    await h.tick(T0 + 90 + 961)
    assert [r.reset for r in h.seen["resource"]] == [False, True]
    stored = await h.store.get_node_resource("n1")
    assert stored is not None and stored.reset and stored.batch_cpu == 0


async def test_colocation_disabled_is_baseline(bus_factory: BusFactory, store: Store) -> None:
    h = await _harness(bus_factory, store, SloManagerSettings(colocation_enabled=False))
    pod = PodSpec(uid="job-2", name="job-2", qos_class="BE", priority=5500, requests=Resources(cpu=1000))
    await h.client.publish(subjects.POD_SUBMITTED, pod)
    await h.client.publish(subjects.NODE_REGISTERED, NODE, node="n1")
    await h.client.publish(subjects.NODE_METRIC, NodeMetric(node="n1", at=T0), node="n1")
    await h.tick(T0 + 60)
    assert [a.spec.requests for a in h.seen["admitted"]] == [Resources(cpu=1000)]
    assert h.seen["resource"] == []
    assert await h.store.get_node_resource("n1") is None
    assert [s.node for s in h.seen["slo"]] == ["n1"]


@pytest.mark.parametrize(
    ("subject", "keys"),
    [
        pytest.param(subjects.POD_SUBMITTED, {}, id="pod.submitted"),
        pytest.param(subjects.NODE_REGISTERED, {"node": "n1"}, id="node.registered"),
        pytest.param(subjects.NODE_METRIC, {"node": "n1"}, id="node.metric"),
        pytest.param(subjects.PROFILE_NODE, {"node": "n1"}, id="profile.node"),
        pytest.param(subjects.POD_BOUND, {"node": "n1"}, id="pod.bound"),
        pytest.param(subjects.POD_STATUS, {"node": "n1"}, id="pod.status"),
    ],
)
async def test_garbage_is_dead_lettered_and_service_keeps_running(harness: Harness, subject: Any,
                                                                   keys: dict[str, str]) -> None:
    h = harness
    await h.client.js.publish(subject.format(**keys), b"{not json")
    await h.client.js.publish(subject.format(**keys), b'{"unexpected": [1, 2]}')
    # Still working afterwards: admission and resources.
    await h.client.publish(subjects.POD_SUBMITTED, PodSpec(uid="after", name="after", priority=9500,
                                                                     requests=Resources(cpu=500)))
    await h.client.publish(subjects.NODE_REGISTERED, NODE, node="n1")
    await h.client.publish(subjects.NODE_METRIC, NodeMetric(node="n1", at=T0), node="n1")
    await h.tick(T0 + 10)
    dead: list[DeadLetter] = h.seen["dlq"]
    assert len(dead) == 2
    assert all(d.subject == subject.format(**keys) and d.service == "slo-manager" for d in dead)
    assert "malformed JSON" in dead[0].reason
    assert subject.type.__name__ in dead[1].reason
    assert [a.spec.uid for a in h.seen["admitted"]] == ["after"]
    assert [r.node for r in h.seen["resource"]] == ["n1"]


@pytest.mark.parametrize(
    ("subject", "keys", "msg", "fragment"),
    [
        pytest.param(subjects.NODE_REGISTERED, {"node": "n2"},
                     NodeSpec(name="n2", capacity=Resources(), allocatable=Resources()),
                     "capacity cpu/memory must be > 0", id="node-without-capacity"),
        pytest.param(subjects.NODE_REGISTERED, {"node": "n2"},
                     NodeSpec(name="n2", capacity=NODE.capacity, allocatable=NODE.allocatable,
                              reserved_cpus="3-1"), "malformed CPU list", id="node-bad-cpu-list"),
        pytest.param(subjects.NODE_METRIC, {"node": "n2"}, NodeMetric(node="n1", at=T0),
                     "on subject", id="metric-for-other-node"),
        pytest.param(subjects.POD_STATUS, {"node": "n2"}, PodStatus(uid="", node="n2", phase="Running", at=T0),
                     "without pod uid", id="status-without-uid"),
    ],
)
async def test_invalid_messages_dead_lettered(harness: Harness, subject: Any, keys: dict[str, str], msg: Any,
                                              fragment: str) -> None:
    h = harness
    await h.client.publish(subject, msg, **keys)
    await h.tick(T0 + 10)
    dead: list[DeadLetter] = h.seen["dlq"]
    assert len(dead) == 1 and fragment in dead[0].reason
    assert "n2" not in h.service.state.nodes


async def test_restart_restores_published_resources_from_store(bus_factory: BusFactory, store: Store) -> None:
    h = await _harness(bus_factory, store, SloManagerSettings())
    await h.client.publish(subjects.NODE_REGISTERED, NODE, node="n1")
    await h.store.put_node(NODE)
    await h.client.publish(subjects.NODE_METRIC, NodeMetric(node="n1", at=T0), node="n1")
    await h.tick(T0 + 10)
    assert len(h.seen["resource"]) == 1

    # A new instance (fresh memory, same store) knows what was published: no churn on its first tick.
    again = SloManagerService(SloManagerSettings())
    ctx = service_context(h.bus, store, h.clock)
    await h.bus.stop_consumers()
    fresh_bus = await bus_factory("slo-manager", clock=h.clock)
    ctx.bus = fresh_bus
    await again.start(ctx)
    assert "n1" in again.state.nodes and again.state.published["n1"].batch_cpu == 60_000
    await fresh_bus.settle(timeout_s=20)
    again.state.put_metric(NodeMetric(node="n1", at=T0 + 60))
    stats = await again.tick(T0 + 70)
    assert stats["resources_published"] == 0 and stats["batch_cpu"] == 60_000


async def test_runs_under_the_runtime_with_virtual_ticks(bus_factory: BusFactory, store: Store, nats_url: str,
                                                         redis_url: str) -> None:
    client = await bus_factory("test-client")
    runner = ServiceRunner(SloManagerService(SloManagerSettings()), RuntimeSettings(
        nats_url=nats_url, redis_url=redis_url, sim=True, store_prefix=store.keys.prefix))
    await runner.start()
    try:
        await client.publish(subjects.NODE_REGISTERED, NODE, node="n1")
        await client.publish(subjects.NODE_METRIC, NodeMetric(node="n1", at=50.0), node="n1")
        ack = await client.request_tick("slo-manager", Tick(seq=1, now=60.0, step_s=60.0), timeout_s=30)
        assert ack.error == "" and ack.seq == 1
        assert (ack.stats["nodes"], ack.stats["batch_cpu"], ack.stats["resources_published"]) == (1, 60_000, 1)
        stored = await store.get_node_resource("n1")
        assert stored is not None and stored.at == 60.0
    finally:
        await runner.stop()


async def test_one_tick_publishes_more_nodes_than_the_redis_pool_holds(harness: Harness) -> None:
    # redis-py's default pool holds 100 connections: one write per node in parallel exhausted it
    # (MaxConnectionsError on the first tick of a 101-node cluster). The tick writes in pipelines.
    h = harness
    names = [f"n{i:03d}" for i in range(250)]
    for name in names:
        spec = NodeSpec(name=name, capacity=NODE.capacity, allocatable=NODE.allocatable)
        await h.client.publish(subjects.NODE_REGISTERED, spec, node=name)
        await h.client.publish(subjects.NODE_METRIC, NodeMetric(
            node=name, at=T0, node_usage=Usage(cpu=10_000, memory=G),  # memory: the system's, no pods
            system_usage=Usage(cpu=1_000, memory=G)), node=name)
    stats = await h.tick(T0 + 30)
    assert stats["resources_published"] == 250
    stored = [await h.store.get_node_resource(name) for name in names]
    # 100 − 40 (margin) − 1 (system) = 59 CPU; 120 − 42 − 1 = 77G, on every node
    assert {(r.batch_cpu, r.batch_memory) if r else None for r in stored} == {(59_000, 77 * G)}
    limits = await h.store.redis.hgetall(h.store.keys.limits(names[-1]))
    assert int(limits[b"batch_cpu"]) == 59_000
    assert len(h.seen["resource"]) == 250


async def test_memory_pressure_is_published_when_the_metric_arrives(bus_factory: BusFactory, store: Store) -> None:
    """Under the wall clock, BE memory pressure in a metric withdraws batch-memory at once, before the next tick,
    and its end brings it back the same way (docs/slo-manager.md "BE memory"); under the virtual clock only the
    tick decides (reproducible runs)."""
    clock = WallClock()
    h = await _harness(bus_factory, store, SloManagerSettings(), clock=clock)
    await h.client.publish(subjects.NODE_REGISTERED, NODE, node="n1")
    t0 = clock.now()
    calm = NodeMetric(node="n1", at=t0, node_usage=Usage(cpu=10_000, memory=G), system_usage=Usage(cpu=1_000, memory=G))
    await h.client.publish(subjects.NODE_METRIC, calm, node="n1")
    await h.settle()
    await h.service.tick(clock.now())
    await h.settle()
    assert [(r.batch_memory, r.memory_pressure) for r in h.seen["resource"]] == [(77 * G, False)]
    pressure = MemoryPressure(since=t0, last_evict_at=t0, used_percent=70)
    await h.client.publish(subjects.NODE_METRIC, msgspec.structs.replace(calm, at=t0 + 1, memory_pressure=pressure),
                           node="n1")
    await h.settle()  # no tick
    assert [(r.batch_memory, r.memory_pressure, r.reason) for r in h.seen["resource"][1:]] == [
        (0, True, "memory pressure")]
    stored = await h.store.get_node_resource("n1")
    assert stored is not None and stored.memory_pressure and stored.batch_memory == 0
    await h.service.tick(clock.now())  # the tick finds nothing new to say
    await h.settle()
    assert len(h.seen["resource"]) == 2
    await h.client.publish(subjects.NODE_METRIC, msgspec.structs.replace(calm, at=t0 + 2), node="n1")
    await h.settle()
    assert [(r.batch_memory, r.memory_pressure, r.reason) for r in h.seen["resource"][2:]] == [
        (77 * G, False, "memory pressure over")]


async def test_memory_pressure_waits_for_the_tick_under_the_virtual_clock(harness: Harness) -> None:
    h = harness
    await h.client.publish(subjects.NODE_REGISTERED, NODE, node="n1")
    calm = NodeMetric(node="n1", at=T0, node_usage=Usage(cpu=10_000, memory=G), system_usage=Usage(cpu=1_000, memory=G))
    await h.client.publish(subjects.NODE_METRIC, calm, node="n1")
    await h.tick(T0 + 30)
    await h.client.publish(subjects.NODE_METRIC, msgspec.structs.replace(
        calm, at=T0 + 40, memory_pressure=MemoryPressure(since=T0 + 35)), node="n1")
    await h.settle()
    assert len(h.seen["resource"]) == 1
    await h.tick(T0 + 60)  # the damping does not hold the change back
    assert [(r.batch_memory, r.memory_pressure, r.reason) for r in h.seen["resource"][1:]] == [
        (0, True, "memory pressure")]


async def test_be_budget_setting_renders_nodeslo_and_the_offer_follows_the_node(bus_factory: BusFactory,
                                                                                store: Store) -> None:
    settings = load_settings(SloManagerSettings, "COLO_SLO_MANAGER", env={"COLO_SLO_MANAGER_BE_BUDGET_ENABLED": "1"})
    h = await _harness(bus_factory, store, settings)
    await h.client.publish(subjects.NODE_REGISTERED, NODE, node="n1")
    budget = BEBudgetState(threshold_percent=85.0, phase="grow", signal=0.11, baseline=0.1, baseline_samples=9)
    await h.client.publish(subjects.NODE_METRIC, NodeMetric(
        node="n1", at=T0 + 30, system_usage=Usage(cpu=7_000, memory=12 * G),
        pods=[PodMetric(uid="ls-1", cpu=11_000, memory=11 * G)], be_budget=budget), node="n1")
    await h.tick(T0 + 60)
    slos: list[NodeSLO] = h.seen["slo"]
    assert [(s.node, s.be_budget.enabled) for s in slos] == [("n1", True)]
    # reclaim 85 % instead of 60 %: 100 − 15 − 7 − 11 = 67 cores
    resources: list[NodeResource] = h.seen["resource"]
    assert [(r.node, r.batch_cpu) for r in resources] == [("n1", 67_000)]
    stored = await h.store.get_node_resource("n1")
    assert stored is not None and stored.batch_cpu == 67_000
