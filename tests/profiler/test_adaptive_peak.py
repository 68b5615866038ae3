"""``peak_method = "adaptive"``: per-pod margins learned from the pod's own past misses (colo_profiler.adaptive).

The default ("reference") gives the profiles of REFERENCE.md §7 unchanged; adaptive raises the margin of a pod
whose daily spikes the percentile misses, gives a steady pod less headroom than × 1.10, never lets a window's
samples into its own base, and survives a checkpoint round trip.
"""

from __future__ import annotations

import asyncio
import math
import time
from typing import Any

import msgspec
import numpy as np
import pytest
from profiler_helpers import DAY, GI, busy_series, cpu_peak, mem_peak, metric

from colo import subjects
from colo.messages import (
    NodeMetric,
    NodeProfile,
    NodeSpec,
    PodBound,
    PodPrediction,
    PodSpec,
    Resources,
    Usage,
)
from colo.runtime import ServiceRunner
from colo.settings import RuntimeSettings, SettingsError, load_settings
from colo.store import Store
from colo.testing.fixtures import BusFactory
from colo_profiler import checkpoint
from colo_profiler.checkpoint import CheckpointError
from colo_profiler.model import CPU_BUCKETS, ProfileModel
from colo_profiler.predict import choose_margin
from colo_profiler.service import ProfilerService
from colo_profiler.settings import ENV_PREFIX, ProfilerSettings

STEP = 300.0
SYSTEM = (500, GI)
ADAPTIVE = ProfilerSettings(peak_method="adaptive", cpu_violation_price=1.0, memory_violation_price=1.0)
NORMAL, SPIKE = 1000, 2500
"""The spiky pod's CPU, milli-cores: NORMAL all day except 30 minutes at SPIKE from 02:00."""
STEADY = (1000, 2 * GI)


def _spiky_cpu(t: float) -> int:
    return SPIKE if 2 * 3600 <= t % DAY < 2.5 * 3600 else NORMAL


def run(settings: ProfilerSettings, days: float, start: float = 0.0, model: ProfileModel | None = None,
        ) -> ProfileModel:
    """A model of node n1 with a spiky pod and a steady pod (requests 4 cores, 8 GiB), a report every 5 min."""
    m = model or ProfileModel(settings)
    if model is None:
        m.node_registered("n1", Usage(cpu=32000, memory=64 * GI))
        m.pod_bound("spiky", "n1", 4000, 8 * GI, "prod", at=0.0)
        m.pod_bound("steady", "n1", 4000, 8 * GI, "prod", at=0.0)
    for k in range(int(round(days * DAY / STEP))):
        t = start + k * STEP
        m.ingest(metric("n1", t, SYSTEM, {"spiky": (_spiky_cpu(t), 2 * GI), "steady": STEADY}))
    return m


def pod(profile: NodeProfile, uid: str) -> PodPrediction:
    return next(p for p in profile.pods if p.uid == uid)


def test_default_is_reference_and_unchanged() -> None:
    """Default settings: no adaptive state, peaks = bucket end × 1.10 (REFERENCE.md §7) on every day, and
    the checkpoint carries no adaptive part."""
    assert ProfilerSettings().peak_method == "reference"
    m = run(ProfilerSettings(), days=5)
    assert m.adaptive is None
    for day in (2, 3, 5):
        steady = pod(m.profile("n1", day * DAY), "steady")
        assert (steady.cpu_peak, steady.memory_peak) == (cpu_peak(STEADY[0]), mem_peak(STEADY[1]))
    assert checkpoint.snapshot(m, 5 * DAY).adaptive is None


def test_adaptive_leaves_everything_but_learned_pod_peaks_alone() -> None:
    """Same samples, both methods: system, prod class and reclaim inputs other than pod peaks are equal; before
    any window is settled (first two days) every pod peak is the reference one."""
    ref = ProfileModel(ProfilerSettings())
    ada = ProfileModel(ADAPTIVE)
    series = busy_series(seed=5, nodes=3, pods_per_node=4, rounds=2 * 48 - 1, start=0.0, step=1800.0)
    for m in (ref, ada):
        for i in range(3):
            for j in range(4):
                m.pod_bound(f"n{i}-p{j}", f"n{i}", 2000, 4 * GI, "prod", at=-DAY)
        for nm in series:
            m.ingest(nm)
    names = sorted(ref.nodes)
    now = 2 * DAY - 1
    assert ref.profiles(names, now) == ada.profiles(names, now)
    for nm in busy_series(seed=6, nodes=3, pods_per_node=4, rounds=96, start=2 * DAY, step=1800.0):
        ref.ingest(nm)
        ada.ingest(nm)
    now = 4 * DAY
    differ = 0
    for a, b in zip(ref.profiles(names, now), ada.profiles(names, now)):
        assert (a.system_peak, a.prod_peak) == (b.system_peak, b.prod_peak)
        differ += sum(p != q for p, q in zip(a.pods, b.pods))
    assert differ > 0


def test_spiky_pod_margin_rises_after_misses_and_covers_its_spike() -> None:
    m = run(ADAPTIVE, days=6)
    assert m.adaptive is not None
    state = m.adaptive.state(m.pods["spiky"].row)
    cpu_res = state.residuals[0]
    # one residual per closed window with a base: days 1..4 (day 0 had no earlier samples; day 5 is still open)
    assert len(cpu_res) == 4
    assert all(r > 0.2 for r in cpu_res), cpu_res  # the 30-min spike stays above the decayed p95
    assert state.margins[0] == pytest.approx(max(cpu_res) + ADAPTIVE.min_margin)
    spiky = pod(m.profile("n1", 6 * DAY), "spiky")
    assert spiky.cpu_peak >= SPIKE
    # the reference peak misses it: p95 × 1.10 of a series that is at NORMAL 98 % of the time
    ref = pod(run(ProfilerSettings(), days=6).profile("n1", 6 * DAY), "spiky")
    assert ref.cpu_peak < SPIKE < spiky.cpu_peak


def test_margin_follows_choose_margin_with_the_settings_price() -> None:
    """Price 0.1: a miss of 0.375 of the request is cheaper to take than to cover, so no margin but the floor."""
    cheap = ProfilerSettings(peak_method="adaptive", cpu_violation_price=0.1)
    m = run(cheap, days=6)
    assert m.adaptive is not None
    state = m.adaptive.state(m.pods["spiky"].row)
    expected = choose_margin(np.array(state.residuals[0]), 0.1, cheap.min_margin)
    assert state.margins[0] == expected == cheap.min_margin
    assert pod(m.profile("n1", 6 * DAY), "spiky").cpu_peak < SPIKE


def test_steady_pod_gets_less_slack_than_reference_and_still_covers_usage() -> None:
    ada = pod(run(ADAPTIVE, days=6).profile("n1", 6 * DAY), "steady")
    ref = pod(run(ProfilerSettings(), days=6).profile("n1", 6 * DAY), "steady")
    base_cpu = float(CPU_BUCKETS.ends[CPU_BUCKETS.find(np.array([STEADY[0] / 1000]))[0]]) * 1000
    assert STEADY[0] <= ada.cpu_peak < ref.cpu_peak
    assert ada.cpu_peak == round(base_cpu + ADAPTIVE.min_margin * 4000)
    assert STEADY[1] <= ada.memory_peak < ref.memory_peak
    assert ada.cpu_peak - STEADY[0] < (ref.cpu_peak - STEADY[0]) / 2


def test_pod_without_request_keeps_reference_peak() -> None:
    m = ProfileModel(ADAPTIVE)
    m.pod_bound("free", "n1", 0, 0, "batch", at=0.0)
    for k in range(int(4 * DAY / STEP)):
        t = k * STEP
        m.ingest(metric("n1", t, SYSTEM, {"free": (_spiky_cpu(t), GI)}))
    p = pod(m.profile("n1", 4 * DAY), "free")
    r = ProfileModel(ProfilerSettings())
    r.pod_bound("free", "n1", 0, 0, "batch", at=0.0)
    for k in range(int(4 * DAY / STEP)):
        t = k * STEP
        r.ingest(metric("n1", t, SYSTEM, {"free": (_spiky_cpu(t), GI)}))
    assert p == pod(r.profile("n1", 4 * DAY), "free")


def test_no_look_ahead_window_samples_stay_out_of_its_base() -> None:
    """Two models equal up to the start of day 3; in one, day 3 opens with a huge sample. The base recorded for
    day 3 is the same in both; only the residual settled at the end of day 3 sees the spike."""
    a = run(ADAPTIVE, days=3)
    b = run(ADAPTIVE, days=3)
    a.ingest(metric("n1", 3 * DAY, SYSTEM, {"spiky": (3900, 2 * GI), "steady": STEADY}))
    b.ingest(metric("n1", 3 * DAY, SYSTEM, {"spiky": (NORMAL, 2 * GI), "steady": STEADY}))
    assert a.adaptive is not None and b.adaptive is not None
    ra, rb = a.pods["spiky"].row, b.pods["spiky"].row
    a.flush()
    b.flush()
    sa, sb = a.adaptive.state(ra), b.adaptive.state(rb)
    assert sa.base == sb.base and sa.residuals == sb.residuals
    assert (sa.window_max[0], sb.window_max[0]) == (3.9, NORMAL / 1000)
    # finish day 3 identically, then open day 4
    for m in (a, b):
        run(ADAPTIVE, days=1, start=3 * DAY + STEP, model=m)
        m.ingest(metric("n1", 4 * DAY + 1, SYSTEM, {"spiky": (NORMAL, 2 * GI), "steady": STEADY}))
    ea, eb = a.adaptive.state(ra), b.adaptive.state(rb)
    assert ea.residuals[0][:-1] == eb.residuals[0][:-1]
    assert ea.residuals[0][-1] == pytest.approx((3.9 - sa.base[0]) / 4.0)
    assert eb.residuals[0][-1] == pytest.approx((SPIKE / 1000 - sb.base[0]) / 4.0)


def test_late_sample_of_a_closed_window_is_not_counted_as_the_new_one() -> None:
    m = run(ADAPTIVE, days=2)
    m.ingest(metric("n1", 2 * DAY, SYSTEM, {"spiky": (NORMAL, 2 * GI), "steady": STEADY}))
    m.ingest(metric("n1", 2 * DAY - 10, SYSTEM, {"spiky": (3900, 2 * GI), "steady": STEADY}))  # late
    m.flush()
    assert m.adaptive is not None
    assert m.adaptive.state(m.pods["spiky"].row).window_max[0] == NORMAL / 1000


def test_checkpoint_round_trip_keeps_residuals_and_goes_on_identically() -> None:
    a = run(ADAPTIVE, days=4.5)
    b = checkpoint.load(checkpoint.dump(a, 4.5 * DAY), ADAPTIVE)
    assert a.adaptive is not None and b.adaptive is not None
    for uid in ("spiky", "steady"):
        sa, sb = a.adaptive.state(a.pods[uid].row), b.adaptive.state(b.pods[uid].row)
        assert len(sa.residuals[0]) == 3  # days 1-3 closed
        assert msgspec.msgpack.encode(sa.__dict__) == msgspec.msgpack.encode(sb.__dict__)  # NaN-safe equality
    assert b.adaptive.window == a.adaptive.window
    assert a.profile("n1", 4.5 * DAY) == b.profile("n1", 4.5 * DAY)
    for m in (a, b):
        run(ADAPTIVE, days=2, start=4.5 * DAY, model=m)
    assert a.profile("n1", 6.5 * DAY) == b.profile("n1", 6.5 * DAY)
    assert a.adaptive.state(a.pods["spiky"].row).residuals == b.adaptive.state(b.pods["spiky"].row).residuals


def test_checkpoint_into_other_settings() -> None:
    """Into a reference profiler the adaptive state is dropped; with another window length the residuals stay
    and a fresh window opens; with another price the margins are re-chosen from the same residuals."""
    a = run(ADAPTIVE, days=4.5)
    blob = checkpoint.dump(a, 4.5 * DAY)
    assert checkpoint.load(blob, ProfilerSettings()).adaptive is None
    assert a.adaptive is not None
    old = a.adaptive.state(a.pods["spiky"].row)
    other = ProfilerSettings(peak_method="adaptive", margin_window_s=DAY / 2, cpu_violation_price=0.1)
    b = checkpoint.load(blob, other)
    assert b.adaptive is not None and b.adaptive.window is None
    new = b.adaptive.state(b.pods["spiky"].row)
    assert new.residuals == old.residuals and math.isnan(new.base[0])
    assert new.margins[0] == choose_margin(np.array(old.residuals[0]), 0.1, other.min_margin) != old.margins[0]


def test_reference_checkpoint_into_adaptive_starts_learning() -> None:
    a = run(ProfilerSettings(), days=2)
    b = checkpoint.load(checkpoint.dump(a, 2 * DAY), ADAPTIVE)
    assert b.adaptive is not None and b.adaptive.window is None
    run(ADAPTIVE, days=2 + STEP / DAY, start=2 * DAY, model=b)  # day 2 opens bare, day 3 with bases, day 4 settles it
    assert len(b.adaptive.state(b.pods["spiky"].row).residuals[0]) == 1


def test_format_1_and_bad_adaptive_state_refused() -> None:
    cp = checkpoint.snapshot(run(ADAPTIVE, days=3), 3 * DAY)
    with pytest.raises(CheckpointError, match="format 1"):
        checkpoint.load(checkpoint.encode(msgspec.structs.replace(cp, version=1, adaptive=None)), ADAPTIVE)
    ad = cp.adaptive
    assert ad is not None and len(ad.uids) == 2
    state = np.frombuffer(ad.state, dtype="<f8").copy()
    state[-1] = math.inf  # a memory residual of the second pod
    cases = {"non-finite residual": {"state": state.tobytes()},
             "ghost": {"uids": ["spiky", "ghost"]},
             "stored twice": {"uids": ["spiky", "spiky"]},
             "does not fit": {"state": ad.state[:-8]}}
    for reason, change in cases.items():
        broken = msgspec.structs.replace(cp, adaptive=msgspec.structs.replace(ad, **change))
        with pytest.raises(CheckpointError, match=reason):
            checkpoint.load(checkpoint.encode(broken), ADAPTIVE)


def test_checkpoint_with_fewer_or_more_residuals_kept() -> None:
    """Restored with another ``residual_window``: the newest residuals are kept, oldest first."""
    a = run(ADAPTIVE, days=5.5)
    assert a.adaptive is not None
    old = a.adaptive.state(a.pods["steady"].row).residuals[1]
    assert len(old) == 4
    blob = checkpoint.dump(a, 5.5 * DAY)
    for window, expected in ((2, old[-2:]), (40, old)):
        b = checkpoint.load(blob, msgspec.structs.replace(ADAPTIVE, residual_window=window))
        assert b.adaptive is not None
        assert b.adaptive.state(b.pods["steady"].row).residuals[1] == expected


def test_freed_row_reused_by_a_new_pod_starts_without_residuals() -> None:
    m = run(ADAPTIVE, days=3)
    assert m.adaptive is not None
    row = m.pods["spiky"].row
    m.pod_ended("spiky")
    m.pod_bound("new", "n1", 4000, 8 * GI, "prod", at=3 * DAY)
    m.ingest(metric("n1", 3 * DAY, SYSTEM, {"new": (NORMAL, GI), "steady": STEADY}))
    assert m.pods["new"].row == row
    st = m.adaptive.state(row)
    assert st.residuals == ((), ()) and math.isnan(st.margins[0]) and st.highest[0] == -math.inf


def test_settings_from_environment_and_every_error_listed() -> None:
    ok = load_settings(ProfilerSettings, ENV_PREFIX, env={"COLO_PROFILER_PEAK_METHOD": "adaptive",
                                                          "COLO_PROFILER_MARGIN_WINDOW_S": "3600"})
    assert (ok.peak_method, ok.margin_window_s, ok.residual_window) == ("adaptive", 3600.0, 28)
    env = {"COLO_PROFILER_PEAK_METHOD": "magic", "COLO_PROFILER_MARGIN_WINDOW_S": "0",
           "COLO_PROFILER_RESIDUAL_WINDOW": "0", "COLO_PROFILER_CPU_VIOLATION_PRICE": "-1",
           "COLO_PROFILER_MIN_MARGIN": "-0.1"}
    with pytest.raises(SettingsError) as err:
        load_settings(ProfilerSettings, ENV_PREFIX, env=env)
    for name in ("peak_method", "margin_window_s", "residual_window", "cpu_violation_price", "min_margin"):
        assert name in str(err.value)


async def _run_service(nats_url: str, redis_url: str, store: Store, settings: ProfilerSettings,
                       ) -> tuple[ProfilerService, ServiceRunner]:
    service = ProfilerService(settings)
    runner = ServiceRunner(service, RuntimeSettings(nats_url=nats_url, redis_url=redis_url, sim=True,
                                                    store_prefix=store.keys.prefix))
    await runner.start()
    return service, runner


@pytest.mark.integration
async def test_service_restart_keeps_learned_margins(nats_url: str, redis_url: str, store: Store,
                                                     bus_factory: BusFactory) -> None:
    """Real NATS and Redis: an adaptive profiler learns margins over four days of reports, stops (checkpoint),
    and its successor holds the same residuals and publishes the same NodeProfile (apart from ``at``)."""
    settings = msgspec.structs.replace(ADAPTIVE, expiry_s=7 * DAY)
    tester = await bus_factory("tester")
    got: dict[str, NodeProfile] = {}

    async def on_profile(p: NodeProfile) -> None:
        got[p.node] = p

    await tester.subscribe(subjects.PROFILE_NODE, on_profile, durable="watch")
    t0 = 10 * DAY
    service, runner = await _run_service(nats_url, redis_url, store, settings)
    assert runner.ctx is not None
    await tester.publish(subjects.NODE_REGISTERED, NodeSpec(name="n1", capacity=Resources(cpu=16000, memory=64 * GI),
                         allocatable=Resources(cpu=16000, memory=64 * GI)), node="n1")
    for uid in ("spiky", "steady"):
        spec = PodSpec(uid=uid, name=uid, namespace="shop", priority=9500, requests=Resources(cpu=4000, memory=8 * GI))
        await tester.publish(subjects.POD_BOUND, PodBound(spec=spec, node="n1", at=t0 - 5 * DAY), msg_id=uid,
                             node="n1")
    await runner.ctx.bus.settle()
    step = 1800.0
    for k in range(int(4 * DAY / step) + 1):
        t = t0 - 4 * DAY + k * step
        nm: NodeMetric = metric("n1", t, SYSTEM, {"spiky": (_spiky_cpu(t), 2 * GI), "steady": STEADY})
        await tester.publish(subjects.NODE_METRIC, nm, node="n1")
    await runner.ctx.bus.settle()
    await service.tick(t0)
    await _until(lambda: "n1" in got)
    first = got.pop("n1")
    assert service.model.adaptive is not None
    learned = service.model.adaptive.state(service.model.pods["spiky"].row)
    assert len(learned.residuals[0]) == 3 and learned.margins[0] > 0.2
    assert pod(first, "spiky").cpu_peak >= SPIKE
    await runner.stop()

    service2, runner2 = await _run_service(nats_url, redis_url, store, settings)
    try:
        assert service2.restored_from is not None and service2.model.adaptive is not None
        again = service2.model.adaptive.state(service2.model.pods["spiky"].row)
        assert again.residuals == learned.residuals and again.margins == learned.margins
        await service2.tick(t0 + 60)
        await _until(lambda: "n1" in got)
        assert msgspec.structs.replace(got["n1"], at=first.at) == first
    finally:
        await runner2.stop()


async def _until(cond: Any, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)
