"""The configuration examples of OOM priority and network QoS in the docs (docs/node-agent.md "OOM priority",
"Network QoS", the README) go through the slo-manager's policy loader as they are written and switch the
strategy on in the NodeSLO it renders; their environment equivalents too."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from colo.messages import NetQoSStrategy, NodeSLO, NodeSpec, OOMStrategy, Resources
from colo_slo_manager.config import load_base
from colo_slo_manager.nodeslo import cluster_of, render_node_slo

ROOT = Path(__file__).resolve().parents[2]
NODE = NodeSpec(name="n1", capacity=Resources(cpu=8000, memory=2**34), allocatable=Resources(cpu=8000, memory=2**34))
NET = NetQoSStrategy(enabled=True, interface="eth0", total_bps=1_000_000_000, ls_bps=600_000_000,
                     be_bps=200_000_000)


def yaml_blocks(doc: str, key: str) -> list[str]:
    """The ```yaml blocks of ``doc`` that set ``node_slo.<key>``."""
    text = (ROOT / doc).read_text()
    return [b for b in re.findall(r"```yaml\n(.*?)```", text, re.S) if re.search(rf"^\s+{key}:", b, re.M)]


def rendered(policy: str, tmp_path: Path) -> NodeSLO:
    path = tmp_path / "slo-manager.yaml"
    path.write_text(policy)
    settings = load_base(str(path), {})
    return render_node_slo(NODE, cluster_of(settings), settings.node_pools, now=1.0)


@pytest.mark.parametrize(("doc", "key", "blocks"), [
    pytest.param("docs/node-agent.md", "oom", 1, id="node-agent.md OOM priority"),
    pytest.param("docs/node-agent.md", "net_qos", 1, id="node-agent.md Network QoS"),
    pytest.param("README.md", "oom", 1, id="README OOM priority"),
    pytest.param("README.md", "net_qos", 1, id="README network QoS"),
])
def test_the_docs_examples_switch_the_strategy_on(doc: str, key: str, blocks: int, tmp_path: Path) -> None:
    examples = yaml_blocks(doc, key)
    assert len(examples) == blocks, f"{doc}: the policy example that sets node_slo.{key}"
    for policy in examples:
        assert yaml.safe_load(policy)["node_slo"][key]["enabled"] is True  # the example switches it on
        slo = rendered(policy, tmp_path)
        if key == "oom":
            assert slo.oom == OOMStrategy(enabled=True)
        else:
            assert slo.net_qos == NET


def test_the_environment_equivalents() -> None:
    env = {"COLO_SLO_MANAGER_NODE_SLO__OOM__ENABLED": "1", "COLO_SLO_MANAGER_NODE_SLO__NET_QOS__ENABLED": "1",
           "COLO_SLO_MANAGER_NODE_SLO__NET_QOS__INTERFACE": "eth0",
           "COLO_SLO_MANAGER_NODE_SLO__NET_QOS__TOTAL_BPS": "1000000000",
           "COLO_SLO_MANAGER_NODE_SLO__NET_QOS__LS_BPS": "600000000",
           "COLO_SLO_MANAGER_NODE_SLO__NET_QOS__BE_BPS": "200000000"}
    settings = load_base(None, env)
    slo = render_node_slo(NODE, cluster_of(settings), settings.node_pools, now=1.0)
    assert (slo.oom, slo.net_qos) == (OOMStrategy(enabled=True), NET)
    off = load_base(None, {"COLO_SLO_MANAGER_NODE_SLO__OOM__ENABLED": "0"})
    assert not render_node_slo(NODE, cluster_of(off), off.node_pools, now=1.0).oom.enabled
