"""Reservations against a real redis-server: reserve, consume, expire, abort, failed binds; allocations add up."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from colo.messages import NodeResource, NodeSpec, PodSpec, Resources
from colo.reservations import (
    REASON_NO_RESERVATION,
    REASON_NOT_COVERED,
    REASON_NOT_OWNER,
    ReservationStore,
    owner_workload,
)
from colo.store import Store

pytestmark = pytest.mark.integration

GI = 2**30


def node(name: str, cpu: int = 4000, memory: int = 8 * GI, pods: int = 0) -> NodeSpec:
    alloc = Resources(cpu=cpu, memory=memory, pods=pods)
    return NodeSpec(name=name, capacity=alloc, allocatable=alloc)


def pod(uid: str, cpu: int = 1000, memory: int = GI, app: str = "web") -> PodSpec:
    return PodSpec(uid=uid, name=uid, namespace="shop", app=app, requests=Resources(cpu=cpu, memory=memory))


async def setup(store: Store) -> ReservationStore:
    await store.put_node(node("n1"))
    await store.put_node(node("n2"))
    return ReservationStore(store.redis, store.keys)


async def bound_requests(store: Store, name: str) -> tuple[int, int, int]:
    """(Σ cpu, Σ memory, pods) of the pods bound on ``name``, from their bindings."""
    cpu = mem = 0
    uids = await store.bound_uids(name)
    for uid in uids:
        h = await store.redis.hgetall(store.keys.binding(uid))
        cpu += int(h[b"cpu"])
        mem += int(h[b"memory"])
    return cpu, mem, len(uids)


async def test_held_room_is_used_for_every_other_bind(store: Store) -> None:
    rs = await setup(store)
    assert (await rs.reserve("r1", "n1", Resources(cpu=3000, memory=GI), at=0.0, ttl_s=60,
                             owner_uid="a")).ok
    assert await store.allocated("n1") == Resources(cpu=3000, memory=GI, pods=1)
    other = await store.bind("b", "n1", Resources(cpu=1500), 1.0)
    assert not other.ok and other.reason == "Insufficient cpu"
    assert (await store.bind("c", "n1", Resources(cpu=1000), 1.0)).ok  # the rest of the node is free
    refused = await rs.reserve("r2", "n1", Resources(cpu=500), at=1.0, ttl_s=60, owner_uid="d")
    assert not refused.ok and refused.reason == "Insufficient cpu"
    assert (await rs.reserve("r1", "n1", Resources(cpu=3000, memory=GI), at=2.0, ttl_s=60,
                             owner_uid="a")).ok  # idempotent
    assert (await store.allocated("n1")).cpu == 4000


async def test_a_pod_taking_none_of_the_held_room_does_not_consume_it(store: Store) -> None:
    """A batch-* owner on a reservation of native cpu/memory is refused (nothing changes); a reservation holding
    only a pod slot still takes any owner."""
    rs = await setup(store)
    await store.put_node_resource(NodeResource(node="n1", batch_cpu=8000, batch_memory=8 * GI))
    await rs.reserve("r1", "n1", Resources(cpu=1000, memory=GI), at=0.0, ttl_s=60, owner_workload="shop/web")
    batch = PodSpec(uid="b", name="b", namespace="shop", app="web", qos_class="BE", priority_class="batch",
                    requests=Resources(batch_cpu=2000, batch_memory=GI))
    refused = await rs.bind_on("r1", batch, "n1", 1.0)
    assert not refused.ok and refused.reason.startswith(REASON_NOT_COVERED)
    rec = await rs.get("r1")
    assert rec is not None and (rec.state, rec.consumed_by) == ("Available", "")
    assert await store.allocated("n1") == Resources(cpu=1000, memory=GI, pods=1)
    await rs.reserve("slot", "n2", Resources(), at=0.0, ttl_s=60, owner_workload="shop/web")
    assert (await rs.bind_on("slot", batch, "n2", 1.0)).ok is False  # n2 has no batch room: the node decides
    assert (await rs.bind_on("slot", pod("c"), "n2", 1.0)).ok


async def test_owner_consumes_the_room_and_allocations_add_up(store: Store) -> None:
    rs = await setup(store)
    await rs.reserve("r1", "n1", Resources(cpu=1000, memory=GI), at=0.0, ttl_s=60, owner_uid="a",
                     owner_workload="shop/web")
    assert (await store.bind("x", "n1", Resources(cpu=2500), 0.5)).ok  # node: 3500 of 4000 used
    stranger = await rs.bind_on("r1", pod("s", app="db"), "n1", 1.0)
    assert not stranger.ok and stranger.reason.startswith(REASON_NOT_OWNER)
    assert (await rs.bind_on("r1", pod("a"), "n1", 1.0)).ok
    assert await store.allocated("n1") == Resources(cpu=3500, memory=GI, pods=2)
    assert await bound_requests(store, "n1") == (3500, GI, 2)
    done = await rs.get("r1")
    assert done is not None and done.state == "Succeeded" and done.consumed_by == "a"
    assert await rs.available() == []
    again = await rs.bind_on("r1", pod("a2"), "n1", 2.0)
    assert not again.ok and again.reason.startswith(REASON_NO_RESERVATION)
    await store.release("a", "Succeeded", "done", 3.0)
    assert await store.allocated("n1") == Resources(cpu=2500, pods=1)


@pytest.mark.parametrize(("requested", "alloc_after"), [
    pytest.param(600, 600, id="smaller-pod-returns-the-rest"),
    pytest.param(1000, 1000, id="exact"),
    pytest.param(1500, 1500, id="larger-pod-takes-the-excess-from-the-node"),
])
async def test_consumption_books_exactly_the_pod(store: Store, requested: int, alloc_after: int) -> None:
    rs = await setup(store)
    await rs.reserve("r1", "n1", Resources(cpu=1000), at=0.0, ttl_s=60, owner_workload="shop/web")
    assert (await rs.bind_on("r1", pod("new-replica", cpu=requested, memory=0), "n1", 1.0)).ok
    assert await store.allocated("n1") == Resources(cpu=alloc_after, pods=1)


async def test_batch_resources_are_held_too(store: Store) -> None:
    rs = await setup(store)
    await store.put_node_resource(NodeResource(node="n1", batch_cpu=2000, batch_memory=4 * GI, at=0.0))
    be = Resources(batch_cpu=1500, batch_memory=GI)
    assert (await rs.reserve("r1", "n1", be, at=0.0, ttl_s=60, owner_uid="be-0")).ok
    other = await store.bind("be-1", "n1", Resources(batch_cpu=1000), 1.0)
    assert not other.ok and other.reason == "Insufficient kubernetes.io/batch-cpu"
    owner = PodSpec(uid="be-0", name="be-0", requests=be)
    assert (await rs.bind_on("r1", owner, "n1", 2.0)).ok
    assert await store.allocated("n1") == Resources(batch_cpu=1500, batch_memory=GI, pods=1)


async def test_refused_bind_keeps_the_room_with_the_reservation(store: Store) -> None:
    rs = await setup(store)
    await rs.reserve("r1", "n1", Resources(cpu=1000), at=0.0, ttl_s=60, owner_uid="a")
    assert (await store.bind("x", "n1", Resources(cpu=3000), 0.5)).ok
    too_big = await rs.bind_on("r1", pod("a", cpu=1500), "n1", 1.0)  # 500 m above the held room: no room
    assert not too_big.ok and too_big.reason == "Insufficient cpu"
    wrong_node = await rs.bind_on("r1", pod("a"), "n2", 1.0)
    assert not wrong_node.ok and wrong_node.reason.startswith(REASON_NO_RESERVATION)
    assert await store.bound_node("a") is None
    assert await store.allocated("n1") == Resources(cpu=4000, pods=2)
    rsv = await rs.get("r1")
    assert rsv is not None and rsv.state == "Available" and rsv.held == Resources(cpu=1000, pods=1)
    assert (await rs.bind_on("r1", pod("a"), "n1", 2.0)).ok  # the room was not lost
    assert await store.allocated("n1") == Resources(cpu=4000, memory=GI, pods=2)


async def test_already_bound_pod_is_refused_without_consuming(store: Store) -> None:
    rs = await setup(store)
    await rs.reserve("r1", "n1", Resources(cpu=1000), at=0.0, ttl_s=60, owner_uid="a")
    assert (await store.bind("a", "n2", Resources(cpu=1000), 0.5)).ok
    res = await rs.bind_on("r1", pod("a"), "n1", 1.0)
    assert not res.ok and res.reason == "already bound to n2"
    assert (await rs.get("r1")).state == "Available"  # type: ignore[union-attr]


async def test_expiry_sweeps_and_returns_the_room(store: Store) -> None:
    rs = await setup(store)
    await rs.reserve("r1", "n1", Resources(cpu=1000, memory=GI), at=0.0, ttl_s=30, owner_uid="a")
    await rs.reserve("r2", "n2", Resources(cpu=1000), at=0.0, ttl_s=90, owner_uid="b")
    assert await rs.sweep(29.0) == []
    assert await rs.sweep(30.0) == ["r1"]
    assert await store.allocated("n1") == Resources()
    assert (await store.allocated("n2")).cpu == 1000
    assert (await rs.get("r1")).state == "Expired"  # type: ignore[union-attr]
    assert [r.name for r in await rs.available()] == ["r2"]
    late = await rs.bind_on("r2", pod("b"), "n2", 95.0)  # past its TTL before any sweep: ended, refused
    assert not late.ok and "Expired" in late.reason
    assert await store.allocated("n2") == Resources()


async def test_abort_returns_the_room_once(store: Store) -> None:
    rs = await setup(store)
    await rs.reserve("r1", "n1", Resources(cpu=1000, memory=GI), at=0.0, ttl_s=60, owner_uid="a")
    assert await rs.release("r1", 1.0, "job aborted")
    assert not await rs.release("r1", 2.0, "again")
    assert await rs.sweep(100.0) == []
    assert await store.allocated("n1") == Resources()
    rsv = await rs.get("r1")
    assert rsv is not None and rsv.state == "Aborted" and rsv.reason == "job aborted"


async def test_reusable_reservation_serves_several_pods(store: Store) -> None:
    rs = await setup(store)
    await rs.reserve("r1", "n1", Resources(cpu=2000), at=0.0, ttl_s=60, owner_workload="shop/web",
                     allocate_once=False)
    for uid in ("w1", "w2"):
        assert (await rs.bind_on("r1", pod(uid, memory=0), "n1", 1.0)).ok
    assert await store.allocated("n1") == Resources(cpu=2000, pods=3)  # two pods and the slot still held
    rsv = await rs.get("r1")
    assert rsv is not None and rsv.state == "Available" and rsv.held.cpu == 0
    await rs.release("r1", 2.0, "done")
    assert await store.allocated("n1") == Resources(cpu=2000, pods=2)


async def test_racing_binds_never_overcommit(store: Store) -> None:
    rs = await setup(store)
    await rs.reserve("r1", "n1", Resources(cpu=2000), at=0.0, ttl_s=60, owner_workload="shop/web")
    owners = [rs.bind_on("r1", pod(f"w{i}", memory=0), "n1", 1.0) for i in range(4)]
    others = [store.bind(f"o{i}", "n1", Resources(cpu=1000), 1.0) for i in range(4)]
    results = await asyncio.gather(*owners, *others)
    alloc = await store.allocated("n1")
    assert alloc.cpu <= 4000
    assert alloc.cpu == (await bound_requests(store, "n1"))[0]
    assert sum(r.ok for r in results[:4]) == 1  # allocate-once: one owner only


def test_owner_workload_formula() -> None:
    assert owner_workload(pod("a")) == "shop/web"
    assert owner_workload(PodSpec(uid="x", name="x", labels={"app": "db"})) == "default/db"
    assert owner_workload(PodSpec(uid="x", name="x")) == ""


async def test_reserve_needs_an_owner_and_a_ttl(store: Store) -> None:
    rs = await setup(store)
    with pytest.raises(ValueError):
        await rs.reserve("r", "n1", Resources(cpu=1), at=0.0, ttl_s=60)
    with pytest.raises(ValueError):
        await rs.reserve("r", "n1", Resources(cpu=1), at=0.0, ttl_s=0, owner_uid="a")
    unknown = await rs.reserve("r", "n9", Resources(cpu=1), at=0.0, ttl_s=60, owner_uid="a")
    assert not unknown.ok and unknown.reason == "unknown node n9"


NODES = ("n1", "n2")
OPS = st.one_of(
    st.tuples(st.just("reserve"), st.integers(0, 3), st.sampled_from(NODES), st.integers(0, 3000),
              st.integers(0, 5), st.booleans(), st.integers(1, 60)),
    st.tuples(st.just("bind"), st.integers(0, 5), st.sampled_from(NODES), st.integers(0, 3000)),
    st.tuples(st.just("bind_on"), st.integers(0, 3), st.integers(0, 5), st.sampled_from(NODES),
              st.integers(0, 3000)),
    st.tuples(st.just("release_pod"), st.integers(0, 5)),
    st.tuples(st.just("abort"), st.integers(0, 3)),
    st.tuples(st.just("sweep")),
)


async def _check_sums(store: Store, rs: ReservationStore) -> None:
    held: dict[str, list[int]] = {n: [0, 0] for n in NODES}
    for r in await rs.available():
        held[r.node][0] += r.held.cpu
        held[r.node][1] += r.held.pods
    for n in NODES:
        alloc = await store.allocated(n)
        cpu, _, pods = await bound_requests(store, n)
        assert (alloc.cpu, alloc.pods) == (cpu + held[n][0], pods + held[n][1]), n
        assert 0 <= alloc.cpu <= 4000


async def _run_ops(redis_url: str, ops: list[tuple[object, ...]]) -> None:
    store = await Store.connect(redis_url, prefix=f"prop-{uuid.uuid4().hex[:12]}")
    try:
        rs = await setup(store)
        for t, op in enumerate(ops):
            at = float(t * 10)
            kind = op[0]
            if kind == "reserve":
                _, r, n, cpu, owner, once, ttl = op
                uid_owner = f"p{owner}" if owner % 2 == 0 else ""
                await rs.reserve(f"r{r}", str(n), Resources(cpu=int(cpu)), at=at, ttl_s=float(ttl),  # type: ignore[call-overload]
                                 owner_uid=uid_owner, owner_workload="shop/web" if not uid_owner else "",
                                 allocate_once=bool(once))
            elif kind == "bind":
                _, u, n, cpu = op
                await store.bind(f"p{u}", str(n), Resources(cpu=int(cpu)), at)  # type: ignore[call-overload]
            elif kind == "bind_on":
                _, r, u, n, cpu = op
                spec = pod(f"p{u}", cpu=int(cpu), memory=0, app="web" if int(u) % 2 else "db")  # type: ignore[call-overload]
                await rs.bind_on(f"r{r}", spec, str(n), at)
            elif kind == "release_pod":
                await store.release(f"p{op[1]}", "Succeeded", "done", at)
            elif kind == "abort":
                await rs.release(f"r{op[1]}", at, "aborted")
            else:
                await rs.sweep(at)
            await _check_sums(store, rs)
        await rs.sweep(1e9)  # everything expired: only the pods' requests stay
        for n in NODES:
            cpu, _, pods = await bound_requests(store, n)
            alloc = await store.allocated(n)
            assert (alloc.cpu, alloc.pods) == (cpu, pods)
    finally:
        await store.delete_all()
        await store.close()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(OPS, min_size=1, max_size=25))
def test_allocations_always_add_up(redis_url: str, ops: list[tuple[object, ...]]) -> None:
    """Any sequence of reserves, binds, consuming binds, pod releases, aborts and sweeps: every node's
    allocation is Σ its pods' requests + Σ the room its available reservations hold, never above
    allocatable, and once every reservation has ended, exactly its pods' requests (no leak)."""
    asyncio.run(_run_ops(redis_url, ops))
