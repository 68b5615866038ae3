"""Which nodes a round treats as sources: by what they carry, not by replacements still on their way.

A node that received a migrated pod's replacement is booked the replacement's usage until its metric shows it
(booking.py). That booking must count against the node's room as a target only: evicting another pod to make
room for one that does not run there yet cures nothing (on the 2-hour audited run a node at 44 % memory, high
threshold 55 %, lost a pod because a replacement booked +17 % on it).
"""

from __future__ import annotations

import pytest
from agent_model import ModelNode, NodeAgentModel, drive

from colo.messages import (
    EvictionCommand,
    NodeMetric,
    NodeSpec,
    PodBound,
    PodMetric,
    PodSpec,
    PodStatus,
    Resources,
    Usage,
)
from colo.sim.migration_audit import MigrationAudit
from colo_descheduler.lownodeload import Eviction
from colo_descheduler.service import DeschedulerService
from colo_descheduler.settings import DeschedulerSettings, HighThresholds, LowThresholds

GI = 1 << 30
ALLOC = (10_000, 100 * GI)
AGGRESSIVE = DeschedulerSettings(low_thresholds=LowThresholds(cpu=20, memory=35),
                                 high_thresholds=HighThresholds(cpu=40, memory=55),
                                 consecutive_high_rounds=1, interval_s=0.0)


def _metric(node: str, at: float, pods: dict[str, int]) -> NodeMetric:
    """A metric whose node figure is Σ ``pods`` (uid → memory GiB), each at 500 m."""
    cpu = 500 * len(pods)
    mem = sum(pods.values()) * GI
    return NodeMetric(node=node, at=at, window_s=300.0, node_usage=Usage(cpu=cpu, memory=mem),
                      system_usage=Usage(), pods=[PodMetric(uid=u, cpu=500, memory=g * GI) for u, g in pods.items()])


def _service(dst_pods: dict[str, int], replacement_gib: int) -> DeschedulerService:
    """``src`` (its pod ``mv`` of ``replacement_gib`` evicted at 0 towards ``cold``), ``dst`` carrying
    ``dst_pods`` on which the scheduler bound ``mv``'s replacement at 5 s, ``cold`` nearly empty; every
    metric at 30 s, the replacement not in ``dst``'s yet."""
    svc = DeschedulerService(AGGRESSIVE)
    v = svc.cluster
    for n in ("src", "dst", "cold"):
        v.on_node(NodeSpec(name=n, capacity=Resources(cpu=ALLOC[0], memory=ALLOC[1], pods=110),
                           allocatable=Resources(cpu=ALLOC[0], memory=ALLOC[1], pods=110)))
    src_pods = {"mv": replacement_gib, "s1": 20}
    for node, pods in (("src", src_pods), ("dst", dst_pods), ("cold", {"c1": 5})):
        for uid in pods:
            v.on_bound(PodBound(spec=PodSpec(uid=uid, name=uid, app=uid, priority=5500), node=node, at=-900.0))
    v.on_metric(_metric("src", -10.0, src_pods))
    v.start_migration(Eviction("mv", "src", "cold", "default/mv", (500, replacement_gib * GI)), 0.0)
    v.on_bound(PodBound(spec=PodSpec(uid="mv", name="mv", app="mv", priority=5500), node="dst", at=5.0))
    v.on_metric(_metric("dst", 30.0, dst_pods))
    v.on_metric(_metric("cold", 30.0, {"c1": 5}))
    return svc


SOURCE_CASES = [
    # (id, dst's pods (GiB memory), replacement GiB, evictions off dst expected)
    ("carries-44pct-booked-61pct-is-no-source", {"d1": 20, "d2": 24}, 17, 0),
    ("carries-60pct-is-a-source", {"d1": 20, "d2": 24, "d3": 16}, 17, 1),
    ("carries-55pct-at-threshold-is-no-source", {"d1": 30, "d2": 25}, 30, 0),
]


@pytest.mark.parametrize(("dst_pods", "replacement_gib", "off_dst"), [c[1:] for c in SOURCE_CASES],
                         ids=[c[0] for c in SOURCE_CASES])
def test_incoming_bookings_do_not_make_a_source(dst_pods: dict[str, int], replacement_gib: int,
                                                off_dst: int) -> None:
    svc = _service(dst_pods, replacement_gib)
    res = svc.run_round(40.0)
    assert sum(1 for e in res.evictions if e.source == "dst") == off_dst, (res.high, res.evictions, res.skipped)
    assert "dst" not in res.low  # its incoming booking still counts against its room


def test_incoming_booking_kept_apart_in_the_load() -> None:
    """``fresh_loads``: ``dst`` carries its metric's 44 GiB; the 17 GiB replacement, bound 25 s of the 300 s
    window before the metric, is its ``incoming`` less the share the window already holds (booking.py)."""
    svc = _service({"d1": 20, "d2": 24}, 17)
    loads = {n.name: n for n in svc.cluster.fresh_loads(40.0, 180.0)}
    dst = loads["dst"]
    assert dst.usage[1] == 44 * GI and dst.pods == 2
    assert dst.incoming[1] == round(17 * GI * (1 - 25 / 300)) and dst.incoming_pods == 1
    assert dst.booked().usage[1] == dst.usage[1] + dst.incoming[1] and dst.booked().pods == 3
    assert loads["src"].usage[1] == 20 * GI and loads["src"].incoming == (0, 0)  # mv's share taken off


def test_replacement_placed_by_the_scheduler_on_a_mid_node_audited() -> None:
    """Driven over the node-agent model, audited as the 2-hour run is (colo.sim.migration_audit).

    ``hot`` (62 % memory: 7 GiB over 55 %) loses ``h2`` (20 GiB) towards ``cold``; the scheduler places the
    replacement on ``mid`` instead (44 %, real 64 % once it runs). Before this change ``mid`` turned a source
    the moment the replacement was bound (its booking +20 %) and lost ``m1`` at 10 s while its newest metric
    showed 44 % (an over-eviction, required 0); now ``mid`` waits until its metric shows it high (220 s), then
    loses the one pod its excess needs.
    """
    gi_pod = {"h1": 40, "h2": 20, "m1": 20, "m2": 22}
    nodes = [ModelNode("hot", ALLOC, (500, 2 * GI), report_offset_s=0.0),
             ModelNode("cold", ALLOC, (500, 5 * GI), report_offset_s=20.0),
             ModelNode("cold2", ALLOC, (500, 5 * GI), report_offset_s=30.0),
             ModelNode("mid", ALLOC, (500, 2 * GI), report_offset_s=40.0)]
    model = NodeAgentModel(nodes, place=lambda ev: "mid" if ev.uid == "h2" else ev.target)
    for uid, gib in gi_pod.items():
        spec = PodSpec(uid=uid, name=uid, app=uid, priority=5500)
        model.add_pod(spec, "hot" if uid.startswith("h") else "mid", (500, gib * GI), at=-900.0)
    audit = MigrationAudit(allocatable={n.name: n.allocatable for n in nodes}, low=(20, 35), high=(40, 55))
    res = drive(DeschedulerService(AGGRESSIVE), model, duration_s=1800.0, on_metric=audit.add_metric)
    for e in res.evictions:
        audit.add_eviction(EvictionCommand(uid=e.uid, node=e.source, reason="LowNodeLoad", at=e.at))
    moves = [(e.at, e.uid, e.source, e.target) for e in res.evictions]
    assert audit.over_evictions() == [], moves
    assert max(audit.migrations_per_pod().values()) <= 2, moves
    assert res.from_node("hot") == 1 and res.from_node("mid") == 1, moves


def _settling(metric_at: float) -> DeschedulerService:
    """``src`` (s1 30 GiB, s2 28 GiB, mv 10 GiB) lost ``mv`` at 0; its next metric at ``metric_at`` has s1 and
    s2 at 59 GiB together and, before 300 s, mv's share of the 300 s window still in its node figure."""
    svc = DeschedulerService(AGGRESSIVE)
    v = svc.cluster
    for n in ("src", "cold"):
        v.on_node(NodeSpec(name=n, capacity=Resources(cpu=ALLOC[0], memory=ALLOC[1], pods=110),
                           allocatable=Resources(cpu=ALLOC[0], memory=ALLOC[1], pods=110)))
    for uid, node in (("s1", "src"), ("s2", "src"), ("mv", "src"), ("c1", "cold")):
        v.on_bound(PodBound(spec=PodSpec(uid=uid, name=uid, app=uid, priority=5500), node=node, at=-900.0))
    v.on_metric(_metric("cold", metric_at, {"c1": 5}))
    v.on_metric(_metric("src", -10.0, {"s1": 30, "s2": 28, "mv": 10}))
    v.start_migration(Eviction("mv", "src", "cold", "default/mv", (500, 10 * GI)), 0.0)
    v.on_status(PodStatus(uid="mv", node="src", phase="Failed", at=0.0, reason="Evicted"))
    gone = max(min(metric_at, 300.0), 0.0) / 300.0  # share of the window mv no longer ran
    left_in = round((1 - gone) * 10 * GI) if metric_at < 300.0 else 0
    pods = {"s1": 31, "s2": 28}
    v.on_metric(NodeMetric(node="src", at=metric_at, window_s=300.0,
                           node_usage=Usage(cpu=1000, memory=59 * GI + left_in), system_usage=Usage(memory=left_in),
                           pods=[PodMetric(uid=u, cpu=500, memory=g * GI) for u, g in pods.items()]))
    return svc


SETTLING_CASES = [
    # (id, src's metric at, round at, evictions off src)
    ("earlier-eviction-not-yet-shown-waits", 50.0, 60.0, 0),
    ("metric-shows-the-eviction-still-high-evicts", 390.0, 400.0, 1),
]


@pytest.mark.parametrize(("metric_at", "round_at", "evicted"), [c[1:] for c in SETTLING_CASES],
                         ids=[c[0] for c in SETTLING_CASES])
def test_a_source_waits_until_its_metric_shows_its_evictions(metric_at: float, round_at: float,
                                                             evicted: int) -> None:
    """59 % of memory (4 GiB over 55 %) by the book after ``mv`` left: a real excess, but one the node's
    metrics cannot confirm until they no longer hold ``mv`` (one window after it left, booking.py). On the
    2-hour run (seed 4) a node cured by 0.1 % of memory by one eviction crept back over the threshold by the
    booking's estimate and lost a second pod 60 s later, where one cured it."""
    svc = _settling(metric_at)
    res = svc.run_round(round_at)
    assert "src" in res.high
    assert sum(1 for e in res.evictions if e.source == "src") == evicted, (res.evictions, res.skipped)
