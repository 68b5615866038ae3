"""End-to-end scheduler benchmark: pods in over NATS JetStream, bound in Redis, PodBound seen by a subscriber.

Starts its own nats-server and redis-server (:mod:`colo.embedded`), runs the scheduler as a
separate process (``python -m colo_scheduler``, default settings), registers ``--nodes``
heterogeneous nodes (four sizes, batch resources, fresh metrics), then:

1. **throughput**: ``--pods`` pods (70 % prod LS with cpu/memory, 30 % batch BE with
   batch-cpu/batch-memory) submitted on ``pod.admitted`` as fast as the scheduler binds them (at
   most ``--window`` submitted and not yet bound); ``pods_per_s`` = pods / (last PodBound − first
   submit);
2. **latency**: ``--rate`` pods/s offered, paced, for ``--seconds``; ``submit_to_bound_p50_ms`` /
   ``p99_ms`` from the publish call to the PodBound's arrival, both in this process.

``--replicas N`` runs N scheduler processes that shard the pods (``COLO_SCHEDULER_REPLICAS``);
``--intake-only`` measures the admission intake alone (no cycles): ``admitted_per_s``.
``--wait-replicas N`` starts N Redis replicas of the bench's Redis and has the scheduler acknowledge a bind
only once N replicas hold it (``COLO_REDIS_WAIT_REPLICAS``: ``WAIT`` after each bind call; docs/operations.md
"High availability").

Targets (issue 3): ≥ 5,000 pods/s sustained; p99 ≤ 50 ms at 1,000 pods/s offered, 1,000 nodes.
Everything (servers, scheduler, this driver) shares the machine: the CPU seconds each used
during the throughput phase are printed too. Prints a readable summary, then one JSON line.

Run: ``.venv/bin/python bench/scheduler_e2e.py --nodes 1000``
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import msgspec
import numpy as np
import psutil
from nats.aio.msg import Msg

from colo import codec, subjects
from colo.bus import Bus
from colo.embedded import EmbeddedServers, free_port
from colo.messages import NodeMetric, NodeResource, NodeSpec, PodAdmitted, PodSpec, Resources, Usage
from colo.store import Store
from colo.testing.clusters import start_replica

GI = 1024**3
MI = 1024**2
NODE_SIZES = [(32_000, 128 * GI), (64_000, 256 * GI), (96_000, 384 * GI), (128_000, 512 * GI)]
"""(cpu milli-cores, memory bytes) of the node shapes, drawn uniformly."""
MAX_PODS_PER_NODE = 110
"""Kubernetes kubelet default maxPods."""


def _die_with_parent() -> None:
    """In the scheduler's child process before exec: SIGTERM when this driver dies (Linux)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def make_nodes(n: int, rng: random.Random) -> tuple[list[NodeSpec], list[NodeResource]]:
    """``n`` nodes of :data:`NODE_SIZES` with 40 % of cpu/memory offered as batch resources."""
    nodes, resources = [], []
    for i in range(n):
        cpu, mem = rng.choice(NODE_SIZES)
        alloc = Resources(cpu=cpu, memory=mem, pods=MAX_PODS_PER_NODE)
        nodes.append(NodeSpec(name=f"node-{i:05d}", capacity=alloc, allocatable=alloc,
                              labels={"topology.kubernetes.io/zone": f"zone-{i % 3}"}))
        resources.append(NodeResource(node=f"node-{i:05d}", batch_cpu=cpu * 4 // 10, batch_memory=mem * 4 // 10))
    return nodes, resources


def make_pods(prefix: str, n: int, rng: random.Random) -> list[PodSpec]:
    """70 % prod LS pods of 50 workloads (each workload one size: cpu 250–2000 m, memory 256 Mi–2 Gi;
    cpu limit 1.5× request, as the replicas of a Deployment), 30 % batch BE pods
    (batch-cpu/batch-memory)."""
    sizes = [(rng.choice((250, 500, 1000, 2000)), rng.choice((256, 512, 1024, 2048)) * MI) for _ in range(50)]
    pods = []
    for j in range(n):
        uid = f"{prefix}-{j:06d}"
        if rng.random() < 0.7:
            cpu, mem = sizes[j % 50]
            pods.append(PodSpec(uid=uid, name=uid, priority_class="prod", priority=9000,
                                requests=Resources(cpu=cpu, memory=mem), limits=Resources(cpu=cpu * 3 // 2, memory=mem),
                                app=f"app-{j % 50}"))  # Burstable: LS
        else:
            req = Resources(batch_cpu=rng.choice((500, 1000, 2000)), batch_memory=rng.choice((1, 2)) * GI)
            pods.append(PodSpec(uid=uid, name=uid, priority_class="batch", qos_class="BE", priority=5000,
                                requests=req, limits=req))
    return pods


class _BoundSpec(msgspec.Struct):
    uid: str


class _Bound(msgspec.Struct):
    spec: _BoundSpec


STALL_S = 30.0
"""Seconds without a bound pod, the submit window full, after which a phase gives up."""


@dataclass
class Watcher:
    """Receives PodBound on core NATS (``colo.v1.pod.bound.*``) and records arrival times."""

    at: dict[str, float] = field(default_factory=dict)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    _decoder: msgspec.json.Decoder[_Bound] = field(default_factory=lambda: msgspec.json.Decoder(_Bound))

    async def on_msg(self, msg: Msg) -> None:
        self.at.setdefault(self._decoder.decode(msg.data).spec.uid, time.perf_counter())
        self.changed.set()

    async def wait_count(self, uids: list[str], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not all(u in self.at for u in uids):
            if time.monotonic() > deadline:
                missing = [u for u in uids if u not in self.at]
                raise TimeoutError(f"{len(missing)} pods not bound within {timeout_s}s, e.g. {missing[:3]}")
            self.changed.clear()
            try:
                await asyncio.wait_for(self.changed.wait(), 0.5)
            except TimeoutError:
                pass


class Publisher:
    """Publishes pre-encoded PodAdmitted payloads to JetStream without waiting for each ack
    (acks are counted; a refused publish aborts the run)."""

    def __init__(self, bus: Bus) -> None:
        self.nc = bus.nc
        self.subject = subjects.POD_ADMITTED.format()
        self.inbox = self.nc.new_inbox()
        self.sent = 0
        self.acked = 0
        self.errors: list[bytes] = []

    async def start(self) -> None:
        async def on_ack(msg: Msg) -> None:
            self.acked += 1
            if b'"error"' in msg.data or (msg.headers and msg.headers.get("Status")):
                self.errors.append(msg.data[:200])

        await self.nc.subscribe(self.inbox, cb=on_ack)

    async def publish(self, payload: bytes) -> float:
        """Publish one payload; returns the submit time (perf_counter seconds)."""
        t = time.perf_counter()
        await self.nc.publish(self.subject, payload, reply=self.inbox)
        self.sent += 1
        return t

    def check(self) -> None:
        if self.errors:
            raise RuntimeError(f"JetStream refused {len(self.errors)} publishes, e.g. {self.errors[0]!r}")


def _payloads(pods: list[PodSpec]) -> list[tuple[str, bytes]]:
    return [(p.uid, codec.encode(PodAdmitted(spec=p, at=time.time()))) for p in pods]


async def _register(bus: Bus, store: Store, nodes: list[NodeSpec], resources: list[NodeResource]) -> None:
    for spec, res in zip(nodes, resources):
        await store.put_node(spec)
        await store.put_node_resource(res)
    events: list[tuple[Any, Any, str | None, dict[str, str]]] = []
    for spec, res in zip(nodes, resources):
        events.append((subjects.NODE_REGISTERED, spec, None, {"node": spec.name}))
        events.append((subjects.NODE_RESOURCE, res, None, {"node": spec.name}))
    await bus.publish_many(events)
    await _publish_metrics(bus, nodes)


async def _publish_metrics(bus: Bus, nodes: list[NodeSpec]) -> None:
    now = time.time()
    await bus.publish_many([(subjects.NODE_METRIC, NodeMetric(
        node=n.name, at=now, window_s=60.0,
        node_usage=Usage(cpu=n.allocatable.cpu // 10, memory=n.allocatable.memory // 5)), None, {"node": n.name})
        for n in nodes])


async def _metrics_loop(bus: Bus, nodes: list[NodeSpec]) -> None:
    """Fresh metrics for every node every 30 s, staggered (a 30th of the nodes each second) as node
    agents' reports are; metrics expire after 180 s."""
    k = 0
    while True:
        await asyncio.sleep(1)
        await _publish_metrics(bus, nodes[k % 30::30])
        k += 1


def _scheduler_command(profile: str, index: int) -> list[str]:
    """``python -m colo_scheduler``, under cProfile (stats written to ``<profile>.<index>`` at the
    scheduler's SIGTERM exit, whole run) when ``profile`` is set."""
    if not profile:
        return [sys.executable, "-m", "colo_scheduler"]
    return [sys.executable, "-m", "cProfile", "-o", f"{profile}.{index}", "-m", "colo_scheduler"]


async def _state(http: aiohttp.ClientSession, port: int) -> dict[str, Any]:
    async with http.get(f"http://127.0.0.1:{port}/debug/state") as r:
        return dict(await r.json())


async def _wait_scheduler(http: aiohttp.ClientSession, port: int, proc: subprocess.Popen[bytes], nodes: int) -> None:
    deadline = time.monotonic() + 120
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"scheduler exited with {proc.returncode}")
        try:
            if (await _state(http, port)).get("nodes") == nodes:
                return
        except aiohttp.ClientError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError("scheduler did not load every node within 120 s")
        await asyncio.sleep(0.2)


def _cpu_s(procs: dict[str, psutil.Process]) -> dict[str, float]:
    out = {}
    for name, p in procs.items():
        t = p.cpu_times()
        out[name] = t.user + t.system
    return out


async def throughput_phase(pub: Publisher, watcher: Watcher, pods: list[PodSpec], window: int) -> tuple[float, float]:
    """Submit ``pods`` keeping at most ``window`` of them unbound; returns (pods/s, seconds).
    Every pod of earlier phases must be bound already. Raises TimeoutError when no pod is bound for
    :data:`STALL_S` seconds while the window is full (e.g. more pods than the nodes hold)."""
    payloads = _payloads(pods)
    uids = [u for u, _ in payloads]
    base = len(watcher.at)
    t0 = time.perf_counter()
    sent = 0
    last_progress, last_bound = time.monotonic(), base
    while sent < len(payloads):
        room = window - (sent - (len(watcher.at) - base))
        if room <= 0:
            if len(watcher.at) != last_bound:
                last_progress, last_bound = time.monotonic(), len(watcher.at)
            elif time.monotonic() - last_progress > STALL_S:
                raise TimeoutError(
                    f"no pod bound for {STALL_S:.0f} s with {window} waiting ({len(watcher.at) - base} of "
                    f"{len(pods)} bound): the nodes may be full; use fewer pods or more --nodes")
            watcher.changed.clear()
            try:
                await asyncio.wait_for(watcher.changed.wait(), 1.0)
            except TimeoutError:
                pass
            continue
        chunk = payloads[sent:sent + min(room, 500)]
        for _, data in chunk:
            await pub.publish(data)
        sent += len(chunk)
        await asyncio.sleep(0)
    await watcher.wait_count(uids, 120)
    pub.check()
    elapsed = max(watcher.at[u] for u in uids) - t0
    return len(pods) / elapsed, elapsed


async def latency_phase(pub: Publisher, watcher: Watcher, pods: list[PodSpec], rate: float) -> np.ndarray:
    """Offer ``pods`` at ``rate`` per second (paced against the clock); returns latencies in ms."""
    payloads = _payloads(pods)
    submitted: dict[str, float] = {}
    t0 = time.perf_counter()
    for k, (uid, data) in enumerate(payloads):
        due = t0 + k / rate
        delay = due - time.perf_counter()
        if delay > 0.0005:
            await asyncio.sleep(delay)
        submitted[uid] = await pub.publish(data)
    await watcher.wait_count(list(submitted), 60)
    pub.check()
    return np.array([(watcher.at[u] - t) * 1e3 for u, t in submitted.items()])


async def run(args: argparse.Namespace) -> dict[str, Any]:
    load_before = os.getloadavg()[0]
    rng = random.Random(args.seed)
    nodes, resources = make_nodes(args.nodes, rng)
    async with EmbeddedServers() as servers, contextlib.AsyncExitStack() as stack:
        bus = await Bus.connect(servers.nats_url, "bench")
        await bus.ensure_streams()
        store = await Store.connect(servers.redis_url, prefix="bench")
        assert servers.redis is not None
        replica_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="colo-bench-replicas-")))
        for _ in range(args.wait_replicas):
            stack.callback(start_replica(servers.redis.port, replica_dir).stop)
        ports = [free_port() for _ in range(args.replicas)]
        schedulers = []
        for i, port in enumerate(ports):
            env = {**os.environ, "COLO_NATS_URL": servers.nats_url, "COLO_REDIS_URL": servers.redis_url,
                   "COLO_STORE_PREFIX": "bench", "COLO_HTTP_PORT": str(port), "COLO_LOG_LEVEL": "WARNING",
                   "COLO_SCHEDULER_REPLICAS": str(args.replicas), "COLO_SCHEDULER_REPLICA_INDEX": str(i),
                   "COLO_REDIS_WAIT_REPLICAS": str(args.wait_replicas)}
            schedulers.append(subprocess.Popen(_scheduler_command(args.profile, i), env=env,
                                               preexec_fn=_die_with_parent if sys.platform == "linux" else None))
        metrics_task: asyncio.Task[None] | None = None
        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as http:
                await _register(bus, store, nodes, resources)
                metrics_task = asyncio.create_task(_metrics_loop(bus, nodes))
                for port, proc in zip(ports, schedulers):
                    await _wait_scheduler(http, port, proc, args.nodes)
                watcher = Watcher()
                await bus.nc.subscribe(subjects.POD_BOUND.wildcard, cb=watcher.on_msg)
                pub = Publisher(bus)
                await pub.start()
                try:
                    await throughput_phase(pub, watcher, make_pods("warm", args.warmup, rng), args.window)
                except TimeoutError:
                    print("scheduler state:", json.dumps(await _state(http, ports[0]))[:3000], file=sys.stderr)
                    raise
                procs = {**{f"scheduler{i or ''}": psutil.Process(p.pid) for i, p in enumerate(schedulers)},
                         "bench": psutil.Process(),
                         "nats-server": psutil.Process(servers.nats.proc.pid),  # type: ignore[union-attr]
                         "redis-server": psutil.Process(servers.redis.proc.pid)}  # type: ignore[union-attr]
                cpu0 = _cpu_s(procs)
                pods_per_s, tput_s = await throughput_phase(pub, watcher, make_pods("tput", args.pods, rng),
                                                            args.window)
                cpu1 = _cpu_s(procs)
                lat_pods = int(args.rate * args.seconds)
                lat = await latency_phase(pub, watcher, make_pods("lat", lat_pods, rng), args.rate)
                cpu2 = _cpu_s(procs)
                states = [await _state(http, port) for port in ports]
        finally:
            if metrics_task is not None:
                metrics_task.cancel()
            for proc in schedulers:
                proc.send_signal(signal.SIGTERM)
            for proc in schedulers:
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
            await bus.close()
            await store.close()
    cpu = {k: round(cpu1[k] - cpu0[k], 2) for k in cpu0}
    cpu_lat = {k: round(cpu2[k] - cpu1[k], 2) for k in cpu0}
    sched_us = sum(v for k, v in cpu.items() if k.startswith("scheduler")) / args.pods * 1e6
    totals: dict[str, float] = {}
    for st in states:
        for k, v in st.get("totals", {}).items():
            totals[k] = totals.get(k, 0) + v
    return {
        "bench": "scheduler_e2e", "nodes": args.nodes, "replicas": args.replicas, "wait_replicas": args.wait_replicas,
        "pods": args.warmup + args.pods + lat_pods,
        "throughput_pods": args.pods, "pods_per_s": round(pods_per_s, 1), "throughput_s": round(tput_s, 3),
        "offered_rate": args.rate, "latency_pods": lat_pods,
        "submit_to_bound_p50_ms": round(float(np.percentile(lat, 50)), 2),
        "submit_to_bound_p99_ms": round(float(np.percentile(lat, 99)), 2),
        "submit_to_bound_max_ms": round(float(lat.max()), 2),
        "cpu_s_during_throughput": cpu, "cpu_s_during_latency": cpu_lat, "cpus": os.cpu_count(),
        "scheduler_cpu_us_per_pod": round(sched_us, 1),
        "pods_per_scheduler_cpu_s": round(1e6 / sched_us, 1),
        "scheduler_totals": totals,
        "loadavg_1m_before": round(load_before, 2), "loadavg_1m_after": round(os.getloadavg()[0], 2),
    }


async def run_intake(args: argparse.Namespace) -> dict[str, Any]:
    """Intake alone: a scheduler without cycles (no prompt cycles, one tick at start) gets ``--pods``
    admissions at once; admitted pods/s = pods / time until all are persisted and queued."""
    rng = random.Random(args.seed)
    nodes, resources = make_nodes(args.nodes, rng)
    async with EmbeddedServers() as servers:
        bus = await Bus.connect(servers.nats_url, "bench")
        await bus.ensure_streams()
        store = await Store.connect(servers.redis_url, prefix="bench")
        port = free_port()
        env = {**os.environ, "COLO_NATS_URL": servers.nats_url, "COLO_REDIS_URL": servers.redis_url,
               "COLO_STORE_PREFIX": "bench", "COLO_HTTP_PORT": str(port), "COLO_LOG_LEVEL": "WARNING",
               "COLO_SCHEDULER_PROMPT_CYCLES": "false", "COLO_SCHEDULER_TICK_INTERVAL_S": "3600"}
        proc = subprocess.Popen([sys.executable, "-m", "colo_scheduler"], env=env,
                                preexec_fn=_die_with_parent if sys.platform == "linux" else None)
        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as http:
                await _register(bus, store, nodes, resources)
                await _wait_scheduler(http, port, proc, args.nodes)
                pub = Publisher(bus)
                await pub.start()
                payloads = _payloads(make_pods("in", args.pods, rng))
                sched = psutil.Process(proc.pid)
                cpu0 = sum(sched.cpu_times()[:2])
                t0 = time.perf_counter()
                for k, (_, data) in enumerate(payloads):
                    await pub.publish(data)
                    if k % 500 == 499:
                        await asyncio.sleep(0)
                deadline = time.monotonic() + 120
                while (await _state(http, port))["queue"]["active"] < args.pods:
                    if time.monotonic() > deadline:
                        raise TimeoutError("admissions not all queued within 120 s")
                    await asyncio.sleep(0.01)
                elapsed = time.perf_counter() - t0
                cpu = sum(sched.cpu_times()[:2]) - cpu0
                pub.check()
                stored = len(await store.redis.smembers(store.keys.pods))
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
            await bus.close()
            await store.close()
    if stored != args.pods:
        raise RuntimeError(f"{stored} Pending records for {args.pods} admissions")
    return {"bench": "scheduler_e2e_intake", "nodes": args.nodes, "pods": args.pods,
            "admitted_per_s": round(args.pods / elapsed, 1), "intake_s": round(elapsed, 3),
            "scheduler_cpu_us_per_pod": round(cpu / args.pods * 1e6, 1), "cpus": os.cpu_count(),
            "loadavg_1m": round(os.getloadavg()[0], 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--pods", type=int, default=20_000, help="pods of the throughput phase")
    ap.add_argument("--warmup", type=int, default=2000, help="pods bound before measuring")
    ap.add_argument("--window", type=int, default=4000, help="most pods submitted and not yet bound")
    ap.add_argument("--rate", type=float, default=1000.0, help="pods/s offered in the latency phase")
    ap.add_argument("--seconds", type=float, default=10.0, help="length of the latency phase")
    ap.add_argument("--replicas", type=int, default=1, help="scheduler processes, pods sharded by uid hash")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--wait-replicas", type=int, default=0,
                    help="Redis replicas to start and WAIT for after every bind (0 = none)")
    ap.add_argument("--profile", default="", metavar="PATH",
                    help="run each scheduler under cProfile, stats to PATH.<replica index> (read with pstats);"
                    " profiling slows the scheduler: figures of such a run are not comparable")
    ap.add_argument("--intake-only", action="store_true",
                    help="measure admission intake alone (decode, Pending write, queue; no cycles)")
    args = ap.parse_args()
    if args.intake_only:
        res = asyncio.run(run_intake(args))
        print(f"scheduler intake, {res['nodes']} nodes: {res['pods']} admissions persisted and queued in"
              f" {res['intake_s']} s = {res['admitted_per_s']:.0f} pods/s, {res['scheduler_cpu_us_per_pod']} us of"
              f" scheduler CPU per pod (load {res['loadavg_1m']})")
        print(json.dumps(res))
        return
    try:
        out = asyncio.run(run(args))
    except TimeoutError as exc:  # a stalled phase: say why, without a traceback
        sys.exit(f"scheduler_e2e: {exc}")
    print(f"scheduler e2e, {out['nodes']} nodes, {out['replicas']} scheduler process(es), WAIT for"
          f" {out['wait_replicas']} Redis replica(s) per bind; {out['cpus']} CPUs shared by"
          " the schedulers, nats-server, redis-server and this driver")
    print(f"  throughput: {out['throughput_pods']} pods bound in {out['throughput_s']} s ="
          f" {out['pods_per_s']:.0f} pods/s (target >= 5000)")
    print(f"  CPU seconds during it: {out['cpu_s_during_throughput']}; the scheduler(s) used"
          f" {out['scheduler_cpu_us_per_pod']} us of CPU per pod = {out['pods_per_scheduler_cpu_s']:.0f} pods per"
          " CPU-second (what it would bind with a core to itself)")
    print(f"  latency at {out['offered_rate']:.0f} pods/s offered ({out['latency_pods']} pods): submit->bound"
          f" p50 {out['submit_to_bound_p50_ms']} ms, p99 {out['submit_to_bound_p99_ms']} ms (target <= 50),"
          f" max {out['submit_to_bound_max_ms']} ms; CPU seconds {out['cpu_s_during_latency']}")
    print(f"  scheduler totals: {out['scheduler_totals']}")
    print(f"  machine load (1 min) before {out['loadavg_1m_before']}, after {out['loadavg_1m_after']}:"
          " other work on these CPUs slows every figure but the CPU per pod")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
