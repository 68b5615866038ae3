"""Binds acknowledged only once a replica holds them (redis_wait_replicas): a real primary and replica."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
import redis.asyncio as aioredis

from colo.embedded import ServerHandle, start_redis
from colo.messages import NodeSpec, Resources
from colo.settings import RuntimeSettings, SettingsError
from colo.store import Store
from colo.store_wait import BindUnknown

pytestmark = pytest.mark.integration

CAP = Resources(cpu=8000, memory=16 * 10**9, pods=110)
REQ = Resources(cpu=100, memory=10**8)


@pytest.fixture
def primary_replica() -> Iterator[tuple[ServerHandle, ServerHandle]]:
    primary = start_redis(extra_args=["--repl-diskless-sync-delay", "0"])  # the default waits 5 s for more replicas
    replica = start_redis(extra_args=["--replicaof", "127.0.0.1", str(primary.port)])
    try:
        yield primary, replica
    finally:
        replica.stop()
        primary.stop()


async def _linked(replica_url: str) -> None:
    r = aioredis.from_url(replica_url)
    try:
        for _ in range(200):
            info = await r.info("replication")
            if info.get("master_link_status") == "up":
                return
            await asyncio.sleep(0.05)
        raise AssertionError("replica never linked to the primary")
    finally:
        await r.aclose()


async def test_bind_and_release_return_once_the_replica_has_them(
        primary_replica: tuple[ServerHandle, ServerHandle]) -> None:
    primary, replica = primary_replica
    await _linked(replica.url)
    store = await Store.connect(primary.url, "wait", settings=RuntimeSettings(redis_wait_replicas=1, redis_wait_timeout_ms=2000))
    mirror = await Store.connect(replica.url, "wait")
    try:
        await store.put_node(NodeSpec(name="n1", capacity=CAP, allocatable=CAP))
        for i in range(20):
            assert (await store.bind(f"p{i}", "n1", REQ, 1.0)).ok
            # no sleep, no retry: the replica already has the bind when bind() returns
            assert await mirror.bound_node(f"p{i}") == "n1"
        assert await store.release("p0", "Succeeded", "", 2.0)
        assert await mirror.bound_node("p0") is None
        assert store.wait.short == {}
    finally:
        await store.close()
        await mirror.close()


async def test_a_bind_without_its_replica_is_kept_and_reported(
        primary_replica: tuple[ServerHandle, ServerHandle]) -> None:
    primary, replica = primary_replica
    await _linked(replica.url)
    replica.stop()  # the replica is gone: WAIT can only time out
    settings = RuntimeSettings(redis_wait_replicas=1, redis_wait_timeout_ms=100, redis_failover_window_s=0.5)
    store = await Store.connect(primary.url, "wait", settings=settings)
    try:
        await store.put_node(NodeSpec(name="n1", capacity=CAP, allocatable=CAP))
        # kept after the window (the primary never went away): on the primary, reported as short
        assert (await store.bind("p1", "n1", REQ, 1.0)).ok
        assert store.wait.repeats >= 1  # sent again on the same connection for the window
        assert await store.bound_node("p1") == "n1"
        assert store.wait.short == {"bind": 1}
    finally:
        await store.close()


async def test_a_short_wait_is_repeated_until_the_replica_acks(
        primary_replica: tuple[ServerHandle, ServerHandle]) -> None:
    """Issue 15 items 4/7 (the chaos soak's seed-7 loss): a WAIT that came back short was taken as an ack
    ("kept"), and the bind was lost by the failover that followed. Now it is sent again until the replica has
    the bind; failed before (returned at once with short == {"bind": 1}, the replica without the bind)."""
    primary, replica = primary_replica
    await _linked(replica.url)
    link = aioredis.from_url(replica.url)
    await link.replicaof("NO", "ONE")  # the replica drops out (as while it resynchronises after a failover)
    settings = RuntimeSettings(redis_wait_replicas=1, redis_wait_timeout_ms=100, redis_failover_window_s=15)
    store = await Store.connect(primary.url, "wait", settings=settings)
    mirror = await Store.connect(replica.url, "wait")
    try:
        await store.put_node(NodeSpec(name="n1", capacity=CAP, allocatable=CAP))

        async def relink() -> None:
            await asyncio.sleep(0.5)
            await link.replicaof("127.0.0.1", str(primary.port))

        back = asyncio.create_task(relink())
        assert (await store.bind("p1", "n1", REQ, 1.0)).ok
        await back
        assert await mirror.bound_node("p1") == "n1"  # acknowledged only once the replica holds it
        assert store.wait.short == {} and store.wait.repeats >= 1
    finally:
        await link.aclose()
        await store.close()
        await mirror.close()


async def test_a_primary_lost_before_its_replica_acks_makes_the_bind_unknown(
        primary_replica: tuple[ServerHandle, ServerHandle]) -> None:
    primary, replica = primary_replica
    await _linked(replica.url)
    link = aioredis.from_url(replica.url)
    await link.replicaof("NO", "ONE")
    await link.aclose()
    settings = RuntimeSettings(redis_wait_replicas=1, redis_wait_timeout_ms=100, redis_failover_window_s=15)
    store = await Store.connect(primary.url, "wait", settings=settings)
    try:
        await store.put_node(NodeSpec(name="n1", capacity=CAP, allocatable=CAP))
        bind = asyncio.create_task(store.bind("p1", "n1", REQ, 1.0))
        await asyncio.sleep(0.5)
        primary.stop()  # before any replica acknowledged the bind
        with pytest.raises(BindUnknown):
            await asyncio.wait_for(bind, 10)
        assert store.wait.short == {}
    finally:
        await store.close()


def test_wait_settings_are_checked() -> None:
    with pytest.raises(SettingsError) as exc:
        RuntimeSettings(redis_wait_replicas=-1, redis_wait_timeout_ms=0)
    assert len(exc.value.errors) == 2
