"""A node cured by a migration and refilled by new placements is no source again for ``relief_hold_s``.

On the 2-hour audited run (seed 1) openb-node-0798, whose every pod alone is over the 40 % CPU threshold, lost
its pod at 3900, 4680, 5460 and 6600 s: each eviction cured it (low), the scheduler put the next pod on the empty
node (high), and the node swung between high and low 11 times against 7 without the descheduler.
"""

from __future__ import annotations

import pytest

from colo.messages import NodeMetric, NodeSpec, PodBound, PodMetric, PodSpec, PodStatus, Resources, Usage
from colo_descheduler.service import DeschedulerService
from colo_descheduler.settings import DeschedulerSettings, HighThresholds, LowThresholds, WindowLimit

ALLOC = (10_000, 100 << 30)


def _metric(node: str, at: float, pods: dict[str, int]) -> NodeMetric:
    """Pods (uid → cpu m) that ran the whole window; memory 1 GiB each."""
    return NodeMetric(node=node, at=at, window_s=300.0,
                      node_usage=Usage(cpu=sum(pods.values()) or 1, memory=(1 << 30) * max(len(pods), 1)),
                      pods=[PodMetric(uid=u, cpu=c, memory=1 << 30) for u, c in pods.items()])


def _evictions_at_refill(hold_s: float, refill_at: float) -> list[str]:
    """``small`` ran ``p1`` (5000 m of 10000: high at 40 %); a round at 0 evicts it; at 400 s the node is empty
    (not high: cured); the scheduler puts ``p2`` (5000 m) there, and at ``refill_at`` its metric shows it."""
    svc = DeschedulerService(DeschedulerSettings(low_thresholds=LowThresholds(cpu=20, memory=35),
                                                 high_thresholds=HighThresholds(cpu=40, memory=55),
                                                 consecutive_high_rounds=1, interval_s=0.0,
                                                 relief_hold_s=hold_s, pod_window_limit=WindowLimit(max_migrations=0)))
    v = svc.cluster
    for n, cpu in (("small", ALLOC[0]), ("cold", 4 * ALLOC[0])):  # p1 alone is 50 % of small, 12.5 % of cold
        v.on_node(NodeSpec(name=n, capacity=Resources(cpu=cpu, memory=ALLOC[1], pods=110),
                           allocatable=Resources(cpu=cpu, memory=ALLOC[1], pods=110)))
    v.on_bound(PodBound(spec=PodSpec(uid="p1", name="p1", app="p1", priority=5500), node="small", at=-900.0))
    v.on_metric(_metric("small", 0.0, {"p1": 5000}))
    v.on_metric(_metric("cold", 0.0, {}))
    first = [e.uid for e in svc.run_round(0.0).evictions]
    assert first == ["p1"]
    v.on_status(PodStatus(uid="p1", node="small", phase="Failed", at=0.0, reason="Evicted"))
    v.on_metric(_metric("small", 400.0, {}))
    v.on_metric(_metric("cold", 400.0, {}))
    assert svc.run_round(400.0).evictions == []
    v.on_bound(PodBound(spec=PodSpec(uid="p2", name="p2", app="p2", priority=5500), node="small",
                        at=refill_at - 400.0))
    v.on_metric(_metric("small", refill_at, {"p2": 5000}))
    v.on_metric(_metric("cold", refill_at, {}))
    return [e.uid for e in svc.run_round(refill_at).evictions]


HOLD_CASES = [
    # (id, relief_hold_s, refill metric at, evicted)
    ("refilled-within-the-hold-keeps-its-pod", 1800.0, 1000.0, []),
    ("after-the-hold-a-source-again", 1800.0, 1900.0, ["p2"]),
    ("hold-off-evicts-again", 0.0, 1000.0, ["p2"]),
]


@pytest.mark.parametrize(("hold_s", "refill_at", "evicted"), [c[1:] for c in HOLD_CASES],
                         ids=[c[0] for c in HOLD_CASES])
def test_a_cured_node_refilled_within_the_hold_is_no_source(hold_s: float, refill_at: float,
                                                            evicted: list[str]) -> None:
    assert _evictions_at_refill(hold_s, refill_at) == evicted
