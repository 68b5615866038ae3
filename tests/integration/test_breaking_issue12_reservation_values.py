"""Reservations with absurd times or amounts against a real redis-server: refused whole, nothing half-written.

A Redis script is not rolled back when a command fails half-way: the reserve script added the held room to
the node's allocation, then failed on the expiry index (``ZADD`` of a NaN score). The room stayed counted
as used with no reservation to end it — the leak REFERENCE.md §11 lists ("Reservation resources leaking"),
through one bad call. An infinite TTL made a reservation no sweep ever ends.
"""

from __future__ import annotations

import math

import pytest

from colo.messages import NodeSpec, Resources
from colo.reservations import ReservationStore
from colo.store import Store

pytestmark = pytest.mark.integration

GI = 2**30
NAN, INF = math.nan, math.inf

BAD = [
    pytest.param({"ttl_s": NAN}, id="ttl-nan"),
    pytest.param({"ttl_s": INF}, id="ttl-inf"),
    pytest.param({"at": NAN}, id="at-nan"),
    pytest.param({"at": INF}, id="at-inf"),
    pytest.param({"at": -INF}, id="at-minus-inf"),
    pytest.param({"held": Resources(cpu=2**70)}, id="held-beyond-int64"),
]


@pytest.mark.parametrize("bad", BAD)
async def test_absurd_reservation_leaves_the_node_as_it_was(store: Store, bad: dict[str, object]) -> None:
    alloc = Resources(cpu=4000, memory=8 * GI)
    await store.put_node(NodeSpec(name="n1", capacity=alloc, allocatable=alloc))
    rs = ReservationStore(store.redis, store.keys)
    args: dict[str, object] = {"held": Resources(cpu=1000, memory=GI), "at": 10.0, "ttl_s": 60.0}
    args.update(bad)
    before = await store.allocated("n1")
    try:
        out = await rs.reserve("r1", "n1", owner_uid="p", **args)  # type: ignore[arg-type]
        refused = not out.ok
    except ValueError:
        refused = True
    assert refused
    assert await store.allocated("n1") == before  # nothing of the room stays counted
    assert await rs.available() == [] and await rs.get("r1") is None
