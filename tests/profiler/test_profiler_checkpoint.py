"""Checkpoint and restore of the profiler service against real NATS and Redis: a new instance on the same Redis
publishes the same predictions without new samples, after a graceful stop and after SIGKILL of a process whose
last checkpoint came from the periodic timer; a corrupt checkpoint is logged and ignored."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import msgspec
import pytest
from profiler_helpers import DAY, GI

from colo import subjects
from colo.bus import Bus
from colo.classes import priority_class_of
from colo.embedded import free_port
from colo.messages import (
    NodeMetric,
    NodeProfile,
    NodeSpec,
    PodBound,
    PodMetric,
    PodSpec,
    Resources,
    Usage,
    WorkloadProfile,
)
from colo.runtime import ServiceRunner
from colo.settings import RuntimeSettings
from colo.store import Store
from colo.testing.fixtures import BusFactory
from colo_profiler import checkpoint
from colo_profiler.model import ProfileModel
from colo_profiler.service import CHECKPOINT_NAME, ProfilerService
from colo_profiler.settings import ProfilerSettings

pytestmark = pytest.mark.integration

SETTINGS = ProfilerSettings(expiry_s=7 * DAY)
NODES = ("n1", "n2")


def cluster(t0: float) -> tuple[list[NodeSpec], list[PodBound], list[NodeMetric]]:
    """Two nodes; per node two warm replicas of shop/web, a warm pod without app, a batch pod and (on n2) a new
    replica of shop/web; hourly metrics over the two days before ``t0``."""
    specs = [NodeSpec(name=n, capacity=Resources(cpu=16000, memory=64 * GI),
                      allocatable=Resources(cpu=16000, memory=64 * GI)) for n in NODES]
    binds = []
    for i, n in enumerate(NODES):
        for j, (app, prio, cpu) in enumerate([("web", 9500, 4000), ("web", 9500, 4000), ("", 9500, 2000),
                                              ("", 5000, 1000)]):
            spec = PodSpec(uid=f"{n}-p{j}", name=f"{n}-p{j}", namespace="shop", app=app, priority=prio,
                           requests=Resources(cpu=cpu, memory=(j + 2) * GI))
            binds.append(PodBound(spec=spec, node=n, at=t0 - 2 * DAY + i))
    binds.append(PodBound(spec=PodSpec(uid="web-new", name="web-new", namespace="shop", app="web", priority=9500,
                                       requests=Resources(cpu=4000, memory=2 * GI)), node="n2", at=t0 - 600))
    metrics = []
    for k in range(48):
        for i, n in enumerate(NODES):
            pods = [PodMetric(uid=f"{n}-p{j}", cpu=300 + 97 * ((k * (j + 1) + i) % 13), memory=(j + 1) * GI // 2)
                    for j in range(4)]
            metrics.append(NodeMetric(node=n, at=t0 - 2 * DAY + 3600 * k + i, window_s=60, pods=pods,
                                      system_usage=Usage(cpu=200 + 10 * (k % 5), memory=GI)))
    return specs, binds, metrics


async def publish(bus: Bus, items: list[Any]) -> None:
    for m in items:
        if isinstance(m, NodeSpec):
            await bus.publish(subjects.NODE_REGISTERED, m, node=m.name)
        elif isinstance(m, PodBound):
            await bus.publish(subjects.POD_BOUND, m, msg_id=f"bound-{m.spec.uid}", node=m.node)
        else:
            await bus.publish(subjects.NODE_METRIC, m, node=m.node)


async def latest(bus: Bus, subject: subjects.Subject[Any], durable: str,
                 key: Callable[[Any], str]) -> dict[str, Any]:
    """The newest message per key on ``subject``, kept up to date."""
    got: dict[str, Any] = {}

    async def handler(msg: Any) -> None:
        got[key(msg)] = msg

    await bus.subscribe(subject, handler, durable=durable)
    return got


async def until(cond: Callable[[], Any], what: str, timeout_s: float = 20.0) -> None:
    """Poll ``cond`` (a plain or async function) until true; fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        ok = cond()
        if asyncio.iscoroutine(ok):
            ok = await ok
        if ok:
            return
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


async def start_profiler(nats_url: str, redis_url: str, store: Store,
                         settings: ProfilerSettings = SETTINGS) -> tuple[ProfilerService, ServiceRunner]:
    service = ProfilerService(settings)
    runner = ServiceRunner(service, RuntimeSettings(nats_url=nats_url, redis_url=redis_url, sim=True,
                                                    store_prefix=store.keys.prefix))
    await runner.start()
    return service, runner


def same_apart_from_at(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return a.keys() == b.keys() and all(msgspec.structs.replace(b[k], at=a[k].at) == a[k] for k in a)


def check_meaningful(nodes: dict[str, NodeProfile], workloads: dict[str, WorkloadProfile]) -> None:
    """The compared profiles are not trivial: warm pods, a replica predicted from its workload, reclaim."""
    new = next(p for p in nodes["n2"].pods if p.uid == "web-new")
    assert new.cold and new.from_workload and new.cpu_peak < 4000
    assert all(not p.cold for n in NODES for p in nodes[n].pods if p.uid != "web-new")
    assert all(nodes[n].prod_reclaimable.cpu > 0 for n in NODES)
    assert [(w.app, w.pods, w.warm) for w in workloads["shop"].workloads] == [("web", 4, True)]


async def test_restart_after_stop_publishes_the_same_predictions(nats_url: str, redis_url: str, store: Store,
                                                                 bus_factory: BusFactory) -> None:
    tester = await bus_factory("tester")
    nodes = await latest(tester, subjects.PROFILE_NODE, "watch-nodes", lambda p: p.node)
    workloads = await latest(tester, subjects.PROFILE_WORKLOAD, "watch-workloads", lambda p: p.namespace)
    t0 = 10 * DAY
    specs, binds, metrics = cluster(t0)
    service, runner = await start_profiler(nats_url, redis_url, store)
    assert runner.ctx is not None and service.restored_from is None
    odd = PodBound(spec=PodSpec(uid="odd", name="odd", namespace="team.a", app="web", priority=5000,
                                requests=Resources(cpu=500, memory=GI)), node="n1", at=t0 - 2 * DAY)
    await publish(tester, [*specs, *binds, odd])
    await runner.ctx.bus.settle()  # bindings first: the workload of a pod is known from its PodBound
    assert service.model.pods["odd"].workload is None  # a namespace that cannot be a subject token: no workload
    await publish(tester, metrics)
    await runner.ctx.bus.settle()
    stats = await service.tick(t0)
    assert (stats["profiles"], stats["workload_profiles"]) == (2, 1)
    await until(lambda: len(nodes) == 2 and len(workloads) == 1, "first profiles")
    first_nodes, first_workloads = dict(nodes), dict(workloads)
    check_meaningful(first_nodes, first_workloads)
    await runner.stop()
    assert await store.get_checkpoint(CHECKPOINT_NAME) is not None
    nodes.clear()
    workloads.clear()

    service2, runner2 = await start_profiler(nats_url, redis_url, store)
    try:
        assert service2.restored_from is not None
        stats2 = await service2.tick(t0 + 60)
        assert stats2["samples_total"] == stats["samples_total"]  # nothing re-read from the streams
        await until(lambda: len(nodes) == 2 and len(workloads) == 1, "profiles after restart")
        assert same_apart_from_at(first_nodes, nodes)
        assert same_apart_from_at(first_workloads, workloads)
    finally:
        await runner2.stop()


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the test process dies (Linux), so no profiler outlives the test."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass


async def test_restart_after_sigkill_uses_the_periodic_checkpoint(nats_url: str, redis_url: str, store: Store,
                                                                  bus_factory: BusFactory, tmp_path: Path) -> None:
    """A ``python -m colo_profiler`` process on the wall clock checkpoints every 0.5 s; it is killed with SIGKILL
    (no stop, no last checkpoint); a new instance publishes what the killed one last published."""
    tester = await bus_factory("tester")
    nodes = await latest(tester, subjects.PROFILE_NODE, "watch-nodes", lambda p: p.node)
    t0 = time.time()
    specs, binds, metrics = cluster(t0)
    for spec in specs:
        await store.put_node(spec)
    await publish(tester, binds)
    expected = ProfileModel(SETTINGS)  # what the profiler should hold, from the model itself
    for spec in specs:
        expected.node_registered(spec.name, Usage(cpu=spec.allocatable.cpu, memory=spec.allocatable.memory))
    for b in binds:
        expected.pod_bound(b.spec.uid, b.node, b.spec.requests.cpu, b.spec.requests.memory,
                           priority_class_of(b.spec), b.at,
                           ("shop", b.spec.app) if b.spec.app else None)
    for nm in metrics:
        expected.ingest(nm)
    port = free_port()
    env = {**os.environ, "COLO_NATS_URL": nats_url, "COLO_REDIS_URL": redis_url,
           "COLO_STORE_PREFIX": store.keys.prefix, "COLO_HTTP_PORT": str(port), "COLO_LOG_LEVEL": "INFO",
           "COLO_PROFILER_EXPIRY_S": str(SETTINGS.expiry_s), "COLO_PROFILER_TICK_INTERVAL_S": "0.1",
           "COLO_PROFILER_PUBLISH_INTERVAL_S": "0.2", "COLO_PROFILER_CHECKPOINT_INTERVAL_S": "0.5"}
    with open(tmp_path / "profiler.log", "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "colo_profiler"], env=env, stdout=log,
                                stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as http:
            async def state() -> dict[str, Any]:
                try:
                    async with http.get(f"http://127.0.0.1:{port}/debug/state") as r:
                        return dict(await r.json()) if r.status == 200 else {}
                except aiohttp.ClientError:
                    return {}

            async def bound() -> bool:
                return (await state()).get("pods") == len(binds)

            await until(bound, "bindings consumed by the process", timeout_s=30)
            await publish(tester, metrics)

            async def checkpointed() -> bool:
                blob = await store.get_checkpoint(CHECKPOINT_NAME)
                return blob is not None and checkpoint.decode(blob).samples == expected.samples

            await until(checkpointed, "a periodic checkpoint with every sample")

        def published_all() -> bool:
            return len(nodes) == 2 and all(p == expected.profile(n, p.at) for n, p in nodes.items())

        await until(published_all, "profiles of every sample")
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    before = dict(nodes)
    nodes.clear()
    service, runner = await start_profiler(nats_url, redis_url, store)
    try:
        assert service.restored_from is not None
        assert service.model.samples == expected.samples
        await service.tick(time.time())
        await until(lambda: len(nodes) == 2, "profiles after restart")
        assert same_apart_from_at(before, nodes)
        new = next(p for p in nodes["n2"].pods if p.uid == "web-new")
        assert new.cold and new.from_workload
    finally:
        await runner.stop()


async def test_corrupt_checkpoint_logged_and_ignored(nats_url: str, redis_url: str, store: Store,
                                                     bus_factory: BusFactory,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    tester = await bus_factory("tester")
    nodes = await latest(tester, subjects.PROFILE_NODE, "watch-nodes", lambda p: p.node)
    await store.put_checkpoint(CHECKPOINT_NAME, checkpoint.MAGIC + b"\x00 definitely not zlib")
    with caplog.at_level(logging.WARNING, logger="colo.profiler"):
        service, runner = await start_profiler(nats_url, redis_url, store)
    try:
        assert runner.ctx is not None and service.ready()
        assert service.restored_from is None and not service.model.nodes
        assert any("ignoring checkpoint" in r.getMessage() and "unreadable" in r.getMessage()
                   for r in caplog.records)
        await tester.publish(subjects.NODE_METRIC, NodeMetric(node="n9", at=5.0, system_usage=Usage(cpu=100)),
                             node="n9")
        await runner.ctx.bus.settle()
        assert (await service.tick(10.0))["profiles"] == 1
        await until(lambda: "n9" in nodes, "a profile from the empty start")
    finally:
        await runner.stop()
    blob = await store.get_checkpoint(CHECKPOINT_NAME)  # replaced by a good one on stop
    assert blob is not None and list(checkpoint.load(blob, SETTINGS).nodes) == ["n9"]


@pytest.mark.parametrize(("interval_s", "ticks", "written"), [
    (300.0, [0.0, 100.0, 299.0, 300.0, 400.0, 600.0], [0, 0, 0, 1, 1, 2]),
    (0.0, [0.0, 300.0, 900.0], [0, 0, 0]),
], ids=["every-300s", "off"])
async def test_periodic_checkpoint(nats_url: str, redis_url: str, store: Store, clean_streams: None,
                                   interval_s: float, ticks: list[float], written: list[int]) -> None:
    service, runner = await start_profiler(nats_url, redis_url, store,
                                           ProfilerSettings(checkpoint_interval_s=interval_s))
    try:
        service.model.ingest(NodeMetric(node="n1", at=0.0, system_usage=Usage(cpu=100)))
        got = [int((await service.tick(t))["checkpoints_total"]) for t in ticks]
        assert got == written
        assert (await store.get_checkpoint(CHECKPOINT_NAME) is not None) is (interval_s > 0)
    finally:
        await runner.stop()
    assert (await store.get_checkpoint(CHECKPOINT_NAME) is not None) is (interval_s > 0)  # none written on stop
