"""Builders shared by the scheduler tests."""

from __future__ import annotations

from colo.messages import NodeMetric, NodeResource, NodeSpec, PodSpec, Resources, Taint, Toleration, Usage
from colo_scheduler.core import Scheduler
from colo_scheduler.settings import SchedulerSettings

GI = 1024**3
MI = 1024**2


def node(name: str, cpu: int = 96_000, memory: int = 512 * GI, pods: int = 0,
         labels: dict[str, str] | None = None, taints: list[Taint] | None = None) -> NodeSpec:
    """A node with capacity = allocatable (cpu milli-cores, memory bytes)."""
    r = Resources(cpu=cpu, memory=memory, pods=pods)
    return NodeSpec(name=name, capacity=r, allocatable=r, labels=labels or {}, taints=taints or [])


def pod(uid: str, cpu: int = 0, memory: int = 0, lim_cpu: int = 0, lim_memory: int = 0, *,
        batch_cpu: int = 0, batch_memory: int = 0, mid_cpu: int = 0, mid_memory: int = 0,
        priority: int | None = None, created_at: float = 0.0, app: str = "", max_per_node: int = -1,
        selector: dict[str, str] | None = None, tolerations: list[Toleration] | None = None,
        daemonset: bool = False) -> PodSpec:
    """A pod with requests (and limits when given)."""
    req = Resources(cpu=cpu, memory=memory, batch_cpu=batch_cpu, batch_memory=batch_memory,
                    mid_cpu=mid_cpu, mid_memory=mid_memory)
    lim = Resources(cpu=lim_cpu, memory=lim_memory, batch_cpu=batch_cpu, batch_memory=batch_memory,
                    mid_cpu=mid_cpu, mid_memory=mid_memory)
    prio_class = "batch" if (batch_cpu or batch_memory) else ("mid" if (mid_cpu or mid_memory) else None)
    qos_class = "BE" if prio_class == "batch" else None  # REFERENCE.md §1: batch-* requests are BE
    return PodSpec(uid=uid, name=uid, requests=req, limits=lim, priority=priority,
                   priority_class=prio_class, qos_class=qos_class, created_at=created_at, app=app,
                   max_instance_per_node=max_per_node, node_selector=selector or {},
                   tolerations=tolerations or [], daemonset=daemonset)


def metric(name: str, at: float, cpu: int = 0, memory: int = 0,
           pods: dict[str, tuple[int, int]] | None = None) -> NodeMetric:
    """A node metric with node usage and optional per-pod usage."""
    from colo.messages import PodMetric

    return NodeMetric(node=name, at=at, node_usage=Usage(cpu=cpu, memory=memory),
                      pods=[PodMetric(uid=u, cpu=c, memory=m) for u, (c, m) in (pods or {}).items()])


def scheduler(**overrides: object) -> Scheduler:
    """A core scheduler with settings overrides."""
    return Scheduler(SchedulerSettings(**overrides))  # type: ignore[arg-type]


def node_resource(name: str, batch_cpu: int = 0, batch_memory: int = 0, mid_cpu: int = 0,
                  mid_memory: int = 0) -> NodeResource:
    """Batch/mid allocatable of a node."""
    return NodeResource(node=name, batch_cpu=batch_cpu, batch_memory=batch_memory, mid_cpu=mid_cpu,
                        mid_memory=mid_memory)
