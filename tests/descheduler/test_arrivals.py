"""A pod that started within its node's 300 s window is only partly in the node's mean: as a target, it counts whole.

The node figure of a NodeMetric is the mean over its window (REFERENCE.md §2); a pod started ``s`` seconds
before the metric adds ``usage × s / 300`` to it, although it runs there with all of ``usage`` (its per-pod
figure is the mean over its own run). Read as it is, such a node is a target while it is already full: on the
2-hour audited run (seed 1) openb-node-0886 at 50 % (a departed pod's share in it) took a migrated pod, then a
22 % pod of the trace at 4440 s, showed 59 % at 4620 s while carrying 68 %, and lost the migrated pod again.
As a source the node still goes by its metric (what the audit checks a descheduler against): the missing
share counts like an incoming booking (``NodeLoad.incoming``).
"""

from __future__ import annotations

import pytest

from colo.messages import NodeMetric, NodeSpec, PodBound, PodMetric, PodSpec, Resources, Usage
from colo_descheduler.service import DeschedulerService
from colo_descheduler.settings import DeschedulerSettings, HighThresholds, LowThresholds

GI = 1 << 30
ALLOC = (10_000, 100 * GI)
AGGRESSIVE = DeschedulerSettings(low_thresholds=LowThresholds(cpu=20, memory=35),
                                 high_thresholds=HighThresholds(cpu=40, memory=55),
                                 consecutive_high_rounds=1, interval_s=0.0)


def _service(node_pods: dict[str, tuple[int, float]], metric_at: float) -> DeschedulerService:
    """``src`` runs ``node_pods`` (uid → (memory GiB, bound at s), 100 m each); its metric at ``metric_at``
    holds each pod's share of the 300 s window; ``cold`` is nearly empty."""
    svc = DeschedulerService(AGGRESSIVE)
    v = svc.cluster
    for n in ("src", "cold"):
        v.on_node(NodeSpec(name=n, capacity=Resources(cpu=ALLOC[0], memory=ALLOC[1], pods=110),
                           allocatable=Resources(cpu=ALLOC[0], memory=ALLOC[1], pods=110)))
    for uid, (_, at) in node_pods.items():
        v.on_bound(PodBound(spec=PodSpec(uid=uid, name=uid, app=uid, priority=5500), node="src", at=at))
    v.on_bound(PodBound(spec=PodSpec(uid="c1", name="c1", app="c1", priority=5500), node="cold", at=-900.0))
    in_window = sum(g * GI * min(max(metric_at - at, 0.0), 300.0) / 300.0 for g, at in node_pods.values())
    v.on_metric(NodeMetric(node="src", at=metric_at, window_s=300.0,
                           node_usage=Usage(cpu=100 * len(node_pods), memory=round(in_window)),
                           pods=[PodMetric(uid=u, cpu=100, memory=g * GI) for u, (g, _) in node_pods.items()]))
    v.on_metric(NodeMetric(node="cold", at=metric_at, window_s=300.0, node_usage=Usage(cpu=100, memory=5 * GI),
                           pods=[PodMetric(uid="c1", cpu=100, memory=5 * GI)]))
    return svc


ARRIVAL_CASES = [
    # (id, src's pods (GiB, bound at), metric and round at, src high, src low, evicted off src)
    ("new-pod-no-source-before-its-metric-shows-it", {"s1": (20, -900.0), "s2": (20, -900.0), "new": (25, 0.0)},
     60.0, False, False, 0),
    ("old-pods-only-unchanged", {"s1": (20, -900.0), "s2": (20, -900.0)}, 60.0, False, False, 0),
    ("new-pod-fully-in-the-window-unchanged", {"s1": (20, -900.0), "new": (25, -300.0)}, 60.0, False, False, 0),
    ("recent-pod-keeps-it-from-being-a-target", {"s1": (20, -900.0), "new": (20, 0.0)}, 60.0, False, False, 0),
]


@pytest.mark.parametrize(("node_pods", "at", "high", "low", "evicted"), [c[1:] for c in ARRIVAL_CASES],
                         ids=[c[0] for c in ARRIVAL_CASES])
def test_a_pod_started_within_the_window_counts_whole(node_pods: dict[str, tuple[int, float]], at: float,
                                                      high: bool, low: bool, evicted: int) -> None:
    svc = _service(node_pods, at)
    res = svc.run_round(at)
    assert ("src" in res.high, "src" in res.low) == (high, low), (res.high, res.low)
    assert sum(1 for e in res.evictions if e.source == "src") == evicted, (res.evictions, res.skipped)


def test_the_load_adds_what_the_window_does_not_hold_yet() -> None:
    """40 GiB of old pods + 25 GiB started 60 s before the metric (5 GiB of it in the mean): 45 GiB carried by
    the metric, 65 GiB as a target."""
    svc = _service({"s1": (20, -900.0), "s2": (20, -900.0), "new": (25, 0.0)}, 60.0)
    src = {n.name: n for n in svc.cluster.fresh_loads(60.0, 180.0)}["src"]
    assert src.usage[1] == 45 * GI and src.incoming[1] == 20 * GI and src.booked().usage[1] == 65 * GI
