"""redis-server killed (-9) and started again on the same data while a Store is connected: the Store's
next calls reconnect and see the data (its pooled connections are dead after the restart)."""

from __future__ import annotations

from pathlib import Path

import pytest

from colo.embedded import start_redis
from colo.messages import NodeSpec, PodRecord, PodSpec, Resources
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
