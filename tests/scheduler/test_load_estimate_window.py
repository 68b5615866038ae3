"""LoadAware's estimate of pods a node metric does not fully contain yet, against a node agent that
reports as the sim and host backends do (REFERENCE.md §2, §4, §11 "Bursts of placements before the
next metric overshoot thresholds unless recent assignments are estimated").

The agent model: one sample a second; node usage = system + Σ usage of the pods running at that
second; a NodeMetric every 60 s whose node figure is the mean of the last ``window`` samples (300,
or fewer while the agent has run for less) and whose pod list gives each running pod's mean over
its own samples in that window (a mean over the pod's life: a pod started 90 s ago reports its full
usage while the node figure holds 90/300 of it). Pods start at their bind time and use a steady
amount of CPU from then on.

Found broken: a pod counted as contained in the metric once it was assigned more than one report
interval (60 s) before it, so the node figure of a metric at +90 s held 30 % of a burst's usage
while the estimator counted all of it, and the next bursts were admitted on top.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sched_helpers import GI, node, pod

from colo.messages import NodeMetric, PodMetric, Usage
from colo_scheduler.core import Scheduler
from colo_scheduler.estimation import pod_gap, unreported_gap
from colo_scheduler.podinfo import make_pod_info
from colo_scheduler.settings import SchedulerSettings
from colo_scheduler.table import NodeTable

ALLOC_CPU = 32_000
"""Node CPU allocatable, milli-cores."""
THRESHOLD = 65
"""LoadAware CPU threshold, percent (REFERENCE.md §4 default)."""
REQUEST, LIMIT = 1_000, 2_000
"""Every offered pod: CPU request and limit, milli-cores; its estimate is 85 % of the limit, 1,700 m."""
ESTIMATE = LIMIT * 85 // 100
REPORT_S, WINDOW_S = 60, 300
"""The node agent's report interval and aggregation window (REFERENCE.md §2)."""
SYSTEM = 2_000
"""System usage of the node (milli-cores), always in the node figure."""


@dataclass
class AgentModel:
    """The node's real CPU over time, as a node agent samples it once a second."""

    started_at: int
    pods: dict[str, tuple[float, int]] = field(default_factory=dict)  # uid → (start s, usage milli)

    def metric(self, at: int) -> NodeMetric | None:
        """The NodeMetric at ``at``: node mean over the last samples, each pod's mean while it ran;
        None before the agent's first sample."""
        window = min(WINDOW_S, at - self.started_at)
        if window <= 0:
            return None
        first = at - window + 1  # samples at first..at
        total = SYSTEM * window
        pods = []
        for uid, (start, usage) in self.pods.items():
            n = max(0, at - max(math.ceil(start), first) + 1)
            total += usage * n
            if n:
                pods.append(PodMetric(uid=uid, cpu=usage, memory=GI))
        return NodeMetric(node="n", at=float(at), window_s=float(window),
                          node_usage=Usage(cpu=total // window, memory=len(self.pods) * GI), pods=pods)

    def real_percent(self) -> float:
        """Steady CPU load of the node once every placed pod runs: (system + Σ usage) / allocatable."""
        return 100 * (SYSTEM + sum(u for _, u in self.pods.values())) / ALLOC_CPU


def run_bursts(offsets: tuple[int, ...], burst: int, usage_of: random.Random | None, minutes: int = 20,
               agent_age_s: int = 3_600) -> float:
    """Offer ``burst`` pods at ``60 k + offset`` for every offset and minute k, schedule each
    burst at once (the queue retries what is left after each metric), apply a metric every 60 s;
    returns the highest real load in percent. A pod's usage is its estimate, or uniform in
    50..100 % of it with ``usage_of``."""
    core = Scheduler(SchedulerSettings(seed=0))
    core.on_node(node("n", cpu=ALLOC_CPU, memory=512 * GI), 0.0)
    agent = AgentModel(started_at=-agent_age_s)
    usage: dict[str, int] = {}
    events = sorted({(60 * k, 0) for k in range(minutes + 1)}
                    | {(60 * k + off, 1) for k in range(minutes) for off in offsets})
    worst, uid = 0.0, 0
    for t, kind in events:
        if kind == 0:
            m = agent.metric(t)
            if m is not None:
                core.on_metric(m, float(t))
        else:
            for _ in range(burst):
                uid += 1
                name = f"p{uid}"
                usage[name] = ESTIMATE if usage_of is None else usage_of.randint(ESTIMATE // 2, ESTIMATE)
                core.add_pod(pod(name, REQUEST, GI, LIMIT, GI), float(t))
        for placed in core.schedule_cycle(float(t)).placements:
            agent.pods[placed.pod.uid] = (float(t), usage[placed.pod.uid])
        worst = max(worst, agent.real_percent())
    return worst


BOUND = THRESHOLD + 0.5 + 100 / ALLOC_CPU
"""What the estimator may reach, percent of allocatable: its filter passes round(100 × estimated /
allocatable) ≤ 65, i.e. estimated < 65.5 % (halves round up); every pod's real usage is at most its
estimate (the 85 % factor of the limit), so the estimate falls short of the real usage only by the
agent's integer mean, which loses under 1 m of the node figure (the 100 / allocatable term). The
estimator floors the part of a pod's usage it takes as contained and the model's first sample of a
pod is at its start second, so both count a little more, never less."""


BURSTS = [
    # a burst right after each report: the metric 89 s later lists the burst, its mean holds 30 % of it
    ("burst-after-each-report", (1,), 8, None, 3_600),
    ("burst-before-each-report", (59,), 8, None, 3_600),
    ("bursts-around-each-report", (1, 59), 6, None, 3_600),
    ("bursts-every-20s-usage-below-estimate", (1, 21, 41), 4, 7, 3_600),
    # the agent started a minute before the first burst: its window grows from 60 s to 300 s (before
    # its first metric LoadAware lets every pod pass, as Koordinator does for a node without one)
    ("agent-just-started-window-growing", (1, 31), 6, None, 60),
]


@pytest.mark.parametrize(("offsets", "burst", "seed", "agent_age_s"), [c[1:] for c in BURSTS],
                         ids=[c[0] for c in BURSTS])
def test_bursts_around_reports_stay_within_threshold_plus_estimator_error(
        offsets: tuple[int, ...], burst: int, seed: int | None, agent_age_s: int) -> None:
    """Bursts of pods offered around the metric reports never push the node's real CPU load past
    :data:`BOUND` (65 % + the estimator's rounding, 65.503 %; see its docstring). On the rule of one
    report interval the rows reached 128.4 %, 170.9 %, 149.7 %, 105.9 % and 107.2 %."""
    rng = random.Random(seed) if seed is not None else None
    worst = run_bursts(offsets, burst, rng, agent_age_s=agent_age_s)
    assert worst <= BOUND, f"real load {worst:.1f} % > {BOUND} %"


def test_the_issue_case_a_metric_at_90s_holds_the_whole_burst() -> None:
    """11 pods placed at 0 s on an idle node; the metric at +90 s lists them all while its node figure
    holds 91 of the 300 samples of their usage. The estimate counts their whole usage (and the
    samples' 1 s more than the 90 s assumed, 11 × 1,700 / 300 m), so no further pod fits, where 7
    more did before (real load 64.7 % → 101.9 %)."""
    core = Scheduler(SchedulerSettings(seed=0))
    core.on_node(node("n", cpu=ALLOC_CPU, memory=512 * GI), 0.0)
    agent = AgentModel(started_at=-3_600)
    idle = agent.metric(0)
    assert idle is not None
    core.on_metric(idle, 0.0)
    for k in range(20):
        core.add_pod(pod(f"a{k}", REQUEST, GI, LIMIT, GI), 0.0)
    for placed in core.schedule_cycle(0.0).placements:
        agent.pods[placed.pod.uid] = (0.0, ESTIMATE)
    assert len(agent.pods) == 11  # (2,000 + 11 × 1,700) / 32,000 = 64.7 %
    m = agent.metric(90)
    assert m is not None and len(m.pods) == 11
    core.on_metric(m, 90.0)
    real = SYSTEM + 11 * ESTIMATE
    estimated = int(core.table.estimated_usage[0, 0])
    assert real <= estimated <= real + 11 * ESTIMATE // WINDOW_S + 1
    assert not core.schedule_cycle(91.0).placements


GAPS = [
    # (estimate, used, assigned_at, metric_at, window_s, windowed) → gap; one resource
    ("not-reported-whole-estimate", (1_700, None, 0.0, 90.0, 300.0, True), 1_700),
    ("ran-whole-window-nothing", (1_700, 1_000, 0.0, 300.0, 300.0, True), 0),
    ("ran-longer-than-window-nothing", (1_700, 2_000, 0.0, 900.0, 300.0, True), 0),
    ("at-90s-70pct-of-usage-missing", (1_700, 1_700, 0.0, 90.0, 300.0, True), 1_190),
    ("usage-above-estimate-counts-usage", (1_700, 2_000, 0.0, 150.0, 300.0, True), 1_000),
    ("usage-below-estimate-estimate-less-share", (1_700, 1_000, 0.0, 150.0, 300.0, True), 1_200),
    ("assigned-after-metric-whole-expectation", (1_700, 1_000, 100.0, 90.0, 300.0, True), 1_700),
    ("short-window-of-a-new-agent", (1_700, 1_700, 0.0, 59.0, 60.0, True), 1_700 - 1_700 * 59 // 60),
    ("share-floored-conservative", (10, 10, 0.0, 1.0, 3.0, True), 7),
    ("millisecond-times", (1_000, 1_000, 0.5, 150.5, 300.0, True), 500),
    ("pod-figures-young-pod-reference-gap", (1_700, 1_000, 0.0, 90.0, 300.0, False), 700),
    ("pod-figures-young-pod-above-estimate", (1_700, 2_000, 0.0, 90.0, 300.0, False), 0),
    ("pod-figures-old-pod-nothing", (1_700, 1_000, 0.0, 400.0, 300.0, False), 0),
]


@pytest.mark.parametrize(("args", "gap"), [c[1:] for c in GAPS], ids=[c[0] for c in GAPS])
def test_unreported_gap(args: tuple[int, int | None, float, float, float, bool], gap: int) -> None:
    assert unreported_gap(*args) == gap


@given(est=st.tuples(st.integers(0, 2**50), st.integers(0, 2**50)),
       used=st.none() | st.tuples(st.integers(0, 2**50), st.integers(0, 2**50)),
       assigned_at=st.floats(0, 10**6), age=st.floats(-100, 1_000), window=st.sampled_from((0.0, 1.0, 60.0, 300.0)),
       windowed=st.booleans())
def test_pod_gap_is_the_gap_of_each_resource(est: tuple[int, int], used: tuple[int, int] | None, assigned_at: float,
                                             age: float, window: float, windowed: bool) -> None:
    """The table's two-resource form equals the one-resource definition (which the loop oracle uses),
    and a gap is never negative."""
    at = assigned_at + age
    got = pod_gap(est, used, assigned_at, at, window, windowed)
    want = tuple(unreported_gap(est[r], None if used is None else used[r], assigned_at, at, window, windowed)
                 for r in range(2))
    assert got == want
    assert min(got) >= 0


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 10**6), ops=st.lists(st.sampled_from(("track", "untrack", "metric", "wait")),
                                                min_size=4, max_size=30))
def test_incremental_pending_equals_a_recompute(seed: int, ops: list[str]) -> None:
    """Track, untrack and metrics (per-pod usage of some tracked pods, windows of 60..300 s, pods
    crossing their window between metrics) in any order: the table's running pending estimate of every
    row equals Σ pod_gap over its pods computed afresh, and a table rebuilt from the same state."""
    r = random.Random(seed)
    table = NodeTable()
    for k in range(3):
        table.upsert_node(node(f"n{k}", cpu=ALLOC_CPU, memory=64 * GI))
    now, uid = 0.0, 0
    for op in ops:
        now += r.choice((1.0, 20.0, 60.0, 150.5))
        if op == "track":
            uid += 1
            spec = pod(f"p{uid}", r.choice((0, 500, 1_000)), GI, r.choice((0, 2_000)), 2 * GI)
            table.track(make_pod_info(spec, queued_at=now), r.randrange(3), now - r.choice((0.0, 30.0, 400.0)))
        elif op == "untrack" and table.assigned:
            table.untrack(r.choice(sorted(table.assigned)))
        elif op == "metric":
            k = r.randrange(3)
            pods = [PodMetric(uid=u, cpu=r.randrange(0, 3_000), memory=r.randrange(0, 3) * GI)
                    for u in table.node_pods[k] if r.random() < 0.7]
            table.set_metric(NodeMetric(node=f"n{k}", at=now - r.choice((0.0, 10.0)),
                                        window_s=r.choice((60.0, 120.0, 300.0)),
                                        node_usage=Usage(cpu=r.randrange(0, 8_000), memory=GI), pods=pods))
        rebuilt = NodeTable()
        for k in range(3):
            rebuilt.upsert_node(table.specs[k])
            m = table.metrics[k]
            if m is not None:
                rebuilt.set_metric(m)
        for ap in table.assigned.values():
            rebuilt.track(ap.pod, ap.node, ap.assigned_at)
        for k in range(3):
            m = table.metrics[k]
            want = [0, 0]
            for u, ap in table.node_pods[k].items():
                used = table.pod_usage[k].get(u)
                g = pod_gap(ap.pod.estimate_ints, used, ap.assigned_at, m.at if m else math.nan,
                            m.window_s if m else 0.0)
                want = [want[0] + g[0], want[1] + g[1]]
            assert table.pending_estimate[k].tolist() == want, (op, k)
            assert rebuilt.pending_estimate[k].tolist() == want, (op, k)


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 10**6))
def test_cached_rows_equal_a_full_recompute_while_pods_cross_their_window(seed: int) -> None:
    """Bursts around reports on 6 nodes (pods crossing their 300 s window between metrics, metrics of
    some nodes skipped): the scheduler with its class cache and per-cycle LoadAware rows places every
    pod where the reference without the cache does, cycle by cycle."""
    r = random.Random(seed)
    cores = [Scheduler(SchedulerSettings(seed=1), use_class_cache=c) for c in (True, False)]
    agents = [AgentModel(started_at=-3_600) for _ in range(6)]
    for core in cores:
        for k in range(6):
            core.on_node(node(f"n{k}", cpu=ALLOC_CPU, memory=512 * GI), 0.0)
    uid = 0
    for t in range(0, 900, 10):
        if t % REPORT_S == 0:
            for k, agent in enumerate(agents):
                m = agent.metric(t)
                if m is not None and r.random() < 0.8:
                    m = msgspec.structs.replace(m, node=f"n{k}")
                    for core in cores:
                        core.on_metric(m, float(t))
        for _ in range(r.choice((0, 0, 3, 9))):
            uid += 1
            spec = pod(f"p{uid}", r.choice((500, 1_000)), GI, r.choice((1_000, 2_000, 4_000)), GI)
            for core in cores:
                core.add_pod(spec, float(t))
        outs = [[(p.pod.uid, p.node) for p in core.schedule_cycle(float(t)).placements] for core in cores]
        assert outs[0] == outs[1], t
        for u, name in outs[0]:
            agents[int(name[1:])].pods[u] = (float(t), r.randint(200, 1_700))
