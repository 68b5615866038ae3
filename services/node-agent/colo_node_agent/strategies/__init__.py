"""QoS strategies: pure functions from a node snapshot and a policy to a plan (REFERENCE.md §5).

Nothing here touches the filesystem, the bus or the clock; the backend builds the inputs, the executor applies
the cgroup writes and the service carries out evictions.
"""

from colo_node_agent.strategies.cgroup_settings import be_qos_settings, pod_settings
from colo_node_agent.strategies.cpu_evict import BECPUSample, be_cpu_release, cpu_evict
from colo_node_agent.strategies.cpu_suppress import SuppressInput, SuppressPlan, be_cpu_allowed, suppress
from colo_node_agent.strategies.memory_evict import memory_evict, memory_release_bytes
from colo_node_agent.strategies.types import Eviction, EvictPlan, PodView

__all__ = [
    "BECPUSample",
    "EvictPlan",
    "Eviction",
    "PodView",
    "SuppressInput",
    "SuppressPlan",
    "be_cpu_allowed",
    "be_cpu_release",
    "be_qos_settings",
    "cpu_evict",
    "memory_evict",
    "memory_release_bytes",
    "pod_settings",
    "suppress",
]
