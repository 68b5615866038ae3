"""Every node agent strategy switch travels from the slo-manager's cluster strategy and node pools into NodeSLO."""

from __future__ import annotations

import pytest

from colo.messages import (
    BEBudgetStrategy,
    BlkIOLimit,
    BlkIOStrategy,
    CPUSetStrategy,
    NodeSpec,
    ResctrlClass,
    ResctrlStrategy,
    Resources,
    SystemStrategy,
)
from colo_slo_manager.nodeslo import render_node_slo
from colo_slo_manager.settings import NodePool, NodeSLOStrategy

NODE = NodeSpec(name="n1", capacity=Resources(cpu=1000, memory=1), allocatable=Resources(cpu=1000, memory=1),
                labels={"pool": "io"})


@pytest.mark.parametrize(("field", "value"), [
    ("cpuset", CPUSetStrategy(enabled=False)),
    ("resctrl", ResctrlStrategy(enabled=True, be=ResctrlClass(l3_end_percent=20, mba_percent=50))),
    ("blkio", BlkIOStrategy(enabled=True, be=[BlkIOLimit(device="8:0", write_bps=10**7)])),
    ("system", SystemStrategy(enabled=True, min_free_kbytes_factor=150)),
    ("be_budget", BEBudgetStrategy(enabled=True, signal="cpu_pressure", max_percent=85)),
], ids=["cpuset", "resctrl", "blkio", "system", "be_budget"])
def test_cluster_value_and_pool_override_reach_nodeslo(field: str, value: object) -> None:
    cluster = NodeSLOStrategy(**{field: value})  # type: ignore[arg-type]
    assert getattr(render_node_slo(NODE, cluster, [], now=1.0), field) == value
    pool = NodePool(name="io", node_selector={"pool": "io"}, **{field: value})  # type: ignore[arg-type]
    slo = render_node_slo(NODE, NodeSLOStrategy(), [pool], now=1.0)
    assert (getattr(slo, field), slo.pool) == (value, "io")
