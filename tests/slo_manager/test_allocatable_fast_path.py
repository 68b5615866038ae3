"""The tick's fast path (NodePods summary + one pass over the reports) equals the per-pod formula.

:func:`compute_allocatable` follows REFERENCE.md §3 pod by pod; :func:`compute_allocatable_of` starts
from every HP pod at its request and corrects by the reports. Checked on the oracle O1 rows and on
random nodes under every policy (hypothesis), including LSE and mid pods, pods without a report, pods
reported but no longer listed, and a report repeated in one metric.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from colo.messages import NodeMetric, NodeProfile, NodeSpec, PodMetric, Resources, Usage
from colo_slo_manager.allocatable import (
    NodePods,
    PodView,
    batch_allocatable,
    compute_allocatable,
    compute_allocatable_of,
    high_priority_sums,
    high_priority_sums_of,
    node_reserved,
)
from colo_slo_manager.settings import BatchConfig, MidConfig

G = 10**9
CPU = 1000

O1_NODE = NodeSpec(name="n1", capacity=Resources(cpu=100 * CPU, memory=120 * G, pods=110),
                   allocatable=Resources(cpu=100 * CPU, memory=120 * G, pods=110))


def _pod(uid: str, prio: str, qos: str, cpu: int = 0, mem: int = 0, phase: str = "Running",
         mid_cpu: int = 0) -> PodView:
    return PodView(uid=uid, phase=phase, priority_class=prio, qos_class=qos,  # type: ignore[arg-type]
                   requests=Resources(cpu=cpu, memory=mem, mid_cpu=mid_cpu))


O1_PODS = [_pod("A", "prod", "LS", 20 * CPU, 20 * G), _pod("B", "batch", "BE"),
           _pod("C", "prod", "LSR", 20 * CPU, 40 * G, phase="Pending"), _pod("D", "batch", "BE", phase="Succeeded")]
O1_METRIC = NodeMetric(node="n1", at=0.0, node_usage=Usage(cpu=50 * CPU, memory=55 * G),
                       system_usage=Usage(cpu=7 * CPU, memory=12 * G),
                       pods=[PodMetric(uid=u, cpu=c * CPU, memory=c * G) for u, c in
                             (("A", 11), ("B", 10), ("C", 22), ("D", 10))])
LSE_PODS = [_pod("lse", "prod", "LSE", 10 * CPU, 10 * G), _pod("prod", "prod", "LS", 8 * CPU, 8 * G),
            _pod("mid", "mid", "LS", mid_cpu=30 * CPU)]
LSE_METRIC = NodeMetric(node="n1", at=0.0, node_usage=Usage(cpu=40 * CPU, memory=45 * G),
                        system_usage=Usage(cpu=7 * CPU, memory=12 * G),
                        pods=[PodMetric(uid=u, cpu=c * CPU, memory=c * G) for u, c in
                              (("lse", 5), ("prod", 6), ("mid", 22))])
R65 = BatchConfig(cpu_reclaim_threshold_percent=65, memory_reclaim_threshold_percent=65)


@pytest.mark.parametrize(
    ("reserved_cpus", "reserved", "pods", "metric", "cfg", "want_cpu", "want_mem"),
    [
        pytest.param("", Resources(), O1_PODS, O1_METRIC, R65, 25000, 33 * G, id="usage"),
        pytest.param("0-19", Resources(), O1_PODS, O1_METRIC, R65, 12000, 33 * G, id="reserved-cpus-0-19"),
        pytest.param("", Resources(memory=20 * G), O1_PODS, O1_METRIC, R65, 25000, 25 * G, id="reserved-memory-20G"),
        pytest.param("", Resources(), O1_PODS, O1_METRIC,
                     BatchConfig(cpu_reclaim_threshold_percent=70, memory_reclaim_threshold_percent=80,
                                 memory_policy="request"), 30000, 36 * G, id="memory-policy-request"),
        pytest.param("", Resources(), O1_PODS, O1_METRIC,
                     BatchConfig(cpu_reclaim_threshold_percent=70, memory_reclaim_threshold_percent=80,
                                 cpu_policy="maxUsageRequest", memory_policy="request"),
                     21000, 36 * G, id="cpu-maxUsageRequest-memory-request"),
        pytest.param("", Resources(), LSE_PODS, LSE_METRIC, R65, 20000, 33 * G, id="lse-counted-at-request"),
    ],
)
def test_oracle_o1_through_the_fast_path(reserved_cpus: str, reserved: Resources, pods: list[PodView],
                                         metric: NodeMetric, cfg: BatchConfig, want_cpu: int, want_mem: int) -> None:
    node = NodeSpec(name="n1", capacity=O1_NODE.capacity, allocatable=O1_NODE.allocatable,
                    reserved_cpus=reserved_cpus, reserved=reserved)
    got = compute_allocatable_of(node, node_reserved(node), metric, NodePods.of(pods), None, cfg, MidConfig())
    assert (got.batch_cpu, got.batch_memory) == (want_cpu, want_mem)
    assert batch_allocatable(node, metric, pods, cfg) == (want_cpu, want_mem)


UIDS = [f"p{i}" for i in range(30)]

_view = st.builds(
    PodView,
    uid=st.sampled_from(UIDS),
    phase=st.sampled_from(["Pending", "Running", "Succeeded", "Failed"]),
    priority_class=st.sampled_from(["prod", "mid", "batch", "free", "none"]),
    qos_class=st.sampled_from(["LSE", "LSR", "LS", "BE"]),
    requests=st.builds(Resources, cpu=st.integers(0, 16_000), memory=st.integers(0, 32 * G),
                       mid_cpu=st.integers(0, 4000), mid_memory=st.integers(0, 4 * G),
                       batch_cpu=st.integers(0, 4000), batch_memory=st.integers(0, 4 * G)),
)
# Reports of listed pods, of pods gone from the list (uids p30..p39), and now and then one repeated.
_report = st.builds(PodMetric, uid=st.sampled_from(UIDS + [f"p{i}" for i in range(30, 40)]),
                    cpu=st.integers(0, 20_000), memory=st.integers(0, 40 * G),
                    qos_class=st.sampled_from([None, "LSE", "LSR", "LS", "BE"]),
                    priority_class=st.sampled_from([None, "prod", "mid", "batch", "free", "none"]))
_batch = st.builds(BatchConfig, cpu_policy=st.sampled_from(["usage", "maxUsageRequest"]),
                   memory_policy=st.sampled_from(["usage", "request", "maxUsageRequest"]),
                   cpu_reclaim_threshold_percent=st.integers(0, 100),
                   memory_reclaim_threshold_percent=st.integers(0, 100),
                   cpu_threshold_percent=st.none() | st.integers(0, 100),
                   memory_threshold_percent=st.none() | st.integers(0, 100))
_mid = st.builds(MidConfig, mode=st.sampled_from(["dynamic", "static"]),
                 cpu_threshold_percent=st.integers(0, 100), memory_threshold_percent=st.integers(0, 100),
                 cpu_unallocated_percent=st.integers(0, 100), memory_unallocated_percent=st.integers(0, 100),
                 cpu_static_percent=st.integers(0, 100), memory_static_percent=st.integers(0, 100))
_node = st.builds(
    lambda cores, mem_gib, alloc_cut, reserved_cpus, reserved_mem: NodeSpec(
        name="n1", capacity=Resources(cpu=cores * CPU, memory=mem_gib * G, pods=110),
        allocatable=Resources(cpu=cores * CPU - alloc_cut, memory=mem_gib * G - alloc_cut * G // 1000, pods=110),
        reserved_cpus=reserved_cpus, reserved=Resources(memory=reserved_mem)),
    cores=st.integers(1, 128), mem_gib=st.integers(1, 512), alloc_cut=st.integers(0, 2000),
    reserved_cpus=st.sampled_from(["", "0", "0-1", "0-3,8"]), reserved_mem=st.integers(0, 16 * G))


@st.composite
def _node_case(draw: st.DrawFn) -> tuple[NodeSpec, list[PodView], NodeMetric, NodeProfile | None]:
    node = draw(_node)
    pods = draw(st.lists(_view, max_size=30, unique_by=lambda v: v.uid))
    reports = draw(st.lists(_report, max_size=36))
    cap = node.capacity
    metric = NodeMetric(node="n1", at=0.0,
                        node_usage=Usage(cpu=draw(st.integers(0, cap.cpu)), memory=draw(st.integers(0, cap.memory))),
                        system_usage=Usage(cpu=draw(st.integers(0, cap.cpu // 4)),
                                           memory=draw(st.integers(0, cap.memory // 4))),
                        host_apps_usage=Usage(cpu=draw(st.integers(0, 2000)), memory=draw(st.integers(0, 2 * G))),
                        pods=reports)
    profile = draw(st.none() | st.builds(
        lambda c, m: NodeProfile(node="n1", at=0.0, prod_reclaimable=Usage(cpu=c, memory=m)),
        st.integers(0, cap.cpu), st.integers(0, cap.memory)))
    return node, pods, metric, profile


@settings(max_examples=300, deadline=None)
@given(case=_node_case(), batch=_batch, mid=_mid)
def test_fast_path_equals_the_per_pod_formula(case: tuple[NodeSpec, list[PodView], NodeMetric, NodeProfile | None],
                                              batch: BatchConfig, mid: MidConfig) -> None:
    node, pods, metric, profile = case
    summary = NodePods.of(pods)
    assert high_priority_sums_of(summary, metric) == high_priority_sums(pods, metric)
    want = compute_allocatable(node, metric, pods, profile, batch, mid)
    assert compute_allocatable_of(node, node_reserved(node), metric, summary, profile, batch, mid) == want


@settings(max_examples=100, deadline=None)
@given(cases=st.lists(_node_case(), min_size=1, max_size=8))
def test_fast_path_over_a_random_cluster_with_cached_summaries(
        cases: list[tuple[NodeSpec, list[PodView], NodeMetric, NodeProfile | None]]) -> None:
    # one summary per node reused for a second metric: only the reports changed
    summaries = [NodePods.of(pods) for _, pods, _, _ in cases]
    for (node, pods, metric, profile), summary in zip(cases, summaries):
        later = NodeMetric(node="n1", at=60.0, node_usage=metric.node_usage, system_usage=metric.system_usage,
                           pods=[PodMetric(uid=p.uid, cpu=p.cpu // 2, memory=p.memory * 2, qos_class=p.qos_class,
                                           priority_class=p.priority_class) for p in reversed(metric.pods)])
        for m in (metric, later):
            assert (compute_allocatable_of(node, node_reserved(node), m, summary, profile, BatchConfig(), MidConfig())
                    == compute_allocatable(node, m, pods, profile, BatchConfig(), MidConfig()))


def test_repeated_report_counts_once_with_the_last_value() -> None:
    pods = [_pod("a", "prod", "LS", 4 * CPU, 4 * G)]
    metric = NodeMetric(node="n1", at=0.0, pods=[
        PodMetric(uid="a", cpu=9 * CPU, memory=G), PodMetric(uid="a", cpu=2 * CPU, memory=G),
        PodMetric(uid="gone", cpu=CPU, memory=G, priority_class="prod"),
        PodMetric(uid="gone", cpu=3 * CPU, memory=G, priority_class="prod")])
    sums = high_priority_sums(pods, metric)
    assert sums.used == Usage(cpu=2 * CPU + 3 * CPU, memory=2 * G)
    assert sums.max_request_used == Usage(cpu=4 * CPU + 3 * CPU, memory=4 * G + G)
    assert high_priority_sums_of(NodePods.of(pods), metric) == sums


def test_a_uid_listed_twice_is_refused() -> None:
    pods = [_pod("a", "prod", "LS", CPU), _pod("b", "prod", "LS"), _pod("a", "batch", "BE")]
    with pytest.raises(ValueError, match="listed more than once on a node: a"):
        NodePods.of(pods)
    with pytest.raises(ValueError, match="listed more than once"):
        high_priority_sums(pods, NodeMetric(node="n1", at=0.0))
