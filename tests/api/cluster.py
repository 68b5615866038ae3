"""A small running cluster for the API tests: node agent (sim backend), slo-manager and scheduler in-process
on the virtual clock of the session's real NATS and Redis, stepped like ``colo.sim`` steps its services
(tick in order, then every service settles at the step's time)."""

from __future__ import annotations

from dataclasses import dataclass, field

from colo.bus import Bus
from colo.messages import NodeSpec, Resources, Tick
from colo.runtime import ServiceRunner
from colo.settings import RuntimeSettings
from colo_node_agent.service import NodeAgentService
from colo_node_agent.settings import NodeAgentSettings
from colo_scheduler.service import SchedulerService
from colo_scheduler.settings import SchedulerSettings
from colo_slo_manager.service import SloManagerService
from colo_slo_manager.settings import SloManagerSettings

GI = 1024**3
STEP_S = 60.0
"""Virtual seconds per step (the node agents' report interval, as ``colo.sim``)."""
ORDER = ("node-agent", "slo-manager", "scheduler")


def node(name: str, cpu: int = 16_000, memory: int = 64 * GI) -> NodeSpec:
    r = Resources(cpu=cpu, memory=memory, pods=110)
    return NodeSpec(name=name, capacity=r, allocatable=r, cpus=cpu // 1000)


@dataclass
class Cluster:
    """The running services; :meth:`step` advances virtual time by one step."""

    bus: Bus
    runners: dict[str, ServiceRunner]
    step_no: int = 0
    now: float = 0.0
    log: list[str] = field(default_factory=list)

    @property
    def scheduler_url(self) -> str:
        return f"http://127.0.0.1:{self.runners['scheduler'].http_port}"

    async def step(self, count: int = 1) -> None:
        for _ in range(count):
            self.step_no += 1
            self.now = self.step_no * STEP_S
            for name in ORDER:
                ack = await self.bus.request_tick(name, Tick(seq=self.step_no, now=self.now, step_s=STEP_S),
                                                  timeout_s=60)
                assert not ack.error, f"{name}: {ack.error}"
            for name in ORDER:
                ack = await self.bus.request_tick(name, Tick(seq=self.step_no, now=self.now, step_s=STEP_S,
                                                             settle_only=True), timeout_s=60)
                assert not ack.error, f"{name}: {ack.error}"

    async def stop(self) -> None:
        for name in reversed(ORDER):
            await self.runners[name].stop()
        await self.bus.close()


async def start_cluster(nats_url: str, redis_url: str, prefix: str, nodes: list[NodeSpec],
                        http_token_file: str = "") -> Cluster:
    """Start the services (streams must be clean) and run one step so that nodes are registered; with
    ``http_token_file`` their HTTP endpoints require its token."""
    settings = RuntimeSettings(nats_url=nats_url, redis_url=redis_url, store_prefix=prefix, sim=True,
                               http_token_file=http_token_file)
    runners: dict[str, ServiceRunner] = {}
    services = {"node-agent": NodeAgentService(NodeAgentSettings(), nodes=nodes),
                "slo-manager": SloManagerService(SloManagerSettings()),
                "scheduler": SchedulerService(SchedulerSettings(seed=1))}
    try:
        for name in ORDER:
            runners[name] = ServiceRunner(services[name], settings)
            await runners[name].start()
    except BaseException:
        for r in runners.values():
            await r.stop()
        raise
    bus = await Bus.connect(nats_url, "cluster-driver")
    cluster = Cluster(bus, runners)
    await cluster.step()
    return cluster
