"""The profile model: peaks, cold start, expiry, prod reclaimable from metrics (REFERENCE.md §7)."""

from __future__ import annotations

import pytest
from profiler_helpers import DAY, GI, cpu_peak, feed, mem_peak

from colo.messages import NodeMetric, PodMetric, Usage
from colo_profiler.model import ProfileModel
from colo_profiler.settings import ProfilerSettings


def make_model(**kw: float) -> ProfileModel:
    m = ProfileModel(ProfilerSettings(**kw))  # type: ignore[arg-type]
    m.node_registered("n1", Usage(cpu=32000, memory=64 * GI))
    m.pod_bound("web", "n1", 4000, 8 * GI, "prod", at=0.0)
    m.pod_bound("job", "n1", 2000, 4 * GI, "batch", at=0.0)
    return m


USAGE = {"web": (1000, 2 * GI), "job": (1500, 1 * GI)}
SYSTEM = (500, 1 * GI)


@pytest.mark.parametrize(
    ("now", "cold"), [(3600.0, True), (DAY - 1, True), (DAY, False), (3 * DAY, False)],
    ids=["1h-cold", "just-under-24h", "exactly-24h", "3d-warm"],
)
def test_cold_start_counts_request(now: float, cold: bool) -> None:
    m = make_model()
    feed(m, "n1", 0.0, 30, SYSTEM, USAGE)
    prof = m.profile("n1", now)
    web = next(p for p in prof.pods if p.uid == "web")
    assert web.cold is cold
    if cold:
        assert (web.cpu_peak, web.memory_peak) == (4000, 8 * GI)
        assert prof.prod_reclaimable == Usage(cpu=0, memory=0)
    else:
        assert (web.cpu_peak, web.memory_peak) == (cpu_peak(1000), mem_peak(2 * GI))
        # class-based: request − (system peak + prod-class peak) is the smaller one here
        expect_cpu = min(4000 - cpu_peak(1000), 4000 - cpu_peak(500) - cpu_peak(1000))
        expect_mem = min(8 * GI - mem_peak(2 * GI), 8 * GI - mem_peak(GI) - mem_peak(2 * GI))
        assert prof.prod_reclaimable == Usage(cpu=expect_cpu, memory=expect_mem)


def test_cold_start_configurable() -> None:
    m = make_model(cold_start_s=600.0)
    feed(m, "n1", 0.0, 30, SYSTEM, USAGE)
    assert not next(p for p in m.profile("n1", 700.0).pods if p.uid == "web").cold


def test_peaks_follow_percentiles() -> None:
    """96 of 100 samples at 1 core and 4 at 4 cores: p95 stays at 1 core; p98 memory sees the spike."""
    m = make_model(cold_start_s=0.0, cpu_half_life_s=1e9, memory_half_life_s=1e9)
    feed(m, "n1", 0.0, 96, SYSTEM, {"web": (1000, 2 * GI)})
    feed(m, "n1", 96 * 60.0, 4, SYSTEM, {"web": (4000, 6 * GI)})
    web = next(p for p in m.profile("n1", 1e4).pods if p.uid == "web")
    assert web.cpu_peak == cpu_peak(1000)
    assert web.memory_peak == mem_peak(6 * GI)


def test_class_and_system_peaks() -> None:
    m = make_model(cold_start_s=0.0)
    m.pod_bound("web2", "n1", 2000, 2 * GI, "prod", at=0.0)
    feed(m, "n1", 0.0, 20, SYSTEM, {**USAGE, "web2": (700, GI)})
    prof = m.profile("n1", 2000.0)
    assert prof.prod_peak == Usage(cpu=cpu_peak(1700), memory=mem_peak(3 * GI))
    assert prof.system_peak == Usage(cpu=cpu_peak(500), memory=mem_peak(GI))


def test_metric_class_used_for_unknown_pod() -> None:
    m = ProfileModel(ProfilerSettings(cold_start_s=0.0))
    m.ingest(NodeMetric(node="n2", at=0.0, pods=[PodMetric(uid="x", cpu=900, memory=GI, priority_class="prod")]))
    prof = m.profile("n2", 10.0)
    assert prof.prod_peak.cpu == cpu_peak(900)
    assert prof.prod_reclaimable == Usage()  # no request known, nothing to reclaim


@pytest.mark.parametrize(
    ("last_metric_at", "now", "node_alive"),
    [(0.0, 1799.0, True), (0.0, 1801.0, False), (1500.0, 1801.0, True)],
    ids=["29min", "31min", "recent-metric"],
)
def test_node_expiry(last_metric_at: float, now: float, node_alive: bool) -> None:
    m = make_model()
    feed(m, "n1", last_metric_at, 1, SYSTEM, USAGE)
    rows_before = m.cpu.rows_in_use
    gone = m.expire(now)
    assert ("n1" in m.nodes) is node_alive
    assert (gone == ["n1"]) is (not node_alive)
    if not node_alive:
        assert m.cpu.rows_in_use == rows_before - 8  # 5 classes + system + 2 pods
        assert not m.pods


def test_pod_expiry_while_node_lives() -> None:
    m = make_model()
    feed(m, "n1", 0.0, 1, SYSTEM, USAGE)
    feed(m, "n1", 60.0, 40, SYSTEM, {"web": USAGE["web"]})  # job vanished from reports
    m.expire(60.0 + 39 * 60.0)
    assert "job" not in m.pods and "web" in m.pods
    assert {p.uid for p in m.profile("n1", 3000.0).pods} == {"web"}


def test_terminated_pod_dropped() -> None:
    m = make_model()
    feed(m, "n1", 0.0, 3, SYSTEM, USAGE)
    m.pod_ended("job")
    assert {p.uid for p in m.profile("n1", 200.0).pods} == {"web"}


def test_publish_interval() -> None:
    m = make_model()
    feed(m, "n1", 0.0, 1, SYSTEM, USAGE)
    assert m.due(0.0) == ["n1"]
    m.mark_published("n1", 0.0)
    assert m.due(59.0) == []
    assert m.due(60.0) == ["n1"]


def test_negative_usage_clamped() -> None:
    m = ProfileModel(ProfilerSettings(cold_start_s=0.0))
    m.ingest(NodeMetric(node="n3", at=0.0, system_usage=Usage(cpu=-5, memory=-1)))
    prof = m.profile("n3", 1.0)
    assert prof.system_peak.cpu == cpu_peak(0)


@pytest.mark.parametrize("names", [
    ["n1"],
    ["n1", "n2", "n3"],
    ["n3", "n1"],
    ["empty", "n2"],
    [],
], ids=["one", "three", "unsorted", "node-without-modelled-pods", "none"])
def test_batched_profiles_equal_one_by_one(names: list[str]) -> None:
    m = make_model()
    m.node_registered("n2", Usage(cpu=16000, memory=32 * GI))
    m.pod_bound("api", "n2", 3000, 2 * GI, "prod", at=0.0)
    m.pod_bound("old", "n3", 1000, GI, "prod", at=-2 * DAY)
    m.pod_bound("late", "empty", 1000, GI, "prod", at=0.0)
    feed(m, "n1", 0.0, 40, SYSTEM, USAGE)
    feed(m, "n2", 0.0, 40, (800, 2 * GI), {"api": (2500, GI)})
    feed(m, "n3", 0.0, 20, (100, GI), {"old": (700, GI // 2)})
    feed(m, "empty", 0.0, 3, (100, GI), {})
    now = 2 * DAY
    batched = m.profiles(names, now)
    assert [p.node for p in batched] == names
    assert batched == [m.profile(n, now) for n in names]
    if "n2" in names:  # the peaks are really per node, not shared across the batch
        api = next(p for p in batched[names.index("n2")].pods if p.uid == "api")
        assert api.cpu_peak == cpu_peak(2500)


def test_batched_profiles_unknown_node_raises() -> None:
    m = make_model()
    with pytest.raises(KeyError):
        m.profiles(["n1", "nope"], 0.0)


@pytest.mark.parametrize(("republish_s", "later_s", "change", "want"), [
    (600.0, 60.0, False, False),
    (600.0, 60.0, True, True),
    (600.0, 600.0, False, True),
    (600.0, 599.0, False, False),
    (0.0, 60.0, False, True),
], ids=["unchanged-skipped", "changed-sent", "unchanged-republished-after-interval", "just-under-interval",
        "interval-0-always"])
def test_worth_sending(republish_s: float, later_s: float, change: bool, want: bool) -> None:
    m = make_model(republish_interval_s=republish_s, cold_start_s=0.0)
    feed(m, "n1", 0.0, 30, SYSTEM, USAGE)
    t0 = 1800.0
    first = m.profile("n1", t0)
    assert m.worth_sending(first)  # nothing sent yet
    m.mark_published("n1", t0, first)
    if change:
        m.pod_ended("job")
    again = m.profile("n1", t0 + later_s)
    assert m.worth_sending(again) is want
