"""Four scheduler replicas (pods sharded by uid hash) race on a tight cluster, against real
nats-server and redis-server; the invariants are read back from Redis.

20 nodes each fit exactly 4 pods (cpu, memory and pod count all run out together); 120 pods
arrive at once, so every replica competes for the same nodes (same seed, same scores). Proven
from the store: no node's allocation exceeds its allocatable in any resource, no pod is bound
twice, each node's allocation equals the sum of its bound pods' requests, every pod is bound or
unschedulable, and the cluster ends full. The same race run with a check-then-write bind (what a
bind without the server-side script would be) must be caught over-committing, which shows that
the checks can fail.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest
from sched_helpers import GI, node, pod

from colo import subjects
from colo.messages import PodAdmitted, PodBound, PodSpec, Resources
from colo.runtime import ServiceRunner
from colo.settings import RuntimeSettings
from colo.store import BindRequest, BindResult, Store
from colo.testing.fixtures import BusFactory
from colo_scheduler.replicas import Replica, shard_of
from colo_scheduler.service import SchedulerService
from colo_scheduler.settings import SchedulerSettings

pytestmark = pytest.mark.integration

REPLICAS = 4
NODES = 20
PER_NODE = 4
PODS = 120
FIELDS = ("cpu", "memory", "batch_cpu", "batch_memory", "mid_cpu", "mid_memory")


def test_shards_are_stable_and_cover_every_replica() -> None:
    uids = [f"pod-{i}" for i in range(4000)]
    shards = Counter(shard_of(u, REPLICAS) for u in uids)
    assert set(shards) == set(range(REPLICAS))
    assert min(shards.values()) > 4000 / REPLICAS * 0.8  # roughly even
    assert shard_of("123456789", 1000) == 0xCBF43926 % 1000 == 262  # the CRC-32 check value: same everywhere
    owners = [[Replica(i, REPLICAS).owns(u) for i in range(REPLICAS)] for u in uids]
    assert all(sum(o) == 1 for o in owners)
    assert all(Replica(0, 1).owns(u) for u in uids[:10])


@pytest.mark.parametrize(("settings", "instance", "durable", "lease"), [
    (SchedulerSettings(), "", "admitted", "scheduler"),
    (SchedulerSettings(replicas=4, replica_index=2), "", "admitted-r2", "scheduler-r2"),
    (SchedulerSettings(leader_election=True), "a", "admitted-a", "scheduler"),
    (SchedulerSettings(replicas=2, replica_index=1, leader_election=True), "b-1", "admitted-r1-b-1", "scheduler-r1"),
], ids=["single", "sharded", "elected", "sharded-elected"])
def test_replica_consumer_and_lease_names(settings: SchedulerSettings, instance: str, durable: str,
                                          lease: str) -> None:
    r = Replica.from_settings(settings, instance)
    assert r.durable("admitted") == durable and r.lease_name == lease


@pytest.mark.parametrize("instance", ["", "a.b", "x" * 65, "has space"])
def test_leader_election_needs_a_usable_instance_name(instance: str) -> None:
    with pytest.raises(ValueError, match="COLO_INSTANCE"):
        Replica.from_settings(SchedulerSettings(leader_election=True), instance)


@pytest.mark.parametrize(("overrides", "problem"), [
    ({"replicas": 0}, "replicas must be >= 1"),
    ({"replicas": 2, "replica_index": 2}, "replica_index"),
    ({"replica_index": -1}, "replica_index"),
    ({"lease_duration_s": 4.0}, "lease timing"),
    ({"lease_retry_period_s": 5.0}, "lease timing"),
    ({"batch_window_s": -0.1}, "batch_window_s"),
])
def test_bad_replica_settings_are_refused(overrides: dict[str, Any], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        SchedulerSettings(**overrides)


async def cluster_violations(store: Store, uids: list[str]) -> list[str]:
    """Every broken invariant of the bindings in ``store`` (empty when all hold)."""
    k = store.keys
    problems: list[str] = []
    names = [n.name for n in await store.list_nodes()]
    alloc = await store.allocated_many(names)
    specs = {r.spec.uid: r.spec for r in await store.list_pods()}
    bindings = await store.bound_nodes(uids)
    seen: Counter[str] = Counter()
    for name in names:
        limits = {key.decode(): int(v) for key, v in (await store.redis.hgetall(k.limits(name))).items()}
        a = alloc[name]
        for f in FIELDS:
            if getattr(a, f) > limits.get(f, 0):
                problems.append(f"{name}: {f} allocated {getattr(a, f)} > allocatable {limits.get(f, 0)}")
        if limits.get("pods", 0) and a.pods > limits["pods"]:
            problems.append(f"{name}: {a.pods} pods > allocatable {limits['pods']}")
        members = await store.bound_uids(name)
        seen.update(members)
        sums = {f: sum(getattr(specs[u].requests, f) for u in members) for f in FIELDS}
        if any(sums[f] != getattr(a, f) for f in FIELDS) or len(members) != a.pods:
            problems.append(f"{name}: allocation {a} != sum of its {len(members)} bound pods {sums}")
        for u in members:
            if bindings.get(u, ("",))[0] != name:
                problems.append(f"{u} is in {name}'s pod set but bound to {bindings.get(u)}")
    problems += [f"{u} bound on {c} nodes" for u, c in seen.items() if c > 1]
    problems += [f"{u} has a binding but is in no node's pod set" for u in bindings if u not in seen]
    return problems


def check_then_write(store: Store) -> Any:
    """A bind_many that checks room, yields, then writes: the race the Lua bind script prevents."""
    k = store.keys

    async def bind_many(requests: Any, fence: Any = None) -> list[BindResult]:
        reqs = [(r.uid, r.node, r.requests, r.at) if isinstance(r, BindRequest) else r for r in requests]
        nodes = sorted({r[1] for r in reqs})
        free = {}
        for n in nodes:
            lim = {key.decode(): int(v) for key, v in (await store.redis.hgetall(k.limits(n))).items()}
            a = await store.allocated(n)
            free[n] = [lim.get("cpu", 0) - a.cpu, lim.get("memory", 0) - a.memory, lim.get("pods", 0) - a.pods]
        await asyncio.sleep(0.02)  # other replicas read the same free room meanwhile
        out = []
        for uid, n, req, at in reqs:
            f = free[n]
            if req.cpu > f[0] or req.memory > f[1] or f[2] < 1:
                out.append(BindResult(False, "Insufficient cpu"))
                continue
            f[0] -= req.cpu
            f[1] -= req.memory
            f[2] -= 1
            pipe = store.redis.pipeline(transaction=False)
            pipe.hincrby(k.allocated(n), "cpu", req.cpu)
            pipe.hincrby(k.allocated(n), "memory", req.memory)
            pipe.hincrby(k.allocated(n), "pods", 1)
            pipe.hset(k.binding(uid), mapping={"node": n, "at": repr(at), "cpu": req.cpu, "memory": req.memory})
            pipe.sadd(k.node_pods(n), uid)
            await pipe.execute()
            out.append(BindResult(True))
        return out

    return bind_many


async def _race(nats_url: str, redis_url: str, store: Store, tester: Any,
                binder: str) -> tuple[list[SchedulerService], list[PodSpec], list[PodBound]]:
    bound: list[PodBound] = []

    async def on_bound(m: PodBound) -> None:
        bound.append(m)

    await tester.subscribe(subjects.POD_BOUND, on_bound, durable="bound")
    for i in range(NODES):
        spec = node(f"n{i:02d}", cpu=4000, memory=8 * GI, pods=PER_NODE)
        await store.put_node(spec)
        await tester.publish(subjects.NODE_REGISTERED, spec, node=spec.name)
    runners = []
    for i in range(REPLICAS):
        svc = SchedulerService(SchedulerSettings(replicas=REPLICAS, replica_index=i, seed=7, tick_interval_s=0.5,
                                                 backoff_initial_s=0.05, backoff_max_s=0.2))
        runner = ServiceRunner(svc, RuntimeSettings(nats_url=nats_url, redis_url=redis_url,
                                                    store_prefix=store.keys.prefix, instance=f"r{i}"))
        await runner.start()
        runners.append(runner)
        if binder == "check-then-write":
            assert runner.ctx is not None
            runner.ctx.store.bind_many = check_then_write(runner.ctx.store)  # type: ignore[method-assign]
    services = [r.service for r in runners]
    assert all(isinstance(s, SchedulerService) for s in services)
    svcs: list[SchedulerService] = services  # type: ignore[assignment]
    specs = [pod(f"p{j:03d}", 1000, 2 * GI) for j in range(PODS)]
    assert len({shard_of(s.uid, REPLICAS) for s in specs}) == REPLICAS  # every replica competes
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 15
        while not all(s.core.table.n == NODES for s in svcs):
            assert loop.time() < deadline
            await asyncio.sleep(0.01)
        await tester.publish_many([(subjects.POD_ADMITTED, PodAdmitted(spec=s, at=0.0), s.uid, {}) for s in specs])

        def settled() -> bool:
            lengths = [s.core.queue.lengths() for s in svcs]
            done = sum(s.totals["pods_bound"] for s in svcs) + sum(q["unschedulable"] for q in lengths)
            return done == PODS and not any(q["active"] or q["backoff"] for q in lengths)

        deadline = loop.time() + 30
        while not settled():
            assert loop.time() < deadline, [s.debug()["queue"] for s in svcs]
            await asyncio.sleep(0.02)
        await tester.settle()
    finally:
        for r in runners:
            await r.stop()
    return svcs, specs, bound


async def test_four_replicas_never_overcommit_a_tight_cluster(nats_url: str, redis_url: str, store: Store,
                                                             bus_factory: BusFactory) -> None:
    tester = await bus_factory("tester")
    svcs, specs, bound = await _race(nats_url, redis_url, store, tester, "atomic")
    uids = [s.uid for s in specs]
    assert await cluster_violations(store, uids) == []
    bindings = await store.bound_nodes(uids)
    assert len(bindings) == NODES * PER_NODE  # the cluster ends full ...
    assert sum(s.totals["pods_bound"] for s in svcs) == NODES * PER_NODE
    assert sum(s.totals["bind_conflicts"] for s in svcs) > 0  # ... through real bind races
    assert sorted(m.spec.uid for m in bound) == sorted(bindings)  # one PodBound per bound pod
    for uid in uids:  # every pod bound, or unschedulable in the replica that owns it
        owner = svcs[shard_of(uid, REPLICAS)]
        assert (uid in bindings) != (uid in owner.core.queue.unschedulable), uid
        assert all(uid not in s.core.queue for s in svcs if s is not owner)
    for s in svcs:  # each replica counted every bound pod on its node, its own or adopted
        assert {u: s.core.table.names[row] for u, (_, row) in s.core.framework.placed.items()} == \
            {u: n for u, (n, _) in bindings.items()}
    # the store's allocation is what each replica now believes
    alloc = await store.allocated_many([f"n{i:02d}" for i in range(NODES)])
    assert all(a == Resources(cpu=4000, memory=8 * GI, pods=PER_NODE) for a in alloc.values())


async def test_the_check_catches_a_non_atomic_bind(nats_url: str, redis_url: str, store: Store,
                                                   bus_factory: BusFactory) -> None:
    tester = await bus_factory("tester")
    _, specs, _ = await _race(nats_url, redis_url, store, tester, "check-then-write")
    problems = await cluster_violations(store, [s.uid for s in specs])
    assert any("> allocatable" in p for p in problems), problems
