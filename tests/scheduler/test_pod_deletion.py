"""Issue 14 "pods can be deleted": ``pod.deleted`` through a real scheduler service (nats-server, redis-server).
A pending pod leaves the queue and is marked ``Failed``/``Deleted`` in the store (never bound afterwards); a bound
pod gets an eviction with reason ``Deleted`` for its node agent, and its ``Failed``/``Deleted`` status frees it
without requeueing it; ``colo delete`` (:func:`colo.cli.delete.delete_pod`) waits for the store to show it."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import pytest
from sched_helpers import GI, MI, node, pod

from colo import subjects
from colo.cli.connection import Connection
from colo.cli.delete import delete_pod, deletion_id
from colo.clock import VirtualClock
from colo.messages import EvictionCommand, PodAdmitted, PodDeleted, PodStatus
from colo.settings import load_runtime_settings
from colo.testing.fixtures import service_context
from colo_scheduler.service import SchedulerService
from colo_scheduler.settings import SchedulerSettings

pytestmark = pytest.mark.integration


async def _start(bus_factory: Any, store: Any) -> SchedulerService:
    clock = VirtualClock(10.0)
    bus = await bus_factory("scheduler", clock, autostart=False)
    svc = SchedulerService(SchedulerSettings(seed=1))
    await svc.start(service_context(bus, store, clock))
    await bus.start_consumers()
    return svc


async def test_pending_pod_leaves_the_queue_and_is_never_bound(bus_factory: Any, store: Any) -> None:
    svc = await _start(bus_factory, store)
    tester = await bus_factory("tester")
    await tester.publish(subjects.POD_ADMITTED, PodAdmitted(spec=pod("p1", 1000, MI), at=10.0))
    await svc.ctx.bus.settle()  # type: ignore[union-attr]
    await svc.tick(10.0)  # no node: unschedulable
    assert "p1" in svc.core.queue
    await tester.publish(subjects.POD_DELETED, PodDeleted(uid="p1", at=11.0, by="alice"))
    await svc.ctx.bus.settle()  # type: ignore[union-attr]
    assert "p1" not in svc.core.queue
    rec = await store.get_pod("p1")
    assert rec is not None and (rec.phase, rec.reason, rec.node) == ("Failed", "Deleted: alice", "")
    spec = node("n1", cpu=4000, memory=8 * GI)
    await store.put_node(spec)
    await tester.publish(subjects.NODE_REGISTERED, spec, node="n1")
    await svc.ctx.bus.settle()  # type: ignore[union-attr]
    assert (await svc.tick(12.0))["pods_bound"] == 0
    assert await store.bound_node("p1") is None


async def test_bound_pod_is_evicted_as_deleted_and_not_requeued(bus_factory: Any, store: Any) -> None:
    svc = await _start(bus_factory, store)
    tester = await bus_factory("tester")
    orders: list[EvictionCommand] = []

    async def on_evict(m: EvictionCommand) -> None:
        orders.append(m)

    await tester.subscribe(subjects.POD_EVICT, on_evict, durable="evict")
    spec = node("n1", cpu=4000, memory=8 * GI)
    await store.put_node(spec)
    await tester.publish(subjects.NODE_REGISTERED, spec, node="n1")
    await tester.publish(subjects.POD_ADMITTED, PodAdmitted(spec=pod("p1", 1000, MI), at=10.0))
    await svc.ctx.bus.settle()  # type: ignore[union-attr]
    assert (await svc.tick(10.0))["pods_bound"] == 1
    # with the message id colo delete gives it (the eviction, on the same stream, must not share it)
    await tester.publish(subjects.POD_DELETED, PodDeleted(uid="p1", at=11.0), msg_id=deletion_id("p1", 11.0))
    await svc.ctx.bus.settle()  # type: ignore[union-attr]
    await tester.settle()
    assert [(o.uid, o.node, o.reason, o.by) for o in orders] == [("p1", "n1", "Deleted", "colo delete")]
    # the node agent stops it and reports it (test_service_integration: reason Deleted for a deletion)
    await tester.publish(subjects.POD_STATUS, PodStatus(uid="p1", node="n1", phase="Failed", at=12.0,
                                                        reason="Deleted"), node="n1")
    await svc.ctx.bus.settle()  # type: ignore[union-attr]
    rec = await store.get_pod("p1")
    assert rec is not None and (rec.phase, rec.reason) == ("Failed", "Deleted")
    assert await store.bound_node("p1") is None and "p1" not in svc.core.queue
    assert (await store.allocated("n1")).cpu == 0
    # deleted, then submitted again (kubectl delete + apply): admitted, it is queued again
    assert await store.admit_pending([pod("p1", 1000, MI)], 13.0) == [True]


async def test_colo_delete_waits_for_the_store(bus_factory: Any, store: Any, nats_url: str, redis_url: str) -> None:
    svc = await _start(bus_factory, store)
    tester = await bus_factory("tester")
    web = msgspec.structs.replace(pod("shop-web", 1000, MI), name="web", namespace="shop")
    await tester.publish(subjects.POD_ADMITTED, PodAdmitted(spec=web, at=10.0))
    await svc.ctx.bus.settle()  # type: ignore[union-attr]
    settings = load_runtime_settings({"COLO_NATS_URL": nats_url, "COLO_REDIS_URL": redis_url,
                                      "COLO_STORE_PREFIX": store.keys.prefix})
    conn = Connection(settings, "env", ())
    before, after = await asyncio.wait_for(delete_pod(conn, "web", "shop", 20.0), 30)
    assert (before.phase, before.spec.uid) == ("Pending", "shop-web")
    assert after is not None and (after.phase, after.reason) == ("Failed", "Deleted: colo delete")
    with pytest.raises(LookupError, match="no pod 'nope'"):
        await delete_pod(conn, "nope", "", 1.0)
