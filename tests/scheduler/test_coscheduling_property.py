"""Property (hypothesis): after any sequence of member arrivals, node additions and cordons, bind
refusals and timeouts, driven through ``Scheduler.schedule_cycle`` at advancing clock times, no gang
is ever partly bound, no member waits past its gang's deadline, and the table holds exactly what is
reserved (no room leaks from released members)."""

from __future__ import annotations

import msgspec
from gang_helpers import cluster, gang, member
from hypothesis import given, settings
from hypothesis import strategies as st
from sched_helpers import GI, node

from colo.store import BindResult
from colo_scheduler.gangbind import settle

GANGS = [
    gang("a", 4, "Strict", timeout_s=5.0, total=8),
    gang("b", 3, "NonStrict", timeout_s=20.0, total=8),
    gang("ps", 1, "Strict", timeout_s=30.0, groups=("ps", "worker"), total=2),
    gang("worker", 3, "NonStrict", timeout_s=30.0, groups=("ps", "worker"), total=6),
]
MIN = {g.name: g.min_member for g in GANGS}

step = st.one_of(
    st.tuples(st.just("arrive"), st.integers(0, len(GANGS) - 1), st.integers(1, 4)),
    st.tuples(st.just("node"), st.sampled_from([1000, 2000, 4000])),
    st.tuples(st.just("cordon"), st.integers(0, 9)),
    st.tuples(st.just("wait"), st.sampled_from([0.5, 1.0, 4.0, 12.0, 40.0])),
)


@settings(max_examples=150, deadline=None)
@given(steps=st.lists(st.tuples(step, st.lists(st.booleans(), max_size=12)), min_size=1, max_size=25))
def test_no_gang_is_ever_partly_bound(steps: list[tuple[tuple[object, ...], list[bool]]]) -> None:
    s = cluster(2, cpu=2000)
    now = 0.0
    arrived = {g.name: 0 for g in GANGS}
    bound: dict[str, str] = {}  # uid → gang key
    nodes = 2
    for op, refusals in steps:
        kind = op[0]
        if kind == "arrive":
            g = GANGS[int(op[1])]  # type: ignore[call-overload]
            for _ in range(int(op[2])):  # type: ignore[call-overload]
                k = arrived[g.name]
                s.add_pod(member(f"{g.name.split('/')[1]}-{k}", g, 1000, created_at=now), now)
                arrived[g.name] = k + 1
        elif kind == "node":
            s.on_node(node(f"n{nodes}", cpu=int(op[1]), memory=64 * GI), now)  # type: ignore[call-overload]
            nodes += 1
        elif kind == "cordon":
            name = f"n{int(op[1]) % nodes}"  # type: ignore[call-overload]
            s.on_node(msgspec.structs.replace(node(name, cpu=int(s.table.alloc[s.table.index[name], 0]),
                                                   memory=64 * GI), unschedulable=True), now)
        else:
            now += float(op[1])  # type: ignore[arg-type]
        now += 0.25
        out = s.schedule_cycle(now)
        results = [BindResult(not (refusals[k] if k < len(refusals) else False), "Insufficient cpu")
                   for k in range(len(out.placements))]
        settled, _ = settle(out.placements, results)
        for p, r in zip(out.placements, settled):
            if r.ok:
                assert p.pod.spec.gang is not None
                bound[p.pod.uid] = p.pod.spec.gang.name
            else:
                s.bind_failed(p.pod)
        # no gang partly bound, whatever happened
        for key, need in MIN.items():
            have = sum(1 for g in bound.values() if g == key)
            assert have == 0 or have >= need, (key, have, need)
        # no member waits past its gang's deadline
        assert all(deadline > now for _, _, deadline in s.waiting.values())
        # exactly the bound and the waiting pods are reserved, and the table holds their room only
        placed = s.framework.placed
        assert set(placed) == set(bound) | set(s.waiting)
        assert int(s.table.allocated[:, 0].sum()) == sum(int(p.spec.requests.cpu) for p, _ in placed.values())
        # every arrived member is bound, waiting or queued
        total = sum(arrived.values())
        assert len(bound) + len(s.waiting) + len(s.queue) == total
