"""NodeSLO from the cluster strategy with the first matching pool's partial strategies merged on."""

from __future__ import annotations

from typing import Any

import pytest

from colo.messages import (
    BlkIOLimit,
    BlkIOStrategy,
    CPUSuppressStrategy,
    MemoryQoSClass,
    MemoryQoSStrategy,
    NodeSpec,
    Resources,
)
from colo.settings import SettingsError, build_settings
from colo_slo_manager.nodeslo import render_node_slo
from colo_slo_manager.settings import NodePool, NodeSLOStrategy, SloManagerSettings

CLUSTER = NodeSLOStrategy(
    cpu_suppress=CPUSuppressStrategy(enabled=True, threshold_percent=65, min_percent=10, policy="cfsQuota"),
    memory_qos=MemoryQoSStrategy(enabled=True, min_percent=20, lsr=MemoryQoSClass(min_percent=30, low_percent=40)),
    blkio=BlkIOStrategy(enabled=True, be=[BlkIOLimit(device="8:0", read_bps=100), BlkIOLimit(device="8:16")]),
)


def node(**labels: str) -> NodeSpec:
    return NodeSpec(name="n1", capacity=Resources(cpu=1000, memory=1), allocatable=Resources(cpu=1000, memory=1),
                    labels=labels)


def test_pool_sets_one_field_the_rest_is_the_clusters() -> None:
    pool = NodePool(name="gpu", node_selector={"pool": "gpu"}, cpu_suppress={"threshold_percent": 50})
    slo = render_node_slo(node(pool="gpu"), CLUSTER, [pool], now=1.0)
    assert slo.pool == "gpu"
    assert slo.cpu_suppress == CPUSuppressStrategy(enabled=True, threshold_percent=50, min_percent=10,
                                                   policy="cfsQuota")
    assert slo.memory_qos == CLUSTER.memory_qos and slo.blkio == CLUSTER.blkio


@pytest.mark.parametrize(("patch", "want"), [
    pytest.param({"lsr": {"low_percent": 5}}, MemoryQoSStrategy(
        enabled=True, min_percent=20, lsr=MemoryQoSClass(min_percent=30, low_percent=5)), id="nested-field"),
    pytest.param({"be": {"min_percent": 7}}, MemoryQoSStrategy(
        enabled=True, min_percent=20, lsr=MemoryQoSClass(min_percent=30, low_percent=40),
        be=MemoryQoSClass(min_percent=7)), id="nested-unset-in-cluster"),
    pytest.param({"lsr": None, "enabled": False}, MemoryQoSStrategy(enabled=False, min_percent=20),
                 id="null-clears"),
    pytest.param({}, CLUSTER.memory_qos, id="empty-keeps"),
])
def test_nested_strategies_merge_field_by_field(patch: dict[str, Any], want: MemoryQoSStrategy) -> None:
    slo = render_node_slo(node(), CLUSTER, [NodePool(name="all", memory_qos=patch)], now=1.0)
    assert slo.memory_qos == want


def test_lists_replace_whole() -> None:
    pool = NodePool(name="ssd", blkio={"be": [{"device": "259:0", "write_bps": 5}]})
    slo = render_node_slo(node(), CLUSTER, [pool], now=1.0)
    assert slo.blkio == BlkIOStrategy(enabled=True, be=[BlkIOLimit(device="259:0", write_bps=5)])


def test_first_matching_pool_wins_and_no_match_is_the_cluster() -> None:
    pools = [NodePool(name="zone-b", node_selector={"zone": "b"}, cpu_suppress={"threshold_percent": 40}),
             NodePool(name="gpu", node_selector={"pool": "gpu"}, cpu_suppress={"threshold_percent": 50}),
             NodePool(name="gpu-a", node_selector={"pool": "gpu", "zone": "a"}, cpu_suppress={"min_percent": 0})]
    first = render_node_slo(node(pool="gpu", zone="a"), CLUSTER, pools, now=1.0)
    assert (first.pool, first.cpu_suppress.threshold_percent, first.cpu_suppress.min_percent) == ("gpu", 50, 10)
    none = render_node_slo(node(zone="c"), CLUSTER, pools, now=1.0)
    assert none.pool == "" and none.cpu_suppress == CLUSTER.cpu_suppress and none.memory_qos == CLUSTER.memory_qos


def test_a_whole_struct_given_in_python_replaces_the_strategy() -> None:
    pool = NodePool(name="p", cpu_suppress=CPUSuppressStrategy(threshold_percent=50))
    slo = render_node_slo(node(), CLUSTER, [pool], now=1.0)
    assert slo.cpu_suppress == CPUSuppressStrategy(threshold_percent=50)  # min_percent and policy: defaults


def test_renders_follow_new_settings_objects() -> None:
    pools = [NodePool(name="p", cpu_suppress={"threshold_percent": 50})]
    assert render_node_slo(node(), CLUSTER, pools, now=1.0).cpu_suppress.threshold_percent == 50
    other = [NodePool(name="p", cpu_suppress={"threshold_percent": 30})]
    assert render_node_slo(node(), CLUSTER, other, now=2.0).cpu_suppress.threshold_percent == 30
    assert render_node_slo(node(), NodeSLOStrategy(), [], now=3.0).cpu_suppress.threshold_percent == 65


def test_unknown_fields_and_bad_values_in_pools_all_listed() -> None:
    data = {"node_pools": [
        {"name": "a", "cpu_suppress": {"threshold": 50, "policy": "sometimes"}},
        {"name": "b", "memory_qos": {"lsr": {"min_percent": "x"}}, "system": 3},
        {"name": "", "cpuset": {"enabled": True}},
        {"name": "c", "node_selector": {"bad key!": "x"}},
    ]}
    with pytest.raises(SettingsError) as err:
        build_settings(SloManagerSettings, data)
    joined = "\n".join(err.value.errors)
    for fragment in ("cpu_suppress.threshold: unknown field", "cpu_suppress.policy", "memory_qos.lsr.min_percent",
                     "system", "node pool name must not be empty", "'bad key!' is not a valid label key"):
        assert fragment in joined, fragment


def test_merged_result_validated_once_per_problem() -> None:
    data = {"node_slo": {"cpu_suppress": {"threshold_percent": 120}},
            "node_pools": [{"name": "a", "cpu_suppress": {"min_percent": 150}},
                           {"name": "b", "memory_evict": {"lower_percent": 90}},
                           {"name": "a", "node_selector": {"zone": "x"}}]}
    with pytest.raises(SettingsError) as err:
        build_settings(SloManagerSettings, data)
    errors = err.value.errors
    assert sum("threshold_percent must be within 0..100, got 120" in e for e in errors) == 1  # the cluster's, once
    assert any("node_pools[0] (a)" in e and "min_percent must be within 0..100, got 150" in e for e in errors)
    assert any("node_pools[1] (b)" in e and "lower_percent 90 must not exceed threshold_percent 70" in e
               for e in errors)
    assert any("duplicate node pool names: a" in e for e in errors)


def test_pool_merge_valid_in_cluster_range_accepted() -> None:
    s = build_settings(SloManagerSettings, {"node_pools": [{"name": "a", "cpu_suppress": {"threshold_percent": 80}}]})
    assert s.node_pools[0].cpu_suppress == {"threshold_percent": 80}


def test_oom_and_net_qos_configured_per_cluster_and_pool() -> None:
    s = build_settings(SloManagerSettings, {
        "node_slo": {"oom": {"be_score_adj": 900}},
        "node_pools": [{"name": "edge", "node_selector": {"pool": "edge"},
                        "net_qos": {"enabled": True, "interface": "eth0", "total_bps": 1_000_000_000,
                                    "ls_bps": 600_000_000, "be_bps": 200_000_000}}]})
    edge = render_node_slo(node(pool="edge"), s.node_slo, s.node_pools, now=1.0)
    other = render_node_slo(node(), s.node_slo, s.node_pools, now=1.0)
    assert edge.oom.be_score_adj == 900 and other.oom.be_score_adj == 900
    assert edge.net_qos.enabled and (edge.net_qos.interface, edge.net_qos.be_bps) == ("eth0", 200_000_000)
    assert not other.net_qos.enabled


def test_bad_oom_and_net_qos_values_all_listed_with_their_path() -> None:
    data = {"node_slo": {"oom": {"be_score_adj": 2000, "ls_max_score_adj": -999}},
            "node_pools": [{"name": "edge", "net_qos": {"enabled": True, "interface": "", "total_bps": 10,
                                                        "ls_bps": 8, "be_bps": 8, "rate": 1}}]}
    with pytest.raises(SettingsError) as err:
        build_settings(SloManagerSettings, data)
    joined = "\n".join(err.value.errors)
    for fragment in ("node_slo.oom.be_score_adj must be within -1000..1000, got 2000",
                     "node_slo.oom: need lsr_score_adj < ls_max_score_adj < be_score_adj",
                     "net_qos.rate: unknown field"):
        assert fragment in joined, fragment
    data["node_pools"][0]["net_qos"].pop("rate")  # type: ignore[index, attr-defined]
    data["node_slo"] = {}
    with pytest.raises(SettingsError) as err:
        build_settings(SloManagerSettings, data)
    joined = "\n".join(err.value.errors)
    for fragment in ("node_pools[0] (edge)", "net_qos.interface must be a network interface name",
                     "net_qos: ls_bps + be_bps (16) must not exceed total_bps (10)"):
        assert fragment in joined, fragment
