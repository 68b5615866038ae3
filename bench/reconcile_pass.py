"""How long the node agent takes to rebuild an empty store: ``python bench/reconcile_pass.py [--nodes 100]
[--pods 30]``.

One sim agent hosting ``nodes`` virtual nodes with ``pods`` running pods each (bound through the store as the
scheduler does, started from their PodBound), against its own nats-server and redis-server. Then the store is
emptied (every key under the prefix deleted: a Redis without persistence restarted) and one reconciliation pass
is timed: every node registered again, every binding, allocation and pod record written back. Then a pass with
nothing to fix (the steady-state cost, every ``reconcile_interval_s``). Ends with a JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

from colo import subjects
from colo.bus import Bus
from colo.clock import VirtualClock
from colo.embedded import EmbeddedServers
from colo.messages import NodeSpec, PodBound, PodRecord, PodSpec, Resources, SimWorkload
from colo.store import BindRequest, Store
from colo.testing.fixtures import service_context
from colo_node_agent.service import NodeAgentService
from colo_node_agent.settings import NodeAgentSettings

G = 10**9
T0 = 1000.0


def pod(uid: str) -> PodSpec:
    return PodSpec(uid=uid, name=uid, qos_class="LS", priority=9500, requests=Resources(cpu=100, memory=G // 10),
                   sim=SimWorkload(kind="series", step_s=60, cpu_util=[0.5], cpu_scale_milli=200,
                                   memory_util=[0.5], memory_scale_bytes=G // 10))


async def run(nodes: int, pods: int) -> dict[str, float]:
    cap = Resources(cpu=64000, memory=256 * G, pods=pods + 10)
    specs = [NodeSpec(name=f"n{i}", capacity=cap, allocatable=cap, cpus=64) for i in range(nodes)]
    async with EmbeddedServers() as servers:
        clock = VirtualClock(T0)
        bus = await Bus.connect(servers.nats_url, "node-agent", clock)
        client = await Bus.connect(servers.nats_url, "bench")
        store = await Store.connect(servers.redis_url, "bench-reconcile")
        try:
            await bus.ensure_streams()
            agent = NodeAgentService(NodeAgentSettings(reconcile_interval_s=0), nodes=specs)
            await agent.start(service_context(bus, store, clock))
            await bus.start_consumers()
            all_pods = [(pod(f"n{i}-p{j}"), f"n{i}") for i in range(nodes) for j in range(pods)]
            await store.put_pods(PodRecord(spec=s) for s, _ in all_pods)
            assert all(r.ok for r in await store.bind_many([BindRequest(s.uid, n, s.requests, T0)
                                                            for s, n in all_pods]))
            await client.publish_many((subjects.POD_BOUND, PodBound(spec=s, node=n, at=T0), None, {"node": n})
                                      for s, n in all_pods)
            await bus.settle(timeout_s=600)
            assert agent.counters["started"] == len(all_pods)
            await store.delete_all()
            t0 = time.perf_counter()
            await agent._reconcile(T0 + 10)
            rebuild_s = time.perf_counter() - t0
            assert agent.reconcile_fixes == {"node_registered": nodes, "binding_restored": len(all_pods)}
            t0 = time.perf_counter()
            await agent._reconcile(T0 + 20)
            steady_s = time.perf_counter() - t0
            assert agent.reconcile_fixes == {"node_registered": nodes, "binding_restored": len(all_pods)}
            await agent.stop()
        finally:
            await store.delete_all()
            await store.close()
            await client.close()
            await bus.close()
    return {"nodes": nodes, "pods": nodes * pods, "rebuild_s": rebuild_s, "steady_pass_s": steady_s}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=100)
    p.add_argument("--pods", type=int, default=30, help="running pods per node")
    args = p.parse_args()
    res = asyncio.run(run(args.nodes, args.pods))
    print(f"{res['nodes']} nodes, {res['pods']} pods: empty store rebuilt in {res['rebuild_s']:.2f} s; "
          f"a pass with nothing to fix {res['steady_pass_s'] * 1000:.0f} ms")
    print(json.dumps({"bench": "reconcile_pass", **{k: round(v, 4) for k, v in res.items()}}))


if __name__ == "__main__":
    main()
