"""Store against a real redis-server: batched Pending admission, leases with fencing tokens, fenced binds."""

from __future__ import annotations

import asyncio

import pytest

from colo.messages import NodeSpec, PodRecord, PodSpec, Resources
from colo.store import REASON_LEASE_LOST, Fence, Store

pytestmark = pytest.mark.integration

GI = 2**30


def node(name: str, cpu: int = 4000) -> NodeSpec:
    alloc = Resources(cpu=cpu, memory=8 * GI)
    return NodeSpec(name=name, capacity=alloc, allocatable=alloc)


def spec(uid: str, cpu: int = 1000) -> PodSpec:
    return PodSpec(uid=uid, name=uid, requests=Resources(cpu=cpu))


async def test_admit_pending_writes_new_and_pending_pods_only(store: Store) -> None:
    await store.put_node(node("n1"))
    await store.put_pod(PodRecord(spec=spec("bound"), updated_at=1.0))
    assert (await store.bind("bound", "n1", Resources(cpu=1000), 2.0)).ok
    await store.put_pod(PodRecord(spec=spec("done"), phase="Succeeded", node="n1", updated_at=3.0))
    await store.put_pod(PodRecord(spec=spec("evicted"), phase="Pending", reason="Evicted", updated_at=3.0))
    out = await store.admit_pending([spec("new"), spec("bound"), spec("done"), spec("evicted"), spec("new")], 10.0)
    assert out == [True, False, False, True, True]
    new = await store.get_pod("new")
    assert new is not None and (new.phase, new.node, new.updated_at) == ("Pending", "", 10.0)
    assert new.spec == spec("new")
    bound = await store.get_pod("bound")
    assert bound is not None and bound.node == "n1" and bound.updated_at == 2.0
    done = await store.get_pod("done")
    assert done is not None and done.phase == "Succeeded"
    evicted = await store.get_pod("evicted")
    assert evicted is not None and (evicted.phase, evicted.reason) == ("Pending", "")
    assert {r.spec.uid for r in await store.list_pods()} == {"new", "bound", "done", "evicted"}
    assert await store.admit_pending([], 1.0) == []


async def test_bound_nodes_reads_many_bindings(store: Store) -> None:
    await store.put_node(node("n1"))
    for uid in ("a", "b"):
        assert (await store.bind(uid, "n1", Resources(cpu=100), 5.0)).ok
    assert await store.bound_nodes(["a", "x", "b"]) == {"a": ("n1", 5.0), "b": ("n1", 5.0)}


async def test_lease_is_exclusive_renewable_and_fenced_by_growing_tokens(store: Store) -> None:
    first = await store.acquire_lease("sched", "alpha", 10_000)
    assert first is not None and first.value == f"{first.token}:alpha"
    assert await store.acquire_lease("sched", "beta", 10_000) is None
    assert await store.lease_holder("sched") == first.value
    assert await store.renew_lease(first, 10_000)
    assert await store.release_lease(first)
    assert await store.lease_holder("sched") is None
    assert not await store.renew_lease(first, 10_000)  # released: cannot be renewed back
    second = await store.acquire_lease("sched", "beta", 10_000)
    assert second is not None and second.token > first.token
    assert not await store.release_lease(first)  # someone else's now
    assert await store.lease_holder("sched") == second.value


async def test_lease_expires_without_renewal(store: Store) -> None:
    lease = await store.acquire_lease("sched", "alpha", 50)
    assert lease is not None
    await asyncio.sleep(0.15)
    assert await store.lease_holder("sched") is None
    assert not await store.renew_lease(lease, 50)
    taken = await store.acquire_lease("sched", "beta", 1000)
    assert taken is not None and taken.token == lease.token + 1


@pytest.mark.parametrize(("holder", "duration_ms"), [("", 1000), ("alpha", 0)], ids=["no-holder", "no-duration"])
async def test_lease_rejects_bad_arguments(store: Store, holder: str, duration_ms: int) -> None:
    with pytest.raises(ValueError, match="lease"):
        await store.acquire_lease("sched", holder, duration_ms)


async def test_fenced_bind_needs_the_current_lease(store: Store) -> None:
    await store.put_node(node("n1"))
    old = await store.acquire_lease("sched", "alpha", 10_000)
    assert old is not None
    ok = await store.bind_many([("a", "n1", Resources(cpu=100), 1.0)], fence=Fence("sched", old.value))
    assert [r.ok for r in ok] == [True]
    await store.release_lease(old)
    new = await store.acquire_lease("sched", "beta", 10_000)
    assert new is not None
    # A paused ex-leader wakes up with its old value: every bind is refused, nothing is written.
    stale = await store.bind_many([("b", "n1", Resources(cpu=100), 2.0), ("c", "n1", Resources(cpu=100), 2.0)],
                                  fence=Fence("sched", old.value))
    assert [(r.ok, r.reason) for r in stale] == [(False, REASON_LEASE_LOST)] * 2
    assert await store.bound_node("b") is None
    assert (await store.allocated("n1")).cpu == 100
    assert (await store.bind("b", "n1", Resources(cpu=100), 3.0, fence=Fence("sched", new.value))).ok
    assert (await store.bind("c", "n1", Resources(cpu=100), 3.0)).ok  # unfenced binds stay possible
    assert (await store.allocated("n1")).cpu == 300


async def test_bind_many_and_admit_across_script_chunks(store: Store) -> None:
    """More binds than one script call takes: results stay in input order and later binds see
    earlier ones across the chunk boundary (the node fills up exactly)."""
    from colo.store import BIND_CHUNK

    n = BIND_CHUNK * 2 + 7
    await store.put_node(node("big", cpu=100 * (n - 5)))
    specs = [spec(f"p{i}", 100) for i in range(n)]
    assert await store.admit_pending(specs, 1.0) == [True] * n
    results = await store.bind_many([(s.uid, "big", s.requests, 2.0) for s in specs])
    assert [r.ok for r in results] == [True] * (n - 5) + [False] * 5
    assert all(r.reason == "Insufficient cpu" for r in results[n - 5:])
    assert (await store.allocated("big")).pods == n - 5
    assert await store.admit_pending(specs, 3.0) == [False] * (n - 5) + [True] * 5


async def test_allocated_many_is_exact_and_zero_for_unknown_nodes(store: Store) -> None:
    big = 2**50  # the largest quantity the scheduler accepts; a Lua number would round it
    await store.put_node(NodeSpec(name="n1", capacity=Resources(cpu=big, memory=big),
                                  allocatable=Resources(cpu=big, memory=big)))
    assert (await store.bind("a", "n1", Resources(cpu=big - 1, memory=3), 1.0)).ok
    got = await store.allocated_many(["n1", "ghost"])
    assert got == {"n1": Resources(cpu=big - 1, memory=3, pods=1), "ghost": Resources()}
    assert got["n1"] == await store.allocated("n1")
    assert await store.allocated_many([]) == {}
    assert await store.all_allocated() == {"n1": got["n1"]}
