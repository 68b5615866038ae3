"""Elastic quota end to end with real nats-server and redis-server, the scheduler service and the real node
agent (sim backend) on a virtual clock: team-b borrows team-a's idle min, team-a's pods arrive and the
scheduler reclaims it (team-b's pods evicted by the node agent on the scheduler's order, team-a's bound), a
non-preemptible pod of team-b is never evicted, the statuses reach ``colo get quotas``, and a restarted
scheduler rebuilds the tree from the stream. Then two scheduler replicas race on one quota: never over max in
the store — and without the quota chain in the binds the same race goes over, so the check can fail."""

from __future__ import annotations

import asyncio
import uuid

import msgspec
import pytest

from colo import subjects
from colo.bus import Bus
from colo.cli.quotas import latest_quota_statuses, quotas_table
from colo.clock import VirtualClock
from colo.messages import (
    PREEMPTIBLE_LABEL,
    QUOTA_NAME_LABEL,
    ElasticQuota,
    EvictionCommand,
    NodeSpec,
    PodAdmitted,
    PodSpec,
    Resources,
    SimWorkload,
)
from colo.runtime import ServiceRunner
from colo.settings import RuntimeSettings
from colo.store import Store
from colo.testing.fixtures import BusFactory, service_context
from colo_node_agent.service import NodeAgentService
from colo_node_agent.settings import NodeAgentSettings
from colo_scheduler.service import SchedulerService
from colo_scheduler.settings import SchedulerSettings

pytestmark = pytest.mark.integration

G = 10**9
T0 = 1000.0
CAP = Resources(cpu=32_000, memory=128 * G, pods=110)
NODES = [NodeSpec(name=n, capacity=CAP, allocatable=CAP, cpus=32) for n in ("n1", "n2")]
# org caps both teams at 20 cores: the cluster has 64, so the quotas, not the nodes, are what runs out
QUOTAS = [ElasticQuota(name="org", min={"cpu": 20_000}, max={"cpu": 20_000}),
          ElasticQuota(name="team-a", parent="org", min={"cpu": 10_000}, max={"cpu": 20_000}),
          ElasticQuota(name="team-b", parent="org", min={"cpu": 10_000}, max={"cpu": 20_000})]


def team_pod(uid: str, team: str, priority: int, preemptible: bool = True, created_at: float = T0) -> PodSpec:
    labels = {QUOTA_NAME_LABEL: team}
    if not preemptible:
        labels[PREEMPTIBLE_LABEL] = "false"
    return PodSpec(uid=uid, name=uid, labels=labels, priority=priority, created_at=created_at,
                   requests=Resources(cpu=1000, memory=G), limits=Resources(cpu=1000, memory=G),
                   sim=SimWorkload(kind="series", step_s=60, cpu_util=[0.2], cpu_scale_milli=1000,
                                   memory_util=[0.2], memory_scale_bytes=G))


class Cluster:
    """The scheduler and the node agent on their own buses, a client bus, the store and the clock."""

    def __init__(self, bus_factory: BusFactory, store: Store, clock: VirtualClock) -> None:
        self.bus_factory, self.store, self.clock = bus_factory, store, clock
        self.buses: list[Bus] = []
        self.evictions: list[EvictionCommand] = []
        self.scheduler: SchedulerService | None = None

    async def start(self) -> None:
        self.client = await self.bus_factory("tester")
        self.buses.append(self.client)

        async def on_evict(m: EvictionCommand) -> None:
            self.evictions.append(m)

        await self.client.subscribe(subjects.POD_EVICT, on_evict, durable="evict")
        bus = await self.bus_factory("node-agent", clock=self.clock, retry_delay_s=0.01)
        self.buses.append(bus)
        self.agent = NodeAgentService(NodeAgentSettings(), nodes=NODES)
        await self.agent.start(service_context(bus, self.store, self.clock))
        await bus.start_consumers()
        for q in QUOTAS:
            await self.client.publish(subjects.QUOTA_SPEC, q, name=q.name)
        await self.start_scheduler()

    async def start_scheduler(self) -> SchedulerService:
        bus = await self.bus_factory("scheduler", clock=self.clock, retry_delay_s=0.01)
        self.buses.append(bus)
        svc = SchedulerService(SchedulerSettings(seed=3, backoff_initial_s=1.0, backoff_max_s=2.0))
        await svc.start(service_context(bus, self.store, self.clock))
        await bus.start_consumers()
        self.scheduler, self.scheduler_bus = svc, bus
        await self.settle()
        return svc

    async def restart_scheduler(self) -> SchedulerService:
        """Stop the scheduler and close its bus (its process ends), then start a new one."""
        assert self.scheduler is not None
        await self.scheduler.stop()
        await self.scheduler_bus.close()
        self.buses.remove(self.scheduler_bus)
        return await self.start_scheduler()

    async def settle(self) -> None:
        for _ in range(2):
            for b in self.buses:
                await b.settle(timeout_s=20)

    async def step(self, now: float) -> None:
        assert self.scheduler is not None
        self.clock.advance_to(now)
        await self.settle()
        await self.scheduler.tick(now)
        await self.settle()
        await self.agent.tick(now)
        await self.settle()

    async def admit(self, specs: list[PodSpec]) -> None:
        await self.client.publish_many([(subjects.POD_ADMITTED, PodAdmitted(spec=s, at=self.clock.now()), s.uid, {})
                                        for s in specs])
        await self.settle()

    async def bound(self, prefix: str) -> set[str]:
        uids = [r.spec.uid for r in await self.store.list_pods() if r.spec.uid.startswith(prefix)]
        return set(await self.store.bound_nodes(uids))


async def test_borrow_reclaim_and_restart(nats_url: str, store: Store, bus_factory: BusFactory) -> None:
    clock = VirtualClock(T0)
    c = Cluster(bus_factory, store, clock)
    await c.start()
    svc = c.scheduler
    assert svc is not None and svc.core.quota is not None
    assert set(svc.core.quota.book.tree.nodes) == {"org", "team-a", "team-b"}
    assert await store.quota_max("team-b") == {"cpu": 20_000}
    # team-b: 16 pods, the last one (lowest priority, would be picked first) non-preemptible
    b_pods = [team_pod(f"b{k:02d}", "team-b", 9500 if k < 15 else 9100, preemptible=k < 15) for k in range(16)]
    await c.admit(b_pods)
    t = T0
    for _ in range(3):
        t += 10
        await c.step(t)
    assert len(await c.bound("b")) == 16  # team-a idle: team-b borrows its min
    assert not c.evictions
    a_pods = [team_pod(f"a{k:02d}", "team-a", 9500) for k in range(10)]
    await c.admit(a_pods)
    for _ in range(6):
        t += 10
        await c.step(t)
    assert await c.bound("a") == {p.uid for p in a_pods}  # team-a got its min back
    b_bound = await c.bound("b")
    assert len(b_bound) == 10 and "b15" in b_bound  # the non-preemptible pod stayed
    assert len(c.evictions) == 6 and all(e.by == "scheduler" for e in c.evictions)
    assert all(e.reason.startswith("quota team-b: reclaiming lent quota cpu") for e in c.evictions)
    assert "b15" not in {e.uid for e in c.evictions}
    used = await store.quota_used_all()
    assert used["team-a"]["cpu"] == 10_000 and used["team-b"]["cpu"] == 10_000 and used["org"]["cpu"] == 20_000
    # the evicted pods are back in the queue, held by their quota
    unsched = svc.core.queue.unschedulable
    assert {e.uid for e in c.evictions} <= set(unsched)
    assert all(any(r.startswith("quota team-b: insufficient runtime quota cpu") for r in unsched[e.uid].reasons)
               for e in c.evictions)
    # what the scheduler published is what colo get quotas shows
    statuses = {s.name: s for s in await latest_quota_statuses(nats_url)}
    assert statuses["team-a"].used == {"cpu": 10_000} and statuses["team-a"].pods == 10
    assert statuses["team-b"].runtime == {"cpu": 10_000} and statuses["team-b"].pending == 6
    assert statuses["org"].used == {"cpu": 20_000}
    assert len(quotas_table(list(statuses.values())).rows) == 3
    # a restarted scheduler rebuilds the tree from the stream and its used from the store
    svc2 = await c.restart_scheduler()
    assert svc2.core.quota is not None
    book = svc2.core.quota.book
    assert set(book.tree.nodes) == {"org", "team-a", "team-b"}
    assert book.used["team-a"][0] == 10_000 and book.used["team-b"][0] == 10_000
    t += 10
    await c.step(t)
    assert len(c.evictions) == 6  # nothing more to reclaim
    # deleting a quota: its pods belong to no quota, its max and its status are gone
    await c.client.publish(subjects.QUOTA_SPEC, ElasticQuota(name="team-b", parent="org", deleted=True), name="team-b")
    t += 10
    await c.step(t)
    assert set(book.tree.nodes) == {"org", "team-a"}
    assert await store.quota_max("team-b") == {}
    assert {s.name for s in await latest_quota_statuses(nats_url)} == {"org", "team-a"}
    await svc2.stop()


async def test_an_invalid_quota_is_dead_lettered_with_every_problem(nats_url: str, store: Store,
                                                                    bus_factory: BusFactory) -> None:
    from colo.messages import DeadLetter

    clock = VirtualClock(T0)
    client = await bus_factory("tester")
    dead: list[DeadLetter] = []

    async def on_dead(m: DeadLetter) -> None:
        dead.append(m)

    await client.subscribe(subjects.DEAD_LETTER, on_dead, durable="dlq")
    bus = await bus_factory("scheduler", clock=clock, retry_delay_s=0.01)
    svc = SchedulerService(SchedulerSettings())
    await svc.start(service_context(bus, store, clock))
    await bus.start_consumers()
    bad = ElasticQuota(name="x", min={"cpu": 5, "gpu": 1}, max={"cpu": 4})
    await client.publish(subjects.QUOTA_SPEC, bad, name="x")
    for b in (bus, client, bus, client):
        await b.settle(timeout_s=20)
    assert svc.core.quota is not None and not svc.core.quota.book.active
    assert len(dead) == 1
    assert "quota x: min.gpu: unknown resource" in dead[0].reason
    assert "quota x: min.cpu: 5 exceeds max.cpu 4" in dead[0].reason
    await svc.stop()


# ------------------------------------------------------------------ two replicas, one quota

RACE_PODS = 24
RACE_MAX = 6_000


async def _race(nats_url: str, redis_url: str, store: Store, tester: Bus, chain: bool) -> tuple[int, int]:
    """Two replicas place RACE_PODS pods of one quota (max RACE_MAX m) at once; returns how many got bound and
    how many binds the store refused."""
    for spec in NODES:
        await store.put_node(spec)
        await tester.publish(subjects.NODE_REGISTERED, spec, node=spec.name)
    quota = ElasticQuota(name="team", max={"cpu": RACE_MAX})
    await tester.publish(subjects.QUOTA_SPEC, quota, name="team")
    runners = []
    for i in range(2):
        svc = SchedulerService(SchedulerSettings(replicas=2, replica_index=i, seed=7, tick_interval_s=0.5,
                                                 backoff_initial_s=0.05, backoff_max_s=0.2))
        runner = ServiceRunner(svc, RuntimeSettings(nats_url=nats_url, redis_url=redis_url,
                                                    store_prefix=store.keys.prefix, instance=f"r{i}"))
        await runner.start()
        runners.append(runner)
    svcs: list[SchedulerService] = [r.service for r in runners]  # type: ignore[misc]
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 15
        while not all(s.core.table.n == len(NODES) and s.core.quota is not None and s.core.quota.book.active
                      for s in svcs):
            assert loop.time() < deadline
            await asyncio.sleep(0.01)
        if not chain:  # binds that do not name their quota: only each replica's own view holds the max
            for s in svcs:
                assert s.core.quota is not None
                s.core.quota.chain_of = lambda pod: ()  # type: ignore[method-assign]
        specs = [msgspec.structs.replace(team_pod(f"p{j:02d}", "team", 9500), sim=None) for j in range(RACE_PODS)]
        await tester.publish_many([(subjects.POD_ADMITTED, PodAdmitted(spec=s, at=0.0), s.uid, {}) for s in specs])
        deadline = loop.time() + 20
        while True:
            queued = sum(len(s.core.queue.pods()) for s in svcs)
            placed = len(await store.bound_nodes([s.uid for s in specs]))
            if placed + queued >= RACE_PODS and not any(s.core.queue.lengths()["active"] or
                                                        s.core.queue.lengths()["backoff"] for s in svcs):
                break
            assert loop.time() < deadline, [s.debug()["queue"] for s in svcs]
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)  # a few more cycles: nothing else may get bound
        return (len(await store.bound_nodes([s.uid for s in specs])),
                sum(s.totals["bind_conflicts"] for s in svcs))
    finally:
        for r in runners:
            await r.stop()


async def test_two_replicas_never_push_a_quota_over_max(nats_url: str, redis_url: str, store: Store,
                                                        bus_factory: BusFactory) -> None:
    tester = await bus_factory("tester")
    bound, refused = await _race(nats_url, redis_url, store, tester, chain=True)
    used = await store.quota_used("team")
    assert used["cpu"] <= RACE_MAX
    assert bound == RACE_MAX // 1000 and used["cpu"] == RACE_MAX
    if refused == 0:  # each replica saw the other's binds before its own: the invariant held without a race
        pytest.skip("the two replicas did not race this time, so the store's quota check was not exercised")


async def test_without_the_quota_chain_the_race_goes_over_max(nats_url: str, redis_url: str, store: Store,
                                                              bus_factory: BusFactory) -> None:
    tester = await bus_factory("tester")
    # the race needs both replicas to place before either sees the other's binds: on a loaded machine one may
    # run late and see them, so up to 3 rounds on fresh stores; one round over max shows the race
    counts = []
    for attempt in range(3):
        fresh = store if attempt == 0 else await Store.connect(redis_url, prefix=f"race-{uuid.uuid4().hex[:8]}")
        try:
            bound, _ = await _race(nats_url, redis_url, fresh, tester, chain=False)
        finally:
            if fresh is not store:
                await fresh.delete_all()
                await fresh.close()
        counts.append(bound)
        if bound > RACE_MAX // 1000:
            break
    assert max(counts) > RACE_MAX // 1000, counts  # each replica alone kept to the max; together they passed it

