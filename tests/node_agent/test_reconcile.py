"""The store rebuilt from the node agents (issue 15, observations 3 and 4): real nats-server and redis-server.

Observation 4, an empty Redis under running services: binds were refused "unknown node" until every agent
restarted. Observation 3, a rollback (the last second of an ``appendfsync everysec`` AOF lost): pods bound a
second time while still running, finished pods keeping their allocations for good. Each test failed on main
(no reconciliation: nodes, bindings and allocations stayed as the loss left them).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from colo import subjects, telemetry
from colo.bus import Bus
from colo.clock import VirtualClock
from colo.messages import (
    NodeResource,
    NodeSpec,
    PodBound,
    PodRecord,
    PodSpec,
    PodStatus,
    Resources,
    SimWorkload,
)
from colo.store import REASON_ALREADY_BOUND, REASON_NODE_UNKNOWN, Store
from colo.testing.fixtures import BusFactory, service_context
from colo_node_agent.service import NodeAgentService
from colo_node_agent.settings import NodeAgentSettings

pytestmark = pytest.mark.integration

G = 10**9
T0 = 1000.0
CAP = Resources(cpu=8000, memory=16 * G, pods=110)


def node(name: str) -> NodeSpec:
    return NodeSpec(name=name, capacity=CAP, allocatable=CAP, cpus=8)


def ls_pod(uid: str, **sim: Any) -> PodSpec:
    workload = dict(kind="series", step_s=60, cpu_util=[0.5], cpu_scale_milli=2000, memory_util=[0.5],
                    memory_scale_bytes=G) | sim
    return PodSpec(uid=uid, name=uid, qos_class="LS", priority=9500, requests=Resources(cpu=1000, memory=G),
                   sim=SimWorkload(**workload))


def fixes(kind: str) -> float:
    return telemetry.registry().get_sample_value("colo_reconcile_fixes_total", {"kind": kind}) or 0.0


@dataclass
class Cluster:
    """Agents (each on its own bus), a client bus standing in for the scheduler, the store, the clock."""

    agents: list[NodeAgentService]
    buses: list[Bus]
    client: Bus
    store: Store
    clock: VirtualClock
    statuses: list[PodStatus] = field(default_factory=list)
    registered: list[NodeSpec] = field(default_factory=list)

    async def settle(self) -> None:
        for bus in [*self.buses, self.client]:
            await bus.settle(timeout_s=20)

    async def tick(self, now: float) -> None:
        self.clock.advance_to(now)
        await self.settle()
        for agent in self.agents:
            await agent.tick(now)
        await self.settle()

    async def bind(self, spec: PodSpec, node: str, record: bool = True) -> None:
        """What the scheduler does: store, bind, announce."""
        if record:
            await self.store.put_pod(PodRecord(spec=spec))
        result = await self.store.bind(spec.uid, node, spec.requests, self.clock.now())
        assert result.ok, result.reason
        await self.client.publish(subjects.POD_BOUND, PodBound(spec=spec, node=node, at=self.clock.now()),
                                  msg_id=f"bound-{spec.uid}-{node}", node=node)
        await self.settle()

    async def roll_back_bind(self, uid: str, node: str, requests: Resources) -> None:
        """The bind of ``uid`` lost, as an AOF cut back past it leaves the store: no binding, the node's
        allocation without it, the record Pending again."""
        k, r = self.store.keys, self.store.redis
        await r.delete(k.binding(uid))
        await r.srem(k.node_pods(node), uid)
        await r.hincrby(k.allocated(node), "cpu", -requests.cpu)
        await r.hincrby(k.allocated(node), "memory", -requests.memory)
        await r.hincrby(k.allocated(node), "pods", -1)
        await r.hset(k.pod_state(uid), mapping={"phase": "Pending", "node": "", "bound_at": "0.0"})


def _collector(sink: list[Any]) -> Callable[[Any], Awaitable[None]]:
    async def collect(msg: Any) -> None:
        sink.append(msg)

    return collect


async def start(bus_factory: BusFactory, store: Store, groups: list[list[str]]) -> Cluster:
    clock = VirtualClock(T0)
    client = await bus_factory("test-client")
    cluster = Cluster(agents=[], buses=[], client=client, store=store, clock=clock)
    await client.subscribe(subjects.POD_STATUS, _collector(cluster.statuses), durable="status")
    await client.subscribe(subjects.NODE_REGISTERED, _collector(cluster.registered), durable="registered")
    for names in groups:
        bus = await bus_factory("node-agent", clock=clock, retry_delay_s=0.01)
        agent = NodeAgentService(NodeAgentSettings(reconcile_interval_s=10, reconcile_grace_s=30),
                                 nodes=[node(n) for n in names])
        await agent.start(service_context(bus, store, clock))
        await bus.start_consumers()
        cluster.agents.append(agent)
        cluster.buses.append(bus)
    await cluster.settle()
    return cluster


async def test_empty_store_is_rebuilt_from_the_agents(bus_factory: BusFactory, store: Store) -> None:
    c = await start(bus_factory, store, [["n1", "n2"]])
    await c.bind(ls_pod("ls-1"), "n1")
    assert [(s.uid, s.phase) for s in c.statuses] == [("ls-1", "Running")]
    before = fixes("node_registered"), fixes("binding_restored")
    await store.delete_all()  # Redis without persistence restarted, or a new one: nothing is left
    assert (await store.bind("new", "n1", Resources(cpu=100), T0)).reason.startswith(REASON_NODE_UNKNOWN)
    await c.tick(T0 + 10)  # the next reconciliation
    assert sorted(n.name for n in await store.list_nodes()) == ["n1", "n2"]
    assert sorted(n.name for n in c.registered) == ["n1", "n1", "n2", "n2"]  # announced again
    assert await store.bound_node("ls-1") == "n1"
    alloc = await store.allocated("n1")
    assert (alloc.cpu, alloc.memory, alloc.pods) == (1000, G, 1)
    rec = await store.get_pod("ls-1")
    assert rec is not None and (rec.phase, rec.node, rec.spec) == ("Running", "n1", ls_pod("ls-1"))
    assert c.agents[0].reconcile_fixes == {"node_registered": 2, "binding_restored": 1}
    assert (fixes("node_registered"), fixes("binding_restored")) == (before[0] + 2, before[1] + 1)
    assert (await store.bind("new", "n1", Resources(cpu=100), T0 + 10)).ok  # scheduling goes on
    assert (await store.bind("ls-1", "n2", Resources(cpu=100), T0 + 10)).reason == f"{REASON_ALREADY_BOUND} n1"
    await c.tick(T0 + 20)
    assert c.agents[0].reconcile_fixes == {"node_registered": 2, "binding_restored": 1}  # nothing more to fix


async def test_rolled_back_binds_are_restored_and_a_second_copy_stopped(bus_factory: BusFactory,
                                                                        store: Store) -> None:
    c = await start(bus_factory, store, [["n1"], ["n2"]])
    a1, a2 = c.agents
    for uid in ("early", "late"):
        await c.bind(ls_pod(uid), "n1")
        await c.roll_back_bind(uid, "n1", ls_pod(uid).requests)
    # a restarted scheduler sees "late" Pending and binds it again, on n2, before n1's agent reconciles
    await c.bind(ls_pod("late"), "n2", record=False)
    assert a1.backend is not None and a2.backend is not None
    assert a1.backend.has_pod("late") and a2.backend.has_pod("late")  # running twice
    await c.tick(T0 + 10)
    # "early" got its binding back: it can no longer be bound a second time
    assert (await store.bind("early", "n2", Resources(cpu=100), T0 + 10)).reason == f"{REASON_ALREADY_BOUND} n1"
    # "late" keeps the store's binding (n2, counted there); the copy on n1 is stopped, silently
    assert not a1.backend.has_pod("late") and a2.backend.has_pod("late")
    assert await store.bound_node("late") == "n2"
    assert (await store.allocated("n1")).pods == 1 and (await store.allocated("n2")).pods == 1
    assert a1.reconcile_fixes == {"binding_restored": 1, "duplicate_stopped": 1}
    assert a2.reconcile_fixes == {}
    assert [(s.uid, s.node, s.phase) for s in c.statuses if s.phase != "Running"] == []
    # a redelivered PodBound of "late" on n1 never starts the stopped copy again
    await c.client.publish(subjects.POD_BOUND, PodBound(spec=ls_pod("late"), node="n1", at=T0),
                           msg_id="bound-late-again", node="n1")
    await c.settle()
    assert not a1.backend.has_pod("late")


async def test_allocations_without_a_pod_are_released(bus_factory: BusFactory, store: Store) -> None:
    c = await start(bus_factory, store, [["n1"]])
    job = PodSpec(uid="job", name="job", qos_class="BE", priority=5500, requests=Resources(batch_cpu=1000),
                  sim=SimWorkload(kind="batch", cpu_milli=1000, duration_s=25))
    await store.put_node_resource(NodeResource(node="n1", batch_cpu=4000, batch_memory=4 * G))
    await c.bind(job, "n1")
    await c.tick(T0 + 30)
    assert [(s.uid, s.phase) for s in c.statuses] == [("job", "Running"), ("job", "Succeeded")]
    assert await store.release("job", "Succeeded", "Completed", T0 + 30, node="n1")  # the scheduler's release
    # the release is rolled back: the binding is there again and the record says Running
    assert (await store.bind("job", "n1", job.requests, T0)).ok
    await store.set_phase("job", "Running", "", T0)
    # bound here, never delivered to the agent (its PodBound lost with a scheduler), and one it cannot run
    await store.put_pod(PodRecord(spec=ls_pod("ghost")))
    assert (await store.bind("ghost", "n1", ls_pod("ghost").requests, T0 + 30)).ok
    bad = ls_pod("bad", step_s=0)
    await c.bind(bad, "n1")  # dead-lettered by the agent: step_s must be > 0
    await c.tick(T0 + 50)
    assert c.agents[0].reconcile_fixes == {}  # each is less than reconcile_grace_s old: statuses may be on the way
    await c.tick(T0 + 60)
    assert c.agents[0].reconcile_fixes == {"allocation_released": 3}
    rec = await store.get_pod("job")
    assert rec is not None and (rec.phase, rec.reason) == ("Succeeded", "Completed")
    for uid in ("job", "ghost", "bad"):
        assert await store.bound_node(uid) is None
    alloc = await store.allocated("n1")
    assert (alloc.cpu, alloc.batch_cpu, alloc.pods) == (0, 0, 0)
    ended = sorted((s.uid, s.phase, s.reason) for s in c.statuses if s.phase != "Running")
    assert ended == [("bad", "Failed", "CreateContainerConfigError"), ("ghost", "Failed", "Evicted"),
                     ("job", "Succeeded", "Completed"), ("job", "Succeeded", "Completed")]  # its end, again


async def test_a_pod_that_ended_between_ticks_is_left_to_the_scheduler(bus_factory: BusFactory,
                                                                       store: Store) -> None:
    """Found in the demo (a false fix each time a batch pod ended early in a 60 s tick): the grace runs from the
    tick that published the end, not from the end's time within the tick."""
    c = await start(bus_factory, store, [["n1"]])
    job = PodSpec(uid="job", name="job", qos_class="BE", priority=5500, requests=Resources(batch_cpu=1000),
                  sim=SimWorkload(kind="batch", cpu_milli=1000, duration_s=15))
    await store.put_node_resource(NodeResource(node="n1", batch_cpu=4000, batch_memory=4 * G))
    await c.bind(job, "n1")
    await c.tick(T0 + 60)  # ends at ~T0 + 20, its status goes out now: the scheduler has not seen it yet
    assert [(s.uid, s.phase) for s in c.statuses] == [("job", "Running"), ("job", "Succeeded")]
    assert c.agents[0].reconcile_fixes == {}
    assert await store.bound_node("job") == "n1"


async def test_an_agent_restarted_on_an_empty_store_reports_the_pods_it_lost(bus_factory: BusFactory,
                                                                            store: Store) -> None:
    """Observation 4's second half: a restarted sim agent dropped its running pods without a status event."""
    c = await start(bus_factory, store, [["n1", "n2"]])
    job = PodSpec(uid="job", name="job", qos_class="BE", priority=5500, requests=Resources(batch_cpu=1000),
                  sim=SimWorkload(kind="batch", cpu_milli=1000, duration_s=15))
    await store.put_node_resource(NodeResource(node="n1", batch_cpu=4000, batch_memory=4 * G))
    await c.bind(ls_pod("ls-1"), "n1")
    await c.bind(ls_pod("ls-2"), "n2")
    await c.bind(job, "n1")
    await c.tick(T0 + 20)  # the job ends (reported); ls-1 and ls-2 run
    await c.buses[0].close()  # the agent stops; its pods lived in its memory
    await store.delete_all()  # and the store is lost
    bus = await bus_factory("node-agent", clock=c.clock, retry_delay_s=0.01)
    agent = NodeAgentService(NodeAgentSettings(), nodes=[node("n1"), node("n2")])
    await agent.start(service_context(bus, store, c.clock))
    await bus.start_consumers()
    await bus.settle(timeout_s=20)
    await c.client.settle(timeout_s=20)
    lost = [(s.uid, s.node, s.phase, s.reason) for s in c.statuses if s.message.startswith("lost:")]
    assert lost == [("ls-1", "n1", "Failed", "Evicted"), ("ls-2", "n2", "Failed", "Evicted")]
    assert agent.counters["lost"] == 2


async def test_a_pod_ended_in_the_store_is_stopped_not_restored(bus_factory: BusFactory, store: Store) -> None:
    """``colo delete node n1 --force`` while n1's agent still runs: the scheduler ends the pod (``Failed``, its
    binding released) and removes the node; the eviction order has not reached the agent (slow, partitioned)
    when its reconciliation re-registers the node. The pod runs here without a binding, but it ended: it must be
    stopped, not bound again and flipped back to ``Running`` (a controller may have replaced it already)."""
    c = await start(bus_factory, store, [["n1"]])
    await c.bind(ls_pod("ls-1"), "n1")
    assert await store.release("ls-1", "Failed", "Deleted: node n1 deleted by test", T0 + 1, node="n1")
    await store.delete_node("n1")
    await c.tick(T0 + 10)  # the next reconciliation
    assert await store.get_node("n1") is not None  # registered again, as documented
    rec = await store.get_pod("ls-1")
    assert rec is not None and (rec.phase, rec.reason) == ("Failed", "Deleted: node n1 deleted by test")
    assert await store.bound_node("ls-1") is None and (await store.allocated("n1")).pods == 0
    backend = c.agents[0].backend
    assert backend is not None and not backend.has_pod("ls-1")
    assert c.agents[0].reconcile_fixes == {"node_registered": 1, "ended_stopped": 1}
    assert [(s.uid, s.phase) for s in c.statuses] == [("ls-1", "Running")]  # the end is the store's, not re-sent
