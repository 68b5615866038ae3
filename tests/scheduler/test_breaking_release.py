"""Pod releases (PodStatus Succeeded/Failed) interleaved with allocation reads, binds, late PodBound
events, Redis errors, redeliveries and evictions, against real nats-server and redis-server.

Invariants checked (read back from Redis): the table never counts less on a node than the store holds
for pods still bound (an under-count lets a cycle place on room that is not there: a refused bind and
a backoff), it equals the store's sums by the next cycle after the release, a finished pod is never
placed again in the table, and a failed handler leaves the service scheduling.
"""

from __future__ import annotations

from typing import Any

import pytest
import redis.exceptions
from sched_helpers import GI, MI, node, pod

from colo import subjects
from colo.bus import MessageInfo
from colo.clock import VirtualClock
from colo.messages import PodAdmitted, PodStatus
from colo.store import Store
from colo.testing.fixtures import BusFactory, service_context
from colo_scheduler.replicas import shard_of
from colo_scheduler.service import SchedulerService
from colo_scheduler.settings import SchedulerSettings

pytestmark = pytest.mark.integration


def _info(node_name: str, delivered: int = 1) -> MessageInfo:
    return MessageInfo(subject=f"colo.v1.pod.status.{node_name}", headers={}, stream_seq=1,
                       num_delivered=delivered)


def _done(uid: str, node_name: str, at: float, reason: str = "Completed") -> PodStatus:
    phase = "Succeeded" if reason == "Completed" else "Failed"
    return PodStatus(uid=uid, node=node_name, phase=phase, at=at, reason=reason)  # type: ignore[arg-type]


async def _start(bus_factory: BusFactory, store: Store, clock: VirtualClock,
                 **settings: Any) -> SchedulerService:
    bus = await bus_factory("scheduler", clock, autostart=False)
    svc = SchedulerService(SchedulerSettings(seed=1, **settings))
    await svc.start(service_context(bus, store, clock))
    await bus.start_consumers()
    return svc


async def _cluster(svc: SchedulerService, bus_factory: BusFactory, store: Store,
                   nodes: dict[str, int], pods: dict[str, int], at: float = 10.0) -> Any:
    """Register ``nodes`` (name → cpu milli-cores), admit ``pods`` (uid → cpu) and settle; returns the tester bus."""
    tester = await bus_factory("tester")
    for name, cpu in nodes.items():
        spec = node(name, cpu=cpu, memory=8 * GI)
        await store.put_node(spec)
        await tester.publish(subjects.NODE_REGISTERED, spec, node=name)
    for uid, cpu in pods.items():
        await tester.publish(subjects.POD_ADMITTED, PodAdmitted(spec=pod(uid, cpu, MI), at=at))
    await svc.ctx.bus.settle()  # type: ignore[union-attr]
    return tester


async def _admit(svc: SchedulerService, tester: Any, uid: str, cpu: int, at: float) -> None:
    """Admit one more pod of ``cpu`` milli-cores and let the service queue it."""
    await tester.publish(subjects.POD_ADMITTED, PodAdmitted(spec=pod(uid, cpu, MI), at=at))
    await svc.ctx.bus.settle()  # type: ignore[union-attr]


def _table_cpu(svc: SchedulerService, name: str) -> int:
    return int(svc.core.table.allocated[svc.core.table.index[name], 0])


# --------------------------------------------------------------------------- what holds


async def test_a_redelivered_status_changes_nothing(bus_factory: BusFactory, store: Store) -> None:
    clock = VirtualClock(10.0)
    svc = await _start(bus_factory, store, clock)
    await _cluster(svc, bus_factory, store, {"n1": 4000}, {"a": 1500, "b": 1000})
    assert (await svc.tick(10.0))["pods_bound"] == 2
    st = _done("a", "n1", 20.0)
    await svc._on_status(st, _info("n1"))
    await svc.tick(21.0)
    await svc._on_status(st, _info("n1", delivered=2))
    await svc.tick(22.0)
    assert "a" not in svc.core.framework.placed and "a" not in svc.core.queue
    assert (await store.allocated("n1")).cpu == _table_cpu(svc, "n1") == 1000


async def test_a_release_while_a_cycle_binds_converges_next_cycle(bus_factory: BusFactory, store: Store) -> None:
    """A status handled while the cycle's bind pipeline is in flight (the cycle placed c on the
    table's sums that still held a)."""
    clock = VirtualClock(10.0)
    svc = await _start(bus_factory, store, clock)
    tester = await _cluster(svc, bus_factory, store, {"n1": 4000}, {"a": 1500})
    assert (await svc.tick(10.0))["pods_bound"] == 1
    await _admit(svc, tester, "c", 1000, 11.0)
    real_bind_many = store.bind_many
    seen: list[int] = []

    async def bind_with_a_release_in_flight(*args: Any, **kwargs: Any) -> Any:
        await svc._on_status(_done("a", "n1", 12.0), _info("n1"))
        seen.append(_table_cpu(svc, "n1"))
        return await real_bind_many(*args, **kwargs)

    store.bind_many = bind_with_a_release_in_flight  # type: ignore[method-assign]
    assert (await svc.tick(12.0))["pods_bound"] == 1
    store.bind_many = real_bind_many  # type: ignore[method-assign]
    assert seen == [1000]  # c reserved, a released: never below what c holds
    await svc.tick(13.0)
    assert (await store.allocated("n1")).cpu == _table_cpu(svc, "n1") == 1000
    assert set(svc.core.framework.placed) == {"c"}


async def test_an_eviction_redelivered_before_the_rebind_queues_the_pod_once(bus_factory: BusFactory,
                                                                            store: Store) -> None:
    clock = VirtualClock(10.0)
    svc = await _start(bus_factory, store, clock)
    await _cluster(svc, bus_factory, store, {"n1": 4000}, {"a": 1500})
    assert (await svc.tick(10.0))["pods_bound"] == 1
    st = _done("a", "n1", 20.0, reason="Evicted")
    await svc._on_status(st, _info("n1"))
    await svc._on_status(st, _info("n1", delivered=2))
    assert svc.core.queue.lengths()["active"] == 1 and "a" not in svc.core.framework.placed
    assert (await svc.tick(21.0))["pods_bound"] == 1
    assert await store.bound_node("a") == "n1"
    assert (await store.allocated("n1")).cpu == _table_cpu(svc, "n1") == 1500


async def test_a_release_refused_by_redis_is_not_an_under_count(bus_factory: BusFactory, store: Store) -> None:
    """The store's connection fails during the release: the binding stays in Redis, while the table
    had already let the pod go. The next cycle must count the pod again (the store still holds it), and
    the redelivery must release it for good."""
    clock = VirtualClock(10.0)
    svc = await _start(bus_factory, store, clock)
    tester = await _cluster(svc, bus_factory, store, {"n1": 4000}, {"a": 3000})
    assert (await svc.tick(10.0))["pods_bound"] == 1
    real_release = store.release

    async def connection_lost(*args: Any, **kwargs: Any) -> bool:
        raise redis.exceptions.ConnectionError("Connection closed by server.")

    store.release = connection_lost  # type: ignore[method-assign]
    st = _done("a", "n1", 20.0)
    with pytest.raises(redis.exceptions.ConnectionError):
        await svc._on_status(st, _info("n1"))
    store.release = real_release  # type: ignore[method-assign]
    assert await store.bound_node("a") == "n1"
    await _admit(svc, tester, "c", 2000, 21.0)
    stats = await svc.tick(21.0)
    assert _table_cpu(svc, "n1") >= (await store.allocated("n1")).cpu == 3000
    assert stats["pods_bound"] == 0 and stats["bind_conflicts"] == 0  # c waits: no bind on room a holds
    await svc._on_status(st, _info("n1", delivered=2))  # the bus's redelivery
    assert (await svc.tick(22.0 + svc.settings.unschedulable_retry_s))["pods_bound"] == 1
    assert (await store.allocated("n1")).cpu == _table_cpu(svc, "n1") == 2000
    assert set(svc.core.framework.placed) == {"c"}


async def test_a_refresh_refused_by_redis_is_retried_next_cycle(bus_factory: BusFactory, store: Store) -> None:
    """The store releases the pod but its reply is lost (the table keeps counting it), then Redis
    fails the next cycle's re-read of the node: the node must stay marked, or the table over-counts
    the finished pod until the next full resync and pods that fit in its room wait."""
    clock = VirtualClock(10.0)
    svc = await _start(bus_factory, store, clock)
    tester = await _cluster(svc, bus_factory, store, {"n1": 4000}, {"a": 3000})
    assert (await svc.tick(10.0))["pods_bound"] == 1
    real_release, real_allocated_many = store.release, store.allocated_many

    async def released_then_lost(*args: Any, **kwargs: Any) -> bool:
        await real_release(*args, **kwargs)
        raise redis.exceptions.ConnectionError("Connection closed by server.")

    async def connection_lost(*args: Any, **kwargs: Any) -> Any:
        raise redis.exceptions.ConnectionError("Connection closed by server.")

    store.release = released_then_lost  # type: ignore[method-assign]
    with pytest.raises(redis.exceptions.ConnectionError):
        await svc._on_status(_done("a", "n1", 20.0), _info("n1"))
    store.release = real_release  # type: ignore[method-assign]
    assert (await store.allocated("n1")).cpu == 0 and _table_cpu(svc, "n1") == 3000
    store.allocated_many = connection_lost  # type: ignore[method-assign]
    with pytest.raises(redis.exceptions.ConnectionError):
        await svc.tick(21.0)
    store.allocated_many = real_allocated_many  # type: ignore[method-assign]
    await _admit(svc, tester, "c", 2000, 22.0)
    stats = await svc.tick(22.0)
    assert stats["pods_bound"] == 1 and stats["bind_conflicts"] == 0
    assert _table_cpu(svc, "n1") == (await store.allocated("n1")).cpu == 2000


async def test_an_eviction_whose_requeue_failed_is_requeued_by_the_redelivery(bus_factory: BusFactory,
                                                                               store: Store) -> None:
    """The release went through, then Redis failed reading the pod back: the redelivered status finds
    no binding (released False) and must still queue the pod again."""
    clock = VirtualClock(10.0)
    svc = await _start(bus_factory, store, clock)
    await _cluster(svc, bus_factory, store, {"n1": 4000}, {"a": 1500})
    assert (await svc.tick(10.0))["pods_bound"] == 1
    real_get_pod = store.get_pod

    async def connection_lost(*args: Any) -> Any:
        raise redis.exceptions.ConnectionError("Connection closed by server.")

    store.get_pod = connection_lost  # type: ignore[method-assign]
    st = _done("a", "n1", 20.0, reason="Evicted")
    with pytest.raises(redis.exceptions.ConnectionError):
        await svc._on_status(st, _info("n1"))
    store.get_pod = real_get_pod  # type: ignore[method-assign]
    assert await store.bound_node("a") is None and "a" not in svc.core.queue
    await svc._on_status(st, _info("n1", delivered=2))
    assert "a" in svc.core.queue
    assert (await svc.tick(21.0))["pods_bound"] == 1
    assert (await store.allocated("n1")).cpu == _table_cpu(svc, "n1") == 1500


async def _two_replicas(bus_factory: BusFactory, store: Store) -> tuple[SchedulerService, SchedulerService]:
    """Replicas 0 and 1 of 2 (nodes loaded from the store). Replica 0's consumers are not started: the
    test hands it its events, so that it lags behind replica 1 exactly where the test says."""
    replicas = []
    for index in (0, 1):
        clock = VirtualClock(10.0)
        bus = await bus_factory("scheduler", clock, autostart=False)
        svc = SchedulerService(SchedulerSettings(seed=1, replicas=2, replica_index=index, lease_duration_s=1.0,
                                                 lease_renew_deadline_s=0.6, lease_retry_period_s=0.2))
        await svc.start(service_context(bus, store, clock))
        if index == 1:
            await bus.start_consumers()
        replicas.append(svc)
    return replicas[0], replicas[1]


def _uids_of(replica: int, n: int) -> list[str]:
    return [u for u in (f"pod-{i}" for i in range(100)) if shard_of(u, 2) == replica][:n]


@pytest.mark.parametrize("who", ["owner", "observer"])
async def test_a_pod_the_other_replica_released_first_converges_next_cycle(bus_factory: BusFactory, store: Store,
                                                                           who: str) -> None:
    """Every replica handles every status; the first to reach the store releases the pod there, the
    others find no binding (released False). A replica's allocation read between the store's release
    and its own status handler already leaves the pod out:

    * ``owner``: the replica that placed the pod then takes it out of the table a second time (an
      under-count: a cycle binds on room another pod holds, the store refuses);
    * ``observer``: a replica that counts the pod only through the store's sums (its PodBound not
      handled yet) kept it in them until that read, or keeps it until the next full resync.
    """
    await store.put_node(node("n1", cpu=4000, memory=8 * GI))
    r0, r1 = await _two_replicas(bus_factory, store)
    big, small = _uids_of(1, 2)
    await _cluster(r1, bus_factory, store, {}, {big: 2000, small: 1000})
    assert (await r1.tick(10.0))["pods_bound"] == 2
    svc = r1 if who == "owner" else r0
    if who == "observer":
        await svc._refresh({"n1"})  # counts both through the sums; their PodBound events are not handled
        assert _table_cpu(svc, "n1") == 3000 and small not in svc.core.framework.placed
    st = _done(small, "n1", 20.0)
    other = r0 if who == "owner" else r1
    await other._on_status(st, _info("n1"))  # the other replica reaches the store first
    if who == "owner":
        await svc._resync(20.0)  # sums without the pod, the pod still placed here
    await svc._on_status(st, _info("n1"))
    await svc.tick(21.0)
    assert _table_cpu(svc, "n1") == (await store.allocated("n1")).cpu == 2000


# --------------------------------------------------------------------------- broken


async def test_a_cycle_during_the_store_release_does_not_place_on_the_room_still_held(
        bus_factory: BusFactory, store: Store) -> None:
    """A cycle that runs while the store's release is in flight still counts the pod: with the table
    released first it placed on the room the store still held, and the bind was refused (a backoff)."""
    clock = VirtualClock(10.0)
    svc = await _start(bus_factory, store, clock)
    tester = await _cluster(svc, bus_factory, store, {"n1": 4000}, {"a": 3000})
    assert (await svc.tick(10.0))["pods_bound"] == 1
    await _admit(svc, tester, "c", 2000, 11.0)
    real_release = store.release
    stats: list[dict[str, float]] = []

    async def release_with_a_cycle_in_the_gap(*args: Any, **kwargs: Any) -> bool:
        stats.append(await svc.tick(12.0))
        released: bool = await real_release(*args, **kwargs)
        return released

    store.release = release_with_a_cycle_in_the_gap  # type: ignore[method-assign]
    await svc._on_status(_done("a", "n1", 12.0), _info("n1"))
    assert stats[0]["bind_conflicts"] == 0


async def test_a_stale_eviction_redelivered_after_the_rebind_releases_nothing(bus_factory: BusFactory,
                                                                            store: Store) -> None:
    """An eviction redelivered (its ack lost) after the pod was bound again on another node: the store
    leaves a binding on a node other than the status's alone, and the table keeps the pod placed there.
    Before, it released the new binding and queued the running pod for a second one."""
    clock = VirtualClock(10.0)
    svc = await _start(bus_factory, store, clock)
    tester = await _cluster(svc, bus_factory, store, {"n1": 3500}, {"a": 1500, "filler": 2000})
    assert (await svc.tick(10.0))["pods_bound"] == 2
    spec = node("n2", cpu=4000, memory=8 * GI)
    await store.put_node(spec)
    await tester.publish(subjects.NODE_REGISTERED, spec, node="n2")
    await svc.ctx.bus.settle()  # type: ignore[union-attr]
    evicted = _done("a", "n1", 20.0, reason="Evicted")
    await svc._on_status(evicted, _info("n1"))
    assert (await svc.tick(21.0))["pods_bound"] == 1
    assert await store.bound_node("a") == "n2"  # the precondition: bound again, elsewhere
    await svc._on_status(evicted, _info("n1", delivered=2))  # the first delivery's ack was lost
    # a runs on n2: it must stay bound and counted there, not be queued for a second binding
    assert await store.bound_node("a") == "n2"
    assert "a" in svc.core.framework.placed and "a" not in svc.core.queue
    await svc.tick(22.0)
    assert (await store.allocated("n2")).cpu == _table_cpu(svc, "n2") == 1500


async def test_a_foreign_pod_adopted_while_its_release_is_under_way_is_released_again(
        bus_factory: BusFactory, store: Store) -> None:
    """Another binder's pod: its PodBound is handled while this replica's status handler waits for
    the store's release (the binding is still there, so it is adopted); the table's release after the
    store's must take it out again, and the node's sums match the store's next cycle."""
    from colo.messages import PodBound, Resources

    clock = VirtualClock(10.0)
    svc = await _start(bus_factory, store, clock)
    await _cluster(svc, bus_factory, store, {"n1": 4000}, {})
    spec = pod("x", 1500, MI)
    assert (await store.bind("x", "n1", Resources(cpu=1500, memory=MI), 10.0)).ok
    real_release = store.release

    async def release_with_the_bound_event_first(*args: Any, **kwargs: Any) -> bool:
        await svc._on_bound([(PodBound(spec=spec, node="n1", at=10.0), _info("n1"))])
        assert "x" in svc.core.framework.placed  # adopted: the binding still stands
        released: bool = await real_release(*args, **kwargs)
        return released

    store.release = release_with_the_bound_event_first  # type: ignore[method-assign]
    await svc._on_status(_done("x", "n1", 20.0), _info("n1"))
    assert "x" not in svc.core.framework.placed
    await svc.tick(21.0)
    assert _table_cpu(svc, "n1") == (await store.allocated("n1")).cpu == 0
