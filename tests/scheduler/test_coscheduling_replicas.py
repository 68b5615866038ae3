"""Two scheduler replicas race on gangs over a tight cluster, against real nats-server and
redis-server (wall clock): every gang is owned by one replica (sharded by the gang's key), no node
is over-committed, and every gang ends bound whole or not at all — read back from Redis.

4 nodes fit 4 pods each (16 slots); 6 Strict gangs of 4 members (24 pods) arrive at once, with 8
lone pods that compete for the same room: at most 4 gangs can be bound, and none partly."""

from __future__ import annotations

import asyncio
import zlib
from collections import Counter

import pytest
from gang_helpers import gang, member
from sched_helpers import GI, node
from test_replicas import cluster_violations

from colo import subjects
from colo.messages import PodAdmitted, PodBound
from colo.runtime import ServiceRunner
from colo.settings import RuntimeSettings
from colo.store import Store
from colo.testing.fixtures import BusFactory
from colo_scheduler.replicas import shard_key, shard_of
from colo_scheduler.service import SchedulerService
from colo_scheduler.settings import SchedulerSettings

pytestmark = pytest.mark.integration

REPLICAS, NODES, PER_NODE, GANGS, SIZE, LONE = 2, 4, 4, 6, 4, 8


async def test_two_replicas_bind_gangs_whole_without_overcommit(nats_url: str, redis_url: str, store: Store,
                                                                bus_factory: BusFactory) -> None:
    tester = await bus_factory("tester")
    bound: list[PodBound] = []

    async def on_bound(m: PodBound) -> None:
        bound.append(m)

    await tester.subscribe(subjects.POD_BOUND, on_bound, durable="bound")
    for i in range(NODES):
        spec = node(f"n{i}", cpu=4000, memory=64 * GI, pods=PER_NODE)
        await store.put_node(spec)
        await tester.publish(subjects.NODE_REGISTERED, spec, node=spec.name)
    gangs = [gang(f"job{j}", SIZE, created_at=float(j)) for j in range(GANGS)]
    specs = [member(f"job{j}-{k}-{zlib.crc32(bytes([j, k])):08x}", g, 1000) for j, g in enumerate(gangs)
             for k in range(SIZE)]
    specs += [member(f"lone-{k}", None, 1000, created_at=0.5) for k in range(LONE)]
    assert len({shard_of(shard_key(s), REPLICAS) for s in specs if s.gang}) == REPLICAS  # both own gangs
    # sharded by uid, members of one gang would be split between the replicas (each would hold a part)
    assert any(len({shard_of(s.uid, REPLICAS) for s in specs if s.gang is g}) > 1 for g in gangs)
    runners = []
    for i in range(REPLICAS):
        svc = SchedulerService(SchedulerSettings(replicas=REPLICAS, replica_index=i, seed=7, tick_interval_s=0.5,
                                                 backoff_initial_s=0.05, backoff_max_s=0.2))
        runner = ServiceRunner(svc, RuntimeSettings(nats_url=nats_url, redis_url=redis_url,
                                                    store_prefix=store.keys.prefix, instance=f"r{i}"))
        await runner.start()
        runners.append(runner)
    svcs: list[SchedulerService] = [r.service for r in runners]  # type: ignore[misc]
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        while not all(s.core.table.n == NODES for s in svcs):
            assert loop.time() < deadline
            await asyncio.sleep(0.01)
        await tester.publish_many([(subjects.POD_ADMITTED, PodAdmitted(spec=s, at=0.0), s.uid, {}) for s in specs])
        deadline = loop.time() + 40  # generous: the machine is shared
        while True:  # until the cluster is full and every replica has nothing left to try
            lengths = [s.core.queue.lengths() for s in svcs]
            full = sum(s.totals["pods_bound"] for s in svcs) == NODES * PER_NODE
            if full and not any(q["active"] or q["backoff"] for q in lengths) and not any(s.core.waiting for s in svcs):
                break
            assert loop.time() < deadline, [s.debug()["queue"] for s in svcs]
            await asyncio.sleep(0.05)
        await tester.settle()
    finally:
        for r in runners:
            await r.stop()
    uids = [s.uid for s in specs]
    assert await cluster_violations(store, uids) == []
    bindings = await store.bound_nodes(uids)
    per_gang = Counter(u.split("-")[0] for u in bindings if u.startswith("job"))
    assert all(n == SIZE for n in per_gang.values()), per_gang  # no gang partly bound
    assert len(bindings) == NODES * PER_NODE
    for spec in specs:  # only the replica owning a gang ever attempted its members (its decision records)
        if spec.gang is not None:
            owner = shard_of(shard_key(spec), REPLICAS)
            assert [i for i, s in enumerate(svcs) if s.core.decision(spec.uid) is not None] == [owner], spec.uid
    assert sorted(m.spec.uid for m in bound) == sorted(bindings)
