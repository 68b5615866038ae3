"""A scheduler restarted on a lost store rebuilds its pending pods from the ``pod.admitted`` stream.

Found open (issue 15, item 0 follow-up): the node agents restore what runs, but pods admitted and not yet bound
lived only in the scheduler's memory, the store and the ``pod.admitted`` stream; a scheduler restarted on an
empty store never replayed that stream, so they were never bound. Now the scheduler replays it at a start on a
new or lost store, minus the pods the streams show bound, ended or deleted.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from sched_helpers import node, pod

from colo import subjects
from colo.embedded import start_redis
from colo.messages import PodAdmitted, PodBound
from colo.runtime import ServiceRunner
from colo.settings import RuntimeSettings
from colo.store import Store
from colo.testing.fixtures import BusFactory
from colo_scheduler.service import SchedulerService
from colo_scheduler.settings import SchedulerSettings

pytestmark = pytest.mark.integration

CPU = 500


async def _wait(pred: object, timeout_s: float, what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not pred():  # type: ignore[operator]
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


def _runner(redis_url: str, nats_url: str) -> ServiceRunner:
    svc = SchedulerService(SchedulerSettings(seed=1, tick_interval_s=0.2, batch_window_s=0.01))
    return ServiceRunner(svc, RuntimeSettings(nats_url=nats_url, redis_url=redis_url, store_prefix="loss"))


async def test_pending_pods_are_rebuilt_from_the_stream_after_a_store_loss(
        tmp_path: Path, nats_url: str, bus_factory: BusFactory) -> None:
    redis = start_redis()
    store = await Store.connect(redis.url, prefix="loss")
    await store.put_node(node("n1", cpu=2 * CPU))  # room for two pods: the other three stay pending
    tester = await bus_factory("tester")
    bound: dict[str, list[str]] = {}

    async def on_bound(m: PodBound) -> None:
        bound.setdefault(m.spec.uid, []).append(m.node)

    await tester.subscribe(subjects.POD_BOUND, on_bound, durable="bound")
    uids = [f"p{k}" for k in range(5)]
    runner = _runner(redis.url, nats_url)
    await runner.start()
    try:
        for uid in uids:
            await tester.publish(subjects.POD_ADMITTED, PodAdmitted(spec=pod(uid, cpu=CPU), at=1.0), msg_id=f"a-{uid}")
        await _wait(lambda: len(bound) == 2, 20, "two pods bound")
        await asyncio.sleep(0.5)  # the admissions acked
    finally:
        await runner.stop()
    first = sorted(bound)

    # the store is lost; the node agent re-registers its node (now larger) and restores what runs on it
    await store.redis.flushall()
    await store.put_node(node("n1", cpu=64_000))
    for uid in first:
        assert await store.restore_binding(pod(uid, cpu=CPU), "n1", 1.0, 2.0) == ""
    runner = _runner(redis.url, nats_url)
    await runner.start()
    try:
        await _wait(lambda: len(bound) == len(uids), 20, f"every pod bound (got {sorted(bound)})")
        await tester.settle()
        assert all(len(nodes) == 1 for nodes in bound.values()), bound  # none bound twice
        assert (await store.allocated("n1")).cpu == CPU * len(uids)
        placed = await store.bound_nodes(uids)
        assert {uid: n for uid, (n, _) in placed.items()} == {uid: "n1" for uid in uids}
    finally:
        await runner.stop()
        await store.close()
        redis.stop()


async def test_a_store_rolled_back_under_a_running_scheduler_gets_its_pending_pods_back(
        tmp_path: Path, nats_url: str, bus_factory: BusFactory) -> None:
    """Issue 15 items 4/7 (the chaos soak's seed-7 loss): the primary is replaced, while the scheduler runs, by
    a server lacking the last writes (here: the same port on a copy of the data taken before the admissions).
    Failed before the data-epoch watch: the scheduler never noticed, and the pods admitted meanwhile stayed
    absent from the store's pod set."""
    data, snap = tmp_path / "data", tmp_path / "snap"
    data.mkdir()
    redis = start_redis(data_dir=str(data))
    port = redis.port
    store = await Store.connect(redis.url, prefix="loss")
    await store.put_node(node("n1", cpu=2 * CPU))  # room for two pods: the other three stay pending
    await store.close()
    redis.stop()
    shutil.copytree(data, snap)  # the store before any admission
    redis = start_redis(port=port, data_dir=str(data))
    store = await Store.connect(redis.url, prefix="loss")
    tester = await bus_factory("tester")
    bound: dict[str, list[str]] = {}

    async def on_bound(m: PodBound) -> None:
        bound.setdefault(m.spec.uid, []).append(m.node)

    await tester.subscribe(subjects.POD_BOUND, on_bound, durable="bound")
    uids = [f"q{k}" for k in range(5)]
    runner = ServiceRunner(SchedulerService(SchedulerSettings(seed=1, tick_interval_s=0.2, batch_window_s=0.01,
                                                              store_epoch_check_s=0.2)),
                           RuntimeSettings(nats_url=nats_url, redis_url=redis.url, store_prefix="loss"))
    await runner.start()
    try:
        for uid in uids:
            await tester.publish(subjects.POD_ADMITTED, PodAdmitted(spec=pod(uid, cpu=CPU), at=1.0), msg_id=f"a-{uid}")
        await _wait(lambda: len(bound) == 2, 20, "two pods bound")
        await asyncio.sleep(0.5)
        assert len(await store.list_pods()) == len(uids)

        # the primary is replaced by a server without the admissions; its node agent restores what runs
        # and re-registers its node, now larger
        redis.stop()
        redis = start_redis(port=port, data_dir=str(snap))
        first = sorted(bound)
        for uid in first:
            assert await store.restore_binding(pod(uid, cpu=CPU), "n1", 1.0, 2.0) == ""
        big = node("n1", cpu=64_000)
        await store.put_node(big)
        await tester.publish(subjects.NODE_REGISTERED, big, node="n1")

        await _wait(lambda: len(bound) == len(uids), 20, f"every pod bound (got {sorted(bound)})")
        await tester.settle()
        await asyncio.sleep(0.3)
        assert all(len(nodes) == 1 for nodes in bound.values()), bound  # none bound twice
        records = {rec.spec.uid: rec for rec in await store.list_pods()}
        assert sorted(records) == uids  # the store's pod set has every pod again
        assert (await store.allocated("n1")).cpu == CPU * len(uids)
        placed = await store.bound_nodes(uids)
        assert {uid: n for uid, (n, _) in placed.items()} == {uid: "n1" for uid in uids}
    finally:
        await runner.stop()
        await store.close()
        redis.stop()


async def test_a_bind_whose_primary_dies_before_its_replica_acks_is_retried_not_announced(
        tmp_path: Path, nats_url: str, bus_factory: BusFactory) -> None:
    """``WAIT 1`` with no replica in sync: the bind stalls (no PodBound); the primary dies before any replica
    acknowledged it, so the bind is unknown; a new primary without it takes the port; the scheduler retries
    the pod there and announces it once, after a replica acknowledged that bind."""
    primary = start_redis()
    port = primary.port
    replica = start_redis()
    link = aioredis.from_url(replica.url)  # not linked yet: no replica holds the first bind
    store = await Store.connect(primary.url, prefix="loss")
    await store.put_node(node("n1", cpu=4 * CPU))
    tester = await bus_factory("tester")
    bound: list[tuple[str, float]] = []

    async def on_bound(m: PodBound) -> None:
        bound.append((m.spec.uid, asyncio.get_running_loop().time()))

    await tester.subscribe(subjects.POD_BOUND, on_bound, durable="bound")
    runner = ServiceRunner(SchedulerService(SchedulerSettings(seed=1, tick_interval_s=0.2, batch_window_s=0.01,
                                                              store_epoch_check_s=0.2, backoff_initial_s=0.2)),
                           RuntimeSettings(nats_url=nats_url, redis_url=primary.url, store_prefix="loss",
                                           redis_wait_replicas=1, redis_wait_timeout_ms=100,
                                           redis_failover_window_s=30))
    await runner.start()
    try:
        await tester.publish(subjects.POD_ADMITTED, PodAdmitted(spec=pod("w0", cpu=CPU), at=1.0), msg_id="a-w0")
        for _ in range(100):  # the bind is on the primary, its WAIT unanswered
            if await store.bound_node("w0") == "n1":
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(1.0)
        assert bound == []  # not acknowledged: no replica has it
        primary.stop()
        primary = start_redis(port=port)  # the new primary, without the bind
        fresh = await Store.connect(primary.url, prefix="loss")
        await fresh.put_node(node("n1", cpu=4 * CPU))  # its node agent registers the node again
        await link.replicaof("127.0.0.1", str(port))
        await _wait(lambda: bool(bound), 30, "w0 bound on the new primary")
        await tester.settle()
        await asyncio.sleep(0.5)
        assert [uid for uid, _ in bound] == ["w0"]  # announced once
        assert await fresh.bound_node("w0") == "n1"
        assert await link.exists(fresh.keys.binding("w0")) == 1  # the replica has it
        await fresh.close()
    finally:
        await runner.stop()
        await link.aclose()
        await store.close()
        replica.stop()
        primary.stop()
