"""A node deleted (``colo delete node``: the scheduler removes its spec, NodeResource and bind limits from the
store) whose node agent registers it again must offer batch resources again at the next tick, not only once the
last NodeResource is older than ``max_publish_age_s`` (5 min): until a NodeResource is stored again the bind
script refuses every batch pod on it."""

from __future__ import annotations

import pytest

from colo import subjects
from colo.clock import VirtualClock
from colo.messages import NodeMetric, NodeResource, NodeSpec, Resources, Usage
from colo.store import Store
from colo.testing.fixtures import BusFactory, service_context
from colo.testing.rig import TickRig
from colo_slo_manager.service import SloManagerService
from colo_slo_manager.settings import SloManagerSettings

pytestmark = pytest.mark.integration

G = 10**9
T0 = 1000.0
NODE = NodeSpec(name="n1", capacity=Resources(cpu=100_000, memory=120 * G, pods=110),
                allocatable=Resources(cpu=100_000, memory=120 * G, pods=110))


def _metric(at: float) -> NodeMetric:
    return NodeMetric(node="n1", at=at, node_usage=Usage(cpu=10_000, memory=12 * G),
                      system_usage=Usage(cpu=7_000, memory=12 * G))


async def test_a_node_registered_again_after_its_deletion_offers_batch_resources_at_once(
        bus_factory: BusFactory, store: Store) -> None:
    clock = VirtualClock(T0)
    bus = await bus_factory("slo-manager", clock=clock, retry_delay_s=0.01)
    client = await bus_factory("test-client")
    seen: list[NodeResource] = []

    async def collect(msg: NodeResource) -> None:
        seen.append(msg)

    await client.subscribe(subjects.NODE_RESOURCE, collect, durable="resource")
    service = SloManagerService(SloManagerSettings())
    await service.start(service_context(bus, store, clock))
    tick = TickRig(service=service, bus=bus, client=client, clock=clock).tick

    await store.put_node(NODE)
    await client.publish(subjects.NODE_REGISTERED, NODE, node="n1")
    await client.publish(subjects.NODE_METRIC, _metric(T0 + 30), node="n1")
    await tick(T0 + 60)
    assert [r.reason for r in seen] == ["initial"]

    await store.delete_node("n1")  # as the scheduler applies node.deleted.n1
    await store.put_node(NODE)  # the node agent's reconciliation: registered again
    await client.publish(subjects.NODE_REGISTERED, NODE, node="n1")
    await client.publish(subjects.NODE_METRIC, _metric(T0 + 90), node="n1")
    await tick(T0 + 120)
    assert len(seen) == 2 and seen[1].batch_cpu == seen[0].batch_cpu > 0
    stored = await store.get_node_resource("n1")
    assert stored is not None and stored.batch_cpu == seen[0].batch_cpu
