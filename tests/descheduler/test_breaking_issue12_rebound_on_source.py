"""An evicted pod bound again on its own source: the migration is over, nothing is mis-stated any more.

The target became unusable after the eviction (cordoned, under BE memory pressure, its reservation expired) and
the scheduler put the evicted pod back on its source. The booking waited for a binding elsewhere that never
came: until its TTL (900 s) the source counted one pod less than its metric listed and stayed "settling" (no
source, whatever its load), the booked target counted the pod's usage as incoming, and the migration kept
counting as running on the source and its workload until the migration TTL (300 s).
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from colo.messages import NodeMetric, NodeSpec, PodBound, PodMetric, PodSpec, PodStatus, Resources, Usage
from colo_descheduler.cluster import ClusterView
from colo_descheduler.lownodeload import Eviction

GI = 1 << 30
SPEC = PodSpec(uid="a", name="a", app="web", requests=Resources(cpu=2000, memory=GI))


@dataclass(frozen=True)
class Case:
    name: str
    rebound_on: str  # where the evicted pod is bound again at 105 s
    source_pods: int  # the source's pod count at 500 s (its metric lists a and b)
    source_settling: bool
    dst_incoming: tuple[int, int]
    migrating: dict[str, int]


CASES = [
    Case("back-on-its-source", "src", 2, False, (0, 0), {}),
    Case("on-a-third-node", "other", 1, False, (0, 0), {}),  # the booking moved to "other" (not in the loads)
]


def view_after(case: Case) -> ClusterView:
    view = ClusterView()
    for name in ("src", "dst", "other"):
        alloc = Resources(cpu=10_000, memory=10 * GI, pods=10)
        view.on_node(NodeSpec(name=name, capacity=alloc, allocatable=alloc))
    other = PodSpec(uid="b", name="b", app="db", requests=Resources(cpu=1000, memory=GI))
    view.on_bound(PodBound(spec=SPEC, node="src", at=0.0))
    view.on_bound(PodBound(spec=other, node="src", at=0.0))
    view.start_migration(Eviction("a", "src", "dst", "default/web", (2000, GI)), 100.0)
    view.on_status(PodStatus(uid="a", node="src", phase="Failed", at=101.0, reason="Evicted"))
    view.on_bound(PodBound(spec=SPEC, node=case.rebound_on, at=105.0))
    view.on_status(PodStatus(uid="a", node=case.rebound_on, phase="Running", at=106.0))
    pods = [PodMetric(uid="b", cpu=1000, memory=GI)]
    if case.rebound_on == "src":
        pods.append(PodMetric(uid="a", cpu=2000, memory=GI))
    view.on_metric(NodeMetric(node="src", at=500.0, node_usage=Usage(cpu=3500, memory=3 * GI), pods=pods))
    view.on_metric(NodeMetric(node="dst", at=500.0, node_usage=Usage(cpu=1000, memory=GI)))
    return view


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_rebound_evicted_pod_ends_its_migration(case: Case) -> None:
    view = view_after(case)
    view.expire(500.0, view.settings.migration_ttl_s + 1000)  # the TTLs are not what ends it
    loads = {n.name: n for n in view.fresh_loads(500.0, 600.0)}
    assert loads["src"].pods == case.source_pods
    assert loads["src"].settling is case.source_settling
    assert loads["dst"].incoming == case.dst_incoming
    assert view.migrating_per_node() == case.migrating
