"""Bookings against what the metrics show, and the time-window limits."""

from __future__ import annotations

import pytest
from agent_model import GI, ModelNode, NodeAgentModel
from hypothesis import given, settings
from hypothesis import strategies as st

from colo.messages import NodeMetric, PodBound, PodMetric, PodSpec, PodStatus, Usage
from colo_descheduler.booking import Booking, covered
from colo_descheduler.cluster import ClusterView
from colo_descheduler.limits import LimitKey, MigrationLimiter
from colo_descheduler.lownodeload import Candidate, Eviction, max_unavailable
from colo_descheduler.settings import DeschedulerSettings, WindowLimit

ALLOC = (32_000, 128 * GI)


@pytest.mark.parametrize(
    ("window", "run", "share"),
    [((0, 300), (-100, 400), 1.0), ((0, 300), (0, 150), 0.5), ((0, 300), (300, 400), 0.0),
     ((0, 300), (-50, 30), 0.1), ((0, 0), (-1, 1), 1.0)],
    ids=["whole-window", "first-half", "after-window", "head-only", "zero-window"],
)
def test_covered(window: tuple[float, float], run: tuple[float, float], share: float) -> None:
    assert covered(*window, *run) == pytest.approx(share)


@pytest.mark.parametrize(
    ("src_offset", "dst_offset", "rebind_s", "ends"),
    [(0.0, 30.0, 5.0, {"source": 300, "target": 330, "gone": 330}),
     (50.0, 10.0, 5.0, {"source": 350, "target": 310, "gone": 350}),
     (20.0, 20.0, 40.0, {"source": 320, "target": 380, "gone": 380}),
     (0.0, 0.0, 1.0, {"source": 300, "target": 360, "gone": 360})],
    ids=["dst-half-interval-later", "src-late-dst-early", "slow-rebind", "same-offsets-fast-rebind"],
)
def test_bookings_follow_what_the_metrics_show(src_offset: float, dst_offset: float, rebind_s: float,
                                               ends: dict[str, int]) -> None:
    """One pod of 4000 m moves from ``src`` to ``dst`` at t = 0; at every round (10 s) for 15 minutes, the
    corrected usage of both nodes equals their real usage after the move within 1 % of a node, and each
    booking side ends at the first report that no longer needs it: the source's first report whose window
    starts after the pod left (≥ 300 s), the target's first whose window starts after the replacement
    started (≥ rebind + 300 s), long before the 900 s TTL."""
    model = NodeAgentModel([ModelNode("src", ALLOC, (4000, 8 * GI), report_offset_s=src_offset),
                            ModelNode("dst", ALLOC, (2000, 8 * GI), report_offset_s=dst_offset)],
                           rebind_delay_s=rebind_s)
    view = ClusterView()
    for spec in model.node_specs():
        view.on_node(spec)
    for i, cpu in enumerate((4000, 6000, 9000)):
        spec = PodSpec(uid=f"p{i}", name=f"p{i}")
        view.on_bound(model.add_pod(spec, "src", (cpu, GI), at=-900.0))
    for t in range(-900, 0):
        model.sample(float(t))
        for name in model.due(float(t)):
            view.on_metric(model.metric(name, float(t)))
    ev = Eviction("p0", "src", "dst", "", (4000, GI))
    view.start_migration(ev, 0.0)
    view.on_status(model.evict(ev, 0.0))
    want = {"src": 4000 + 6000 + 9000, "dst": 2000 + 4000}  # real CPU after the move
    seen: set[str] = set()
    booking = view.bookings["p0"]
    seen_ends = {"source": -1, "target": -1, "gone": -1}
    for t in range(0, 900):
        for bound, status in model.binds_due(float(t)):
            view.on_bound(bound)
            view.on_status(status)
        model.sample(float(t))
        for name in model.due(float(t)):
            view.on_metric(model.metric(name, float(t)))
            seen.add(name)
        if t % 10 == 0 and seen == {"src", "dst"}:
            loads = {n.name: n.booked().usage[0] for n in view.fresh_loads(float(t), 180.0)}
            for name, cpu in want.items():
                assert abs(loads[name] - cpu) <= ALLOC[0] // 100, (t, name, loads[name], cpu)
        view.expire(float(t), 300.0)
        for side, done in (("source", booking.source_done), ("target", booking.target_done),
                           ("gone", "p0" not in view.bookings)):
            if done and seen_ends[side] < 0:
                seen_ends[side] = t
    assert seen_ends == ends


def _move_one_pod(src_offset: float, dst_offset: float, rebind_s: float, pod_cpu: int,
                  check: list[tuple[int, str, int, int]]) -> int:
    """Move a ``pod_cpu`` pod from src to dst at 0; append (t, node, corrected, real) every 10 s once both
    nodes reported; returns the second the booking was gone (-1 if never)."""
    model = NodeAgentModel([ModelNode("src", ALLOC, (3000, 8 * GI), report_offset_s=src_offset),
                            ModelNode("dst", ALLOC, (2000, 8 * GI), report_offset_s=dst_offset)],
                           rebind_delay_s=rebind_s)
    view = ClusterView()
    for spec in model.node_specs():
        view.on_node(spec)
    view.on_bound(model.add_pod(PodSpec(uid="mv", name="mv"), "src", (pod_cpu, GI), at=-900.0))
    view.on_bound(model.add_pod(PodSpec(uid="stay", name="stay"), "src", (5000, GI), at=-900.0))
    for t in range(-900, 0):
        model.sample(float(t))
        for name in model.due(float(t)):
            view.on_metric(model.metric(name, float(t)))
    ev = Eviction("mv", "src", "dst", "", (pod_cpu, GI))
    view.start_migration(ev, 0.0)
    view.on_status(model.evict(ev, 0.0))
    real = {"src": 3000 + 5000, "dst": 2000 + pod_cpu}
    seen: set[str] = set()
    for t in range(0, 600):
        for bound, status in model.binds_due(float(t)):
            view.on_bound(bound)
            view.on_status(status)
        model.sample(float(t))
        for name in model.due(float(t)):
            view.on_metric(model.metric(name, float(t)))
            seen.add(name)
        if t % 10 == 0 and seen == {"src", "dst"}:
            for load in view.fresh_loads(float(t), 180.0):
                check.append((t, load.name, load.booked().usage[0], real[load.name]))
        view.expire(float(t), 300.0)
        if "mv" not in view.bookings:
            return t
    return -1


@settings(max_examples=25, deadline=None)
@given(st.sampled_from([0.0, 10.0, 20.0, 30.0, 40.0, 50.0]), st.sampled_from([0.0, 10.0, 20.0, 30.0, 40.0, 50.0]),
       st.integers(1, 50), st.integers(500, 12_000))
def test_bookings_neither_over_nor_under_count(src_offset: float, dst_offset: float, rebind_s: int,
                                               pod_cpu: int) -> None:
    """For any report offsets, rebind delay and pod size, every round's corrected usage of source and target
    is the real usage after the move within 1 % of a node, and the booking ends no later than one window
    plus one report interval (and one round) after the replacement started."""
    check: list[tuple[int, str, int, int]] = []
    gone = _move_one_pod(src_offset, dst_offset, float(rebind_s), pod_cpu, check)
    assert check
    for t, node, corrected, real in check:
        assert abs(corrected - real) <= ALLOC[0] // 100, (t, node, corrected, real)
    assert 0 < gone <= rebind_s + 300 + 60 + 10


def test_replacement_on_another_node_moves_the_booking() -> None:
    view = ClusterView()
    view.on_bound(PodBound(spec=PodSpec(uid="p", name="p"), node="a", at=0.0))
    view.start_migration(Eviction("p", "a", "b", "", (1000, GI)), 100.0)
    view.on_bound(PodBound(spec=PodSpec(uid="p", name="p"), node="c", at=105.0))
    booking = view.bookings["p"]
    assert (booking.target_node, booking.left_at, booking.bound_at) == ("c", 105.0, 105.0)
    # c's metric 60 s later holds 60/300 of the replacement: 80 % of it is still booked; the pod is listed
    metric = NodeMetric(node="c", at=165.0, window_s=300.0, node_usage=Usage(cpu=1200),
                        pods=[PodMetric(uid="p", cpu=1000)])
    assert booking.target_share(metric) == (pytest.approx(0.8), 0)


def test_booking_ttl_is_the_backstop() -> None:
    """The pod left its source but no replacement was bound and no metric came: the TTL ends the booking."""
    view = ClusterView(DeschedulerSettings(booking_ttl_s=900.0))
    view.start_migration(Eviction("p", "a", "b", "", (1000, GI)), 0.0)
    view.on_status(PodStatus(uid="p", node="a", phase="Failed", at=1.0, reason="Evicted"))
    view.expire(900.0, 300.0)
    assert "p" in view.bookings and view.migrations == {}
    view.expire(901.0, 300.0)
    assert view.bookings == {}


def test_eviction_that_never_took_drops_its_booking() -> None:
    """No word of the pod leaving or rebinding when the migration's TTL passes: the pod still runs on its
    source (its metric lists it), so the booking must not keep taking it off for the rest of the 900 s."""
    view = ClusterView()
    view.start_migration(Eviction("p", "a", "b", "", (1000, GI)), 0.0)
    view.expire(300.0, 300.0)
    assert "p" in view.bookings  # still running at the TTL
    view.expire(301.0, 300.0)
    assert view.bookings == {} and view.migrations == {}


def test_running_status_before_binding_moves_the_booking() -> None:
    view = ClusterView()
    view.start_migration(Eviction("p", "a", "b", "", (1000, GI)), 0.0)
    view.on_status(PodStatus(uid="p", node="c", phase="Running", at=7.0))
    booking = view.bookings["p"]
    assert (booking.target_node, booking.bound_at, booking.left_at) == ("c", 7.0, 7.0)
    assert view.migrations == {}


def test_source_share_while_listed_and_after() -> None:
    b = Booking("p", "a", "b", (1000, GI), started_at=100.0, ran_since=0.0, left_at=100.0)
    listed = NodeMetric(node="a", at=90.0, pods=[PodMetric(uid="p", cpu=1000)])
    assert b.source_share(listed) == (1.0, 1)
    gone = NodeMetric(node="a", at=160.0, window_s=300.0)
    assert b.source_share(gone) == (pytest.approx(100 / 300), 0)  # [-140, 160] holds its run 0..100
    assert b.source_share(NodeMetric(node="a", at=400.0, window_s=300.0)) == (0.0, 0)
    assert b.source_done


LIMIT_CASES = [
    # (name, settings, history [(key, started, finished)], candidate, now, planned, replicas, refused-by)
    ("node-2-in-5-min", DeschedulerSettings(), [(LimitKey("n", "ns", ""), 0.0, 10.0),
                                                (LimitKey("n", "ns", ""), 20.0, 30.0)],
     LimitKey("n", "ns", ""), 100.0, [], {}, "node n"),
    ("node-window-passed", DeschedulerSettings(), [(LimitKey("n", "ns", ""), 0.0, 10.0),
                                                   (LimitKey("n", "ns", ""), 20.0, 30.0)],
     LimitKey("n", "ns", ""), 331.0, [], {}, ""),
    ("node-running-counts-forever", DeschedulerSettings(), [(LimitKey("n", "ns", ""), 0.0, None),
                                                            (LimitKey("n", "ns", ""), 20.0, None)],
     LimitKey("n", "ns", ""), 5000.0, [], {}, "node n"),
    ("node-planned-this-round", DeschedulerSettings(), [(LimitKey("n", "ns", ""), 0.0, 10.0)],
     LimitKey("n", "ns", ""), 100.0, [LimitKey("n", "ns", "")], {}, "node n"),
    ("workload-max-unavailable-8-replicas", DeschedulerSettings(),
     [(LimitKey("a", "ns", "ns/web"), 0.0, 5.0), (LimitKey("b", "ns", "ns/web"), 10.0, 15.0)],
     LimitKey("c", "ns", "ns/web"), 200.0, [], {"ns/web": 8}, "workload ns/web"),
    ("workload-30-replicas-allows-3", DeschedulerSettings(),
     [(LimitKey("a", "ns", "ns/web"), 0.0, 5.0), (LimitKey("b", "ns", "ns/web"), 10.0, 15.0)],
     LimitKey("c", "ns", "ns/web"), 200.0, [], {"ns/web": 30}, ""),
    ("namespace-off-by-default", DeschedulerSettings(),
     [(LimitKey(f"n{i}", "ns", ""), 0.0, None) for i in range(20)], LimitKey("x", "ns", ""), 1.0, [], {}, ""),
    ("namespace-limit", DeschedulerSettings(namespace_window_limit=WindowLimit(max_migrations=3, window_s=600)),
     [(LimitKey(f"n{i}", "ns", ""), 0.0, 1.0) for i in range(3)], LimitKey("x", "ns", ""), 500.0, [], {},
     "namespace ns"),
    ("global-limit", DeschedulerSettings(global_window_limit=WindowLimit(max_migrations=2, window_s=60)),
     [(LimitKey("a", "x", ""), 0.0, 1.0), (LimitKey("b", "y", ""), 0.0, 1.0)], LimitKey("c", "z", ""), 30.0,
     [], {}, "cluster"),
]


@pytest.mark.parametrize(("settings", "history", "key", "now", "planned", "replicas", "by"),
                         [c[1:] for c in LIMIT_CASES], ids=[c[0] for c in LIMIT_CASES])
def test_window_limits(settings: DeschedulerSettings, history: list[tuple[LimitKey, float, float | None]],
                       key: LimitKey, now: float, planned: list[LimitKey], replicas: dict[str, int],
                       by: str) -> None:
    limiter = MigrationLimiter(settings, max_unavailable)
    for i, (k, started, finished) in enumerate(history):
        limiter.record(f"u{i}", k, started)
        if finished is not None:
            limiter.finish(f"u{i}", finished)
    reason = limiter.refuse(key, now, replicas, planned)
    assert reason.startswith(by) if by else reason == ""


def test_workload_limit_holds_after_failed_status() -> None:
    """The per-workload count does not reset on the evicted pod's Failed status (it did on main)."""
    view = ClusterView()
    for i in range(8):
        view.on_bound(PodBound(spec=PodSpec(uid=f"w{i}", name=f"w{i}", namespace="shop", app="web"), node="hot",
                               at=0.0))
    for i in range(2):
        view.start_migration(Eviction(f"w{i}", "hot", "cold", "shop/web", (1000, GI), "shop"), 10.0 * i)
        view.on_status(PodStatus(uid=f"w{i}", node="hot", phase="Failed", at=10.0 * i + 1, reason="Evicted"))
    unavailable, _ = view.workload_counts()
    assert unavailable == {"shop/web": 2}
    assert view.refuse(Candidate("w5", "other", (1000, GI), workload="shop/web", namespace="shop"), 60.0)
