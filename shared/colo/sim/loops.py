"""The BE memory evict→rebind loop (REFERENCE.md §11, first bullet): a scenario that provokes it and a counter.

A cycle is a pod evicted for memory from node X (a ``QoSEvent`` of kind ``evict`` whose reason is
``BE memory eviction``) and bound again on X (``PodBound``) while X is still under BE memory pressure
(its last ``NodeResource`` says so) or within ``hold_s`` seconds of the eviction. A node that evicts BE
pods for memory and takes them straight back has admission looser than eviction; the loop scenario
(:func:`memory_loop_scenario`) sets one up on purpose: BE pods that use more memory than they request on a
node whose online pods leave only a little batch-memory (docs/scenario.md "Memory loop scenario").
"""

from __future__ import annotations

from dataclasses import dataclass, field

from colo.messages import NodeResource, NodeSpec, PodBound, PodSpec, QoSEvent, Resources, SimWorkload
from colo.sim.scenario import Arrival, Scenario, ScenarioParams

MEMORY_EVICTION_REASON = "BE memory eviction"
"""``QoSEvent.reason`` of the node agent's BE memory eviction (colo_node_agent.backends.sim)."""

GIB = 1 << 30


@dataclass
class EvictRebindCounter:
    """Counts evict→rebind cycles from the events of one run (module doc). ``hold_s`` seconds (default
    300, the slo-manager's default hold of BE memory pressure, docs/slo-manager.md)."""

    hold_s: float = 300.0
    cycles: list[tuple[str, str, float, float]] = field(default_factory=list)
    """(pod uid, node, evicted at, bound again at) of every cycle seen."""
    _evicted: dict[str, tuple[str, float]] = field(default_factory=dict)
    _pressure: dict[str, bool] = field(default_factory=dict)

    def on_qos(self, msg: QoSEvent) -> None:
        """Remember the pods of a BE memory eviction: node and time."""
        if msg.kind == "evict" and msg.reason == MEMORY_EVICTION_REASON:
            for uid in msg.pods:
                self._evicted[uid] = (msg.node, msg.at)

    def on_resource(self, msg: NodeResource) -> None:
        """The node's BE memory pressure as the slo-manager last published it."""
        self._pressure[msg.node] = msg.memory_pressure

    def on_bound(self, msg: PodBound) -> None:
        """A binding closes a cycle when the pod was memory-evicted from the same node, within the hold or
        while that node is under pressure."""
        last = self._evicted.pop(msg.spec.uid, None)
        if last is None:
            return
        node, at = last
        if msg.node == node and (msg.at - at <= self.hold_s or self._pressure.get(node, False)):
            self.cycles.append((msg.spec.uid, node, at, msg.at))

    @property
    def count(self) -> int:
        """Number of cycles."""
        return len(self.cycles)


def memory_loop_scenario(minutes: float = 30.0, be_pods: int = 12) -> Scenario:
    """One node near the BE memory eviction threshold with BE pods running and more queued.

    Node: 32 cores, 64 GiB. An online (LS, prod) pod uses its 36 GiB request from t = 0: with the sim's
    4 % system memory the node is at 60.25 %, and the `usage` batch-memory formula (REFERENCE.md §3,
    reclaim threshold 65 %) offers 65 − 4 − 56.25 = 4.75 % = 3.04 GiB. From t = 120 s ``be_pods`` BE pods
    (batch class) arrive, each requesting 512 MiB and 500 m and using 1.5 GiB and 500 m for 2 h: six fit the
    offer and take the node to 74.3 %, above the 70 % eviction threshold, so the agent evicts BE pods down
    to 68 %; the others wait in the queue.
    """
    node = NodeSpec(name="memloop-0", capacity=Resources(cpu=32000, memory=64 * GIB, pods=110),
                    allocatable=Resources(cpu=32000, memory=64 * GIB, pods=110), cpus=32)
    ls = PodSpec(uid="ls-memloop-0", name="online-0", namespace="online", labels={"colo.sim/kind": "ls"},
                 priority=9000, priority_class="prod", qos_class="LS",
                 requests=Resources(cpu=4000, memory=36 * GIB), limits=Resources(cpu=8000, memory=40 * GIB))
    arrivals = [Arrival(0.0, ls)]
    for k in range(be_pods):
        uid = f"batch-memloop-{k:02d}"
        pod = PodSpec(uid=uid, name=uid, namespace="batch", labels={"colo.sim/kind": "batch", "app": "memloop"},
                      priority=5500, qos_class="BE", requests=Resources(cpu=500, memory=512 << 20),
                      app="memloop", created_at=120.0 + k * 0.001,
                      sim=SimWorkload(kind="batch", cpu_milli=500, memory_bytes=3 * GIB // 2, duration_s=7200.0))
        arrivals.append(Arrival(120.0, pod))
    params = ScenarioParams(nodes=1, hours=minutes / 60.0)
    return Scenario(params=params, nodes=[node], arrivals=arrivals,
                    description={"scenario": "memory loop", "nodes": 1, "be_pods": be_pods})
