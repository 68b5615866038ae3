"""Issue 13, preemption across quotas.

1. team-b (min 10 cores) uses 12 in two 6-core pods; a high-priority pod of team-a (within its runtime) fits
   nowhere. Preemption took a 6-core team-b pod because team-b was above its min at that moment, leaving team-b at
   6 cores, below its guarantee (quota reclaim refuses that very victim for that reason). A pod never takes
   another quota's pods below that quota's min.
2. A pod that a quota reclaim ordered out in a cycle was ordered out again by a preemption of the same cycle (or
   the other way round): one pod, two eviction orders. Each pod is ordered out once.
"""

from __future__ import annotations

import msgspec
import pytest
from sched_helpers import node, pod, scheduler

from colo.messages import PREEMPTIBLE_LABEL, QUOTA_NAME_LABEL, ElasticQuota, PodSpec
from colo_scheduler.core import Scheduler


def _in(spec: PodSpec, quota: str, preemptible: bool = True) -> PodSpec:
    labels = {QUOTA_NAME_LABEL: quota} | ({} if preemptible else {PREEMPTIBLE_LABEL: "false"})
    return msgspec.structs.replace(spec, labels=labels)


def _teams(b_pods: list[int]) -> Scheduler:
    """Two 10-core nodes full: team-b's pods of ``b_pods`` milli-cores, team-a's two 4-core non-preemptible pods
    (so that a preemptor of team-a looks at team-b)."""
    s = scheduler()
    for n in ("n0", "n1"):
        s.on_node(node(n, cpu=10_000, memory=64 << 30, pods=110), 0.0)
    for spec in (ElasticQuota(name="team-a", min={"cpu": 10_000}, max={"cpu": 20_000}),
                 ElasticQuota(name="team-b", min={"cpu": 10_000}, max={"cpu": 20_000})):
        assert s.on_quota(spec) == []
    for k, cpu in enumerate(b_pods):
        s.add_pod(_in(pod(f"b{k}", cpu=cpu, priority=5, created_at=k), "team-b"), 0.0)
    for k in range(2):
        s.add_pod(_in(pod(f"a{k}", cpu=4000, priority=5, created_at=k), "team-a", preemptible=False), 0.0)
    out = s.schedule_cycle(1.0)
    assert len(out.placements) == len(b_pods) + 2 and not out.evictions
    return s


def test_preemptor_never_takes_another_quota_below_its_min() -> None:
    s = _teams([6000, 6000])
    s.add_pod(_in(pod("hi", cpu=2000, priority=9000), "team-a"), 2.0)
    evictions = [e for t in (3.0, 4.0) for e in s.schedule_cycle(t).evictions]
    assert evictions == [], [(e.pod.uid, e.reason) for e in evictions]


@pytest.mark.parametrize("times", [(3.0,), (3.0, 4.0, 5.0)], ids=["one-cycle", "three-cycles"])
def test_each_pod_is_ordered_out_once(times: tuple[float, ...]) -> None:
    s = _teams([5000, 6000, 1000])  # 12 cores; hi raises team-a's request: team-b's runtime drops to 11
    s.add_pod(_in(pod("hi", cpu=1000, priority=9000), "team-a"), 2.0)
    ordered = [e.pod.uid for t in times for e in s.schedule_cycle(t).evictions]
    assert ordered == ["b2"]  # 12 - 1 = 11 cores ≥ min 10: reclaim takes it; the preemption waits for it


def test_a_preemption_counts_reclaimed_pods_as_gone() -> None:
    """team-b at 12 of min 10 cores; hi (team-a) drops team-b's runtime to 11: reclaim orders b2 (2 cores) out,
    and the same cycle's preemption took b3 (2 more) as well — team-b at 8 cores, below its min, and one pod
    evicted for nothing (b2's room is on its way to hi)."""
    s = scheduler()
    for n in ("n0", "n1"):
        s.on_node(node(n, cpu=10_000, memory=64 << 30, pods=110), 0.0)
    for spec in (ElasticQuota(name="team-a", min={"cpu": 10_000}, max={"cpu": 20_000}),
                 ElasticQuota(name="team-b", min={"cpu": 10_000}, max={"cpu": 20_000})):
        assert s.on_quota(spec) == []
    for k, cpu in enumerate([4000, 4000, 2000, 2000]):
        s.add_pod(_in(pod(f"b{k}", cpu=cpu, priority=5, created_at=k), "team-b"), 0.0)
    for k in range(2):
        s.add_pod(_in(pod(f"a{k}", cpu=3000, priority=5, created_at=k), "team-a", preemptible=False), 0.0)
    assert len(s.schedule_cycle(1.0).placements) == 6
    s.add_pod(_in(pod("hi", cpu=3000, priority=9000), "team-a"), 2.0)
    ordered = [e.pod.uid for t in (3.0, 4.0) for e in s.schedule_cycle(t).evictions]
    assert len(ordered) == 1, ordered


def test_victims_of_one_node_together_never_take_a_quota_below_its_min() -> None:
    """team-b at 13 of min 10 cores; hi (team-a, 4 cores) fits only on n0 by taking b0 and b1 (2 cores each):
    each alone leaves team-b at 11 cores, both together at 9. Preemption took both."""
    s = scheduler()
    for n in ("n0", "n1", "n2"):
        s.on_node(node(n, cpu=10_000, memory=64 << 30, pods=110, labels={"name": n}), 0.0)
    for spec in (ElasticQuota(name="team-a", min={"cpu": 10_000}, max={"cpu": 30_000}),
                 ElasticQuota(name="team-b", min={"cpu": 10_000}, max={"cpu": 30_000})):
        assert s.on_quota(spec) == []

    def on(spec: PodSpec, n: str) -> PodSpec:
        return msgspec.structs.replace(spec, node_selector={"name": n})

    s.add_pod(msgspec.structs.replace(on(pod("x", cpu=10_000, priority=5), "n2"), labels={PREEMPTIBLE_LABEL: "false"}), 0.0)
    for uid, quota, cpu, n, preemptible in (("a0", "team-a", 6000, "n0", False), ("b0", "team-b", 2000, "n0", True),
                                            ("b1", "team-b", 2000, "n0", True), ("b2", "team-b", 9000, "n1", True),
                                            ("a1", "team-a", 1000, "n1", False)):
        s.add_pod(on(_in(pod(uid, cpu=cpu, priority=5), quota, preemptible), n), 0.0)
    assert len(s.schedule_cycle(1.0).placements) == 6
    s.add_pod(_in(pod("hi", cpu=4000, priority=9000), "team-a"), 2.0)
    evictions = [e for t in (3.0, 4.0) for e in s.schedule_cycle(t).evictions]
    assert evictions == [], [(e.pod.uid, e.reason) for e in evictions]
