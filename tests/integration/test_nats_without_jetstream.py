"""A nats-server started without JetStream (no ``-js``): every service's start fails with one line naming the
server and how to enable JetStream, instead of a traceback ending in ``nats.js.errors.ServiceUnavailableError``."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator

import pytest

from colo.bus import JetStreamNotEnabled
from colo.embedded import ServerHandle, start_nats
from colo.messages import NodeSpec, Resources
from colo.runtime import Service, ServiceRunner
from colo.settings import RuntimeSettings
from colo_api.service import ApiService
from colo_api.settings import ApiSettings
from colo_descheduler.service import DeschedulerService
from colo_descheduler.settings import DeschedulerSettings
from colo_node_agent.service import NodeAgentService
from colo_node_agent.settings import NodeAgentSettings
from colo_profiler.service import ProfilerService
from colo_profiler.settings import ProfilerSettings
from colo_scheduler.service import SchedulerService
from colo_scheduler.settings import SchedulerSettings
from colo_slo_manager.service import SloManagerService
from colo_slo_manager.settings import SloManagerSettings

pytestmark = pytest.mark.integration

_R = Resources(cpu=8000, memory=2**34)
SERVICES: dict[str, Callable[[], Service]] = {
    "scheduler": lambda: SchedulerService(SchedulerSettings()),
    "descheduler": lambda: DeschedulerService(DeschedulerSettings()),
    "slo-manager": lambda: SloManagerService(SloManagerSettings()),
    "node-agent": lambda: NodeAgentService(NodeAgentSettings(), nodes=[NodeSpec(name="nojs-n1", capacity=_R,
                                                                                allocatable=_R)]),
    "profiler": lambda: ProfilerService(ProfilerSettings()),
    "api": lambda: ApiService(ApiSettings()),
}


@pytest.fixture(scope="module")
def plain_nats() -> Iterator[ServerHandle]:
    handle = start_nats(jetstream=False)
    try:
        yield handle
    finally:
        handle.stop()


@pytest.mark.parametrize("name", list(SERVICES))
async def test_start_names_the_server_without_jetstream(name: str, plain_nats: ServerHandle,
                                                         redis_url: str) -> None:
    runner = ServiceRunner(SERVICES[name](), RuntimeSettings(nats_url=plain_nats.url, redis_url=redis_url,
                                                             store_prefix=f"nojs-{name}"))
    with pytest.raises(JetStreamNotEnabled) as caught:
        await runner.start()
    assert str(caught.value) == (f"JetStream is not enabled on the NATS server nats://127.0.0.1:{plain_nats.port}: "
                                 "start it with `nats-server -js`, or add `jetstream {}` to its configuration file")


def test_the_profiler_exits_with_one_line(plain_nats: ServerHandle, redis_url: str) -> None:
    env = {**os.environ, "COLO_NATS_URL": plain_nats.url, "COLO_REDIS_URL": redis_url,
           "COLO_STORE_PREFIX": "nojs-main", "COLO_HTTP_PORT": "0"}
    done = subprocess.run([sys.executable, "-m", "colo_profiler"], env=env, capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"COLO_PROFILER: cannot start: JetStream is not enabled on the NATS server nats://127.0.0.1:{plain_nats.port}: "
        "start it with `nats-server -js`, or add `jetstream {}` to its configuration file"]
