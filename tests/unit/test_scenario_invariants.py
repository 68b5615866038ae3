"""The coordinator's per-tick store snapshot equals the store's own readers, and follows changes."""

from __future__ import annotations

import pytest

from colo.messages import NodeResource, NodeSpec, Resources
from colo.sim.invariants import AllocationWatch, StoreSnapshot, parse_allocated
from colo.store import Store

G = 10**9


def _node(name: str, cpu: int = 8000) -> NodeSpec:
    cap = Resources(cpu=cpu, memory=16 * G, pods=10)
    return NodeSpec(name=name, capacity=cap, allocatable=cap)


async def _expected(store: Store) -> tuple[dict[str, Resources], dict[str, NodeResource], dict[str, Resources]]:
    return ({n.name: n.allocatable for n in await store.list_nodes()}, await store.list_node_resources(),
            await store.all_allocated())


@pytest.mark.parametrize(
    ("names", "reply", "want"),
    [
        pytest.param([], "", {}, id="no-nodes"),
        pytest.param(["a"], "", {"a": Resources()}, id="empty-hash"),
        pytest.param(["a", "b"], "cpu,500,pods,1;", {"a": Resources(cpu=500, pods=1), "b": Resources()},
                     id="one-empty-one-set"),
        pytest.param(["a"], "batch_cpu,7,other,3", {"a": Resources(batch_cpu=7)}, id="unknown-field-ignored"),
    ],
)
def test_parse_allocated(names: list[str], reply: str, want: dict[str, Resources]) -> None:
    assert parse_allocated(names, reply) == want


def test_parse_allocated_rejects_a_short_reply() -> None:
    with pytest.raises(ValueError, match="2 nodes"):
        parse_allocated(["a", "b"], "cpu,1")


async def test_snapshot_equals_store_readers_and_follows_changes(store: Store) -> None:
    snap = StoreSnapshot()
    assert await snap.read(store) == ({}, {}, {})
    for n in ("n1", "n2", "n3"):
        await store.put_node(_node(n))
    assert await snap.read(store) == await _expected(store)
    await store.put_node_resource(NodeResource(node="n1", batch_cpu=3000, batch_memory=G, at=1.0))
    ok = await store.bind("p1", "n1", Resources(cpu=1000, memory=G, batch_cpu=500), 1.0)
    assert ok.ok
    got = await snap.read(store)
    assert got == await _expected(store) and got[2]["n1"].batch_cpu == 500
    # changed spec and offer must be picked up although earlier bytes were cached
    await store.put_node(_node("n2", cpu=4000))
    await store.put_node_resource(NodeResource(node="n1", batch_cpu=1000, at=2.0))
    got = await snap.read(store)
    assert got == await _expected(store)
    assert got[0]["n2"].cpu == 4000 and got[1]["n1"].batch_cpu == 1000


async def test_watch_reports_a_native_overcommit(store: Store) -> None:
    await store.put_node(_node("n1", cpu=2000))
    assert (await store.bind("p1", "n1", Resources(cpu=2000), 1.0)).ok
    watch = AllocationWatch()
    assert await watch.check(store, 60.0) == []
    await store.put_node(_node("n1", cpu=1000))  # the node shrank below what is bound
    assert await watch.check(store, 120.0) == ["t=120s n1: cpu allocated 2000 > allocatable 1000"]
