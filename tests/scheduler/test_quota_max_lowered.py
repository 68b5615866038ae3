"""A quota whose max is lowered below what it uses is brought back within it (Koordinator's quota over-used
revoke: used > runtime → evict; docs/quota.md "Reclaim"): lowest priority first, latest placed first, never a
non-preemptible pod; and with only non-preemptible pods left over it stays over, which ``colo get quotas``
marks."""

from __future__ import annotations

import msgspec
from sched_helpers import node, pod, scheduler

from colo.messages import PREEMPTIBLE_LABEL, QUOTA_NAME_LABEL, ElasticQuota, PodSpec


def _team(spec: PodSpec, preemptible: bool = True) -> PodSpec:
    labels = {QUOTA_NAME_LABEL: "team"}
    if not preemptible:
        labels[PREEMPTIBLE_LABEL] = "false"
    return msgspec.structs.replace(spec, labels=labels)


def test_lowering_max_below_used_evicts_back_to_the_new_max() -> None:
    s = scheduler()
    for k in range(2):
        s.on_node(node(f"n{k}", cpu=64_000, memory=256 << 30, pods=110), 0.0)
    assert s.on_quota(ElasticQuota(name="team", max={"cpu": 64_000})) == []
    for k in range(8):  # 8 × 8 cores = 64 cores, priority rising with k; t0 non-preemptible
        s.add_pod(_team(pod(f"t{k}", cpu=8000, priority=5000 + k, created_at=k), preemptible=k != 0), 0.0)
    out = s.schedule_cycle(1.0)
    assert len(out.placements) == 8 and not out.evictions
    assert s.on_quota(ElasticQuota(name="team", max={"cpu": 32_000})) == []
    out = s.schedule_cycle(2.0)
    victims = [e.pod.uid for e in out.evictions]
    assert victims == ["t1", "t2", "t3", "t4"], [e.reason for e in out.evictions]
    assert [e.reason for e in out.evictions] == [f"quota team: over its max cpu (used {u} > max 32000)"
                                                 for u in (64_000, 56_000, 48_000, 40_000)]


def test_a_quota_over_its_max_with_only_non_preemptible_pods_stays_over_and_says_so() -> None:
    s = scheduler()
    s.on_node(node("n0", cpu=64_000, memory=256 << 30, pods=110), 0.0)
    assert s.on_quota(ElasticQuota(name="team", max={"cpu": 64_000})) == []
    for k in range(4):
        s.add_pod(_team(pod(f"t{k}", cpu=8000, priority=5000, created_at=k), preemptible=False), 0.0)
    assert len(s.schedule_cycle(1.0).placements) == 4
    assert s.on_quota(ElasticQuota(name="team", max={"cpu": 16_000})) == []
    assert not s.schedule_cycle(2.0).evictions  # never a non-preemptible pod
    assert s.quota is not None
    (st,) = [x for x in s.quota.statuses(3.0) if x.name == "team"]
    from colo.cli.quotas import over
    assert (st.used["cpu"], st.max["cpu"], over(st)) == (32_000, 16_000, "cpu>max")
