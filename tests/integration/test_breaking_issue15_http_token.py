"""Issue 15, attacked: the bearer token of a service's HTTP endpoints against path and header tricks.

A service runs in-process against real nats-server and redis-server with a token file; requests are sent as
raw bytes over a socket (no client-side URL normalisation), and only the probes may answer without the token.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from aiohttp import web

from colo.runtime import ServiceContext, ServiceRunner
from colo.settings import RuntimeSettings

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]

TOKEN = "s3cret-token"


class Tiny:
    """A service with one data route of its own."""

    name = "tiny"
    tick_interval_s = 60.0

    async def start(self, ctx: ServiceContext) -> None:
        ctx.add_route("GET", "/debug/seen", self.seen)

    async def seen(self, _: web.Request) -> web.Response:
        return web.json_response(["secret"])

    async def tick(self, now: float) -> dict[str, float]:
        return {}

    async def stop(self) -> None:
        pass

    def ready(self) -> bool:
        return True

    def debug(self) -> dict[str, object]:
        return {"secret": 1}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def port(nats_url: str, redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[int]:
    token = Path(tmp_path_factory.mktemp("token")) / "token"
    token.write_text(f"  {TOKEN} \n\n")
    runner = ServiceRunner(Tiny(), RuntimeSettings(nats_url=nats_url, redis_url=redis_url, store_prefix="tok-test",
                                                   http_token_file=str(token)))
    await runner.start()
    try:
        yield runner.http_port
    finally:
        await runner.stop()


async def raw(port: int, request: bytes) -> tuple[int, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        await writer.drain()
        data = await asyncio.wait_for(reader.read(65536), 5)
    finally:
        writer.close()
    status = int(data.split(b" ", 2)[1])
    return status, data


def get(target: str, method: str = "GET", headers: bytes = b"") -> bytes:
    return f"{method} {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n".encode() + headers + b"\r\n"


@pytest.mark.parametrize("target", [
    "/metrics", "//metrics", "/metrics/", "/METRICS", "/debug/../metrics", "/healthz/../metrics",
    "/healthz/%2e%2e/metrics", "/healthz/%2E%2E/debug/state", "/%6detrics", "/debug/state", "/debug//state",
    "/readyz/../debug/state", "/debug/seen", f"/metrics?token={TOKEN}", f"/metrics?access_token={TOKEN}",
    "http://x/metrics", "/healthz/..%2fmetrics", "/./metrics",
])
@pytest.mark.parametrize("method", ["GET", "HEAD", "POST", "OPTIONS"])
async def test_no_path_or_method_reaches_data_without_the_token(port: int, target: str, method: str) -> None:
    status, data = await raw(port, get(target, method))
    assert status != 200 and (status in (401, 404, 405)), (target, method, data[:300])
    assert b"secret" not in data.split(b"\r\n\r\n", 1)[-1] and b"colo_" not in data, data[:300]


@pytest.mark.parametrize("header", [
    b"Authorization: Bearer \xff\xfe\r\n",  # not UTF-8
    b"Authorization: Bearer \xc3\xa9t\xc3\xa9\r\n",  # UTF-8, not ASCII
    b"Authorization: Bearer s3cret-token\x00\r\n",
    b"Authorization: Bearer  s3cret-tokex\r\n",
    b"Authorization: Bearer\r\n",
    b"Authorization: s3cret-token\r\n",
    b"authorization: basic s3cret-token\r\n",
])
async def test_a_bad_authorization_header_gets_401(port: int, header: bytes) -> None:
    status, data = await raw(port, get("/metrics", headers=header))
    assert status in (400, 401), data[:300]


@pytest.mark.parametrize("header", [b"Authorization: Bearer s3cret-token\r\n",
                                    b"authorization: bearer   s3cret-token  \r\n"])
async def test_the_token_works_with_whitespace_around_it(port: int, header: bytes) -> None:
    status, data = await raw(port, get("/debug/seen", headers=header))
    assert status == 200, data[:300]


@pytest.mark.parametrize("target", ["/healthz", "/readyz"])
@pytest.mark.parametrize("method", ["GET", "HEAD"])
async def test_the_probes_are_open(port: int, target: str, method: str) -> None:
    status, _ = await raw(port, get(target, method))
    assert status == 200
