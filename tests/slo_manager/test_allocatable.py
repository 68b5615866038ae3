"""Batch and mid allocatable: oracle O1 of REFERENCE.md §10 and the mid formula of §3."""

from __future__ import annotations

import pytest

from colo.messages import NodeMetric, NodeProfile, NodeSpec, PodMetric, Resources, Usage
from colo_slo_manager.allocatable import (
    PodView,
    batch_allocatable,
    count_cpu_list,
    mid_allocatable,
    node_problems,
    node_reserved,
)
from colo_slo_manager.settings import BatchConfig, MidConfig

G = 10**9
CPU = 1000


def node(reserved_cpus: str = "", reserved: Resources = Resources(), cpu: int = 100 * CPU,
         memory: int = 120 * G, allocatable: Resources | None = None) -> NodeSpec:
    cap = Resources(cpu=cpu, memory=memory, pods=110)
    return NodeSpec(name="n1", capacity=cap, allocatable=allocatable or cap,
                    reserved_cpus=reserved_cpus, reserved=reserved)


def pod(uid: str, prio: str, qos: str, cpu: int = 0, mem: int = 0, phase: str = "Running",
        mid_cpu: int = 0) -> PodView:
    return PodView(uid=uid, phase=phase, priority_class=prio, qos_class=qos,  # type: ignore[arg-type]
                   requests=Resources(cpu=cpu, memory=mem, mid_cpu=mid_cpu))


# O1 pods: A LS Running 20 CPU/20G; B BE Running no requests; C Pending (LSR, prod) 2 × 10 CPU/20G;
# D BE Succeeded.
O1_PODS = [
    pod("A", "prod", "LS", 20 * CPU, 20 * G),
    pod("B", "batch", "BE"),
    pod("C", "prod", "LSR", 20 * CPU, 40 * G, phase="Pending"),
    pod("D", "batch", "BE", phase="Succeeded"),
]
O1_METRIC = NodeMetric(
    node="n1", at=0.0, node_usage=Usage(cpu=50 * CPU, memory=55 * G),
    system_usage=Usage(cpu=7 * CPU, memory=12 * G),
    pods=[PodMetric(uid="A", cpu=11 * CPU, memory=11 * G), PodMetric(uid="B", cpu=10 * CPU, memory=10 * G),
          PodMetric(uid="C", cpu=22 * CPU, memory=22 * G), PodMetric(uid="D", cpu=10 * CPU, memory=10 * G)],
)
# The LSE row: an LSE pod req 10 CPU used 5, another prod pod used 6, a mid pod used 22.
LSE_PODS = [
    pod("lse", "prod", "LSE", 10 * CPU, 10 * G),
    pod("prod", "prod", "LS", 8 * CPU, 8 * G),
    pod("mid", "mid", "LS", mid_cpu=30 * CPU),
]
LSE_METRIC = NodeMetric(
    node="n1", at=0.0, node_usage=Usage(cpu=40 * CPU, memory=45 * G),
    system_usage=Usage(cpu=7 * CPU, memory=12 * G),
    pods=[PodMetric(uid="lse", cpu=5 * CPU, memory=5 * G), PodMetric(uid="prod", cpu=6 * CPU, memory=6 * G),
          PodMetric(uid="mid", cpu=22 * CPU, memory=22 * G)],
)


@pytest.mark.parametrize(
    ("n", "pods", "metric", "cfg", "want_cpu", "want_mem"),
    [
        pytest.param(node(), O1_PODS, O1_METRIC,
                     BatchConfig(cpu_reclaim_threshold_percent=65, memory_reclaim_threshold_percent=65),
                     25000, 33 * G, id="usage"),
        pytest.param(node(reserved_cpus="0-19"), O1_PODS, O1_METRIC,
                     BatchConfig(cpu_reclaim_threshold_percent=65, memory_reclaim_threshold_percent=65),
                     12000, 33 * G, id="reservation-reserved-cpus-0-19"),
        pytest.param(node(reserved=Resources(memory=20 * G)), O1_PODS, O1_METRIC,
                     BatchConfig(cpu_reclaim_threshold_percent=65, memory_reclaim_threshold_percent=65),
                     25000, 25 * G, id="reservation-memory-20G"),
        pytest.param(node(), O1_PODS, O1_METRIC,
                     BatchConfig(cpu_reclaim_threshold_percent=70, memory_reclaim_threshold_percent=80,
                                 memory_policy="request"),
                     30000, 36 * G, id="memory-policy-request"),
        pytest.param(node(), O1_PODS, O1_METRIC,
                     BatchConfig(cpu_reclaim_threshold_percent=70, memory_reclaim_threshold_percent=80,
                                 cpu_policy="maxUsageRequest", memory_policy="request"),
                     21000, 36 * G, id="cpu-maxUsageRequest-memory-request"),
        pytest.param(node(), LSE_PODS, LSE_METRIC,
                     BatchConfig(cpu_reclaim_threshold_percent=65, memory_reclaim_threshold_percent=65),
                     20000, 33 * G, id="lse-counted-at-request"),
    ],
)
def test_oracle_o1_batch_allocatable(n: NodeSpec, pods: list[PodView], metric: NodeMetric,
                                     cfg: BatchConfig, want_cpu: int, want_mem: int) -> None:
    assert batch_allocatable(n, metric, pods, cfg) == (want_cpu, want_mem)


@pytest.mark.parametrize(
    ("pods", "metric_pods", "cfg", "want"),
    [
        pytest.param([], [PodMetric(uid="gone", cpu=10 * CPU, memory=10 * G, priority_class="prod")],
                     BatchConfig(), (60000 - 7000 - 10000, 78 * G - 12 * G - 10 * G),
                     id="deleted-prod-pod-in-metric-counts"),
        pytest.param([], [PodMetric(uid="gone", cpu=10 * CPU, memory=10 * G, priority_class="batch")],
                     BatchConfig(), (60000 - 7000, 78 * G - 12 * G), id="deleted-batch-pod-ignored"),
        pytest.param([], [PodMetric(uid="gone", cpu=10 * CPU, memory=10 * G, qos_class="BE")],
                     BatchConfig(), (60000 - 7000, 78 * G - 12 * G), id="deleted-be-pod-ignored"),
        pytest.param([pod("p", "prod", "LS", 4 * CPU, 4 * G, phase="Pending")], [],
                     BatchConfig(), (60000 - 7000 - 4000, 78 * G - 12 * G - 4 * G),
                     id="pod-without-metric-counts-request"),
        pytest.param([pod("p", "prod", "LS", 90 * CPU, 110 * G)], [], BatchConfig(), (0, 0),
                     id="floor-at-zero"),
        pytest.param([], [], BatchConfig(cpu_threshold_percent=30, memory_threshold_percent=40),
                     (30000, 48 * G), id="batch-threshold-cap"),
        pytest.param([pod("f", "free", "BE", 10 * CPU, 10 * G)],
                     [PodMetric(uid="f", cpu=10 * CPU, memory=10 * G)], BatchConfig(),
                     (60000 - 7000, 78 * G - 12 * G), id="free-pod-not-high-priority"),
    ],
)
def test_batch_allocatable_rules(pods: list[PodView], metric_pods: list[PodMetric], cfg: BatchConfig,
                                 want: tuple[int, int]) -> None:
    metric = NodeMetric(node="n1", at=0.0, system_usage=Usage(cpu=7 * CPU, memory=12 * G), pods=metric_pods)
    assert batch_allocatable(node(), metric, pods, cfg) == want


def test_host_apps_count_as_system() -> None:
    metric = NodeMetric(node="n1", at=0.0, system_usage=Usage(cpu=7 * CPU, memory=12 * G),
                        host_apps_usage=Usage(cpu=3 * CPU, memory=2 * G))
    assert batch_allocatable(node(), metric, [], BatchConfig()) == (60000 - 10000, 78 * G - 14 * G)


@pytest.mark.parametrize(
    ("cpus", "want"),
    [
        pytest.param("", 0, id="empty"),
        pytest.param("0-19", 20, id="range"),
        pytest.param("0-3,8,10-11", 7, id="mixed"),
        pytest.param(" 2 , 4 ", 2, id="spaces"),
    ],
)
def test_count_cpu_list(cpus: str, want: int) -> None:
    assert count_cpu_list(cpus) == want


@pytest.mark.parametrize("cpus", [pytest.param("a-b", id="letters"), pytest.param("5-2", id="descending"),
                                  pytest.param("1--3", id="double-dash")])
def test_count_cpu_list_rejects(cpus: str) -> None:
    with pytest.raises(ValueError, match="malformed CPU list"):
        count_cpu_list(cpus)
    assert node_problems(node(reserved_cpus=cpus))


def test_node_reserved_takes_the_larger() -> None:
    n = node(allocatable=Resources(cpu=96 * CPU, memory=110 * G, pods=110), reserved=Resources(cpu=2 * CPU))
    assert node_reserved(n) == Usage(cpu=4 * CPU, memory=10 * G)


# Mid: capacity 100 CPU / 120G; node used 50 CPU / 55G; system 7 CPU / 12G; prod requests 20 CPU / 20G.
MID_METRIC = NodeMetric(node="n1", at=0.0, node_usage=Usage(cpu=50 * CPU, memory=55 * G),
                        system_usage=Usage(cpu=7 * CPU, memory=12 * G))
MID_PODS = [pod("A", "prod", "LS", 20 * CPU, 20 * G), pod("N", "none", "LS", 3 * CPU, 1 * G),
            pod("B", "batch", "BE", 5 * CPU, 5 * G)]


def profile(cpu: int, memory: int) -> NodeProfile:
    return NodeProfile(node="n1", at=0.0, prod_reclaimable=Usage(cpu=cpu, memory=memory))


@pytest.mark.parametrize(
    ("prof", "cfg", "want"),
    [
        pytest.param(None, MidConfig(), (0, 0), id="no-profile-is-zero"),
        pytest.param(profile(9 * CPU, 8 * G), MidConfig(), (9000, 8 * G), id="reclaimable-below-unused"),
        pytest.param(profile(80 * CPU, 90 * G), MidConfig(), (50000, 65 * G), id="capped-by-node-unused"),
        pytest.param(profile(9 * CPU, 8 * G), MidConfig(cpu_threshold_percent=5, memory_threshold_percent=5),
                     (5000, 6 * G), id="capped-by-threshold"),
        # unallocated = 100 − 7 − 23 = 70 CPU; 120 − 12 − 21 = 87G; 10 % of each added
        pytest.param(profile(9 * CPU, 8 * G), MidConfig(cpu_unallocated_percent=10,
                                                         memory_unallocated_percent=10),
                     (9000 + 7000, 8 * G + 8_700_000_000), id="plus-unallocated-percent"),
        pytest.param(profile(-5 * CPU, 0), MidConfig(), (0, 0), id="negative-reclaimable-floored"),
        pytest.param(profile(9 * CPU, 8 * G), MidConfig(mode="static", cpu_static_percent=20,
                                                         memory_static_percent=50, memory_threshold_percent=30),
                     (20000, 36 * G), id="static-mode"),
    ],
)
def test_mid_allocatable(prof: NodeProfile | None, cfg: MidConfig, want: tuple[int, int]) -> None:
    assert mid_allocatable(node(), MID_METRIC, MID_PODS, prof, cfg) == want
