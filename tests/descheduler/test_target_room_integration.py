"""Migration targets over real NATS and Redis: the descheduler proposes only targets whose reservation the
store accepts (batch-memory offered by the slo-manager, the store's allocations), and a job that fails ends
its target booking at once."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from msgspec.structs import replace
from test_migration_integration import (
    node_agent,
    publish_metrics,
    seed_cluster,
    start_descheduler,
    wait_for,
)

from colo import subjects
from colo.clock import VirtualClock
from colo.messages import (
    EvictionCommand,
    NodeMetric,
    NodeResource,
    NodeSpec,
    PodMetric,
    PodRecord,
    PodSpec,
    Resources,
    Usage,
)
from colo.reservations import ReservationStore
from colo.store import Store
from colo.testing.fixtures import BusFactory
from colo_descheduler.targetroom import TargetRoom

pytestmark = pytest.mark.integration
GI = 1 << 30
NODE = Resources(cpu=10_000, memory=100 * GI, pods=110)
BE_REQUEST = Resources(batch_cpu=2000, batch_memory=4 * GI)


async def test_no_target_the_store_refuses(bus_factory: BusFactory, store: Store) -> None:
    """hot (90 % CPU) runs a BE pod requesting 4 GiB of batch-memory. By usage the emptiest low node is
    cold-a (10 %), but its slo-manager offer holds 1 GiB of batch-memory (the store would refuse the
    reservation: Insufficient kubernetes.io/batch-memory); cold-b (20 %) offers 16 GiB. The job reserves on
    cold-b and evicts; before, it went Pending on cold-a, refused, and was Aborted with the pod still on hot."""
    offers = {"hot": 16 * GI, "cold-a": GI, "cold-b": 16 * GI}
    for name, mem in offers.items():
        await store.put_node(NodeSpec(name=name, capacity=NODE, allocatable=NODE))
        await store.put_node_resource(NodeResource(node=name, batch_cpu=8000, batch_memory=mem, at=50.0))
    be = PodSpec(uid="be-1", name="be-1", priority=5500, app="batch", requests=BE_REQUEST)
    ds = PodSpec(uid="ds-1", name="ds-1", daemonset=True, requests=Resources(cpu=100))
    for spec in (be, ds):
        await store.put_pod(PodRecord(spec=spec, phase="Running", node="hot", updated_at=0.0, bound_at=0.0))
        assert (await store.bind(spec.uid, "hot", spec.requests, 0.0)).ok
    clock = VirtualClock(400.0)
    tester = await bus_factory("tester")
    evictions: list[EvictionCommand] = []
    await node_agent(tester, evictions)
    desched = await start_descheduler(bus_factory, store, clock)
    for name in offers:  # the offers also arrive as events (node.resource.*)
        await tester.publish(subjects.NODE_RESOURCE, NodeResource(node=name, batch_cpu=8000,
                                                                  batch_memory=offers[name], at=60.0), node=name)
    usage = {"hot": 9000, "cold-a": 1000, "cold-b": 2000}
    for name, cpu in usage.items():
        pods = [PodMetric(uid="be-1", cpu=3000, memory=GI), PodMetric(uid="ds-1", cpu=6000, memory=GI)] \
            if name == "hot" else []
        await tester.publish(subjects.NODE_METRIC, NodeMetric(node=name, at=400.0, window_s=300.0,
                                                              node_usage=Usage(cpu=cpu, memory=2 * GI), pods=pods),
                             node=name)
    await desched.ctx.bus.settle()  # type: ignore[union-attr]
    await wait_for(lambda: len(desched.cluster.room.offers) == 3 and len(desched.cluster.metrics) == 3)

    stats = await desched.tick(400.0)
    assert (stats["jobs_running"], stats["reservations_refused"]) == (1.0, 0.0)
    [job] = desched.jobs.jobs.values()  # type: ignore[union-attr]
    assert (job.uid, job.target) == ("be-1", "cold-b")
    [rsv] = await ReservationStore(store.redis, store.keys).available()
    assert rsv.node == "cold-b"
    await wait_for(lambda: [e.uid for e in evictions] == ["be-1"])


async def test_target_full_in_the_store_is_no_target(bus_factory: BusFactory, store: Store) -> None:
    """Another scheduler bound 9000 m on cold (its metric does not show it yet): the round reads the store's
    allocations and proposes no migration — before, a job went Pending there, refused (Insufficient cpu)."""
    await seed_cluster(store)
    assert (await store.bind("filler", "cold", Resources(cpu=9000), 50.0)).ok
    clock = VirtualClock(100.0)
    tester = await bus_factory("tester")
    await node_agent(tester, [])
    desched = await start_descheduler(bus_factory, store, clock)
    await publish_metrics(tester, 100.0)
    await desched.ctx.bus.settle()  # type: ignore[union-attr]
    stats = await desched.tick(100.0)
    assert (stats["jobs_created"], stats["reservations_refused"]) == (0.0, 0.0)
    assert desched.last_result.evictions == []


async def test_failed_job_ends_its_target_booking(bus_factory: BusFactory, store: Store) -> None:
    """The node agent never acts on the eviction: the job fails at its running timeout (30 s). Its target
    booking (+ the pod's usage on cold) ends with it, not at the 900 s booking TTL."""
    await seed_cluster(store)
    clock = VirtualClock(100.0)
    tester = await bus_factory("tester")
    sent: list[EvictionCommand] = []

    async def silent(cmd: EvictionCommand) -> None:
        sent.append(cmd)

    await tester.subscribe(subjects.POD_EVICT, silent, durable="agent-evict")
    desched = await start_descheduler(bus_factory, store, clock, migration_running_timeout_s=30.0)
    await publish_metrics(tester, 100.0)
    await desched.ctx.bus.settle()  # type: ignore[union-attr]
    assert (await desched.tick(100.0))["jobs_running"] == 1.0
    cold = {n.name: n for n in desched.cluster.fresh_loads(100.0, 180.0)}["cold"]
    assert cold.incoming[0] > 0  # booked while the job runs
    clock.advance_to(131.0)
    assert (await desched.tick(131.0))["jobs_failed"] == 1.0
    cold = {n.name: n for n in desched.cluster.fresh_loads(131.0, 180.0)}["cold"]
    assert (cold.incoming, cold.incoming_pods) == ((0, 0), 0)
    assert desched.cluster.room.held == {}


RES = st.builds(Resources, cpu=st.integers(0, 3000), memory=st.integers(0, 3000), batch_cpu=st.integers(0, 3000),
                batch_memory=st.integers(0, 3000), mid_cpu=st.integers(0, 1000), mid_memory=st.integers(0, 1000))
OFFERS = st.one_of(st.none(), st.builds(NodeResource, node=st.just("t"), batch_cpu=st.integers(0, 4000),
                                        batch_memory=st.integers(0, 4000), mid_cpu=st.integers(0, 2000),
                                        mid_memory=st.integers(0, 2000), reset=st.booleans()))


async def _agrees(redis_url: str, pods: int, offer: NodeResource | None, bound: list[Resources],
                  pod: Resources) -> None:
    store = await Store.connect(redis_url, prefix=f"room-{uuid.uuid4().hex[:12]}")
    try:
        alloc = Resources(cpu=4000, memory=4000, pods=pods)
        spec = NodeSpec(name="t", capacity=alloc, allocatable=alloc)
        await store.put_node(spec)
        room = TargetRoom()
        room.on_node(spec)
        if offer is not None:
            # the slo-manager writes 0 for a reset node; the room reads ``reset`` as 0 whatever the values
            stored = replace(offer, batch_cpu=0, batch_memory=0, mid_cpu=0, mid_memory=0) if offer.reset else offer
            await store.put_node_resource(stored)
            room.on_resource(offer)
        for i, req in enumerate(bound):
            await store.bind(f"b{i}", "t", req, 0.0)  # refused binds leave nothing, as in the store
        room.refresh(await store.allocated_many(["t"]))
        want = room.refusal(PodSpec(uid="p", name="p", requests=pod), "t", room.allocated("t", ()))
        got = await ReservationStore(store.redis, store.keys).reserve("rsv", "t", pod, at=1.0, ttl_s=60.0,
                                                                      owner_uid="p")
        assert got.ok == (want == ""), (want, got.reason)
    finally:
        await store.delete_all()
        await store.close()


@settings(max_examples=60, deadline=None)
@given(pods=st.integers(0, 3), offer=OFFERS, bound=st.lists(RES, max_size=4), pod=RES)
def test_room_agrees_with_the_store(redis_url: str, pods: int, offer: NodeResource | None,
                                    bound: list[Resources], pod: Resources) -> None:
    """Any node (pods limit 0 = none), offer (none, reset or not), pods bound by the store's own rules and
    pod requests: the room finds no shortfall exactly when the store accepts the reservation."""
    asyncio.run(_agrees(redis_url, pods, offer, bound, pod))
