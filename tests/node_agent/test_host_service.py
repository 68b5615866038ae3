"""The node agent service on the host backend, in-process against real nats-server and redis-server, with real
processes in real cgroups (markers ``cgroup`` and ``integration``).

Each test's node is its own parent group ``colo-test-<hex>`` (``node_scope=parent``) with a CPU quota and a
memory limit the test sets, so the node is a small slice of this shared machine: the hogs cannot disturb other
work and the other work does not count as the node's usage.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from colo import subjects
from colo.bus import Bus
from colo.clock import WallClock
from colo.messages import (
    CPUSuppressStrategy,
    EvictionCommand,
    MemoryEvictStrategy,
    NodeResource,
    NodeSLO,
    PodBound,
    PodRecord,
    PodSpec,
    PodStatus,
    QoSEvent,
    Resources,
)
from colo.store import Store
from colo.testing.fixtures import BusFactory, service_context
from colo_node_agent.backends.host import HostBackend
from colo_node_agent.service import NodeAgentService
from colo_node_agent.settings import NodeAgentSettings

pytestmark = [pytest.mark.cgroup, pytest.mark.integration]

ROOT = Path("/sys/fs/cgroup")
MI = 1 << 20
NODE = "host-test"
LOOP_S = 0.25
BE_DIR = "kubepods/besteffort"
HOG = [sys.executable, "-c", "while True: pass"]


def make_parent(parent: str, cpu_quota_us: int, memory_bytes: int) -> None:
    """The test's node: a parent group with a CPU quota (period 100 ms) and a memory limit. Its cpu.shares are
    raised so that other work on this machine does not starve it while a test measures."""
    for c in ("cpu", "cpuacct", "cpuset", "memory"):
        (ROOT / c / parent).mkdir()
    for name in ("cpuset.cpus", "cpuset.mems"):
        (ROOT / "cpuset" / parent / name).write_text((ROOT / "cpuset" / name).read_text())
    (ROOT / "cpu" / parent / "cpu.cfs_quota_us").write_text(str(cpu_quota_us))
    (ROOT / "cpu" / parent / "cpu.shares").write_text("8192")
    (ROOT / "memory" / parent / "memory.limit_in_bytes").write_text(str(memory_bytes))


def read(parent: str, controller: str, cgroup: str, name: str) -> str:
    return (ROOT / controller / parent / cgroup / name).read_text().strip()


@dataclass
class Agent:
    """The agent service on its own bus with a wall-clock tick loop, like ServiceRunner runs it."""

    service: NodeAgentService
    bus: Bus
    ticker: asyncio.Task[None]

    @property
    def host(self) -> HostBackend:
        assert isinstance(self.service.backend, HostBackend)
        return self.service.backend

    async def stop(self) -> None:
        """Stop like a SIGTERM'd agent process: ticks, consumers, service, bus (the pods keep running)."""
        self.ticker.cancel()
        await asyncio.gather(self.ticker, return_exceptions=True)
        await self.bus.stop_consumers()
        await self.service.stop()
        await self.bus.close()


@dataclass
class Harness:
    bus_factory: BusFactory
    store: Store
    settings: NodeAgentSettings
    client: Bus | None = None
    seen: dict[str, list[Any]] = field(default_factory=dict)

    async def start_agent(self) -> Agent:
        bus = await self.bus_factory("node-agent", clock=WallClock(), retry_delay_s=0.01)
        service = NodeAgentService(self.settings)
        await service.start(service_context(bus, self.store, WallClock()))
        await bus.start_consumers()

        async def ticks() -> None:
            while True:
                await service.tick(time.time())
                await asyncio.sleep(LOOP_S)

        if self.client is None:
            self.client = await self.bus_factory("test-client")
            for key, subject in (("status", subjects.POD_STATUS), ("qos", subjects.NODE_QOS),
                                 ("metric", subjects.NODE_METRIC)):
                await self.client.subscribe(subject, _collector(self.seen.setdefault(key, [])), durable=key)
        return Agent(service, bus, asyncio.create_task(ticks()))

    async def bind(self, spec: PodSpec) -> None:
        assert self.client is not None
        now = time.time()
        await self.store.put_pod(PodRecord(spec=spec))
        result = await self.store.bind(spec.uid, NODE, spec.requests, now)
        assert result.ok, result.reason
        await self.client.publish(subjects.POD_BOUND, PodBound(spec=spec, node=NODE, at=now),
                                  msg_id=f"bound-{spec.uid}", node=NODE)

    def statuses(self, uid: str) -> list[tuple[str, str]]:
        return [(s.phase, s.reason) for s in self.seen.get("status", []) if s.uid == uid]

    async def until(self, cond: Callable[[], bool], timeout_s: float = 20.0, what: str = "") -> None:
        deadline = time.monotonic() + timeout_s
        while not cond():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            await asyncio.sleep(0.05)


def _collector(sink: list[Any]) -> Callable[[Any], Awaitable[None]]:
    async def collect(msg: Any) -> None:
        sink.append(msg)

    return collect


def settings(parent: str, state_dir: Path, **kw: Any) -> NodeAgentSettings:
    return NodeAgentSettings(backend="host", cgroup_parent=parent, state_dir=str(state_dir), node_name=NODE,
                             loop_s=LOOP_S, node_scope="parent", report_interval_s=1.0, window_s=5.0,
                             termination_grace_s=1.0, **kw)


@pytest.fixture
async def harness(bus_factory: BusFactory, store: Store, cgroup_parent: str,
                  tmp_path: Path) -> AsyncIterator[Callable[..., Harness]]:
    made: list[Harness] = []

    def make(**kw: Any) -> Harness:
        h = Harness(bus_factory, store, settings(cgroup_parent, tmp_path / "state", **kw))
        made.append(h)
        return h

    yield make


def be_pod(uid: str, command: list[str], batch_cpu: int = 500, memory: int = 0) -> PodSpec:
    return PodSpec(uid=uid, name=uid, qos_class="BE", priority=5500, command=command,
                   requests=Resources(batch_cpu=batch_cpu, batch_memory=memory),
                   limits=Resources(batch_memory=memory))


async def test_be_cpu_hogs_are_held_to_the_suppress_budget(harness: Callable[..., Harness],
                                                           cgroup_parent: str, store: Store) -> None:
    make_parent(cgroup_parent, cpu_quota_us=100_000, memory_bytes=1024 * MI)
    h = harness()
    agent = await h.start_agent()
    await store.put_node_resource(NodeResource(node=NODE, batch_cpu=1000, batch_memory=512 * MI))
    # switch the node to the cfsQuota policy over NATS (the default cpuset policy cannot go below 2 CPUs,
    # all of this machine)
    assert h.client is not None
    await h.client.publish(subjects.NODE_SLO, NodeSLO(node=NODE, cpu_suppress=CPUSuppressStrategy(
        policy="cfsQuota", threshold_percent=65)), node=NODE)
    for i in range(2):
        await h.bind(be_pod(f"hog-{i}", HOG))
    await h.until(lambda: all(h.statuses(f"hog-{i}") == [("Running", "")] for i in range(2)), what="hogs running")
    await h.until(lambda: read(cgroup_parent, "cpu", BE_DIR, "cpu.cfs_quota_us") != "-1", what="a BE quota")
    await asyncio.sleep(1.0)  # let the budget settle
    budgets = []
    t0, u0 = time.monotonic(), int(read(cgroup_parent, "cpuacct", BE_DIR, "cpuacct.usage"))
    for _ in range(12):
        await asyncio.sleep(LOOP_S)
        budgets.append(agent.host.be_allowed)
    used_milli = (int(read(cgroup_parent, "cpuacct", BE_DIR, "cpuacct.usage")) - u0) / 1e6 / (time.monotonic() - t0)
    budget = sum(budgets) / len(budgets)
    # BEAllowed = 1000 m (the node: its 1-CPU quota) × 65 % − LS 0 − system ≈ 0
    assert 600 <= budget <= 650
    assert abs(used_milli - budget) <= 0.1 * budget, f"BE used {used_milli:.0f} m against a budget of {budget:.0f} m"
    quota = int(read(cgroup_parent, "cpu", BE_DIR, "cpu.cfs_quota_us"))
    assert abs(quota / 100 - budget) <= 20, "the BE quota is the budget × period"
    events: list[QoSEvent] = [e for e in h.seen["qos"] if e.kind == "suppress"]
    assert events and events[-1].reason == "cfsQuota" and 600 <= int(events[-1].detail["be_cpu_allowed_milli"]) <= 650
    metrics = h.seen.get("metric", [])
    assert metrics and metrics[-1].be_cpu_allowed == agent.host.be_allowed or metrics[-1].be_cpu_allowed > 0
    await agent.stop()


async def test_be_memory_hog_is_evicted_before_the_node_fills(harness: Callable[..., Harness],
                                                              cgroup_parent: str, store: Store) -> None:
    limit = 512 * MI
    make_parent(cgroup_parent, cpu_quota_us=200_000, memory_bytes=limit)
    h = harness(memory_evict=MemoryEvictStrategy(threshold_percent=40))
    agent = await h.start_agent()
    await store.put_node_resource(NodeResource(node=NODE, batch_cpu=1000, batch_memory=limit))
    ls = PodSpec(uid="ls-1", name="ls-1", qos_class="LS", priority=9500, command=["sleep", "300"],
                 requests=Resources(cpu=100, memory=16 * MI))
    await h.bind(ls)
    # grows by 8 MiB every 100 ms towards 480 MiB: past the 40 % threshold (205 MiB) in ~2.6 s, into the node's
    # limit (512 MiB, an OOM kill) in ~6 s if nobody evicts it (slow enough for a loaded CI machine)
    grow = ("import time\nchunks = []\nfor _ in range(60):\n    chunks.append(b'x' * (8 << 20))\n"
            "    time.sleep(0.1)\ntime.sleep(300)\n")
    await h.bind(be_pod("hog", [sys.executable, "-c", grow], memory=0))
    await h.until(lambda: len(h.statuses("hog")) == 2, what="the hog to end")
    assert h.statuses("hog") == [("Running", ""), ("Failed", "Evicted")]
    end: PodStatus = [s for s in h.seen["status"] if s.uid == "hog"][-1]
    assert end.message.startswith("node memory ") and ">= 40%" in end.message
    # the QoS event is on another subject: its delivery may trail the status
    await h.until(lambda: any(e.kind == "evict" for e in h.seen["qos"]), what="the eviction's QoS event")
    evicts = [e for e in h.seen["qos"] if e.kind == "evict"]
    assert [e.pods for e in evicts] == [["hog"]] and evicts[0].reason == "BE memory eviction"
    peak = int(read(cgroup_parent, "memory", "", "memory.max_usage_in_bytes"))
    assert peak < 0.9 * limit, f"node memory peaked at {peak / limit:.0%} of its limit"
    oom_control = read(cgroup_parent, "memory", "", "memory.oom_control")
    assert "oom_kill 0" in oom_control.splitlines(), "nothing was OOM-killed"
    assert h.statuses("ls-1") == [("Running", "")] and agent.host.is_running("ls-1")
    await h.until(lambda: not agent.host.has_pod("hog"), what="the hog's group removed")
    assert not (ROOT / "memory" / cgroup_parent / BE_DIR / "podhog").exists()
    await agent.stop()


async def test_agent_restart_keeps_every_pod_tracked(harness: Callable[..., Harness], cgroup_parent: str,
                                                     store: Store) -> None:
    make_parent(cgroup_parent, cpu_quota_us=100_000, memory_bytes=1024 * MI)
    h = harness()
    agent = await h.start_agent()
    await store.put_node_resource(NodeResource(node=NODE, batch_cpu=1000, batch_memory=512 * MI))
    pods = [PodSpec(uid="ls-1", name="ls-1", qos_class="LS", command=["sleep", "300"],
                    requests=Resources(cpu=100)),
            PodSpec(uid="lsr-1", name="lsr-1", qos_class="LSR", command=["sleep", "300"],
                    requests=Resources(cpu=100), limits=Resources(cpu=100)),
            be_pod("be-1", ["sleep", "300"])]
    for spec in pods:
        await h.bind(spec)
    await h.until(lambda: all(h.statuses(p.uid) == [("Running", "")] for p in pods), what="pods running")
    groups = {p.uid: agent.host.pods[p.uid].state.cgroup for p in pods}
    await h.until(lambda: all(len(agent.host.tree.procs(cg)) == 2 for cg in groups.values()),
                  what="wrapper and command in every pod group")
    before = {uid: sorted(agent.host.tree.procs(cg)) for uid, cg in groups.items()}
    await agent.stop()
    await asyncio.sleep(0.5)

    agent2 = await h.start_agent()
    assert (agent2.service.counters["adopted"], agent2.service.counters["started"]) == (3, 0)
    assert h.client is not None
    await h.client.publish(subjects.POD_BOUND, PodBound(spec=pods[0], node=NODE, at=time.time()),
                           msg_id="bound-again", node=NODE)
    await asyncio.sleep(4 * LOOP_S)
    assert agent2.service.counters["started"] == 0, "a redelivered binding starts nothing"
    after = {uid: sorted(agent2.host.tree.procs(cg)) for uid, cg in groups.items()}
    assert after == before, "same processes: none restarted, none orphaned"
    assert all(h.statuses(p.uid) == [("Running", "")] for p in pods)
    await h.client.publish(subjects.POD_EVICT, EvictionCommand(uid="be-1", node=NODE, reason="LowNodeLoad",
                                                               at=time.time(), by="descheduler"), node=NODE)
    await h.until(lambda: h.statuses("be-1")[-1] == ("Failed", "Evicted"), what="the eviction")
    await h.until(lambda: not agent2.host.has_pod("be-1"), what="the evicted pod's group removed")
    assert not (ROOT / "cpu" / cgroup_parent / groups["be-1"]).exists()
    await agent2.stop()
