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
from colo.cli.connection import Connection
from colo.cli.delete_node import NodeBusy, NodeNotFound, delete_node, wait_gone
from colo.clock import VirtualClock
from colo.messages import EvictionCommand, PodAdmitted
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
