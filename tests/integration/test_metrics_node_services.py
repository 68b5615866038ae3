"""``/metrics`` of the node agent, slo-manager and profiler say what the bus and ``/debug/state`` say.

The services run as they do in production (ServiceRunner: HTTP endpoints, sim ticks over NATS) against the real
nats-server and redis-server of colo.testing; the sim backend hosts the nodes. After the ticks, ``/metrics`` is
read over HTTP and each figure is compared with the messages the services published (NodeMetric, QoSEvent,
NodeResource, NodeProfile) and with ``/debug/state``. Node names are unique per test: the registry is the
process's, shared by every test run in it.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from prometheus_client.parser import text_string_to_metric_families

import colo
from colo import subjects
from colo.bus import Bus
from colo.messages import (
    EvictionCommand,
    NodeMetric,
    NodeProfile,
    NodeResource,
    NodeSpec,
    PodBound,
    PodRecord,
    PodSpec,
    QoSEvent,
    Resources,
    SimWorkload,
    Tick,
)
from colo.runtime import Service, ServiceRunner
from colo.settings import RuntimeSettings
from colo.store import Store
from colo.testing.fixtures import BusFactory
from colo_node_agent.metrics import usage_by_qos
from colo_node_agent.service import NodeAgentService
from colo_node_agent.settings import NodeAgentSettings
from colo_profiler.metrics import relative_error
from colo_profiler.service import ProfilerService
from colo_slo_manager.service import SloManagerService
from colo_slo_manager.settings import ConfigReloadSettings, SloManagerSettings

pytestmark = pytest.mark.integration

G = 10**9
T0 = 0.0
STEP = 60.0
CAP = Resources(cpu=8000, memory=16 * G, pods=110)

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parse(text: str) -> Samples:
    """Prometheus text → {(sample name, sorted labels): value}."""
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sample ``name{labels}``; KeyError naming it when absent."""
    key = (name, tuple(sorted(labels.items())))
    if key not in samples:
        raise KeyError(f"{name}{labels} not exported")
    return samples[key]


def ls_pod(uid: str, cpu_util: float, memory: int = G) -> PodSpec:
    """A prod LS pod using ``cpu_util`` × 4 cores and ``memory`` bytes."""
    return PodSpec(uid=uid, name=uid, qos_class="LS", priority=9500, requests=Resources(cpu=2000, memory=G),
                   sim=SimWorkload(kind="series", step_s=60, cpu_util=[cpu_util], cpu_scale_milli=4000,
                                   memory_util=[1.0], memory_scale_bytes=memory))


def be_pod(uid: str, cpu: int, memory: int) -> PodSpec:
    """A BE batch pod using ``cpu`` milli-cores and ``memory`` bytes for an hour."""
    return PodSpec(uid=uid, name=uid, qos_class="BE", priority=5500,
                   requests=Resources(batch_cpu=1000, batch_memory=G),
                   sim=SimWorkload(kind="batch", cpu_milli=cpu, duration_s=3600, memory_bytes=memory))


@dataclass
class Cluster:
    """Services on ServiceRunners (sim ticks), a client bus collecting what they publish, the store."""

    nodes: list[str]
    bucket: str
    client: Bus
    store: Store
    runners: dict[str, ServiceRunner] = field(default_factory=dict)
    seen: dict[str, list[Any]] = field(default_factory=dict)
    now: float = T0
    seq: int = 0

    async def tick(self, n: int = 1) -> None:
        """Advance every service ``n`` steps of 60 s (node agent first, as the demo's coordinator does)."""
        for _ in range(n):
            self.now += STEP
            for name in ("node-agent", "slo-manager", "profiler"):
                if name in self.runners:
                    self.seq += 1
                    ack = await self.client.request_tick(name, Tick(seq=self.seq, now=self.now, step_s=STEP))
                    assert ack.error == "", ack.error
            await self.client.settle(timeout_s=20)

    async def bind(self, spec: PodSpec, node: str) -> None:
        if spec.qos_class == "BE" and "slo-manager" not in self.runners:  # batch room, as slo-manager would give
            await self.store.put_node_resource(NodeResource(node=node, batch_cpu=4000, batch_memory=4 * G))
        await self.store.put_pod(PodRecord(spec=spec))
        assert (await self.store.bind(spec.uid, node, spec.requests, self.now)).ok
        await self.client.publish(subjects.POD_BOUND, PodBound(spec=spec, node=node, at=self.now),
                                  msg_id=f"bound-{spec.uid}", node=node)
        await self.client.settle(timeout_s=20)

    async def scrape(self, service: str) -> tuple[Samples, dict[str, Any]]:
        """``/metrics`` (parsed) and ``/debug/state`` of ``service``, over HTTP."""
        base = f"http://127.0.0.1:{self.runners[service].http_port}"
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{base}/metrics") as r:
                assert r.status == 200
                text = await r.text()
            async with http.get(f"{base}/debug/state") as r:
                state = await r.json()
        return parse(text), state

    def last(self, key: str, node: str) -> Any:
        return [m for m in self.seen[key] if m.node == node][-1]


def _collector(sink: list[Any]) -> Callable[[Any], Awaitable[None]]:
    async def collect(msg: Any) -> None:
        sink.append(msg)

    return collect


ClusterFactory = Callable[..., Awaitable[Cluster]]


@pytest_asyncio.fixture
async def cluster(nats_url: str, redis_url: str, bus_factory: BusFactory) -> AsyncIterator[ClusterFactory]:
    """``await cluster("slo-manager", ...)``: two sim nodes on a node agent, plus the services named."""
    prefix = f"met-{uuid.uuid4().hex[:8]}"
    nodes = [f"{prefix}-a", f"{prefix}-b"]
    runtime = RuntimeSettings(nats_url=nats_url, redis_url=redis_url, sim=True, store_prefix=prefix)
    store = await Store.connect(redis_url, prefix)
    made: list[ServiceRunner] = []

    async def make(*services: str) -> Cluster:
        client = await bus_factory("test-client")
        c = Cluster(nodes=nodes, bucket=prefix, client=client, store=store)
        for key, subject in (("metric", subjects.NODE_METRIC), ("qos", subjects.NODE_QOS),
                             ("resource", subjects.NODE_RESOURCE), ("profile", subjects.PROFILE_NODE)):
            await client.subscribe(subject, _collector(c.seen.setdefault(key, [])), durable=key)
        specs = [NodeSpec(name=n, capacity=CAP, allocatable=CAP, cpus=8) for n in nodes]
        slo = SloManagerSettings(config_reload=ConfigReloadSettings(kv_bucket=prefix))  # KV buckets outlive tests
        # no interference model: LS pods are served all they ask, so the metrics compare with exact demands
        agent = NodeAgentSettings(interference_calibration="off")
        built: dict[str, Service] = {"node-agent": NodeAgentService(agent, nodes=specs),
                                     "slo-manager": SloManagerService(slo, env={}), "profiler": ProfilerService()}
        for name in ("node-agent", *services):  # the agent first: it registers the nodes the others load
            runner = ServiceRunner(built[name], runtime)
            await runner.start()
            made.append(runner)
            c.runners[name] = runner
        return c

    try:
        yield make
    finally:
        for runner in reversed(made):
            await runner.stop()
        await store.close()
        admin = await bus_factory("test-admin")
        await admin.key_value(prefix)  # created by slo-manager, or now: deleted either way
        await admin.js.delete_key_value(prefix)


async def test_node_agent_metrics_equal_its_node_metrics_and_qos_events(cluster: ClusterFactory) -> None:
    c = await cluster()
    a, b = c.nodes
    await c.bind(ls_pod("web-1", cpu_util=0.9), a)  # 3.6 cores of LS: suppress shrinks the BE budget
    await c.bind(be_pod("be-1", cpu=3000, memory=2 * G), a)
    await c.bind(be_pod("hog-1", cpu=500, memory=12 * G), b)  # 12 of 16 GB: BE memory eviction
    await c.bind(ls_pod("web-2", cpu_util=0.1), b)
    await c.tick(2)
    await c.client.publish(subjects.POD_EVICT, EvictionCommand(uid="web-2", node=b, reason="LowNodeLoad",
                                                               at=c.now, by="descheduler"), node=b)
    await c.client.publish(subjects.POD_EVICT, EvictionCommand(uid="be-1", node=a, reason="Deleted", at=c.now,
                                                               by="colo"), node=a)
    await c.client.settle(timeout_s=20)
    await c.tick(1)
    samples, state = await c.scrape("node-agent")

    for node in c.nodes:
        metric: NodeMetric = c.last("metric", node)
        for qos, (cpu, mem) in usage_by_qos(metric).items():
            assert value(samples, "colo_node_cpu_usage_cores", node=node, qos=qos) == cpu / 1000
            assert value(samples, "colo_node_memory_usage_bytes", node=node, qos=qos) == mem
        assert metric.be_cpu_allowed == state["nodes"][node]["be_cpu_allowed"] >= 0
        assert value(samples, "colo_node_be_cpu_allowed_cores", node=node) == metric.be_cpu_allowed / 1000
        assert value(samples, "colo_node_be_cpu_suppressed_cores", node=node) == (8000 - metric.be_cpu_allowed) / 1000
        assert value(samples, "colo_node_cpu_capacity_cores", node=node) == 8.0
        assert value(samples, "colo_node_last_report_timestamp_seconds", node=node) == metric.at > 0
        events: list[QoSEvent] = [e for e in c.seen["qos"] if e.node == node]
        for action in ("suppress", "burst"):
            assert value(samples, "colo_node_agent_qos_actions_total", node=node, action=action) == sum(
                1 for e in events if e.kind == action)
    first = [m for m in c.seen["metric"] if m.node == a][0]
    assert usage_by_qos(first)["ls"][0] == 3600 and usage_by_qos(first)["be"][0] > 0  # the case is the one meant
    assert value(samples, "colo_node_be_cpu_suppressed_cores", node=a) > 0
    assert any(e.kind == "suppress" for e in c.seen["qos"] if e.node == a)
    # hog-1 evicted by the agent for memory, web-2 by order; be-1 deleted: not an eviction
    evicted = {(e.node, e.reason, tuple(e.pods)) for e in c.seen["qos"] if e.kind == "evict"}
    assert evicted == {(b, "BE memory eviction", ("hog-1",)), (b, "LowNodeLoad", ("web-2",)),
                       (a, "Deleted", ("be-1",))}
    expected = {(a, "memory"): 0, (a, "cpu"): 0, (a, "order"): 0, (b, "memory"): 1, (b, "cpu"): 0, (b, "order"): 1}
    for (node, reason), n in expected.items():
        assert value(samples, "colo_node_agent_evictions_total", node=node, reason=reason) == n, (node, reason)
    # the cheap health signals, from the readiness probes; no *_created series
    assert value(samples, "colo_bus_connected") == 1 and value(samples, "colo_store_up") == 1
    assert value(samples, "colo_build_info", service="node-agent", version=colo.__version__) == 1
    assert not [k for k in samples if k[0].endswith("_created")]


async def test_slo_manager_metrics_equal_the_published_node_resources(cluster: ClusterFactory) -> None:
    c = await cluster("slo-manager")
    a, b = c.nodes
    await c.bind(ls_pod("web-1", cpu_util=0.5), a)
    await c.tick(3)
    samples, state = await c.scrape("slo-manager")
    for node in c.nodes:
        published: NodeResource = c.last("resource", node)
        assert state["nodes"][node]["published"]["batch_cpu"] == published.batch_cpu
        assert value(samples, "colo_node_batch_allocatable_cpu_cores", node=node) == published.batch_cpu / 1000
        assert value(samples, "colo_node_batch_allocatable_memory_bytes", node=node) == published.batch_memory
        assert value(samples, "colo_node_mid_allocatable_cpu_cores", node=node) == published.mid_cpu / 1000
        assert value(samples, "colo_node_mid_allocatable_memory_bytes", node=node) == published.mid_memory
        assert value(samples, "colo_node_batch_resource_reset", node=node) == 0
    batch_a = c.last("resource", a).batch_cpu
    assert 0 < batch_a < c.last("resource", b).batch_cpu  # the LS pod on a leaves less to offer there
    version = state["config"]["version"]
    assert len(version) == 16
    assert value(samples, "colo_slo_manager_config_generation") == 1
    assert value(samples, "colo_slo_manager_config_info", version=version) == 1
    assert [k for k in samples if k[0] == "colo_slo_manager_config_info"] == [
        ("colo_slo_manager_config_info", (("version", version),))]
    assert value(samples, "colo_slo_manager_config_applied_timestamp_seconds") == state["config"]["since"]

    # a hot reload over the key-value bucket: the new version in force, one info series, counted; a refused
    # configuration changes nothing but its counter
    svc = c.runners["slo-manager"].service
    assert isinstance(svc, SloManagerService) and svc.config is not None
    applied = ("colo_config_applied_total", (("service", "slo-manager"), ("trigger", "kv")))
    refused = ("colo_config_rejected_total", (("service", "slo-manager"), ("trigger", "kv")))
    kv = await c.client.key_value(c.bucket)
    await kv.put("slo-manager", b"node_slo: {cpu_suppress: {threshold_percent: 40}}\n")
    await svc.config.wait_attempts(1)
    await kv.put("slo-manager", b"node_slo: {cpu_suppress: {threshold_percent: 400}}\n")
    await svc.config.wait_attempts(2)
    after, state = await c.scrape("slo-manager")
    new = state["config"]["version"]
    assert new != version and state["config"]["applied"] == 1 and state["config"]["rejected"] == 1
    assert value(after, "colo_slo_manager_config_generation") == 2  # one applied, one refused
    assert [k for k in after if k[0] == "colo_slo_manager_config_info"] == [
        ("colo_slo_manager_config_info", (("version", new),))]
    assert after[applied] - samples.get(applied, 0.0) == 1
    assert after[refused] - samples.get(refused, 0.0) == 1


async def test_profiler_metrics_equal_its_profiles_and_the_usage_reported(cluster: ClusterFactory) -> None:
    c = await cluster("profiler")
    a, b = c.nodes
    await c.bind(ls_pod("web-1", cpu_util=0.5, memory=2 * G), a)
    await c.bind(ls_pod("web-2", cpu_util=0.25, memory=G), b)
    before, _ = await c.scrape("profiler")
    ticks = 4
    await c.tick(ticks)
    samples, state = await c.scrape("profiler")
    assert set(state["nodes"]) >= set(c.nodes)
    errors: dict[str, list[float]] = {"cpu": [], "memory": []}
    exceeded = {"cpu": 0, "memory": 0}
    for node in c.nodes:
        profile: NodeProfile = c.last("profile", node)
        assert value(samples, "colo_node_prod_peak_predicted_cpu_cores", node=node) == profile.prod_peak.cpu / 1000
        assert value(samples, "colo_node_prod_peak_predicted_memory_bytes", node=node) == profile.prod_peak.memory
        assert value(samples, "colo_node_prod_reclaimable_cpu_cores", node=node) == profile.prod_reclaimable.cpu / 1000
        metric: NodeMetric = c.last("metric", node)
        prod = [p for p in metric.pods if p.priority_class == "prod"]
        assert value(samples, "colo_node_prod_usage_cpu_cores", node=node) == sum(p.cpu for p in prod) / 1000
        assert value(samples, "colo_node_prod_usage_memory_bytes", node=node) == sum(p.memory for p in prod)
        # each report after the first scored against the prediction of the tick before it (the last profile
        # published up to then: an unchanged profile is not sent again)
        profiles: list[NodeProfile] = [p for p in c.seen["profile"] if p.node == node]
        for m in [m for m in c.seen["metric"] if m.node == node]:
            made = [p for p in profiles if p.at < m.at]
            if not made:
                continue
            usage = [p for p in m.pods if p.priority_class == "prod"]
            for resource, obs, peak in (("cpu", sum(p.cpu for p in usage), made[-1].prod_peak.cpu),
                                        ("memory", sum(p.memory for p in usage), made[-1].prod_peak.memory)):
                err = relative_error(obs, peak)
                if err is not None:
                    errors[resource].append(err)
                    exceeded[resource] += obs > peak
    assert len(errors["cpu"]) == 2 * (ticks - 1)
    for resource, errs in errors.items():
        count = "colo_profiler_prod_peak_error_ratio_count"
        total = "colo_profiler_prod_peak_error_ratio_sum"
        base_n = before.get((count, (("resource", resource),)), 0.0)
        base_s = before.get((total, (("resource", resource),)), 0.0)
        assert value(samples, count, resource=resource) - base_n == len(errs)
        assert value(samples, total, resource=resource) - base_s == pytest.approx(sum(errs))
        ex = "colo_profiler_prod_peak_exceeded_total"
        assert value(samples, ex, resource=resource) - before[(ex, (("resource", resource),))] == exceeded[resource]
    assert value(samples, "colo_profiler_models", kind="node") == len(state["nodes"])
