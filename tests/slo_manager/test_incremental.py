"""The incremental paths of slo-manager: precomputed pod summaries and cached NodeSLO renders.

Each cached input must be picked up when it changes: a test here fails when a change of
pods, node spec or metric does not reach the computed allocatable or the NodeSLO.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from colo.messages import (
    MemoryEvictStrategy,
    NodeMetric,
    NodeProfile,
    NodeSpec,
    PodBound,
    PodMetric,
    PodSpec,
    PodStatus,
    Resources,
    Usage,
)
from colo_slo_manager.allocatable import (
    NodePods,
    PodView,
    compute_allocatable,
    compute_allocatable_of,
    node_reserved,
)
from colo_slo_manager.memory_pressure import eviction_headroom
from colo_slo_manager.service import SloManagerService
from colo_slo_manager.settings import BatchConfig, MidConfig, NodePool, SloManagerSettings
from colo_slo_manager.state import ClusterState

G = 10**9
NODE = NodeSpec(name="n1", capacity=Resources(cpu=32_000, memory=64 * G, pods=110),
                allocatable=Resources(cpu=30_000, memory=60 * G, pods=110), reserved_cpus="0-1")

_views = st.builds(
    PodView,
    uid=st.sampled_from([f"p{i}" for i in range(8)]),
    phase=st.sampled_from(["Pending", "Running", "Succeeded", "Failed"]),
    priority_class=st.sampled_from(["prod", "mid", "batch", "free", "none"]),
    qos_class=st.sampled_from(["LSE", "LSR", "LS", "BE"]),
    requests=st.builds(Resources, cpu=st.integers(0, 8000), memory=st.integers(0, 8 * G),
                       mid_cpu=st.integers(0, 4000), mid_memory=st.integers(0, 4 * G)),
)
_metric_pods = st.lists(st.builds(
    PodMetric, uid=st.sampled_from([f"p{i}" for i in range(12)]), cpu=st.integers(0, 8000),
    memory=st.integers(0, 8 * G), qos_class=st.sampled_from([None, "LS", "BE"]),
    priority_class=st.sampled_from([None, "prod", "batch", "free", "mid"])), max_size=10)


@settings(max_examples=150, deadline=None)
@given(pods=st.lists(_views, max_size=8, unique_by=lambda v: v.uid), metric_pods=_metric_pods,
       node_cpu=st.integers(0, 30_000), system_cpu=st.integers(0, 4000), reclaim=st.integers(0, 8000),
       cpu_policy=st.sampled_from(["usage", "request", "maxUsageRequest"]),
       mid_mode=st.sampled_from(["dynamic", "static"]))
def test_summary_path_equals_direct_formula(pods: list[PodView], metric_pods: list[PodMetric], node_cpu: int,
                                            system_cpu: int, reclaim: int, cpu_policy: str,
                                            mid_mode: str) -> None:
    metric = NodeMetric(node="n1", at=0.0, node_usage=Usage(cpu=node_cpu, memory=20 * G),
                        system_usage=Usage(cpu=system_cpu, memory=2 * G), pods=metric_pods)
    profile = NodeProfile(node="n1", at=0.0, prod_reclaimable=Usage(cpu=reclaim, memory=G))
    batch = BatchConfig(cpu_policy=cpu_policy)  # type: ignore[arg-type]
    mid = MidConfig(mode=mid_mode)  # type: ignore[arg-type]
    want = compute_allocatable(NODE, metric, pods, profile, batch, mid)
    got = compute_allocatable_of(NODE, node_reserved(NODE), metric, NodePods.of(pods), profile, batch, mid)
    assert got == want


def _spec(uid: str, cpu: int, prio: int = 9500) -> PodSpec:
    return PodSpec(uid=uid, name=uid, priority=prio, requests=Resources(cpu=cpu, memory=G))


@pytest.mark.parametrize(
    ("change", "want_hp"),
    [
        pytest.param(lambda s: s.on_bound(PodBound(spec=_spec("b", 3000), node="n1", at=2)), {"a", "b"},
                     id="new-binding"),
        pytest.param(lambda s: s.on_status(PodStatus(uid="a", node="n1", phase="Succeeded", at=2)), set(),
                     id="pod-finished"),
        pytest.param(lambda s: s.on_bound(PodBound(spec=_spec("a", 1000), node="n2", at=2)), set(),
                     id="pod-moved-away"),
        pytest.param(lambda s: (s.on_status(PodStatus(uid="a", node="n1", phase="Failed", at=2)),
                                s.forget_finished(10_000.0)), set(), id="pod-forgotten"),
        pytest.param(lambda s: s.on_status(PodStatus(uid="a", node="n1", phase="Running", at=0.5)), {"a"},
                     id="stale-status-keeps-summary"),
    ],
)
def test_pod_summary_follows_pod_changes(change: object, want_hp: set[str]) -> None:
    state = ClusterState()
    state.on_bound(PodBound(spec=_spec("a", 1000), node="n1", at=1))
    assert {h[0] for h in state.pod_summary("n1").hp} == {"a"}
    change(state)  # type: ignore[operator]
    assert {h[0] for h in state.pod_summary("n1").hp} == want_hp
    assert state.pod_summary("n1") == NodePods.of(state.pods_on("n1"))


def _service(pools: list[NodePool] | None = None) -> SloManagerService:
    svc = SloManagerService(SloManagerSettings(node_pools=pools or []))
    svc.state.put_node(NODE)
    return svc


def test_compute_picks_up_pod_metric_and_node_changes() -> None:
    svc = _service()
    metric = NodeMetric(node="n1", at=0.0, node_usage=Usage(cpu=4000, memory=8 * G),
                        system_usage=Usage(cpu=1000, memory=G))
    svc.state.put_metric(metric)
    first = svc._compute("n1", 0.0)
    svc.state.on_bound(PodBound(spec=_spec("a", 6000), node="n1", at=1))
    svc.state.on_status(PodStatus(uid="a", node="n1", phase="Running", at=2))
    after_pod = svc._compute("n1", 0.0)
    assert after_pod is not None and first is not None and after_pod.batch_cpu < first.batch_cpu
    svc.state.put_metric(NodeMetric(node="n1", at=1.0, node_usage=Usage(cpu=4000, memory=8 * G),
                                    system_usage=Usage(cpu=1000, memory=G),
                                    pods=[PodMetric(uid="a", cpu=9000, memory=G)]))
    after_metric = svc._compute("n1", 1.0)
    assert after_metric is not None and after_metric.batch_cpu < after_pod.batch_cpu
    bigger = NodeSpec(name="n1", capacity=Resources(cpu=64_000, memory=64 * G, pods=110),
                      allocatable=Resources(cpu=58_000, memory=60 * G, pods=110), reserved_cpus="0-1")
    svc.state.put_node(bigger)
    after_node = svc._compute("n1", 1.0)
    assert after_node is not None and after_node.batch_cpu > after_metric.batch_cpu
    # the node's 8G include 6G no pod accounts for: the eviction headroom (memory_pressure.py) caps batch-memory
    # at 68 % of 64G − 8G
    metric = svc.state.metrics["n1"]
    pure = compute_allocatable(bigger, metric, svc.state.pods_on("n1"), None, svc.settings.batch, svc.settings.mid)
    assert after_node == eviction_headroom(pure, metric, bigger.capacity.memory, 0, MemoryEvictStrategy())
    assert after_node.batch_memory == 64 * G * 68 // 100 - 8 * G < pure.batch_memory


def test_node_slo_rendered_again_only_when_the_spec_changes() -> None:
    svc = _service([NodePool(name="gpu", node_selector={"pool": "gpu"})])
    first = svc._render("n1", NODE, 0.0)
    assert first is not None and first.pool == ""
    assert svc._render("n1", NODE, 60.0) is None
    relabelled = NodeSpec(name="n1", capacity=NODE.capacity, allocatable=NODE.allocatable,
                          reserved_cpus=NODE.reserved_cpus, labels={"pool": "gpu"})
    svc.state.put_node(relabelled)
    second = svc._render("n1", relabelled, 120.0)
    assert second is not None and second.pool == "gpu"
    same_policy_new_object = NodeSpec(name="n1", capacity=NODE.capacity, allocatable=NODE.allocatable,
                                      reserved_cpus=NODE.reserved_cpus, labels={"pool": "gpu", "x": "y"})
    assert svc._render("n1", same_policy_new_object, 180.0) is None
    del svc.state.slos["n1"]
    assert svc._render("n1", same_policy_new_object, 240.0) is not None


def test_node_slo_rendered_again_when_settings_change() -> None:
    svc = _service()
    assert svc._render("n1", NODE, 0.0) is not None
    svc.settings = SloManagerSettings(node_pools=[NodePool(name="all")])
    again = svc._render("n1", NODE, 60.0)
    assert again is not None and again.pool == "all"
