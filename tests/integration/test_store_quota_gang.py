"""Quota charges and gang groups in the store's bind script, against a real redis-server: the max is a hard
cap (also for two clients racing), release gives a charge back once, a gang binds all together or not at all."""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from colo.messages import NodeSpec, PodSpec, Resources
from colo.reservations import ReservationStore
from colo.store import (
    BIND_CHUNK,
    REASON_GANG_MEMBER_REFUSED,
    REASON_QUOTA_EXCEEDED,
    BindRequest,
    BindResult,
    Store,
)

pytestmark = pytest.mark.integration

GI = 2**30
ZERO = {"cpu": 0, "memory": 0, "batch_cpu": 0, "batch_memory": 0, "mid_cpu": 0, "mid_memory": 0, "pods": 0}


def node(name: str, cpu: int = 16000, memory: int = 64 * GI, pods: int = 0) -> NodeSpec:
    alloc = Resources(cpu=cpu, memory=memory, pods=pods)
    return NodeSpec(name=name, capacity=alloc, allocatable=alloc)


def used(**kw: int) -> dict[str, int]:
    return {**ZERO, **kw}


@pytest.mark.parametrize(
    ("quota_max", "existing", "pod_request", "expected"),
    [
        pytest.param({"cpu": 4000}, [Resources(cpu=3000)], Resources(cpu=1000), "", id="exact-fit"),
        pytest.param({"cpu": 4000}, [Resources(cpu=3000)], Resources(cpu=1001),
                     "quota team-a exceeded: cpu", id="cpu-over-by-one"),
        pytest.param({"memory": GI}, [], Resources(cpu=1, memory=GI + 1),
                     "quota team-a exceeded: memory", id="memory-over"),
        pytest.param({"cpu": 1000, "memory": GI}, [], Resources(cpu=2000, memory=2 * GI),
                     "quota team-a exceeded: cpu, memory", id="both-over-listed"),
        pytest.param({"batch_cpu": 500}, [], Resources(cpu=10_000), "",
                     id="unrequested-resource-not-checked"),
        pytest.param({"memory": GI}, [], Resources(cpu=15000), "", id="cpu-unlimited-when-absent"),
        pytest.param({}, [Resources(cpu=8000)], Resources(cpu=8000), "", id="empty-max-unlimited"),
        pytest.param({"pods": 2}, [Resources(), Resources()], Resources(), "quota team-a exceeded: pods",
                     id="pod-count"),
        pytest.param({"cpu": 0}, [], Resources(cpu=1), "quota team-a exceeded: cpu", id="zero-max"),
    ],
)
async def test_quota_check(store: Store, quota_max: dict[str, int], existing: list[Resources],
                           pod_request: Resources, expected: str) -> None:
    await store.put_node(node("n1"))
    await store.set_quota_max("team-a", quota_max)
    for i, r in enumerate(existing):
        assert (await store.bind_many([BindRequest(f"e{i}", "n1", r, 1.0, quotas=("team-a",))]))[0].ok
    before = await store.quota_used("team-a")
    got = (await store.bind_many([BindRequest("p", "n1", pod_request, 2.0, quotas=("team-a",))]))[0]
    assert got == BindResult(not expected, expected)
    if expected:
        assert got.reason.startswith(REASON_QUOTA_EXCEEDED)
        assert await store.quota_used("team-a") == before
        assert await store.bound_node("p") is None
    else:
        assert (await store.quota_used("team-a"))["pods"] == before["pods"] + 1


async def test_every_ancestor_is_checked_and_charged(store: Store) -> None:
    await store.put_node(node("n1"))
    await store.set_quota_max("org", {"cpu": 3000})
    await store.set_quota_max("team-a", {"cpu": 2000})
    await store.set_quota_max("team-b", {"cpu": 2000})
    assert (await store.bind_many([BindRequest("a", "n1", Resources(cpu=2000), 1.0, ("team-a", "org"))]))[0].ok
    refused = (await store.bind_many([BindRequest("b", "n1", Resources(cpu=1500), 1.0, ("team-b", "org"))]))[0]
    assert refused == BindResult(False, "quota org exceeded: cpu")
    assert await store.quota_used("team-b") == ZERO
    assert await store.quota_used_all() == {"org": used(cpu=2000, pods=1), "team-a": used(cpu=2000, pods=1),
                                            "team-b": ZERO}


async def test_release_frees_once_and_rebind_charges_again(store: Store) -> None:
    await store.put_node(node("n1"))
    await store.put_node(node("n2"))
    await store.set_quota_max("q", {"cpu": 1000})
    req = BindRequest("p", "n1", Resources(cpu=1000, memory=GI), 1.0, quotas=("q",))
    assert (await store.bind_many([req]))[0].ok
    assert await store.quota_used("q") == used(cpu=1000, memory=GI, pods=1)
    assert await store.release("p", "Failed", "Evicted", 2.0)
    assert not await store.release("p", "Failed", "Evicted", 2.5)
    assert not await store.release("p", "Succeeded", "", 2.6, node="n1")
    assert await store.quota_used("q") == ZERO
    again = BindRequest("p", "n2", Resources(cpu=1000, memory=GI), 3.0, quotas=("q",))
    assert (await store.bind_many([again]))[0].ok
    assert await store.quota_used("q") == used(cpu=1000, memory=GI, pods=1)
    assert not (await store.bind_many([BindRequest("x", "n1", Resources(cpu=1), 3.0, ("q",))]))[0].ok


async def test_lowered_max_refuses_new_binds_and_delete_uncaps(store: Store) -> None:
    await store.put_node(node("n1"))
    await store.set_quota_max("q", {"cpu": 4000})
    assert (await store.bind_many([BindRequest("a", "n1", Resources(cpu=3000), 1.0, ("q",))]))[0].ok
    await store.set_quota_max("q", {"cpu": 2000})
    assert await store.quota_max("q") == {"cpu": 2000}
    assert not (await store.bind_many([BindRequest("b", "n1", Resources(cpu=100), 1.0, ("q",))]))[0].ok
    assert not await store.delete_quota("q")  # a's charge remains
    assert await store.quota_max("q") == {}
    assert (await store.bind_many([BindRequest("b", "n1", Resources(cpu=100), 1.0, ("q",))]))[0].ok
    await store.release("a", "Succeeded", "", 2.0)
    await store.release("b", "Succeeded", "", 2.0)
    assert await store.delete_quota("q")
    assert await store.quota_used_all() == {}


@pytest.mark.parametrize(
    ("quota_max", "problem"),
    [
        pytest.param({"gpu": 1}, "max.gpu: unknown resource", id="unknown-resource"),
        pytest.param({"cpu": -1}, "max.cpu: must be an int >= 0", id="negative"),
        pytest.param({"cpu": 1.5}, "max.cpu: must be an int >= 0", id="float"),
    ],
)
async def test_set_quota_max_refuses_bad_input(store: Store, quota_max: dict[str, int], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        await store.set_quota_max("q", quota_max)
    with pytest.raises(ValueError, match="name: must not be empty.*max.gpu"):
        await store.set_quota_max("", {"gpu": 1})


async def test_gang_refused_by_its_last_member_leaves_nothing_bound(store: Store) -> None:
    await store.put_node(node("n1", cpu=4000))
    await store.put_node(node("n2", cpu=1000))
    await store.set_quota_max("q", {"cpu": 10_000})
    before = await store.all_allocated()
    gang = [BindRequest(f"g{i}", "n1", Resources(cpu=1000), 1.0, ("q",), group="job-1") for i in range(3)]
    gang.append(BindRequest("g3", "n2", Resources(cpu=1500), 1.0, ("q",), group="job-1"))
    lone = BindRequest("lone", "n1", Resources(cpu=1000), 1.0)
    got = await store.bind_many([gang[0], lone, *gang[1:]])
    assert got[1] == BindResult(True)
    assert got[4] == BindResult(False, "Insufficient cpu")
    for r in (got[0], got[2], got[3]):
        assert r == BindResult(False, "gang member g3 refused: Insufficient cpu")
        assert r.reason.startswith(REASON_GANG_MEMBER_REFUSED)
    assert await store.bound_nodes([g.uid for g in gang]) == {}
    after = await store.all_allocated()
    assert after["n2"] == before["n2"] and after["n1"] == Resources(cpu=1000, pods=1)
    assert await store.quota_used("q") == ZERO


async def test_gang_members_see_each_other_on_node_and_quota(store: Store) -> None:
    await store.put_node(node("n1", cpu=4000))
    await store.set_quota_max("q", {"cpu": 2500})
    fits_node_not_quota = [BindRequest(f"a{i}", "n1", Resources(cpu=1000), 1.0, ("q",), "ga") for i in range(3)]
    got = await store.bind_many(fits_node_not_quota)
    assert got[2] == BindResult(False, "quota q exceeded: cpu")
    assert got[0].reason == "gang member a2 refused: quota q exceeded: cpu"
    over_node = [BindRequest(f"b{i}", "n1", Resources(cpu=1500), 1.0, group="gb") for i in range(3)]
    got = await store.bind_many(over_node)
    assert [r.ok for r in got] == [False] * 3 and got[2].reason == "Insufficient cpu"
    fits = [BindRequest(f"c{i}", "n1", Resources(cpu=1200), 1.0, ("q",), "gc") for i in range(2)]
    assert all(r.ok for r in await store.bind_many(fits))
    assert await store.quota_used("q") == used(cpu=2400, pods=2)


async def test_duplicate_uid_in_a_gang_refuses_the_gang(store: Store) -> None:
    await store.put_node(node("n1"))
    got = await store.bind_many([BindRequest("d", "n1", Resources(cpu=1), 1.0, group="g"),
                                 BindRequest("d", "n1", Resources(cpu=1), 1.0, group="g")])
    assert got[1] == BindResult(False, "already bound to n1")
    assert got[0] == BindResult(False, "gang member d refused: already bound to n1")
    assert await store.bound_node("d") is None


async def test_thousand_member_gang_is_never_split_across_chunks(store: Store) -> None:
    n = 1000
    assert n > BIND_CHUNK
    await store.put_node(node("big", cpu=n * 100, memory=n * GI))
    await store.put_node(node("small", cpu=100))
    lone = [BindRequest(f"l{i}", "big", Resources(cpu=1), 1.0) for i in range(BIND_CHUNK - 10)]
    gang = [BindRequest(f"m{i}", "big", Resources(cpu=50, memory=GI // 2), 1.0, group="huge") for i in range(n)]
    assert all(r.ok for r in await store.bind_many([*lone, *gang]))
    assert (await store.allocated("big")).pods == n + len(lone)
    doomed = [BindRequest(f"x{i}", "big", Resources(cpu=1), 1.0, group="doomed") for i in range(n - 1)]
    doomed.append(BindRequest("xlast", "small", Resources(cpu=200), 1.0, group="doomed"))
    got = await store.bind_many([BindRequest("y", "big", Resources(cpu=1), 1.0), *doomed])
    assert got[0].ok and not any(r.ok for r in got[1:])
    assert await store.bound_nodes([d.uid for d in doomed]) == {}


async def test_reservation_bind_on_checks_and_charges_quotas(store: Store) -> None:
    await store.put_node(node("n1"))
    rs = ReservationStore(store.redis, store.keys)
    await store.set_quota_max("q", {"cpu": 1500})
    assert (await rs.reserve("r1", "n1", Resources(cpu=1000), at=0.0, ttl_s=60, owner_workload="ns/web",
                             allocate_once=False)).ok
    pod = PodSpec(uid="a", name="a", namespace="ns", app="web", requests=Resources(cpu=1000))
    assert (await rs.bind_on("r1", pod, "n1", 1.0, quotas=("q",))).ok
    assert await store.quota_used("q") == used(cpu=1000, pods=1)
    second = PodSpec(uid="b", name="b", namespace="ns", app="web", requests=Resources(cpu=1000))
    refused = await rs.bind_on("r1", second, "n1", 1.0, quotas=("q",))
    assert not refused.ok and refused.reason == "quota q exceeded: cpu"
    assert await store.bound_node("b") is None
    assert await store.release("a", "Succeeded", "", 2.0)
    assert await store.quota_used("q") == ZERO


# ---------------------------------------------------------------- properties and races

_op = st.one_of(
    st.tuples(st.just("bind"), st.integers(0, 11), st.integers(0, 2), st.integers(1, 3000),
              st.sampled_from(["", "g1", "g2"])),
    st.tuples(st.just("release"), st.integers(0, 11), st.just(0), st.just(0), st.just("")),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(st.lists(_op, min_size=1, max_size=8), min_size=1, max_size=6))
async def test_quota_used_is_the_bound_pods_sum_and_never_over_max(
        store: Store, batches: list[list[tuple[str, int, int, int, str]]]) -> None:
    await store.delete_all()
    await store.put_node(node("n1", cpu=6000))
    await store.put_node(node("n2", cpu=6000))
    await store.set_quota_max("leaf", {"cpu": 5000, "pods": 6})
    await store.set_quota_max("parent", {"cpu": 7000})
    requested: dict[str, int] = {}
    epoch = uuid.uuid4().hex[:6]
    for batch in batches:
        binds: list[BindRequest] = []
        for op, pod_no, node_no, cpu, group in batch:
            uid = f"{epoch}-p{pod_no}"
            if op == "release":
                await store.release(uid, "Succeeded", "", 1.0)
            else:
                binds.append(BindRequest(uid, f"n{node_no % 2 + 1}", Resources(cpu=cpu), 1.0, ("leaf", "parent"),
                                         group=f"{group}-{len(binds) % 2}" if group else ""))
        results = await store.bind_many(binds)
        requested.update((b.uid, b.requests.cpu) for b, r in zip(binds, results) if r.ok)
        for group in {b.group for b in binds if b.group}:
            members = [r.ok for b, r in zip(binds, results) if b.group == group]
            assert all(members) or not any(members), f"group {group} partly bound"
        bound = await store.bound_nodes(list(requested))
        total = sum(requested[u] for u in bound)
        leaf, parent = await store.quota_used("leaf"), await store.quota_used("parent")
        assert leaf["cpu"] == parent["cpu"] == total
        assert leaf["pods"] == len(bound)
        assert total <= 5000 and len(bound) <= 6
        alloc = await store.all_allocated()
        assert alloc["n1"].cpu + alloc["n2"].cpu == total


@pytest_asyncio.fixture
async def second_client(store: Store, redis_url: str) -> AsyncIterator[Store]:
    other = await Store.connect(redis_url, prefix=store.keys.prefix)
    yield other
    await other.close()


async def test_two_replicas_racing_never_push_a_quota_over_max(store: Store, second_client: Store) -> None:
    for i in range(4):
        await store.put_node(node(f"n{i}", cpu=100_000))
    await store.set_quota_max("team", {"cpu": 20_000, "memory": 40 * GI})
    rng = random.Random(7)

    async def replica(client: Store, name: str) -> list[BindResult]:
        out: list[BindResult] = []
        for round_no in range(20):
            batch = []
            for j in range(10):
                uid = f"{name}-{round_no}-{j}"
                req = Resources(cpu=rng.randint(100, 900), memory=rng.randint(1, 3) * GI // 2)
                group = f"{name}-{round_no}" if j < 4 else ""
                batch.append(BindRequest(uid, f"n{rng.randint(0, 3)}", req, 1.0, ("team",), group=group))
            out += await client.bind_many(batch)
            await asyncio.sleep(0)
        return out

    a, b = await asyncio.gather(replica(store, "a"), replica(second_client, "b"))
    refused = [r for r in a + b if not r.ok]
    assert refused and any(r.ok for r in a) and any(r.ok for r in b)  # the race reached the cap
    used_now = await store.quota_used("team")
    assert used_now["cpu"] <= 20_000 and used_now["memory"] <= 40 * GI
    bound = await store.bound_nodes([f"{n}-{r}-{j}" for n in "ab" for r in range(20) for j in range(10)])
    assert used_now["pods"] == len(bound) == sum(r.ok for r in a + b)
    alloc = await store.all_allocated()
    assert sum(v.cpu for v in alloc.values()) == used_now["cpu"]
