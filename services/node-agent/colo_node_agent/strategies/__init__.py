"""QoS strategies: pure functions from a node snapshot and a policy to a plan (REFERENCE.md §5).

Nothing here touches the filesystem, the bus or the clock; the backend builds the inputs, the executor applies
the cgroup writes and the service carries out evictions. :func:`plan_node` runs every strategy for one node.
"""

from colo_node_agent.strategies.blkio import blkio_writes
from colo_node_agent.strategies.cgroup_settings import be_qos_settings, pod_settings
from colo_node_agent.strategies.cpu_burst import BurstPod, cpu_burst, share_pool_state
from colo_node_agent.strategies.cpu_evict import BECPUSample, be_cpu_release, cpu_evict
from colo_node_agent.strategies.cpu_suppress import SuppressInput, SuppressPlan, be_cpu_allowed, suppress
from colo_node_agent.strategies.cpusets import CpusetPod, plan_cpusets
from colo_node_agent.strategies.memory_evict import memory_evict, memory_release_bytes
from colo_node_agent.strategies.memory_qos import MemoryPod, memory_qos
from colo_node_agent.strategies.node import (
    NodeFeatures,
    NodePlan,
    NodeSnapshot,
    PodState,
    StrategyMemory,
    plan_node,
)
from colo_node_agent.strategies.resctrl_qos import resctrl_plan
from colo_node_agent.strategies.system import system_writes
from colo_node_agent.strategies.types import Eviction, EvictPlan, PodView

__all__ = [
    "BECPUSample",
    "BurstPod",
    "CpusetPod",
    "EvictPlan",
    "Eviction",
    "MemoryPod",
    "NodeFeatures",
    "NodePlan",
    "NodeSnapshot",
    "PodState",
    "PodView",
    "StrategyMemory",
    "SuppressInput",
    "SuppressPlan",
    "be_cpu_allowed",
    "be_cpu_release",
    "be_qos_settings",
    "blkio_writes",
    "cpu_burst",
    "cpu_evict",
    "memory_evict",
    "memory_qos",
    "memory_release_bytes",
    "plan_cpusets",
    "plan_node",
    "pod_settings",
    "resctrl_plan",
    "share_pool_state",
    "suppress",
    "system_writes",
]
