"""Fixtures of the API tests: the API service running in-process against the session's real nats-server and
redis-server (colo.testing.fixtures), with a bearer token."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import aiohttp
import pytest_asyncio

from colo.runtime import ServiceRunner
from colo.settings import RuntimeSettings
from colo.store import Store
from colo_api.service import ApiService
from colo_api.settings import ApiSettings

TOKEN = "s3cret-test-token"
"""The bearer token the fixtures start the service with."""


@dataclass
class Api:
    """A running API service: ``url`` its base URL, ``http`` a client session sending the token."""

    runner: ServiceRunner
    url: str
    http: aiohttp.ClientSession

    @property
    def service(self) -> ApiService:
        assert isinstance(self.runner.service, ApiService)
        return self.runner.service


async def start_api(nats_url: str, redis_url: str, prefix: str, scheduler_url: str = "",
                    token: str = TOKEN, admission_wait_s: float = 5.0, http_token_file: str = "") -> ServiceRunner:
    """Start an API service (wall clock) on a free port; ``http_token_file`` as the services'
    ``COLO_HTTP_TOKEN_FILE``."""
    settings = ApiSettings(token=token, scheduler_url=scheduler_url, admission_wait_s=admission_wait_s)
    runner = ServiceRunner(ApiService(settings),
                           RuntimeSettings(nats_url=nats_url, redis_url=redis_url, store_prefix=prefix,
                                           http_token_file=http_token_file))
    await runner.start()
    return runner


@pytest_asyncio.fixture
async def api(nats_url: str, redis_url: str, store: Store, clean_streams: None) -> AsyncIterator[Api]:
    """The API service on the test's store prefix and freshly emptied streams (no admission runs: a submission
    waits 0.3 s for answers that do not come)."""
    runner = await start_api(nats_url, redis_url, store.keys.prefix, admission_wait_s=0.3)
    http = aiohttp.ClientSession(headers={"Authorization": f"Bearer {TOKEN}"})
    try:
        yield Api(runner, f"http://127.0.0.1:{runner.http_port}", http)
    finally:
        await http.close()
        await runner.stop()
