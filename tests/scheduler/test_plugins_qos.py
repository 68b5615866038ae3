"""QoSAdmission (PreFilter): REFERENCE.md §1 valid class combinations and resource kinds."""

from __future__ import annotations

import pytest
from sched_helpers import GI, MI, node, node_resource, scheduler

from colo.messages import PodSpec, Resources
from colo_scheduler.framework.interface import UNSCHEDULABLE_AND_UNRESOLVABLE

NOW = 100.0


def spec(qos: str | None = None, prio: str | None = None, priority: int | None = None, **req: int) -> PodSpec:
    return PodSpec(uid="p", name="p", qos_class=qos, priority_class=prio, priority=priority,  # type: ignore[arg-type]
                   requests=Resources(**req))


CASES = [
    ("ls-prod-valid", spec("LS", "prod", cpu=500, memory=MI), []),
    ("lsr-prod-whole-cores-valid", spec("LSR", "prod", cpu=2000, memory=MI), []),
    ("be-batch-valid", spec("BE", "batch", batch_cpu=1000, batch_memory=GI), []),
    ("mid-class-mid-resources-valid", spec("LS", "mid", mid_cpu=1000, mid_memory=GI), []),
    ("derived-classes-valid", spec(cpu=500), []),
    ("be-prod", spec("BE", "prod", cpu=100), ["QoS class BE cannot have priority class prod"]),
    ("be-unclassified", spec("BE", priority=100, batch_cpu=100), ["QoS class BE cannot have priority class none"]),
    ("lsr-fraction-of-core", spec("LSR", "prod", cpu=1500),
     ["QoS class LSR requires a whole, non-zero number of cores, got 1500m"]),
    ("lse-no-cpu", spec("LSE", "prod", memory=GI), ["QoS class LSE requires a whole, non-zero number of cores"]),
    ("lsr-batch-class", spec("LSR", "batch", cpu=1000), ["QoS class LSR requires priority class prod, got batch"]),
    ("batch-resources-not-be", spec("LS", "batch", batch_cpu=1000),
     ["pods requesting batch-* resources must be BE, got LS"]),
    ("mid-resources-batch-class", spec("BE", "batch", mid_cpu=1000),
     ["pods requesting mid-* resources must have priority class mid, got batch"]),
    ("mixed-kinds", spec("BE", "batch", cpu=100, batch_cpu=1000),
     ["a pod requests one kind of resources, got cpu/memory and batch-*"]),
]


@pytest.mark.parametrize(("pod_spec", "problems"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_qos_admission(pod_spec: PodSpec, problems: list[str]) -> None:
    s = scheduler()
    s.on_node(node("n"), NOW)
    s.on_node_resource(node_resource("n", batch_cpu=64_000, batch_memory=64 * GI, mid_cpu=8000, mid_memory=8 * GI),
                       NOW)
    s.add_pod(pod_spec, NOW)
    out = s.schedule_cycle(NOW)
    if not problems:
        assert [p.node for p in out.placements] == ["n"]
        return
    assert not out.placements
    result = out.failures[0].result
    assert result.code == UNSCHEDULABLE_AND_UNRESOLVABLE and result.rejectors == {"QoSAdmission"}
    (reason,) = result.reasons
    assert reason.startswith("invalid QoS/priority class: ")
    for p in problems:
        assert p in reason
