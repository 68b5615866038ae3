"""Issue 14 item 3 "nodes can be deleted": ``DELETE /v1/nodes/{name}`` and ``colo delete node`` through a real
scheduler service and API service (nats-server, redis-server). An empty node leaves the store, ``GET /v1/nodes``
and the scheduler's candidates; a busy one is refused (409 naming its pods) unless forced, when its pods end
``Failed``/``Deleted: node … deleted by api``; an unknown node is a 404."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import msgspec
import pytest
import pytest_asyncio
from sched_helpers import GI, MI, node, node_resource, pod

from colo import subjects
from colo.bus import MessageInfo
from colo.cli.connection import Connection
from colo.cli.delete_node import NodeBusy, NodeNotFound, delete_node, wait_gone
from colo.clock import VirtualClock
from colo.messages import (
    CPUInfo,
    EvictionCommand,
    GPUInfo,
    GPURequest,
    NodeDeleted,
    NodeSpec,
    NodeTopology,
    PodAdmitted,
    PodSpec,
    Resources,
)
from colo.runtime import ServiceRunner
from colo.settings import RuntimeSettings, load_runtime_settings
from colo.testing.fixtures import service_context
from colo_api.service import ApiService
from colo_api.settings import ApiSettings
from colo_scheduler.service import SchedulerService
from colo_scheduler.settings import SchedulerSettings

pytestmark = pytest.mark.integration

TOKEN = "node-deletion-token"


@pytest_asyncio.fixture
async def scheduler(bus_factory: Any, store: Any) -> SchedulerService:
    clock = VirtualClock(10.0)
    bus = await bus_factory("scheduler", clock, autostart=False)
    svc = SchedulerService(SchedulerSettings(seed=1))
    await svc.start(service_context(bus, store, clock))
    await bus.start_consumers()
    return svc


@pytest_asyncio.fixture
async def api(nats_url: str, redis_url: str, store: Any, scheduler: SchedulerService
              ) -> AsyncIterator[tuple[str, aiohttp.ClientSession]]:
    runner = ServiceRunner(ApiService(ApiSettings(token=TOKEN)),
                           RuntimeSettings(nats_url=nats_url, redis_url=redis_url, store_prefix=store.keys.prefix))
    await runner.start()
    http = aiohttp.ClientSession(headers={"Authorization": f"Bearer {TOKEN}"})
    try:
        yield f"http://127.0.0.1:{runner.http_port}", http
    finally:
        await http.close()
        await runner.stop()


async def _register(tester: Any, store: Any, name: str, cpu: int) -> None:
    spec = node(name, cpu=cpu, memory=8 * GI)
    await store.put_node(spec)
    await tester.publish(subjects.NODE_REGISTERED, spec, node=name)


async def _delete(api: tuple[str, aiohttp.ClientSession], path: str) -> tuple[int, Any]:
    url, http = api
    async with http.delete(url + path) as resp:
        return resp.status, await resp.json()


async def _node_names(api: tuple[str, aiohttp.ClientSession]) -> list[str]:
    url, http = api
    async with http.get(url + "/v1/nodes") as resp:
        assert resp.status == 200
        return [n["name"] for n in (await resp.json())["items"]]


async def test_delete_nodes_through_the_api(scheduler: SchedulerService, api: Any, bus_factory: Any,
                                            store: Any) -> None:
    tester = await bus_factory("tester")
    orders: list[EvictionCommand] = []

    async def on_evict(m: EvictionCommand) -> None:
        orders.append(m)

    await tester.subscribe(subjects.POD_EVICT, on_evict, durable="evict")
    await _register(tester, store, "busy", 4000)
    await _register(tester, store, "idle", 500)  # too small for the pod: it goes to busy
    web = msgspec.structs.replace(pod("shop-web", 1000, MI), name="web", namespace="shop")
    await tester.publish(subjects.POD_ADMITTED, PodAdmitted(spec=web, at=10.0))
    await scheduler.ctx.bus.settle()  # type: ignore[union-attr]
    assert (await scheduler.tick(10.0))["pods_bound"] == 1
    assert await store.bound_node("shop-web") == "busy"
    assert await _node_names(api) == ["busy", "idle"]

    status, out = await _delete(api, "/v1/nodes/idle")
    assert status == 202 and out == {"node": "idle", "force": False, "pods": []}
    assert await asyncio.wait_for(wait_gone(store, "idle", 10.0), 20)
    assert await _node_names(api) == ["busy"]
    assert scheduler.core.table.index["idle"] in scheduler.core.table.retired
    assert (scheduler.debug()["nodes"], scheduler.debug()["retired_nodes"]) == (1, 1)

    status, out = await _delete(api, "/v1/nodes/busy")
    assert status == 409 and out["problems"] == ["shop/web"] and "shop/web" in out["error"]
    assert await store.get_node("busy") is not None

    status, out = await _delete(api, "/v1/nodes/busy?force=true")
    assert status == 202 and out == {"node": "busy", "force": True, "pods": ["shop/web"]}
    assert await asyncio.wait_for(wait_gone(store, "busy", 10.0), 20)
    assert await _node_names(api) == []
    rec = await store.get_pod("shop-web")
    assert rec is not None and (rec.phase, rec.reason) == ("Failed", "Deleted: node busy deleted by api")
    assert await store.bound_node("shop-web") is None
    await tester.settle()
    assert [(o.uid, o.node, o.reason) for o in orders] == [("shop-web", "busy", "Deleted")]

    # neither node is a candidate any more
    await tester.publish(subjects.POD_ADMITTED, PodAdmitted(spec=pod("p2", 100, MI), at=11.0))
    await scheduler.ctx.bus.settle()  # type: ignore[union-attr]
    assert (await scheduler.tick(11.0))["pods_bound"] == 0
    # a node agent still running registers it again: it is a candidate again
    await _register(tester, store, "idle", 4000)
    await scheduler.ctx.bus.settle()  # type: ignore[union-attr]
    assert (await scheduler.tick(12.0))["pods_bound"] == 1
    assert await store.bound_node("p2") == "idle"

    assert (await _delete(api, "/v1/nodes/nowhere"))[0] == 404
    assert (await _delete(api, "/v1/nodes/idle?force=yes"))[0] == 400


async def test_a_node_registered_again_gets_its_batch_offer_back(scheduler: SchedulerService, api: Any,
                                                                  bus_factory: Any, store: Any) -> None:
    """slo-manager republishes an unchanged NodeResource only after ``max_publish_age_s``: the offer it made
    before the deletion holds again as soon as the node registers, without a new one."""
    tester = await bus_factory("tester")
    await _register(tester, store, "n1", 4000)
    await tester.publish(subjects.NODE_RESOURCE, node_resource("n1", batch_cpu=2000, batch_memory=GI), node="n1")
    await scheduler.ctx.bus.settle()  # type: ignore[union-attr]
    status, _ = await _delete(api, "/v1/nodes/n1")
    assert status == 202 and await asyncio.wait_for(wait_gone(store, "n1", 10.0), 20)
    await _register(tester, store, "n1", 4000)
    await tester.publish(subjects.POD_ADMITTED, PodAdmitted(spec=pod("be", batch_cpu=1000, batch_memory=MI), at=11.0))
    await scheduler.ctx.bus.settle()  # type: ignore[union-attr]
    assert (await scheduler.tick(11.0))["pods_bound"] == 1
    assert await store.bound_node("be") == "n1"
    offer = await store.get_node_resource("n1")  # the bind limits hold it again
    assert offer is not None and (offer.batch_cpu, offer.batch_memory) == (2000, GI)


async def test_colo_delete_node_waits_for_the_store(scheduler: SchedulerService, bus_factory: Any, store: Any,
                                                    nats_url: str, redis_url: str) -> None:
    tester = await bus_factory("tester")
    await _register(tester, store, "n1", 4000)
    await tester.publish(subjects.POD_ADMITTED, PodAdmitted(spec=pod("p1", 1000, MI), at=10.0))
    await scheduler.ctx.bus.settle()  # type: ignore[union-attr]
    assert (await scheduler.tick(10.0))["pods_bound"] == 1
    settings = load_runtime_settings({"COLO_NATS_URL": nats_url, "COLO_REDIS_URL": redis_url,
                                      "COLO_STORE_PREFIX": store.keys.prefix})
    conn = Connection(settings, "env", ())
    with pytest.raises(NodeBusy, match="p1"):
        await delete_node(conn, "n1", False, 5.0)
    pods, gone = await asyncio.wait_for(delete_node(conn, "n1", True, 20.0), 30)
    assert [p.spec.uid for p in pods] == ["p1"] and gone is True
    rec = await store.get_pod("p1")
    assert rec is not None and (rec.phase, rec.reason) == ("Failed", "Deleted: node n1 deleted by colo delete")
    with pytest.raises(NodeNotFound):
        await delete_node(conn, "n1", False, 1.0)


async def test_colo_delete_node_exit_codes(scheduler: SchedulerService, bus_factory: Any, store: Any, nats_url: str,
                                           redis_url: str, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """The command itself (its own event loop, in a thread): 1 refused naming the pod, 0 forced, 1 unknown."""
    from colo.cli import main as cli

    tester = await bus_factory("tester")
    await _register(tester, store, "n1", 4000)
    await tester.publish(subjects.POD_ADMITTED, PodAdmitted(spec=pod("p1", 1000, MI), at=10.0))
    await scheduler.ctx.bus.settle()  # type: ignore[union-attr]
    assert (await scheduler.tick(10.0))["pods_bound"] == 1
    for key, value in (("COLO_NATS_URL", nats_url), ("COLO_REDIS_URL", redis_url),
                       ("COLO_STORE_PREFIX", store.keys.prefix)):
        monkeypatch.setenv(key, value)
    assert await asyncio.to_thread(cli.main, ["delete", "node", "n1"]) == 1
    assert "node n1 still has 1 pod(s) bound: default/p1" in " ".join(capsys.readouterr().err.split())
    assert await asyncio.to_thread(cli.main, ["delete", "node", "n1", "--force", "--wait-s", "20"]) == 0
    assert "node/n1 deleted; its pods end: default/p1" in " ".join(capsys.readouterr().out.split())
    assert await asyncio.to_thread(cli.main, ["delete", "node", "n1"]) == 1
    assert await asyncio.to_thread(cli.main, ["delete", "pod", "p1", "--force"]) == 1


@pytest.mark.parametrize("force", [False, True], ids=["refused", "forced"])
async def test_a_pod_bound_during_the_deletion_is_not_left_on_a_gone_node(
        scheduler: SchedulerService, bus_factory: Any, store: Any, monkeypatch: pytest.MonkeyPatch,
        force: bool) -> None:
    """A scheduling cycle binds a pending pod to the node while the deletion runs (the same event loop runs
    both: here just before the node leaves the store). Not forced, the node must stay with the pod on it;
    forced, the pod must be ended too: never bound to a node the store no longer holds."""
    tester = await bus_factory("tester")
    await _register(tester, store, "n1", 4000)
    await tester.publish(subjects.POD_ADMITTED, PodAdmitted(spec=pod("p1", 1000, MI), at=10.0))
    await scheduler.ctx.bus.settle()  # type: ignore[union-attr]
    real_delete, cycles = store.delete_node, []

    async def cycle_then_delete(*args: Any, **kwargs: Any) -> Any:
        if not cycles:  # the first removal only
            cycles.append((await scheduler.tick(10.0))["pods_bound"])
        return await real_delete(*args, **kwargs)

    monkeypatch.setattr(store, "delete_node", cycle_then_delete)
    await tester.publish(subjects.NODE_DELETED, NodeDeleted(node="n1", at=11.0, by="test", force=force), node="n1")
    await scheduler.ctx.bus.settle()  # type: ignore[union-attr]
    rec = await store.get_pod("p1")
    assert cycles == [1] and rec is not None
    if force:
        assert await store.get_node("n1") is None
        assert (rec.phase, await store.bound_node("p1")) == ("Failed", None)
    else:
        assert await store.get_node("n1") is not None
        assert await store.bound_node("p1") == "n1"
        assert scheduler.core.table.index["n1"] not in scheduler.core.table.retired


async def test_batch_resources_that_arrive_before_the_node_registers_again_are_kept(
        scheduler: SchedulerService, bus_factory: Any, store: Any) -> None:
    """Deleted, then registered again by its node agent: slo-manager's NodeResource (another consumer) may be
    handled before the registration; it must be applied when the node registers, as for a new node, not dropped
    with the retired row's (then batch pods wait for the next NodeResource, up to 5 min)."""
    tester = await bus_factory("tester")
    await _register(tester, store, "n1", 4000)
    await scheduler.ctx.bus.settle()  # type: ignore[union-attr]
    await tester.publish(subjects.NODE_DELETED, NodeDeleted(node="n1", at=11.0, by="test"), node="n1")
    await scheduler.ctx.bus.settle()  # type: ignore[union-attr]
    assert await store.get_node("n1") is None
    offer = node_resource("n1", batch_cpu=2000, batch_memory=GI)
    await store.put_node_resource(offer)
    await tester.publish(subjects.NODE_RESOURCE, offer, node="n1")
    await scheduler.ctx.bus.settle()  # type: ignore[union-attr]
    await _register(tester, store, "n1", 4000)
    await tester.publish(subjects.POD_ADMITTED, PodAdmitted(spec=pod("b1", batch_cpu=1000, batch_memory=MI),
                                                            at=12.0))
    await scheduler.ctx.bus.settle()  # type: ignore[union-attr]
    assert (await scheduler.tick(12.0))["pods_bound"] == 1
    assert await store.bound_node("b1") == "n1"


async def test_a_forced_deletion_frees_gpus_and_cpusets_for_the_node_registered_again(
        scheduler: SchedulerService, bus_factory: Any, store: Any) -> None:
    """A pod holding both GPUs and an exclusive cpuset is ended with its node; registered again, the node gives
    the same devices and CPUs to the next pod (nothing of the ended pod's stays booked in the store or the table)."""
    tester = await bus_factory("tester")
    r = Resources(cpu=8000, memory=8 * GI, pods=110)
    spec = NodeSpec(name="g1", capacity=r, allocatable=r, cpus=8,
                    topology=NodeTopology(cpus=[CPUInfo(cpu=c, core=c) for c in range(8)]),
                    gpus=[GPUInfo(index=i, model="V100M16", memory_bytes=16 * GI) for i in range(2)])

    def gpu_pod(uid: str) -> PodSpec:
        return PodSpec(uid=uid, name=uid, priority=9500, qos_class="LSR", priority_class="prod", requests=Resources(cpu=4000, memory=GI),
                       limits=Resources(cpu=4000, memory=GI), gpu=GPURequest(count=2, milli=1000))

    await store.put_node(spec)
    await tester.publish(subjects.NODE_REGISTERED, spec, node="g1")
    await tester.publish(subjects.POD_ADMITTED, PodAdmitted(spec=gpu_pod("first"), at=10.0))
    await scheduler.ctx.bus.settle()  # type: ignore[union-attr]
    assert (await scheduler.tick(10.0))["pods_bound"] == 1
    first = await store.get_pod("first")
    assert first is not None and first.devices and first.cpuset
    await tester.publish(subjects.NODE_DELETED, NodeDeleted(node="g1", at=11.0, by="test", force=True), node="g1")
    await scheduler.ctx.bus.settle()  # type: ignore[union-attr]
    assert await store.get_node("g1") is None
    await store.put_node(spec)
    await tester.publish(subjects.NODE_REGISTERED, spec, node="g1")
    await tester.publish(subjects.POD_ADMITTED, PodAdmitted(spec=gpu_pod("second"), at=12.0))
    await scheduler.ctx.bus.settle()  # type: ignore[union-attr]
    assert (await scheduler.tick(12.0))["pods_bound"] == 1
    second = await store.get_pod("second")
    assert second is not None and (second.node, second.devices, second.cpuset) == ("g1", first.devices,
                                                                                   first.cpuset)


async def test_an_order_older_than_the_nodes_registration_is_not_applied(
        scheduler: SchedulerService, bus_factory: Any, store: Any) -> None:
    """COLO_NODES keeps node.deleted for good (16 a node) and a new durable consumer reads the stream from the start:
    a replica added later (here the second of two), or a scheduler whose consumer was lost, must not delete again
    a node that registered after the order."""
    tester = await bus_factory("tester")
    await _register(tester, store, "n1", 4000)
    await tester.publish(subjects.NODE_DELETED, NodeDeleted(node="n1", at=11.0, by="test"), node="n1")
    await scheduler.ctx.bus.settle()  # type: ignore[union-attr]
    assert await store.get_node("n1") is None
    await _register(tester, store, "n1", 4000)  # its node agent, still running
    await scheduler.ctx.bus.settle()  # type: ignore[union-attr]

    clock = VirtualClock(20.0)
    bus = await bus_factory("scheduler-r1", clock, autostart=False)
    second = SchedulerService(SchedulerSettings(seed=1, replicas=2, replica_index=1))
    await second.start(service_context(bus, store, clock))
    await bus.start_consumers()
    await bus.settle()
    assert second.node_deletion.totals["nodes_deleted"] == 0
    assert await store.get_node("n1") is not None
    assert second.core.table.index["n1"] not in second.core.table.retired


async def test_a_registration_older_than_the_deletion_does_not_bring_the_node_back(
        scheduler: SchedulerService, bus_factory: Any, store: Any) -> None:
    """node.registered and node.deleted have separate consumers: a registration published before the order may be
    handled after it (redelivered when its ack was lost, or its consumer behind). The node must stay out of the
    candidates: the store no longer holds it, every bind there would be refused ``unknown node``."""
    tester = await bus_factory("tester")
    await _register(tester, store, "n1", 4000)
    await scheduler.ctx.bus.settle()  # type: ignore[union-attr]
    seq = await tester.last_seq(subjects.NODE_REGISTERED, node="n1")
    await tester.publish(subjects.NODE_DELETED, NodeDeleted(node="n1", at=11.0, by="test"), node="n1")
    await scheduler.ctx.bus.settle()  # type: ignore[union-attr]
    assert await store.get_node("n1") is None
    info = MessageInfo(subject=subjects.NODE_REGISTERED.format(node="n1"), headers={}, stream_seq=seq,
                       num_delivered=2)
    await scheduler._on_node(node("n1", cpu=4000, memory=8 * GI), info)
    assert scheduler.core.table.index["n1"] in scheduler.core.table.retired
    await tester.publish(subjects.POD_ADMITTED, PodAdmitted(spec=pod("p1", 1000, MI), at=12.0))
    await scheduler.ctx.bus.settle()  # type: ignore[union-attr]
    assert (await scheduler.tick(12.0))["pods_bound"] == 0
