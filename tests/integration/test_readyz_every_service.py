"""Every service's /readyz against its own redis-server, killed and started again: 200 with both dependencies
``up``, 503 naming ``redis`` ``down`` while it is gone, 200 again once it is back (issue 15, observation 1:
readiness ignored Redis)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from colo.embedded import start_redis
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
    "node-agent": lambda: NodeAgentService(NodeAgentSettings(), nodes=[NodeSpec(name="rz-n1", capacity=_R,
                                                                                allocatable=_R)]),
    "profiler": lambda: ProfilerService(ProfilerSettings()),
    "api": lambda: ApiService(ApiSettings()),
}


async def _readyz(port: int) -> tuple[int, dict[str, Any]]:
    async with aiohttp.ClientSession() as http:
        async with http.get(f"http://127.0.0.1:{port}/readyz") as r:
            return r.status, await r.json()


async def _until_status(port: int, status: int) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    while True:
        got, body = await _readyz(port)
        if got == status:
            return body
        assert loop.time() < deadline, f"/readyz stayed {got}: {body}"
        await asyncio.sleep(0.1)


@pytest.mark.parametrize("name", list(SERVICES))
async def test_readyz_names_redis_while_it_is_down(name: str, tmp_path: Path, nats_url: str,
                                                   clean_streams: None) -> None:
    redis = start_redis(data_dir=str(tmp_path))
    service = SERVICES[name]()
    runner = ServiceRunner(service, RuntimeSettings(nats_url=nats_url, redis_url=redis.url, store_prefix=f"rz-{name}"))
    await runner.start()
    try:
        body = await _until_status(runner.http_port, 200)
        assert body["service"] == service.name
        assert {d: v["state"] for d, v in body["dependencies"].items()} == {"nats": "up", "redis": "up"}
        redis.proc.kill()
        redis.proc.wait(timeout=10)
        redis.stop()
        status, body = await _readyz(runner.http_port)
        assert status == 503 and body["ready"] is False, body
        assert body["dependencies"]["redis"]["state"] == "down" and body["dependencies"]["redis"]["error"], body
        assert body["dependencies"]["nats"]["state"] == "up", body
        redis = start_redis(redis.port, data_dir=str(tmp_path))
        body = await _until_status(runner.http_port, 200)
        assert body["dependencies"]["redis"]["state"] == "up"
    finally:
        await runner.stop()
        redis.stop()
