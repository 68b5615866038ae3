"""Workload (namespace, app) models: one replica's usage distribution, cold-start predictions from it, expiry and
the WorkloadProfiles published per namespace."""

from __future__ import annotations

import pytest
from profiler_helpers import DAY, GI, cpu_peak, feed, mem_peak

from colo.messages import PodPrediction, Usage, WorkloadPrediction, WorkloadProfile
from colo_profiler.model import ProfileModel
from colo_profiler.settings import ProfilerSettings

WEB = ("shop", "web")
SYSTEM = (500, GI)


def make_model(**kw: object) -> ProfileModel:
    """Two warm replicas of shop/web on n1 and n2 (bound two days ago); decay off so percentiles are exact."""
    settings = {"cpu_half_life_s": 1e9, "memory_half_life_s": 1e9, "cold_start_s": DAY, **kw}
    m = ProfileModel(ProfilerSettings(**settings))  # type: ignore[arg-type]
    for n in ("n1", "n2", "n3"):
        m.node_registered(n, Usage(cpu=32000, memory=64 * GI))
    m.pod_bound("web-a", "n1", 4000, 8 * GI, "prod", at=-2 * DAY, workload=WEB)
    m.pod_bound("web-b", "n2", 4000, 8 * GI, "prod", at=-2 * DAY, workload=WEB)
    return m


def warm_web(m: ProfileModel, a: int = 1000, b: int = 1000, n_a: int = 50, n_b: int = 50) -> None:
    """Samples of web-a (``a`` milli-cores, 2 GiB) and web-b (``b`` milli-cores, 3 GiB) from two days ago."""
    feed(m, "n1", -2 * DAY, n_a, SYSTEM, {"web-a": (a, 2 * GI)})
    feed(m, "n2", -2 * DAY, n_b, SYSTEM, {"web-b": (b, 3 * GI)})


def pred(m: ProfileModel, node: str, uid: str, now: float = 0.0) -> PodPrediction:
    return next(p for p in m.profile(node, now).pods if p.uid == uid)


@pytest.mark.parametrize(("n_a", "n_b", "want_cpu"), [
    (50, 50, 3000),   # half the samples at 3 cores: p95 sees them
    (96, 4, 1000),    # 4 % at 3 cores: p95 stays at 1 core
], ids=["half-high", "few-high"])
def test_workload_is_one_replicas_distribution_across_nodes(n_a: int, n_b: int, want_cpu: int) -> None:
    m = make_model()
    warm_web(m, a=1000, b=3000, n_a=n_a, n_b=n_b)
    (prof,) = m.workload_profiles(0.0)
    assert prof.namespace == "shop"
    (w,) = prof.workloads
    # the per-replica distribution, not the sum of replicas (which would be 4 cores)
    assert w == WorkloadPrediction(app="web", cpu_peak=cpu_peak(want_cpu), memory_peak=mem_peak(3 * GI), pods=2,
                                   since=-2 * DAY, warm=True)
    assert m.workload_samples == n_a + n_b


@pytest.mark.parametrize(("from_workload", "request_cpu", "own_cpu", "want_cpu", "want_flag"), [
    (True, 4000, None, cpu_peak(1000), True),
    (True, 500, None, 500, True),                   # capped by the request
    (True, 4000, 3500, cpu_peak(3500), True),       # its own peak so far is higher: kept
    (False, 4000, None, 4000, False),               # the reference: full request
], ids=["workload-peak", "capped-by-request", "own-peak-higher", "reference-setting"])
def test_cold_pod_of_a_warm_workload(from_workload: bool, request_cpu: int, own_cpu: int | None, want_cpu: int,
                                     want_flag: bool) -> None:
    m = make_model(cold_start_from_workload=from_workload)
    warm_web(m)
    m.pod_bound("web-c", "n3", request_cpu, 8 * GI, "prod", at=-3600.0, workload=WEB)
    feed(m, "n3", -3600.0, 3, SYSTEM, {"web-c": (own_cpu, GI)} if own_cpu is not None else {})
    p = pred(m, "n3", "web-c")
    assert (p.cold, p.from_workload, p.cpu_peak) == (True, want_flag, want_cpu)
    assert p.memory_peak == (mem_peak(3 * GI) if from_workload else 8 * GI)


@pytest.mark.parametrize(("first_sample", "app", "want_flag"), [
    (-2 * DAY, "web", True),
    (-DAY + 60, "web", False),        # workload observed for less than cold_start_s
    (-2 * DAY, "", False),            # no app: no workload
], ids=["warm-workload", "young-workload", "no-app"])
def test_workload_needs_app_and_warmth(first_sample: float, app: str, want_flag: bool) -> None:
    m = make_model()
    feed(m, "n1", first_sample, 30, SYSTEM, {"web-a": (1000, 2 * GI)})
    m.pod_bound("new", "n3", 4000, 8 * GI, "prod", at=-60.0, workload=("shop", app) if app else None)
    feed(m, "n3", -60.0, 1, SYSTEM, {})  # the node reports; the new pod has no sample yet
    p = pred(m, "n3", "new")
    assert p.from_workload is want_flag
    assert (p.cpu_peak, p.memory_peak) == ((cpu_peak(1000), mem_peak(2 * GI)) if want_flag else (4000, 8 * GI))


def test_cold_pods_from_workload_reclaim_against_their_predicted_peak() -> None:
    """A node whose only prod pod is new: the reference reclaims nothing; from the workload the class-based
    estimate counts its request against class peak + its predicted peak (its usage counted twice, on purpose)."""
    ours, ref = make_model(), make_model(cold_start_from_workload=False)
    for m in (ours, ref):
        warm_web(m)
        m.pod_bound("web-c", "n3", 4000, 8 * GI, "prod", at=-600.0, workload=WEB)
        feed(m, "n3", -600.0, 10, SYSTEM, {"web-c": (800, GI)})
    c, mem = cpu_peak(1000), mem_peak(3 * GI)
    assert ref.profile("n3", 0.0).prod_reclaimable == Usage()
    got = ours.profile("n3", 0.0)
    assert got.prod_peak == Usage(cpu=cpu_peak(800), memory=mem_peak(GI))
    want_cpu = min(4000 - c, 4000 - (cpu_peak(500) + cpu_peak(800) + c))
    want_mem = min(8 * GI - mem, 8 * GI - (mem_peak(GI) + mem_peak(GI) + mem))
    assert got.prod_reclaimable == Usage(cpu=want_cpu, memory=want_mem)
    assert want_cpu > 0 and want_mem > 0


def test_warm_pod_keeps_its_own_model() -> None:
    m = make_model()
    warm_web(m, a=600, b=3000)
    p = pred(m, "n1", "web-a")
    assert (p.cold, p.from_workload, p.cpu_peak) == (False, False, cpu_peak(600))


def test_workload_outlives_its_pods_until_expiry() -> None:
    m = make_model(expiry_s=1800.0, cold_start_s=600.0)
    warm_web(m)
    last = -2 * DAY + 49 * 60.0
    m.pod_ended("web-a")
    m.pod_ended("web-b")
    assert m.workloads[WEB].pods == set()
    # a replacement replica bound right after the old ones ended is predicted from the workload
    m.pod_bound("web-new", "n1", 4000, 8 * GI, "prod", at=last + 60, workload=WEB)
    assert pred(m, "n1", "web-new", now=last + 120).from_workload
    rows = m.cpu.rows_in_use
    m.expire(last + 1799)
    assert WEB in m.workloads
    m.expire(last + 1801)
    assert WEB not in m.workloads
    assert m.cpu.rows_in_use == rows - 1 - 6 - 6  # the workload row; both nodes expired too (5 classes + system)


def test_expired_workload_starts_afresh_when_sampled_again() -> None:
    m = make_model(expiry_s=1800.0)
    warm_web(m)
    m.expire(4 * DAY)
    assert not m.workloads and not m.pods
    m.pod_bound("web-z", "n1", 4000, 8 * GI, "prod", at=4 * DAY, workload=WEB)
    feed(m, "n1", 4 * DAY, 2, SYSTEM, {"web-z": (2000, GI)})
    wl = m.workloads[WEB]
    assert (wl.first_seen, wl.pods) == (4 * DAY, {"web-z"})
    assert not pred(m, "n1", "web-z", now=4 * DAY + 600).from_workload  # young again


def test_samples_before_the_binding_stay_out_of_the_workload() -> None:
    """A pod first seen in a metric has no app yet; it joins its workload at its first sample after the bind."""
    m = make_model()
    feed(m, "n3", 0.0, 2, SYSTEM, {"early": (700, GI)})
    assert m.workload_samples == 0
    m.pod_bound("early", "n3", 1000, GI, "prod", at=0.0, workload=WEB)
    feed(m, "n3", 120.0, 3, SYSTEM, {"early": (700, GI)})
    assert m.workload_samples == 3 and m.workloads[WEB].pods == {"early"}


def test_workload_updates_dedup_and_empty_namespace() -> None:
    m = make_model(publish_interval_s=60.0, republish_interval_s=600.0, expiry_s=1800.0)
    t = -2 * DAY + 49 * 60.0
    warm_web(m)
    first = m.workload_updates(t)
    assert [p.namespace for p in first] == ["shop"] and first[0].workloads[0].pods == 2
    assert m.workload_updates(t + 30) == []          # within the publish interval
    assert m.workload_updates(t + 60) == []          # due but unchanged: not re-sent
    m.pod_ended("web-a")
    changed = m.workload_updates(t + 120)
    assert [w.pods for p in changed for w in p.workloads] == [1]
    m.expire(t + 1801)
    assert m.workload_updates(t + 1801) == [WorkloadProfile(namespace="shop", at=t + 1801)]
    assert m.workload_updates(t + 1900) == []
