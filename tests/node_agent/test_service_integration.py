"""The node agent against real nats-server and redis-server (fixtures of colo.testing)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from colo import codec, subjects
from colo.bus import Bus
from colo.clock import VirtualClock
from colo.messages import (
    DeadLetter,
    EvictionCommand,
    NodeMetric,
    NodeResource,
    NodeSLO,
    NodeSpec,
    PodBound,
    PodRecord,
    PodSpec,
    PodStatus,
    QoSEvent,
    Resources,
    SimWorkload,
    cpuset_parse,
)
from colo.store import BindRequest, Store
from colo.testing.fixtures import BusFactory, service_context
from colo.testing.rig import TickRig
from colo_node_agent.service import NodeAgentService
from colo_node_agent.settings import NodeAgentSettings

pytestmark = pytest.mark.integration

G = 10**9
T0 = 1000.0
CAP = Resources(cpu=8000, memory=16 * G, pods=110)
NODES = [NodeSpec(name=n, capacity=CAP, allocatable=CAP, cpus=8) for n in ("n1", "n2")]


def ls_pod(uid: str) -> PodSpec:
    return PodSpec(uid=uid, name=uid, qos_class="LS", priority=9500, requests=Resources(cpu=1000, memory=G),
                   sim=SimWorkload(kind="series", step_s=60, cpu_util=[0.5], cpu_scale_milli=2000,
                                   memory_util=[0.5], memory_scale_bytes=G))


@dataclass(kw_only=True)
class Harness(TickRig[NodeAgentService]):
    """The agent on its own bus, a client bus collecting what it publishes, the store and the clock."""

    store: Store

    async def bind(self, spec: PodSpec, node: str) -> None:
        await self.store.put_pod(PodRecord(spec=spec))
        assert (await self.store.bind(spec.uid, node, spec.requests, self.clock.now())).ok
        await self.client.publish(subjects.POD_BOUND, PodBound(spec=spec, node=node, at=self.clock.now()),
                                  msg_id=f"bound-{spec.uid}", node=node)


def _collector(sink: list[Any]) -> Callable[[Any], Awaitable[None]]:
    async def collect(msg: Any) -> None:
        sink.append(msg)

    return collect


async def start_agent(bus_factory: BusFactory, store: Store, clock: VirtualClock, client: Bus | None = None,
                      seen: dict[str, list[Any]] | None = None) -> Harness:
    bus = await bus_factory("node-agent", clock=clock, retry_delay_s=0.01)
    ctx = service_context(bus, store, clock)
    # no scheduler releases what ends here: reconciliation would (tests/node_agent/test_reconcile.py)
    service = NodeAgentService(NodeAgentSettings(reconcile_interval_s=0), nodes=NODES)
    if client is None:
        client = await bus_factory("test-client")
        seen = {}
        for key, subject in (("status", subjects.POD_STATUS), ("metric", subjects.NODE_METRIC),
                             ("qos", subjects.NODE_QOS), ("registered", subjects.NODE_REGISTERED),
                             ("dlq", subjects.DEAD_LETTER)):
            await client.subscribe(subject, _collector(seen.setdefault(key, [])), durable=key)
    assert seen is not None
    await service.start(ctx)
    await bus.start_consumers()
    h = Harness(service=service, bus=bus, client=client, store=store, clock=clock, seen=seen)
    await h.settle()
    return h


async def test_bound_pod_runs_and_node_metrics_are_published(bus_factory: BusFactory, store: Store) -> None:
    h = await start_agent(bus_factory, store, VirtualClock(T0))
    assert sorted(n.name for n in await store.list_nodes()) == ["n1", "n2"]
    assert sorted(n.name for n in h.seen["registered"]) == ["n1", "n2"]
    # every node is registered with kubernetes.io/hostname = its name, in the store and on the bus
    assert {n.name: n.labels.get("kubernetes.io/hostname") for n in await store.list_nodes()} == {"n1": "n1", "n2": "n2"}
    assert all(n.labels["kubernetes.io/hostname"] == n.name for n in h.seen["registered"])
    await h.bind(ls_pod("ls-1"), "n1")
    await h.settle()
    statuses: list[PodStatus] = h.seen["status"]
    assert [(s.uid, s.node, s.phase, s.qos_class) for s in statuses] == [("ls-1", "n1", "Running", "LS")]
    rec = await store.get_pod("ls-1")
    assert rec is not None and rec.phase == "Running"
    stats = await h.tick(T0 + 60)
    metrics_: list[NodeMetric] = h.seen["metric"]
    assert sorted(m.node for m in metrics_) == ["n1", "n2"]
    n1 = next(m for m in metrics_ if m.node == "n1")
    assert [(p.uid, p.cpu, p.memory) for p in n1.pods] == [("ls-1", 1000, G // 2)]
    assert n1.node_usage.cpu == 1000 + 160
    assert stats["pods_running"] == 1 and stats["ls_cpu_demand_milli"] == pytest.approx(1000)
    assert stats["cpu_capacity_milli"] == 16000


async def test_eviction_order_and_slo(bus_factory: BusFactory, store: Store) -> None:
    h = await start_agent(bus_factory, store, VirtualClock(T0))
    assert h.service.backend is not None
    assert h.service.backend.fs[1].read("cpu/kubepods/besteffort/cpu.idle") == "1"  # default policy
    await h.bind(ls_pod("ls-1"), "n2")
    await h.client.publish(subjects.NODE_SLO, NodeSLO(node="n2", be_cpu_idle=False), node="n2")
    await h.client.publish(subjects.POD_EVICT, EvictionCommand(uid="ls-1", node="n2", reason="LowNodeLoad",
                                                               at=T0, by="descheduler"), node="n2")
    await h.settle()
    assert [(s.uid, s.phase, s.reason) for s in h.seen["status"]] == [
        ("ls-1", "Running", ""), ("ls-1", "Failed", "Evicted")]
    events: list[QoSEvent] = h.seen["qos"]
    assert [(e.kind, e.pods) for e in events] == [("evict", ["ls-1"])]
    assert not h.service.backend.slos[1].be_cpu_idle
    assert h.service.backend.fs[1].read("cpu/kubepods/besteffort/cpu.idle") == "0"
    assert h.service.backend.fs[0].read("cpu/kubepods/besteffort/cpu.idle") == "1"


@pytest.mark.parametrize(("subject", "payload", "reason"), [
    (subjects.POD_BOUND, b"not json", "malformed JSON"),
    (subjects.POD_BOUND, b'{"spec": {"uid": "x"}, "node": "n1", "at": 1}', "invalid PodBound"),
    (subjects.POD_BOUND, codec.encode(PodBound(spec=ls_pod("far"), node="elsewhere", at=1)),
     "not hosted by this agent"),
    (subjects.POD_BOUND, codec.encode(PodBound(spec=PodSpec(uid="", name="x"), node="n1", at=1)), "no uid"),
    (subjects.POD_BOUND, codec.encode(PodBound(spec=ls_pod("c"), node="n1", at=1, cpuset="3-1")), "not a CPU list"),
    (subjects.POD_EVICT, b"evict!", "malformed JSON"),
    (subjects.POD_EVICT, b'{"uid": 3}', "invalid EvictionCommand"),
    (subjects.NODE_SLO, b"{{", "malformed JSON"),
    (subjects.NODE_SLO, codec.encode(NodeSLO(node="n1", memory_evict={"threshold_percent": 170})),  # type: ignore[arg-type]
     "within 0..100"),
], ids=["bound-not-json", "bound-missing-fields", "bound-foreign-node", "bound-no-uid", "bound-bad-cpuset",
         "evict-not-json",
        "evict-wrong-type", "slo-not-json", "slo-out-of-range"])
async def test_garbage_is_dead_lettered_and_agent_keeps_running(
        bus_factory: BusFactory, store: Store, subject: Any, payload: bytes, reason: str) -> None:
    h = await start_agent(bus_factory, store, VirtualClock(T0))
    concrete = subject.format(node="n1")
    await h.client.js.publish(concrete, payload)
    await h.settle()
    dead: list[DeadLetter] = h.seen["dlq"]
    assert [d.subject for d in dead] == [concrete]
    assert reason in dead[0].reason and dead[0].service == "node-agent"
    await h.bind(ls_pod("after"), "n1")
    await h.settle()
    assert [s.uid for s in h.seen["status"]] == ["after"]
    assert (await h.tick(T0 + 60))["pods_running"] == 1


async def test_restart_adopts_bound_pods_and_starts_none_twice(bus_factory: BusFactory, store: Store) -> None:
    clock = VirtualClock(T0)
    h = await start_agent(bus_factory, store, clock)
    await h.bind(ls_pod("ls-1"), "n1")
    await h.settle()
    await h.tick(T0 + 60)
    await h.bus.close()
    # the pod keeps its binding in the store; a new agent process adopts it
    h2 = await start_agent(bus_factory, store, clock, client=h.client, seen=h.seen)
    assert h2.service.counters["adopted"] == 1
    assert h2.service.backend is not None and h2.service.backend.has_pod("ls-1")
    await h.client.publish(subjects.POD_BOUND, PodBound(spec=ls_pod("ls-1"), node="n1", at=T0),
                           msg_id="bound-again", node="n1")
    await h2.settle()
    assert h2.service.counters["started"] == 0
    assert [(s.uid, s.phase) for s in h.seen["status"]] == [("ls-1", "Running")]  # re-announce deduplicated
    assert (await h2.tick(T0 + 120))["pods_running"] == 1


async def test_batch_pod_succeeds_and_status_is_published(bus_factory: BusFactory, store: Store) -> None:
    h = await start_agent(bus_factory, store, VirtualClock(T0))
    job = PodSpec(uid="job-1", name="job-1", qos_class="BE", priority=5500,
                  requests=Resources(batch_cpu=1000, batch_memory=G),
                  sim=SimWorkload(kind="batch", cpu_milli=1000, duration_s=45, memory_bytes=G // 2))
    await store.put_node_resource(NodeResource(node="n1", batch_cpu=4000, batch_memory=4 * G))
    await h.bind(job, "n1")
    await h.settle()
    stats = await h.tick(T0 + 60)
    statuses: list[PodStatus] = h.seen["status"]
    assert [(s.uid, s.phase, s.reason, s.priority_class) for s in statuses] == [
        ("job-1", "Running", "", "batch"), ("job-1", "Succeeded", "Completed", "batch")]
    assert T0 + 45 <= statuses[1].at <= T0 + 50
    assert statuses[1].requests == job.requests
    assert (stats["batch_completed"], stats["pods_running"]) == (1, 0)


@pytest.mark.parametrize(("names", "instance", "same_as"), [
    (["n2", "n1"], "", ["n1", "n2"]),
    (["n1"], "", None),
    (["n1", "n2"], "rack-7", None),
], ids=["order-independent", "other-nodes-differ", "instance-wins"])
def test_agent_identity(names: list[str], instance: str, same_as: list[str] | None) -> None:
    from colo_node_agent.service import agent_id

    ident = agent_id(names, instance)
    if same_as is not None:
        assert ident == agent_id(same_as)
    else:
        assert ident != agent_id(["n1", "n2"])
    if instance:
        assert ident == instance


async def test_two_agents_each_get_their_own_nodes_pods(bus_factory: BusFactory, store: Store) -> None:
    clock = VirtualClock(T0)
    client = await bus_factory("test-client")
    statuses: list[PodStatus] = []
    await client.subscribe(subjects.POD_STATUS, _collector(statuses), durable="status")
    agents = []
    for spec in NODES:
        bus = await bus_factory("node-agent", clock=clock, retry_delay_s=0.01)
        ctx = service_context(bus, store, clock)
        agent = NodeAgentService(NodeAgentSettings(), nodes=[spec])
        await agent.start(ctx)
        await bus.start_consumers()
        agents.append((agent, bus))
    for uid, node in (("a", "n1"), ("b", "n2")):
        spec = ls_pod(uid)
        await store.put_pod(PodRecord(spec=spec))
        assert (await store.bind(uid, node, spec.requests, T0)).ok
        await client.publish(subjects.POD_BOUND, PodBound(spec=spec, node=node, at=T0), msg_id=f"bound-{uid}", node=node)
    for _, bus in agents:
        await bus.settle(timeout_s=20)
    await client.settle(timeout_s=20)
    assert sorted((s.uid, s.node, s.phase) for s in statuses) == [("a", "n1", "Running"), ("b", "n2", "Running")]


async def test_redelivered_bound_message_of_a_finished_pod_does_not_start_it_again(
        bus_factory: BusFactory, store: Store) -> None:
    h = await start_agent(bus_factory, store, VirtualClock(T0))
    job = PodSpec(uid="job-2", name="job-2", qos_class="BE", priority=5500,
                  requests=Resources(batch_cpu=1000, batch_memory=G),
                  sim=SimWorkload(kind="batch", cpu_milli=1000, duration_s=30, memory_bytes=G // 2))
    await store.put_node_resource(NodeResource(node="n1", batch_cpu=4000, batch_memory=4 * G))
    await h.bind(job, "n1")
    await h.settle()
    await h.tick(T0 + 60)
    assert [(s.uid, s.phase) for s in h.seen["status"]][-1] == ("job-2", "Succeeded")  # not released yet
    # the same PodBound again (a redelivery before or after the binding is released)
    await h.client.publish(subjects.POD_BOUND, PodBound(spec=job, node="n1", at=T0), msg_id="bound-job-2-again",
                           node="n1")
    await h.settle()
    await h.tick(T0 + 120)
    phases = [(s.uid, s.phase) for s in h.seen["status"]]
    assert phases == [("job-2", "Running"), ("job-2", "Succeeded")], phases
    assert h.service.counters["started"] == 1  # started once (a restart's status could be deduplicated)


async def test_memory_pressure_is_reported_at_once_between_reports(bus_factory: BusFactory, store: Store) -> None:
    """A node whose BE memory pressure begins publishes its NodeMetric in that tick, not at the next report."""
    h = await start_agent(bus_factory, store, VirtualClock(T0))
    await h.tick(T0 + 60)  # the regular report of both nodes
    reported = len(h.seen["metric"])
    be = PodSpec(uid="be-hog", name="be-hog", qos_class="BE", priority=5500, priority_class="batch",
                 requests=Resources(cpu=500, memory=G),
                 sim=SimWorkload(kind="batch", cpu_milli=500, memory_bytes=12 * G, duration_s=3600))
    await h.bind(be, "n1")  # 12 GB of 16: 75 % + system → evicted at once
    await h.settle()
    await h.tick(T0 + 80)  # 20 s after the report: not due
    fresh: list[NodeMetric] = h.seen["metric"][reported:]
    assert [m.node for m in fresh] == ["n1"]
    assert fresh[0].memory_pressure is not None and fresh[0].memory_pressure.last_evict_at > T0 + 60
    assert any(s.uid == "be-hog" and s.reason == "Evicted" for s in h.seen["status"])
    await h.tick(T0 + 100)  # still under pressure, nothing new: no extra report
    assert len(h.seen["metric"]) == reported + 1


@pytest.mark.parametrize(("order_reason", "status_reason"), [
    pytest.param("Deleted", "Deleted", id="deletion"),
    pytest.param("LowNodeLoad", "Evicted", id="descheduler-eviction"),
])
async def test_status_reason_of_an_order(bus_factory: BusFactory, store: Store, order_reason: str,
                                         status_reason: str) -> None:
    """A deletion (``colo delete pod``: the scheduler's order with reason ``Deleted``) ends the pod with reason
    ``Deleted``, which the scheduler does not requeue; any other order stays an ``Evicted`` (requeued)."""
    h = await start_agent(bus_factory, store, VirtualClock(T0))
    await h.bind(ls_pod("web"), "n1")
    await h.client.publish(subjects.POD_EVICT, EvictionCommand(uid="web", node="n1", reason=order_reason, at=T0,
                                                               by="colo delete"), node="n1")
    await h.settle()
    assert [(s.uid, s.phase, s.reason) for s in h.seen["status"]] == [
        ("web", "Running", ""), ("web", "Failed", status_reason)]


async def test_the_bound_cpuset_is_applied_and_survives_an_agent_restart(bus_factory: BusFactory,
                                                                         store: Store) -> None:
    """The scheduler's cpuset (``PodBound.cpuset``, docs/topology.md) becomes the LSR pod's cpuset.cpus; a new
    agent reads it back from the store's binding."""
    h = await start_agent(bus_factory, store, VirtualClock(T0))
    r = Resources(cpu=2000, memory=G)
    spec = PodSpec(uid="lsr", name="lsr", qos_class="LSR", priority=9500, requests=r, limits=r,
                   sim=SimWorkload(kind="series", step_s=60, cpu_util=[0.5], cpu_scale_milli=2000,
                                   memory_util=[0.5], memory_scale_bytes=G))
    await store.put_pod(PodRecord(spec=spec))
    bind = BindRequest(uid="lsr", node="n1", requests=r, at=T0, cpuset="6-7")
    assert (await store.bind_many([bind]))[0].ok
    await h.client.publish(subjects.POD_BOUND, PodBound(spec=spec, node="n1", at=T0, cpuset="6-7"),
                           msg_id="bound-lsr", node="n1")
    await h.tick(T0 + 60)
    assert h.service.backend is not None
    assert h.service.backend.fs[0].read("cpuset/kubepods/podlsr/cpuset.cpus") == "6-7"
    share = cpuset_parse(str(h.service.backend.fs[0].read("cpuset/kubepods/burstable/cpuset.cpus")))
    assert share and not {6, 7} & set(share)
    await h.service.stop()
    again = await start_agent(bus_factory, store, VirtualClock(T0 + 60), client=h.client, seen=h.seen)
    await again.tick(T0 + 120)
    assert again.service.backend is not None
    assert again.service.backend.fs[0].read("cpuset/kubepods/podlsr/cpuset.cpus") == "6-7"
