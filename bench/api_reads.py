"""Latency of the API's list reads: ``python bench/api_reads.py [--nodes 1000] [--pods 10000] [--runs 7]``.

Starts its own nats-server and redis-server, registers ``nodes`` nodes (each with a batch offer and one metric
report of 30 pods in the metrics stream) and ``pods`` pod records (a tenth of them waiting), starts the API
service in-process (no scheduler: waiting pods keep the store's reason), then times ``GET /v1/nodes``,
``GET /v1/pods``, ``GET /v1/pods?namespace=…`` and ``GET /v1/pods/{ns}/{name}`` over HTTP: median and best of
``runs`` requests, and the answer's size. Everything is read when asked (no cache), so these are the costs of one
dashboard refresh. Ends with a JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time

import aiohttp

from colo import subjects as S
from colo.bus import Bus
from colo.embedded import start_nats, start_redis
from colo.messages import NodeMetric, NodeResource, NodeSpec, PodMetric, PodRecord, PodSpec, Resources, Usage
from colo.runtime import ServiceRunner
from colo.settings import RuntimeSettings
from colo.store import Store
from colo_api.service import ApiService
from colo_api.settings import ApiSettings

GI = 1024**3


async def seed(store: Store, bus: Bus, nodes: int, pods: int) -> None:
    r = Resources(cpu=64_000, memory=256 * GI, pods=110)
    await store.put_node_resources([NodeResource(node=f"n{i}", batch_cpu=20_000, batch_memory=64 * GI)
                                    for i in range(nodes)])
    for i in range(nodes):
        await store.put_node(NodeSpec(name=f"n{i}", capacity=r, allocatable=r))
    items = [(S.NODE_METRIC, NodeMetric(node=f"n{i}", at=1.0, node_usage=Usage(cpu=30_000, memory=100 * GI),
                                        pods=[PodMetric(uid=f"n{i}-p{j}", cpu=1000, memory=GI,
                                                        qos_class="BE" if j % 3 else "LS") for j in range(30)]),
              None, {"node": f"n{i}"}) for i in range(nodes)]
    await bus.publish_many(items)
    await store.put_pods(PodRecord(spec=PodSpec(uid=f"ns{k % 50}-p{k}", name=f"p{k}", namespace=f"ns{k % 50}",
                                                requests=Resources(cpu=1000, memory=GI)),
                                   phase="Pending" if k % 10 == 0 else "Running",
                                   node="" if k % 10 == 0 else f"n{k % nodes}") for k in range(pods))


async def timed(http: aiohttp.ClientSession, url: str, runs: int) -> dict[str, float]:
    times, size = [], 0
    for _ in range(runs):
        start = time.perf_counter()
        async with http.get(url) as resp:
            body = await resp.read()
            assert resp.status == 200, body[:200]
        times.append(time.perf_counter() - start)
        size = len(body)
    return {"median_ms": round(1000 * statistics.median(times), 1), "best_ms": round(1000 * min(times), 1),
            "bytes": size}


async def main(nodes: int, pods: int, runs: int) -> dict[str, object]:
    nats, redis = start_nats(), start_redis()
    try:
        settings = RuntimeSettings(nats_url=nats.url, redis_url=redis.url, store_prefix="bench-api")
        bus = await Bus.connect(nats.url, "bench")
        await bus.ensure_streams()
        store = await Store.connect(redis.url, prefix="bench-api")
        t0 = time.perf_counter()
        await seed(store, bus, nodes, pods)
        seeded_s = time.perf_counter() - t0
        runner = ServiceRunner(ApiService(ApiSettings()), settings)
        await runner.start()
        base = f"http://127.0.0.1:{runner.http_port}"
        try:
            async with aiohttp.ClientSession() as http:
                out = {
                    "nodes": await timed(http, base + "/v1/nodes", runs),
                    "pods": await timed(http, base + "/v1/pods", runs),
                    "pods_namespace": await timed(http, base + "/v1/pods?namespace=ns7", runs),
                    "pod": await timed(http, base + "/v1/pods/ns7/p7", runs),
                }
        finally:
            await runner.stop()
            await store.close()
            await bus.close()
        return {"bench": "api_reads", "nodes": nodes, "pods": pods, "runs": runs, "seed_s": round(seeded_s, 1),
                **out}
    finally:
        nats.stop()
        redis.stop()


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=1000)
    p.add_argument("--pods", type=int, default=10_000)
    p.add_argument("--runs", type=int, default=7)
    a = p.parse_args()
    result = asyncio.run(main(a.nodes, a.pods, a.runs))
    for key in ("nodes", "pods", "pods_namespace", "pod"):
        r = result[key]
        assert isinstance(r, dict)
        print(f"GET {key:<15} median {r['median_ms']:>7} ms  best {r['best_ms']:>7} ms  {r['bytes']:>10,} bytes")
    print(json.dumps(result))
