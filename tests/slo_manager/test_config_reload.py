"""Hot reload of the slo-manager's configuration from a YAML file and a NATS key-value entry (real NATS/Redis)."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from nats.js.kv import KeyValue

from colo import subjects
from colo.clock import VirtualClock
from colo.messages import (
    ConfigApplied,
    ConfigRejected,
    NodeMetric,
    NodeResource,
    NodeSLO,
    NodeSpec,
    PodAdmitted,
    PodSpec,
    Resources,
    Usage,
)
from colo.settings import load_settings
from colo.store import Store
from colo.testing.fixtures import BusFactory, service_context
from colo.testing.rig import TickRig
from colo_slo_manager.service import SloManagerService
from colo_slo_manager.settings import ENV_PREFIX, SloManagerSettings

pytestmark = pytest.mark.integration

G = 10**9
T0 = 1000.0
NODE = NodeSpec(name="n1", capacity=Resources(cpu=100_000, memory=100 * G, pods=110),
                allocatable=Resources(cpu=100_000, memory=100 * G, pods=110), labels={"pool": "web"})
KEY = "slo-manager"


@dataclass(kw_only=True)
class Rig(TickRig[SloManagerService]):
    """The service under test, a client collecting what it publishes, the key-value bucket and the file."""

    kv: KeyValue
    path: Path

    async def changed(self, attempts: int) -> None:
        """Wait until the service has tried ``attempts`` configuration changes, then for its announcements."""
        assert self.service.config is not None
        await self.service.config.wait_attempts(attempts)
        await self.settle()

    def thresholds(self) -> list[int]:
        slos: list[NodeSLO] = self.seen["slo"]
        return [s.cpu_suppress.threshold_percent for s in slos]


def _collector(sink: list[Any]) -> Callable[[Any], Awaitable[None]]:
    async def collect(msg: Any) -> None:
        sink.append(msg)

    return collect


def _write(path: Path, text: str) -> None:
    """Replace the file at once, as editors and configuration management do (rename over it)."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _policy(threshold: int, bucket: str, extra: str = "") -> str:
    return (f"node_slo: {{cpu_suppress: {{threshold_percent: {threshold}}}}}\n"
            f"config_reload: {{kv_bucket: {bucket}, file_poll_s: 0.05}}\n{extra}")


@pytest_asyncio.fixture
async def rig_factory(bus_factory: BusFactory, store: Store,
                      tmp_path: Path) -> AsyncIterator[Callable[..., Awaitable[Rig]]]:
    bucket = f"cfg-{uuid.uuid4().hex[:10]}"  # KV buckets outlive the COLO_* stream cleanup: one per test
    rigs: list[Rig] = []
    admin = await bus_factory("test-admin")
    kv = await admin.key_value(bucket)

    async def make(kv_before_start: bytes | None = None) -> Rig:
        path = tmp_path / "slo-manager.yaml"
        _write(path, _policy(55, bucket))
        if kv_before_start is not None:
            await kv.put(KEY, kv_before_start)
        env = {f"{ENV_PREFIX}_CONFIG": str(path)}
        settings = load_settings(SloManagerSettings, ENV_PREFIX, env=env)
        clock = VirtualClock(T0)
        bus = await bus_factory("slo-manager", clock=clock, retry_delay_s=0.01)
        client = await bus_factory("test-client")
        rig = Rig(service=SloManagerService(settings, env=env), bus=bus, client=client, clock=clock, kv=kv,
                  path=path)
        for key, subject in (("slo", subjects.NODE_SLO), ("resource", subjects.NODE_RESOURCE),
                             ("admitted", subjects.POD_ADMITTED), ("applied", subjects.CONFIG_APPLIED),
                             ("rejected", subjects.CONFIG_REJECTED)):
            await client.subscribe(subject, _collector(rig.seen.setdefault(key, [])), durable=key)
        await rig.service.start(service_context(bus, store, clock))
        rigs.append(rig)
        return rig

    try:
        yield make
    finally:
        for rig in rigs:
            await rig.service.stop()
        await admin.js.delete_key_value(bucket)


async def test_kv_value_applied_invalid_rejected_delete_falls_back_to_file(
        rig_factory: Callable[..., Awaitable[Rig]]) -> None:
    r = await rig_factory()
    await r.client.publish(subjects.NODE_REGISTERED, NODE, node="n1")
    await r.tick(T0 + 10)
    assert r.thresholds() == [55]  # the file's
    start: list[ConfigApplied] = r.seen["applied"]
    assert [(a.trigger, a.service) for a in start] == [("start", "slo-manager")]
    assert "file" in start[0].sources and start[0].sources["kv"].endswith(" none")
    file_version = start[0].version

    # A valid value: applied, announced with its revision, NodeSLO re-rendered, new profile used at admission.
    await r.kv.put(KEY, b"""
node_slo: {cpu_suppress: {threshold_percent: 40}}
profiles:
  - name: spark
    match_expressions: [{key: app, operator: In, values: [spark, flink]}]
    qos_class: BE
    priority_class: batch
""")
    await r.changed(1)
    applied: list[ConfigApplied] = r.seen["applied"]
    assert [a.trigger for a in applied] == ["start", "kv"]
    kv_version = applied[1].version
    assert kv_version != file_version and "revision" in applied[1].sources["kv"]
    await r.client.publish(subjects.POD_SUBMITTED, PodSpec(uid="j1", name="j1", labels={"app": "flink"},
                                                           requests=Resources(cpu=1000, memory=G)))
    await r.tick(T0 + 20)
    assert r.thresholds() == [55, 40]
    admitted: list[PodAdmitted] = r.seen["admitted"]
    assert [(a.profile, a.spec.requests) for a in admitted] == [("spark", Resources(batch_cpu=1000, batch_memory=G))]
    debug: dict[str, Any] = r.service.debug()["config"]  # type: ignore[assignment]
    assert debug["version"] == kv_version and debug["applied"] == 1
    assert debug["settings"]["node_slo"]["cpu_suppress"]["threshold_percent"] == 40

    # An invalid value: every problem reported, the previous configuration stays in force.
    await r.kv.put(KEY, b"""
bogus: 1
batch: {cpu_policy: request, cpu_reclaim_threshold_percent: 150}
node_slo: {cpu_suppress: {threshold_percent: 10}}
node_pools: [{name: gpu, cpu_suppress: {threshold: 3}}]
""")
    await r.changed(2)
    rejected: list[ConfigRejected] = r.seen["rejected"]
    assert len(rejected) == 1 and rejected[0].trigger == "kv" and rejected[0].version_in_force == kv_version
    joined = "\n".join(rejected[0].errors)
    for fragment in ("bogus", "cpu_policy", "cpu_reclaim_threshold_percent", "cpu_suppress.threshold: unknown"):
        assert fragment in joined, fragment
    assert len(rejected[0].errors) >= 4
    assert r.service.settings.node_slo.cpu_suppress.threshold_percent == 40
    await r.tick(T0 + 30)
    assert r.thresholds() == [55, 40]  # nothing new rendered
    debug = r.service.debug()["config"]  # type: ignore[assignment]
    assert debug["version"] == kv_version and debug["rejected"] == 1
    assert debug["last_rejection"]["errors"] == rejected[0].errors

    # The key deleted: back to the file alone.
    await r.kv.delete(KEY)
    await r.changed(3)
    assert [a.trigger for a in r.seen["applied"]] == ["start", "kv", "kv"]
    assert r.seen["applied"][-1].version == file_version
    await r.tick(T0 + 40)
    assert r.thresholds() == [55, 40, 55]


async def test_file_edit_reloads_policy_and_resources(rig_factory: Callable[..., Awaitable[Rig]]) -> None:
    r = await rig_factory()
    await r.client.publish(subjects.NODE_REGISTERED, NODE, node="n1")
    metric = NodeMetric(node="n1", at=T0, node_usage=Usage(cpu=20_000, memory=20 * G),
                        system_usage=Usage(cpu=10_000, memory=10 * G))
    await r.client.publish(subjects.NODE_METRIC, metric, node="n1")
    await r.tick(T0 + 10)
    resources: list[NodeResource] = r.seen["resource"]
    assert [x.batch_cpu for x in resources] == [50_000]  # 100 × 60 % − 10 (system)

    # 62 % instead of 60 %: +2 cores, under the 10 % diff threshold, yet published at once after a reload.
    bucket = r.service.settings.config_reload.kv_bucket
    _write(r.path, _policy(45, bucket, "batch: {cpu_reclaim_threshold_percent: 62}\n"))
    await r.changed(1)
    assert [a.trigger for a in r.seen["applied"]] == ["start", "file"]
    await r.client.publish(subjects.NODE_METRIC, NodeMetric(node="n1", at=T0 + 20, node_usage=metric.node_usage,
                                                            system_usage=metric.system_usage), node="n1")
    await r.tick(T0 + 30)
    assert r.thresholds() == [55, 45]
    assert [x.batch_cpu for x in r.seen["resource"]] == [50_000, 52_000]

    # A broken file: rejected with both problems, the edited configuration stays.
    _write(r.path, _policy(45, bucket, "batch: {cpu_reclaim_threshold_percent: 101, memory_policy: sometimes}\n"))
    await r.changed(2)
    rejected: list[ConfigRejected] = r.seen["rejected"]
    assert [x.trigger for x in rejected] == ["file"] and len(rejected[0].errors) == 2
    assert all(e.startswith(str(r.path)) for e in rejected[0].errors)
    assert r.service.settings.batch.cpu_reclaim_threshold_percent == 62


async def test_invalid_kv_at_start_keeps_the_file_configuration(rig_factory: Callable[..., Awaitable[Rig]]) -> None:
    r = await rig_factory(kv_before_start=b"mid: {mode: sometimes, cpu_threshold_percent: -5}\n")
    await r.settle()
    rejected: list[ConfigRejected] = r.seen["rejected"]
    assert len(rejected) == 1 and len(rejected[0].errors) == 2
    assert [a.trigger for a in r.seen["applied"]] == ["start"]
    assert r.service.settings.mid.mode == "dynamic"
    assert r.service.settings.node_slo.cpu_suppress.threshold_percent == 55


async def test_kv_value_at_start_in_force_before_the_first_pod(rig_factory: Callable[..., Awaitable[Rig]]) -> None:
    r = await rig_factory(kv_before_start=b"colocation_enabled: false\ntick_interval_s: 5\n")
    assert r.service.settings.colocation_enabled is False
    await r.client.publish(subjects.POD_SUBMITTED, PodSpec(uid="b1", name="b1", qos_class="BE", priority=5500,
                                                           requests=Resources(cpu=1000)))
    await r.settle()
    assert [a.spec.requests for a in r.seen["admitted"]] == [Resources(cpu=1000)]  # validated, not translated
    applied: list[ConfigApplied] = r.seen["applied"]
    assert [(a.trigger, a.restart_required) for a in applied] == [("start", ["tick_interval_s"])]
    assert r.service.settings.tick_interval_s == 60.0
