"""The profiler's checkpoints and workload models under what breaks in operation: Redis down when a checkpoint is
due, namespaces and node names that cannot name a subject (real NATS and Redis; an own redis-server where it is
stopped and restarted)."""

from __future__ import annotations

import asyncio
import random
import time
import zlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import msgspec
import pytest
import pytest_asyncio
from profiler_helpers import GI, busy_series, metric

from colo import subjects
from colo.clock import VirtualClock
from colo.embedded import ServerHandle, start_redis
from colo.messages import NodeMetric, PodBound, PodMetric, PodSpec, Resources, Usage
from colo.runtime import ServiceRunner
from colo.settings import RuntimeSettings
from colo.store import Store
from colo.testing.fixtures import BusFactory, service_context
from colo_profiler import checkpoint
from colo_profiler.model import ProfileModel
from colo_profiler.service import CHECKPOINT_NAME, ProfilerService
from colo_profiler.settings import ProfilerSettings

pytestmark = pytest.mark.integration

SETTINGS = ProfilerSettings(checkpoint_interval_s=60, expiry_s=86_400)
NO_INFO: Any = None
"""Handlers called directly: no delivery info (only a dead-letter would use it)."""


@pytest_asyncio.fixture
async def own_redis() -> AsyncIterator[list[ServerHandle]]:
    """A redis-server of this test's own (a list: the test may replace it by a restarted one)."""
    handles = [start_redis()]
    try:
        yield handles
    finally:
        for h in handles:
            h.stop()


async def _until(cond: Callable[[], bool], what: str, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


async def test_redis_down_at_checkpoint_time_tick_goes_on_and_retries(bus_factory: BusFactory,
                                                                      own_redis: list[ServerHandle]) -> None:
    url = own_redis[0].url
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    bus = await bus_factory("profiler")
    store = await Store.connect(url, prefix="breaking")
    clock = VirtualClock(1000.0)
    svc = ProfilerService(SETTINGS)
    try:
        await svc.start(service_context(bus, store, clock))
        for m in busy_series(1, 2, 3, 5, 700.0, 60.0):
            svc.model.ingest(m)
        await svc.tick(1000.0)
        clock.advance_to(1100.0)
        assert (await svc.tick(1100.0))["checkpoints_total"] == 1

        own_redis[0].stop()
        clock.advance_to(1200.0)
        stats = await svc.tick(1200.0)  # raised ConnectionError before: the tick was reported failed
        assert stats["checkpoints_total"] == 1 and stats["checkpoint_failures_total"] == 1
        assert stats["nodes"] == 2  # the rest of the tick was done

        own_redis.append(start_redis(port=port))  # back, empty (no persistence)
        clock.advance_to(1210.0)
        stats = await svc.tick(1210.0)  # retried at the next tick, not an interval later
        assert stats["checkpoints_total"] == 2 and stats["checkpoint_failures_total"] == 1
        blob = await store.get_checkpoint(CHECKPOINT_NAME)
        assert blob is not None
        restored = checkpoint.load(blob, SETTINGS)
        assert sorted(restored.nodes) == sorted(svc.model.nodes) and restored.samples == svc.model.samples
        cp_debug = svc.debug()["checkpoint"]
        assert isinstance(cp_debug, dict) and cp_debug["failed_total"] == 1
    finally:
        await svc.stop()
        await store.close()


@pytest.mark.parametrize("namespace", [
    pytest.param("shop\n", id="trailing-newline"),  # passes the subject pattern's `$`, nats-py refuses it
    pytest.param("n" * 5000, id="5000-characters"),  # over nats-server's 4 KiB protocol line: disconnected
    pytest.param("n" * 64, id="64-characters"),
])
async def test_namespace_that_cannot_name_a_subject_keeps_publishing(bus_factory: BusFactory, store: Store,
                                                                     namespace: str) -> None:
    bus = await bus_factory("profiler")
    clock = VirtualClock(1000.0)
    svc = ProfilerService(ProfilerSettings(checkpoint_interval_s=0))
    await svc.start(service_context(bus, store, clock))
    for uid, ns in (("odd", namespace), ("fine", "shop")):
        await svc.on_bound(PodBound(spec=PodSpec(uid=uid, name=uid, namespace=ns, app="web",
                                                 requests=Resources(cpu=1000, memory=GI)), node="n1", at=1000.0),
                           NO_INFO)
    await svc.on_metric(NodeMetric(node="n1", at=1000.0, window_s=60, system_usage=Usage(cpu=100, memory=GI),
                                   pods=[PodMetric(uid="odd", cpu=500, memory=GI),
                                         PodMetric(uid="fine", cpu=500, memory=GI)]), NO_INFO)
    stats = await svc.tick(1000.0)
    assert (stats["profiles"], stats["workload_profiles"]) == (1, 1)
    assert list(svc.model.workloads) == [("shop", "web")]
    assert svc.model.pods["odd"].workload is None  # modelled as a pod, without a workload
    assert bus.nc.is_connected and bus.nc.stats["reconnects"] == 0


async def test_node_name_that_cannot_name_a_subject_is_dead_lettered(nats_url: str, redis_url: str, store: Store,
                                                                     bus_factory: BusFactory) -> None:
    client = await bus_factory("tester")
    svc = ProfilerService(ProfilerSettings(checkpoint_interval_s=0))
    runner = ServiceRunner(svc, RuntimeSettings(nats_url=nats_url, redis_url=redis_url, sim=True,
                                                store_prefix=store.keys.prefix))
    await runner.start()
    try:
        for node in ("n1", "a.b", "n1\n", "n" * 300):
            await client.publish(subjects.NODE_METRIC, NodeMetric(node=node, at=1000.0, window_s=60,
                                                                  system_usage=Usage(cpu=100, memory=GI)), node="n1")
        await _until(lambda: svc.rejected == 3 and "n1" in svc.model.nodes, "three metrics refused, one taken")
        stats = await svc.tick(1000.0)  # ValueError / BadSubjectError for every tick before
        assert stats["profiles"] == 1 and sorted(svc.model.nodes) == ["n1"]
    finally:
        await runner.stop()


async def test_checkpoint_of_an_earlier_profiler_with_unpublishable_names(bus_factory: BusFactory,
                                                                          store: Store) -> None:
    """An earlier profiler took node ``a.b`` and namespace ``shop\\n`` into its model and checkpoint; restored as
    is, every tick of its successor failed. Those models are dropped at restore, the rest is kept."""
    old = ProfileModel(SETTINGS)
    old.pod_bound("odd", "n1", 1000, GI, "prod", 1000.0, ("shop\n", "web"))
    old.pod_bound("fine", "n1", 1000, GI, "prod", 1000.0, ("shop", "web"))
    for node, pods in (("n1", {"odd": (500, GI), "fine": (400, GI)}), ("a.b", {"x": (300, GI)})):
        old.ingest(metric(node, 1000.0, (100, GI), pods))
    await store.put_checkpoint(CHECKPOINT_NAME, checkpoint.dump(old, 1000.0))

    bus = await bus_factory("profiler")
    svc = ProfilerService(SETTINGS)
    await svc.start(service_context(bus, store, VirtualClock(1010.0)))
    try:
        assert svc.restored_from == 1000.0
        assert sorted(svc.model.nodes) == ["n1"] and list(svc.model.workloads) == [("shop", "web")]
        assert svc.model.pods["odd"].workload is None and "x" not in svc.model.pods
        stats = await svc.tick(1010.0)
        assert (stats["profiles"], stats["workload_profiles"]) == (1, 1)
        svc.model.ingest(metric("n1", 1020.0, (100, GI), {"odd": (500, GI)}))
        assert list(svc.model.workloads) == [("shop", "web")]  # the odd pod does not bring its workload back
        checkpoint.load(checkpoint.dump(svc.model, 1030.0), SETTINGS)  # still a consistent model
    finally:
        await svc.stop()


def _with_bad_utf8(model: ProfileModel) -> bytes:
    """A checkpoint of ``model`` (whose node ``né`` holds the only non-ASCII text) with ``é`` replaced by bytes that
    are not UTF-8, CRC recomputed: what a writer that damaged its memory before the CRC would leave."""
    blob = checkpoint.dump(model, 1000.0)
    body = msgspec.msgpack.decode(blob[len(checkpoint.MAGIC) + 4:])
    meta = zlib.decompress(body[1])
    assert meta.count("é".encode()) == 2  # the node, and the node of its pod
    body[1] = zlib.compress(meta.replace("é".encode(), b"\xff\xfe"))
    raw = msgspec.msgpack.encode(body)
    return bytes(checkpoint.MAGIC + zlib.crc32(raw).to_bytes(4, "big") + raw)


async def test_checkpoint_with_text_that_is_not_utf8_is_ignored(bus_factory: BusFactory, store: Store) -> None:
    old = ProfileModel(SETTINGS)
    old.ingest(metric("né", 1000.0, (100, GI), {"p": (300, GI)}))
    blob = _with_bad_utf8(old)
    with pytest.raises(checkpoint.CheckpointError, match="unreadable checkpoint"):  # UnicodeDecodeError before
        checkpoint.load(blob, SETTINGS)
    await store.put_checkpoint(CHECKPOINT_NAME, blob)
    bus = await bus_factory("profiler")
    svc = ProfilerService(SETTINGS)
    await svc.start(service_context(bus, store, VirtualClock(1010.0)))  # raised before: the service did not start
    try:
        assert svc.ready() and svc.restored_from is None and not svc.model.nodes
    finally:
        await svc.stop()


def test_damaged_checkpoints_with_a_valid_crc_are_restored_or_refused() -> None:
    """Seeded fuzzing: 1 to 4 random bytes of the metadata (and sometimes of an index array) changed, the CRC
    recomputed; each blob is refused with CheckpointError or gives a model that works, never another error."""
    model = ProfileModel(SETTINGS)
    for m in busy_series(1, 2, 3, 10, 1000.0, 60.0):
        model.ingest(m)
    model.pod_bound("n0-p0", "n0", 1000, GI, "prod", 1000.0, ("shop", "web"))
    for m in busy_series(2, 2, 3, 3, 2000.0, 60.0):
        model.ingest(m)
    blob = checkpoint.dump(model, 3000.0)
    envelope = msgspec.msgpack.decode(blob[len(checkpoint.MAGIC) + 4:])
    meta = zlib.decompress(envelope[1])
    rng = random.Random(7)
    outcomes = {"restored": 0, "refused": 0}
    for _ in range(1000):
        damaged = bytearray(meta)
        for _ in range(rng.randint(1, 4)):
            damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        body = list(envelope)
        body[1] = zlib.compress(bytes(damaged))
        if rng.random() < 0.3:
            k = rng.choice([2, 4])
            index = bytearray(zlib.decompress(body[k]))
            index[rng.randrange(len(index))] = rng.randrange(256)
            body[k] = zlib.compress(bytes(index))
        raw = msgspec.msgpack.encode(body)
        try:
            restored = checkpoint.load(checkpoint.MAGIC + zlib.crc32(raw).to_bytes(4, "big") + raw, SETTINGS)
        except checkpoint.CheckpointError:
            outcomes["refused"] += 1
            continue
        restored.profiles(sorted(restored.nodes), 3100.0)
        restored.workload_profiles(3100.0)
        restored.expire(10.0**7)
        checkpoint.dump(restored, 3100.0)
        outcomes["restored"] += 1
    assert outcomes["refused"] > 500 and outcomes["restored"] > 50  # both paths exercised
