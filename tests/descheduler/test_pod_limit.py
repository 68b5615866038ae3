"""A pod moved within the last hour is not moved again (``pod_window_limit``, 1 per 3600 s by default).

On the 2-hour audited run (seed 1) one batch pod was each time the smallest cure of the node it had just been
moved to, once the trace's placements drove that node high: 0967 → 0129 → 0967 → 0275 → 0912 within 64 minutes
(4 migrations of one pod; the audit allows 2).
"""

from __future__ import annotations

import pytest

from colo.messages import NodeMetric, NodeSpec, PodBound, PodMetric, PodSpec, PodStatus, Resources, Usage
from colo_descheduler.lownodeload import Eviction
from colo_descheduler.service import DeschedulerService
from colo_descheduler.settings import DeschedulerSettings, HighThresholds, LowThresholds, WindowLimit

GI = 1 << 30
ALLOC = (10_000, 100 * GI)


def _settings(pod_limit: WindowLimit) -> DeschedulerSettings:
    return DeschedulerSettings(low_thresholds=LowThresholds(cpu=20, memory=35),
                               high_thresholds=HighThresholds(cpu=40, memory=55), consecutive_high_rounds=1,
                               interval_s=0.0, pod_window_limit=pod_limit)


def _service(round_at: float, pod_limit: WindowLimit) -> DeschedulerService:
    """``mv`` (10 GiB) was moved ``cold0`` → ``src`` at 0 s (Running there at 60 s); at ``round_at`` ``src``
    carries 60 GiB: ``mv`` alone cures it (the smallest cure), ``s1`` (20 GiB) next."""
    svc = DeschedulerService(_settings(pod_limit))
    v = svc.cluster
    for n in ("src", "cold", "cold0"):
        v.on_node(NodeSpec(name=n, capacity=Resources(cpu=ALLOC[0], memory=ALLOC[1], pods=110),
                           allocatable=Resources(cpu=ALLOC[0], memory=ALLOC[1], pods=110)))
    v.on_bound(PodBound(spec=PodSpec(uid="mv", name="mv", app="mv", priority=5500), node="cold0", at=-900.0))
    v.start_migration(Eviction("mv", "cold0", "src", "default/mv", (100, 10 * GI)), 0.0)
    v.on_status(PodStatus(uid="mv", node="cold0", phase="Failed", at=0.0, reason="Evicted"))
    for uid, at in (("mv", 5.0), ("big", -900.0), ("s1", -900.0)):
        v.on_bound(PodBound(spec=PodSpec(uid=uid, name=uid, app=uid, priority=5500), node="src", at=at))
    v.on_status(PodStatus(uid="mv", node="src", phase="Running", at=60.0))
    pods = {"mv": 10, "big": 30, "s1": 20}
    before = round_at - 300.0
    v.on_metric(NodeMetric(node="src", at=round_at, window_s=300.0,
                           node_usage=Usage(cpu=300, memory=sum(pods.values()) * GI),
                           pods=[PodMetric(uid=u, cpu=100, memory=g * GI) for u, g in pods.items()]))
    for n in ("cold", "cold0"):
        v.on_metric(NodeMetric(node=n, at=round_at, window_s=300.0, node_usage=Usage(cpu=100, memory=GI)))
    assert before >= 5.0, "the metric's window holds mv whole"
    return svc


POD_LIMIT_CASES = [
    # (id, round at, pod limit, evicted uids)
    ("moved-within-the-hour-the-next-cure-goes", 1200.0, WindowLimit(max_migrations=1, window_s=3600.0), ["s1"]),
    ("an-hour-after-it-may-go-again", 3700.0, WindowLimit(max_migrations=1, window_s=3600.0), ["mv"]),
    ("limit-off", 1200.0, WindowLimit(max_migrations=0, window_s=3600.0), ["mv"]),
]


@pytest.mark.parametrize(("round_at", "pod_limit", "evicted"), [c[1:] for c in POD_LIMIT_CASES],
                         ids=[c[0] for c in POD_LIMIT_CASES])
def test_a_pod_moved_within_the_window_is_not_moved_again(round_at: float, pod_limit: WindowLimit,
                                                          evicted: list[str]) -> None:
    svc = _service(round_at, pod_limit)
    res = svc.run_round(round_at)
    assert [e.uid for e in res.evictions] == evicted, (res.high, res.skipped)
