"""redis-server killed (-9) and started again on the same data while a Store is connected: the Store's
next calls reconnect and see the data (its pooled connections are dead after the restart)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from colo.embedded import start_redis
from colo.messages import NodeResource, NodeSpec, PodRecord, PodSpec, Resources
from colo.store import Store

pytestmark = pytest.mark.integration


async def test_store_survives_a_redis_restart_on_the_same_data(tmp_path: Path) -> None:
    server = start_redis(data_dir=str(tmp_path))
    store = await Store.connect(server.url, prefix="restart")
    try:
        alloc = Resources(cpu=4000, memory=2**30)
        await store.put_node(NodeSpec(name="n1", capacity=alloc, allocatable=alloc))
        await store.put_pod(PodRecord(spec=PodSpec(uid="p1", name="p1", requests=Resources(cpu=500))))
        assert (await store.bind("p1", "n1", Resources(cpu=500), at=1.0)).ok
        # a pool of several connections, as concurrent handlers leave it
        assert len(await store.bound_nodes(["p1"])) == 1
        server.proc.kill()
        server.proc.wait(timeout=10)
        server.stop()
        server = start_redis(server.port, data_dir=str(tmp_path))
        # every call after the restart works, without a caller's retry
        assert await store.bound_node("p1") == "n1"
        assert (await store.allocated("n1")).cpu == 500
        assert [n.name for n in await store.list_nodes()] == ["n1"]
        assert (await store.get_pod("p1")) is not None
    finally:
        await store.close()
        server.stop()


async def test_pipelines_scripts_and_concurrent_calls_after_a_restart_meet_no_stale_connection(
        tmp_path: Path) -> None:
    """Issue 15, observation 2: after a Redis restart the slo-manager's tick failed with "Connection closed
    by server" on a pooled connection. The calls a tick and a cycle make — a pipeline (put_node_resources),
    a script (bind_many), many at once so that several pooled connections are stale — all succeed."""
    server = start_redis(data_dir=str(tmp_path))
    store = await Store.connect(server.url, prefix="restart2")
    try:
        alloc = Resources(cpu=64_000, memory=2**34)
        names = [f"n{k}" for k in range(8)]
        for n in names:
            await store.put_node(NodeSpec(name=n, capacity=alloc, allocatable=alloc))
        await asyncio.gather(*(store.allocated(n) for n in names))  # 8 connections in the pool
        server.proc.kill()
        server.proc.wait(timeout=10)
        server.stop()
        server = start_redis(server.port, data_dir=str(tmp_path))
        await store.put_node_resources([NodeResource(node=n, batch_cpu=1000) for n in names])
        await store.put_pods([PodRecord(spec=PodSpec(uid=f"p{k}", name=f"p{k}", requests=Resources(cpu=100)))
                              for k in range(8)])
        results = await store.bind_many([(f"p{k}", names[k], Resources(cpu=100), 1.0) for k in range(8)])
        assert all(r.ok for r in results), results
        got = await asyncio.gather(*(store.allocated(n) for n in names))
        assert [r.cpu for r in got] == [100] * 8
        assert {nr.node: nr.batch_cpu for nr in (await store.list_node_resources()).values()} == dict.fromkeys(
            names, 1000)
    finally:
        await store.close()
        server.stop()
