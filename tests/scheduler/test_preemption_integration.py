"""Priority preemption end to end over real NATS and Redis: a prod pod on a cluster full of batch pods is
nominated, its victims are evicted (``pod.evict``) by the scheduler service, a stand-in node agent ends them
(PodStatus Failed/Evicted), they are requeued, the prod pod is bound on the nominated node, and ``colo
explain`` shows the victims and why that node."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Callable

import pytest
from rich.console import Console

from colo import subjects
from colo.bus import Bus
from colo.cli.explain import render
from colo.clock import VirtualClock
from colo.messages import EvictionCommand, NodeSpec, PodAdmitted, PodRecord, PodSpec, PodStatus, Resources
from colo.store import Store
from colo.testing.fixtures import BusFactory, service_context
from colo_scheduler.service import SchedulerService
from colo_scheduler.settings import SchedulerSettings

pytestmark = pytest.mark.integration
GI = 1 << 30
NODES = ("n1", "n2")
REQUEST = Resources(cpu=2000, memory=4 * GI)
BATCH = {"b1": ("n1", 5500, 10.0), "b2": ("n1", 5500, 20.0), "b3": ("n2", 5600, 10.0), "b4": ("n2", 5600, 30.0)}
"""uid → (node, priority, bound at): every node full (4000 m of 4000 m)."""


async def wait_for(cond: Callable[[], bool], timeout_s: float = 5.0) -> None:
    for _ in range(int(timeout_s / 0.02)):
        if cond():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition not met in time")


def node_spec(name: str) -> NodeSpec:
    r = Resources(cpu=4000, memory=64 * GI)
    return NodeSpec(name=name, capacity=r, allocatable=r)


async def seed(store: Store) -> None:
    for name in NODES:
        await store.put_node(node_spec(name))
    for uid, (node, prio, at) in BATCH.items():
        spec = PodSpec(uid=uid, name=uid, priority=prio, app="etl", requests=REQUEST)
        await store.put_pod(PodRecord(spec=spec, phase="Running", node=node, updated_at=at, bound_at=at))
        assert (await store.bind(uid, node, REQUEST, at)).ok


async def node_agent(bus: Bus, evictions: list[EvictionCommand]) -> None:
    """Stands in for the node agents: an eviction order ends the pod at once (PodStatus Failed, Evicted)."""

    async def on_evict(cmd: EvictionCommand) -> None:
        evictions.append(cmd)
        await bus.publish(subjects.POD_STATUS, PodStatus(uid=cmd.uid, node=cmd.node, phase="Failed", at=cmd.at,
                                                         reason="Evicted", message=cmd.reason),
                          msg_id=f"status-{cmd.uid}-{cmd.at}", node=cmd.node)

    await bus.subscribe(subjects.POD_EVICT, on_evict, durable="agent-evict")


async def test_prod_pod_preempts_batch_pods(bus_factory: BusFactory, store: Store) -> None:
    await seed(store)
    clock = VirtualClock(100.0)
    tester = await bus_factory("tester")
    evictions: list[EvictionCommand] = []
    await node_agent(tester, evictions)
    bus = await bus_factory("scheduler", clock, autostart=False)
    sched = SchedulerService(SchedulerSettings(seed=1, prompt_cycles=False))
    await sched.start(service_context(bus, store, clock))
    await bus.start_consumers()
    for name in NODES:
        await tester.publish(subjects.NODE_REGISTERED, node_spec(name), node=name)

    web = PodSpec(uid="web-1", name="web-1", namespace="shop", priority=9500, requests=REQUEST)
    await tester.publish(subjects.POD_ADMITTED, PodAdmitted(spec=web, at=100.0), msg_id="admit-web-1")
    await wait_for(lambda: "web-1" in sched.core.queue)
    stats = await sched.tick(100.0)
    assert stats["pods_bound"] == 0

    # n1's victims have the lower priority: the most recently started one goes (2000 m are enough)
    await wait_for(lambda: len(evictions) == 1)
    assert [(e.uid, e.node, e.by, e.reason) for e in evictions] == [("b2", "n1", "scheduler",
                                                                    "Preempted by shop/web-1")]
    await wait_for(lambda: "b2" in sched.core.queue)  # released by its PodStatus and requeued
    rec = await store.get_pod("b2")
    assert rec is not None and rec.phase == "Pending" and await store.bound_node("b2") is None

    clock.advance_to(102.0)  # past the preemptor's backoff: placed on the nominated node
    stats = await sched.tick(102.0)
    assert await store.bound_node("web-1") == "n1"
    assert await store.bound_node("b1") == "n1" and await store.bound_node("b3") == "n2"
    assert len(evictions) == 1  # nothing evicted twice
    assert sched.totals["preemption_evictions"] == 1

    # colo explain: the nominated node, the victim, the criteria against the runner-up
    decision = sched.core.decision("web-1")
    assert decision is not None
    js = decision.to_json(sched.core.table.names)
    assert js["status"] == "Success" and js["node"] == "n1" and js["nominated_node"] == "n1"
    out = io.StringIO()
    render(js, Console(file=out, width=160))
    text = out.getvalue()
    print(text)
    assert "nominated to n1" in text and "b2" in text and "5500" in text and "runner-up n2" in text
    await sched.stop()
