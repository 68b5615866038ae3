"""Reservations against a real redis-server: a reusable reservation gets a consuming pod's room back when the pod
ends, an allocate-once one does not; submissions recorded Pending (replays and name clashes)."""

from __future__ import annotations

import pytest

from colo.messages import NodeSpec, PodSpec, ReservationOwner, ReservationSpec, Resources
from colo.reservations import PENDING_EXISTS, PENDING_KNOWN, ReservationStore
from colo.store import Store

pytestmark = pytest.mark.integration

GI = 2**30
WEB = (ReservationOwner(workload="shop/web"),)


def pod(uid: str, cpu: int, memory: int = GI) -> PodSpec:
    return PodSpec(uid=uid, name=uid, namespace="shop", app="web", requests=Resources(cpu=cpu, memory=memory))


async def setup(store: Store) -> ReservationStore:
    alloc = Resources(cpu=8000, memory=16 * GI)
    await store.put_node(NodeSpec(name="n1", capacity=alloc, allocatable=alloc))
    return ReservationStore(store.redis, store.keys)


@pytest.mark.parametrize(
    ("allocate_once", "held_after_release", "alloc_after_release"),
    [
        pytest.param(False, Resources(cpu=3000, memory=2 * GI, pods=1), Resources(cpu=3000, memory=2 * GI, pods=1),
                     id="reusable-gets-the-room-back"),
        pytest.param(True, Resources(), Resources(), id="allocate-once-does-not"),
    ],
)
async def test_room_after_the_consuming_pod_ends(store: Store, allocate_once: bool, held_after_release: Resources,
                                                 alloc_after_release: Resources) -> None:
    rs = await setup(store)
    assert (await rs.reserve("r1", "n1", Resources(cpu=3000, memory=2 * GI), at=0.0, ttl_s=600, owners=WEB,
                             allocate_once=allocate_once)).ok
    assert (await rs.bind_on("r1", pod("a", 4000), "n1", 1.0)).ok  # 3000 from the room, 1000 from the node
    if allocate_once:  # it ended: the memory the pod did not use went back to the node
        assert await store.allocated("n1") == Resources(cpu=4000, memory=GI, pods=1)
    else:  # the rest stays held
        assert await store.allocated("n1") == Resources(cpu=4000, memory=2 * GI, pods=2)
    assert await store.release("a", "Succeeded", "Completed", 2.0)
    assert not await store.release("a", "Succeeded", "Completed", 2.1)  # once
    rec = await rs.get("r1")
    assert rec is not None and rec.held == held_after_release
    assert await store.allocated("n1") == alloc_after_release
    if not allocate_once:  # the next owner pod takes the whole room again
        assert (await rs.bind_on("r1", pod("b", 3000, 2 * GI), "n1", 3.0)).ok
        assert await store.allocated("n1") == Resources(cpu=3000, memory=2 * GI, pods=2)


async def test_reusable_room_goes_to_the_node_once_the_reservation_ended(store: Store) -> None:
    rs = await setup(store)
    await rs.reserve("r1", "n1", Resources(cpu=3000), at=0.0, ttl_s=60, owners=WEB, allocate_once=False)
    assert (await rs.bind_on("r1", pod("a", 2000, 0), "n1", 1.0)).ok
    assert await rs.sweep(100.0) == ["r1"]  # expired: its remaining 1000 go back to the node
    assert await store.allocated("n1") == Resources(cpu=2000, pods=1)
    assert await store.release("a", "Succeeded", "", 101.0)
    assert await store.allocated("n1") == Resources()
    rec = await rs.get("r1")
    assert rec is not None and rec.state == "Expired" and rec.held == Resources()


async def test_pending_submissions(store: Store) -> None:
    rs = await setup(store)
    sub = ReservationSpec(name="r1", requests=Resources(cpu=1000), owners=list(WEB), ttl_s=60, created_at=5.0)
    assert await rs.put_pending(sub, 6.0) == ""
    assert await rs.put_pending(sub, 7.0) == PENDING_KNOWN
    [(rec, back)] = await rs.pending()
    assert (rec.state, rec.node, rec.held.cpu, rec.expires_at, back) == ("Pending", "", 1000, 65.0, sub)
    assert await store.allocated("n1") == Resources()  # holds nothing
    assert await rs.end_pending("r1", "Pending", "0/1 nodes are available: 1 Insufficient cpu", 8.0)
    assert (await rs.get("r1")).reason.startswith("0/1 nodes")  # type: ignore[union-attr]
    assert (await rs.reserve("r1", "n1", sub.requests, at=9.0, ttl_s=56.0, owners=WEB, created_at=5.0)).ok
    assert await rs.pending() == []
    assert await rs.put_pending(sub, 10.0) == PENDING_KNOWN  # a replay of the placed one
    again = ReservationSpec(name="r1", requests=Resources(cpu=1000), owners=list(WEB), ttl_s=60, created_at=11.0)
    assert await rs.put_pending(again, 11.0) == PENDING_EXISTS
    assert [r.state for r in await rs.all()] == ["Available"]
    assert await rs.release("r1", 12.0, "done")
    assert await rs.put_pending(again, 12.0) == ""  # the name is free again
    assert await rs.end_pending("r1", "Expired", "ttl passed", 80.0)
    assert await rs.pending() == [] and (await rs.get("r1")).state == "Expired"  # type: ignore[union-attr]
