"""What a bind that cannot be lost costs: ``python bench/store_durability.py [--single 1000] [--batched 10000] [--rounds 3]``.

In one run, on the same machine and disk, four Redis set-ups, each a fresh redis-server with its data directory
under ``--dir`` (a real disk: on tmpfs an fsync costs nothing):

* ``everysec``: ``appendfsync everysec``, Redis' default with AOF on; a power loss may cut the last second;
* ``always``: ``appendfsync always`` (Colo's default: the embedded Redis, compose.yaml): fsync before the reply;
* ``everysec+wait1`` / ``always+wait1``: the same plus a replica (another redis-server, ``replicaof``) and
  ``redis_wait_replicas = 1``: the store sends ``WAIT 1`` after each bind call (:mod:`colo.store_wait`).

Two workloads each: ``single`` = one pod per :meth:`Store.bind` call, one after the other (the latency a lone
bind pays); ``batched`` = :meth:`Store.bind_many` of 100 pods a call (what a scheduling cycle sends). Prints
binds/s (median of the rounds) and the ratio to ``everysec`` per workload; ends with a JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

from colo.embedded import ServerHandle, start_redis
from colo.messages import NodeSpec, Resources
from colo.settings import RuntimeSettings
from colo.store import BindRequest, Store

CAP = Resources(cpu=10**9, memory=10**15, pods=0)
REQ = Resources(cpu=100, memory=10**8)
NODES = 100
BATCH = 100


async def _linked(url: str) -> None:
    replica = await Store.connect(url, "probe")
    try:
        for _ in range(400):
            if (await replica.redis.info("replication")).get("master_link_status") == "up":
                return
            await asyncio.sleep(0.05)
        raise RuntimeError("replica never linked")
    finally:
        await replica.close()


async def measure(url: str, wait: int, single: int, batched: int) -> dict[str, float]:
    """binds/s of each workload against the Redis at ``url``."""
    store = await Store.connect(url, "bench-durability",
                                settings=RuntimeSettings(redis_wait_replicas=wait, redis_wait_timeout_ms=5000))
    try:
        await store.delete_all()
        for i in range(NODES):
            await store.put_node(NodeSpec(name=f"n{i}", capacity=CAP, allocatable=CAP))
        t0 = time.perf_counter()
        for i in range(single):
            assert (await store.bind(f"s{i}", f"n{i % NODES}", REQ, 1.0)).ok
        single_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        for start in range(0, batched, BATCH):
            res = await store.bind_many([BindRequest(f"b{i}", f"n{i % NODES}", REQ, 1.0)
                                         for i in range(start, min(start + BATCH, batched))])
            assert all(r.ok for r in res)
        batched_s = time.perf_counter() - t0
        assert not store.wait.short, store.wait.short
        return {"single": single / single_s, "batched": batched / batched_s}
    finally:
        await store.close()


async def run(args: argparse.Namespace) -> dict[str, dict[str, float]]:
    """Median over ``args.rounds`` rounds (the set-ups interleaved in each, so that a busy spell of a shared
    machine hits them alike) of each set-up's binds/s per workload."""
    rounds = [await one_round(args) for _ in range(args.rounds)]
    return {name: {w: statistics.median(r[name][w] for r in rounds) for w in rounds[0][name]} for name in rounds[0]}


async def one_round(args: argparse.Namespace) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    root = Path(args.dir)
    root.mkdir(parents=True, exist_ok=True)
    for fsync in ("everysec", "always"):
        for wait in (0, 1):
            name = fsync + ("+wait1" if wait else "")
            with tempfile.TemporaryDirectory(dir=root) as data, tempfile.TemporaryDirectory(dir=root) as rdata:
                servers: list[ServerHandle] = []
                try:
                    primary = start_redis(data_dir=data, extra_args=["--appendfsync", fsync,
                                                                     "--repl-diskless-sync-delay", "0"])
                    servers.append(primary)
                    if wait:
                        replica = start_redis(data_dir=rdata, extra_args=[
                            "--appendfsync", fsync, "--replicaof", "127.0.0.1", str(primary.port)])
                        servers.append(replica)
                        await _linked(replica.url)
                    out[name] = await measure(primary.url, wait, args.single, args.batched)
                finally:
                    for s in reversed(servers):
                        s.stop()
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--single", type=int, default=1000, help="binds one at a time (default 1000)")
    p.add_argument("--batched", type=int, default=10000, help="binds in calls of 100 (default 10000)")
    p.add_argument("--rounds", type=int, default=3, help="rounds; the median is reported (default 3)")
    p.add_argument("--dir", default="out/bench-durability", help="where the data directories go (a real disk)")
    args = p.parse_args()
    res = asyncio.run(run(args))
    base = res["everysec"]
    print(f"{'set-up':<16} {'single binds/s':>15} {'ratio':>6} {'batched binds/s':>16} {'ratio':>6}")
    for name, r in res.items():
        print(f"{name:<16} {r['single']:>15.0f} {r['single'] / base['single']:>6.2f} "
              f"{r['batched']:>16.0f} {r['batched'] / base['batched']:>6.2f}")
    print(json.dumps({"bench": "store_durability", "single": args.single, "batched": args.batched,
                      "rounds": args.rounds,
                      "binds_per_s": {k: {w: round(v, 1) for w, v in r.items()} for k, r in res.items()},
                      "ratio_to_everysec": {k: {w: round(v / base[w], 3) for w, v in r.items()}
                                            for k, r in res.items()}}))


if __name__ == "__main__":
    main()
