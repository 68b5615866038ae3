"""Store against a real redis-server: records, atomic bind (race), release, allocation sums."""

from __future__ import annotations

import asyncio

import pytest

from colo.messages import NodeResource, NodeSpec, PodRecord, PodSpec, Resources
from colo.store import BindRequest, BindResult, Store

pytestmark = pytest.mark.integration

GI = 2**30


def node(name: str, cpu: int = 4000, memory: int = 8 * GI, pods: int = 0) -> NodeSpec:
    alloc = Resources(cpu=cpu, memory=memory, pods=pods)
    return NodeSpec(name=name, capacity=alloc, allocatable=alloc, labels={"zone": "a"})


async def test_node_and_pod_records_roundtrip(store: Store) -> None:
    spec = node("n1")
    await store.put_node(spec)
    await store.put_node(node("n0"))
    assert await store.get_node("n1") == spec
    assert await store.get_node("missing") is None
    assert [n.name for n in await store.list_nodes()] == ["n0", "n1"]

    res = NodeResource(node="n1", batch_cpu=1500, batch_memory=GI, at=60.0)
    await store.put_node_resource(res)
    assert await store.get_node_resource("n1") == res
    assert await store.list_node_resources() == {"n1": res}

    rec = PodRecord(spec=PodSpec(uid="p1", name="web", labels={"app": "web"},
                                 requests=Resources(cpu=500)), updated_at=1.5)
    await store.put_pod(rec)
    assert await store.get_pod("p1") == rec
    assert await store.list_pods() == [rec]
    assert await store.set_phase("p1", "Running", "Started", 3.0)
    assert not await store.set_phase("nope", "Running", "", 3.0)
    got = await store.get_pod("p1")
    assert got is not None and (got.phase, got.reason, got.updated_at) == ("Running", "Started", 3.0)


@pytest.mark.parametrize(
    ("node_spec", "node_resource", "existing", "pod_request", "expected"),
    [
        pytest.param(node("n1"), None, [], Resources(cpu=4000, memory=8 * GI), BindResult(True),
                     id="exact-fit"),
        pytest.param(node("n1"), None, [Resources(cpu=3000)], Resources(cpu=1001),
                     BindResult(False, "Insufficient cpu"), id="cpu-over-by-one"),
        pytest.param(node("n1"), None, [Resources(memory=8 * GI)], Resources(cpu=1, memory=1),
                     BindResult(False, "Insufficient memory"), id="memory-full"),
        pytest.param(node("n1", cpu=1000), None, [Resources(cpu=1000)], Resources(memory=1),
                     BindResult(True), id="zero-cpu-request-not-checked"),
        pytest.param(node("n1", pods=1), None, [Resources()], Resources(),
                     BindResult(False, "Too many pods"), id="pods-limit"),
        pytest.param(node("n1", pods=0), None, [Resources()] * 3, Resources(),
                     BindResult(True), id="pods-unlimited-when-zero"),
        pytest.param(node("n1"), None, [], Resources(batch_cpu=1),
                     BindResult(False, "Insufficient kubernetes.io/batch-cpu"), id="batch-without-noderesource"),
        pytest.param(node("n1"), NodeResource(node="n1", batch_cpu=2000, batch_memory=GI),
                     [Resources(batch_cpu=1000)], Resources(batch_cpu=1000, batch_memory=GI),
                     BindResult(True), id="batch-fits"),
        pytest.param(node("n1"), NodeResource(node="n1", mid_cpu=500, mid_memory=GI), [],
                     Resources(mid_cpu=600, mid_memory=2 * GI),
                     BindResult(False, "Insufficient kubernetes.io/mid-cpu, Insufficient kubernetes.io/mid-memory"),
                     id="mid-both-short"),
        pytest.param(None, None, [], Resources(cpu=1), BindResult(False, "unknown node n1"),
                     id="unknown-node"),
    ],
)
async def test_bind_checks(store: Store, node_spec: NodeSpec | None, node_resource: NodeResource | None,
                           existing: list[Resources], pod_request: Resources, expected: BindResult) -> None:
    if node_spec is not None:
        await store.put_node(node_spec)
    if node_resource is not None:
        await store.put_node_resource(node_resource)
    for i, r in enumerate(existing):
        assert (await store.bind(f"old{i}", "n1", r, 0.0)).ok
    before = await store.allocated("n1")
    result = await store.bind("new", "n1", pod_request, 5.0)
    assert result == expected
    after = await store.allocated("n1")
    if expected.ok:
        assert after.cpu == before.cpu + pod_request.cpu
        assert after.batch_cpu == before.batch_cpu + pod_request.batch_cpu
        assert after.pods == before.pods + 1
        assert await store.bound_node("new") == "n1"
    else:
        assert after == before
        assert await store.bound_node("new") is None


async def test_bind_twice_refused_and_record_shows_binding(store: Store) -> None:
    await store.put_node(node("n1"))
    await store.put_node(node("n2"))
    await store.put_pod(PodRecord(spec=PodSpec(uid="p", name="p")))
    assert (await store.bind("p", "n1", Resources(cpu=100), 7.0)).ok
    again = await store.bind("p", "n2", Resources(cpu=100), 8.0)
    assert again == BindResult(False, "already bound to n1")
    rec = await store.get_pod("p")
    assert rec is not None and (rec.node, rec.bound_at) == ("n1", 7.0)
    assert [r.spec.uid for r in await store.pods_on("n1")] == ["p"]
    assert await store.allocated("n2") == Resources()


async def test_concurrent_bind_race_never_overcommits(store: Store, redis_url: str) -> None:
    await store.put_node(node("tight", cpu=10_000, memory=10 * GI, pods=50))
    others = [await Store.connect(redis_url, store.keys.prefix) for _ in range(4)]
    try:
        # 4 "schedulers" race 60 binds each for 100 distinct pods (each pod tried by several)
        async def scheduler(s: Store, offset: int) -> list[BindResult]:
            reqs = [BindRequest(f"p{(offset * 25 + i) % 100}", "tight", Resources(cpu=700, memory=GI // 2), 1.0)
                    for i in range(60)]
            firsts = [await s.bind(r.uid, r.node, r.requests, r.at) for r in reqs[:10]]
            return firsts + await s.bind_many(reqs[10:])

        results = await asyncio.gather(*(scheduler(s, i) for i, s in enumerate(others)))
    finally:
        for s in others:
            await s.close()
    ok = sum(r.ok for rs in results for r in rs)
    alloc = await store.allocated("tight")
    bound = await store.bound_uids("tight")
    assert ok == 14  # 14 × 700 m = 9800 m ≤ 10 000 m; a 15th would exceed
    assert len(bound) == ok == alloc.pods
    assert alloc.cpu == ok * 700 <= 10_000
    assert alloc.memory == ok * (GI // 2)


async def test_release_frees_once(store: Store) -> None:
    await store.put_node(node("n1"))
    await store.put_pod(PodRecord(spec=PodSpec(uid="p", name="p")))
    assert (await store.bind("p", "n1", Resources(cpu=1500, memory=GI), 1.0)).ok
    assert (await store.bind("q", "n1", Resources(cpu=500), 1.0)).ok
    assert await store.release("p", "Failed", "Evicted", 9.0)
    assert not await store.release("p", "Failed", "Evicted", 9.5)
    assert not await store.release("never", "Failed", "", 9.5)
    assert await store.allocated("n1") == Resources(cpu=500, pods=1)
    rec = await store.get_pod("p")
    assert rec is not None and (rec.phase, rec.reason, rec.updated_at, rec.node) == ("Failed", "Evicted", 9.0, "n1")
    assert [r.spec.uid for r in await store.pods_on("n1")] == []  # q has no record
    assert (await store.bind("p", "n1", Resources(cpu=1500), 10.0)).ok  # requeued pod can bind again


async def test_release_with_a_node_leaves_a_binding_elsewhere_alone(store: Store) -> None:
    """A stale status names the node of an earlier binding: the pod's binding on another node stays."""
    for name in ("n1", "n2"):
        await store.put_node(node(name))
    assert (await store.bind("p", "n2", Resources(cpu=1500), 10.0)).ok
    assert not await store.release("p", "Failed", "Evicted", 9.0, node="n1")
    assert await store.bound_node("p") == "n2"
    assert await store.allocated("n2") == Resources(cpu=1500, pods=1)
    assert await store.release("p", "Succeeded", "Completed", 20.0, node="n2")
    assert await store.allocated("n2") == Resources()


async def test_concurrent_release_frees_exactly_once(store: Store) -> None:
    await store.put_node(node("n1"))
    assert (await store.bind("p", "n1", Resources(cpu=1000), 1.0)).ok
    results = await asyncio.gather(*(store.release("p", "Succeeded", "Completed", 2.0) for _ in range(10)))
    assert sum(results) == 1
    assert await store.allocated("n1") == Resources()


async def test_all_allocated_and_delete_all(store: Store) -> None:
    await store.put_node(node("a"))
    await store.put_node(node("b"))
    await store.bind("p", "a", Resources(cpu=10), 0.0)
    assert await store.all_allocated() == {"a": Resources(cpu=10, pods=1), "b": Resources()}
    assert await store.delete_all() > 0
    assert await store.list_nodes() == []
    assert await store.all_allocated() == {}
