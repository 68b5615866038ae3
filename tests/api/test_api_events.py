"""The event stream's guarantees: every message of a burst is either delivered or counted in a ``dropped``
event (a slow client never holds the bus and is told what it lost); an undecodable message is delivered with
its error; an unregistered subject is named as such."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
import pytest_asyncio

from colo.runtime import ServiceRunner
from colo.settings import RuntimeSettings
from colo.store import Store
from colo_api.service import ApiService
from colo_api.settings import ApiSettings

pytestmark = pytest.mark.integration

BURST = 3000


@pytest_asyncio.fixture
async def small_queue_api(nats_url: str, redis_url: str, store: Store) -> AsyncIterator[str]:
    runner = ServiceRunner(ApiService(ApiSettings(sse_queue=16)),
                           RuntimeSettings(nats_url=nats_url, redis_url=redis_url, store_prefix=store.keys.prefix))
    await runner.start()
    try:
        yield f"http://127.0.0.1:{runner.http_port}"
    finally:
        await runner.stop()


async def _read(url: str, out: list[tuple[str, Any]], ready: asyncio.Event, until: int) -> None:
    async with aiohttp.ClientSession() as http, http.get(url) as resp:
        event = "message"
        accounted = 0
        async for raw in resp.content:
            line = raw.decode().rstrip("\n")
            if line == ": subscribed":
                ready.set()
            elif line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                data = json.loads(line[6:])
                out.append((event, data))
                accounted += data["dropped"] if event == "dropped" else 1
                if accounted >= until:
                    return


async def test_a_burst_is_delivered_or_counted_as_dropped(small_queue_api: str, nats_url: str) -> None:
    import nats

    got: list[tuple[str, Any]] = []
    ready = asyncio.Event()
    reader = asyncio.create_task(_read(small_queue_api + "/v1/events?subject=test.>", got, ready, BURST))
    await asyncio.wait_for(ready.wait(), 10)
    nc = await nats.connect(nats_url)
    try:
        for i in range(BURST):
            await nc.publish("colo.v1.test.burst", str(i).encode())
        await nc.flush()
        await asyncio.wait_for(reader, 20)
    finally:
        await nc.close()
    delivered = [d for e, d in got if e == "message"]
    dropped = sum(d["dropped"] for e, d in got if e == "dropped")
    assert len(delivered) + dropped == BURST and dropped > 0
    assert all(d["subject"] == "test.burst" and d["type"] == "" and "unregistered subject" in d["error"]
               for d in delivered)


async def test_undecodable_message_is_delivered_with_its_error(small_queue_api: str, nats_url: str) -> None:
    import nats

    got: list[tuple[str, Any]] = []
    ready = asyncio.Event()
    reader = asyncio.create_task(_read(small_queue_api + "/v1/events?subject=sim.tick.*", got, ready, 1))
    await asyncio.wait_for(ready.wait(), 10)
    nc = await nats.connect(nats_url)
    try:
        await nc.publish("colo.v1.sim.tick.nobody", b'{"seq": "x"}')  # core NATS only: no stream keeps it
        await asyncio.wait_for(reader, 10)
    finally:
        await nc.close()
    [(event, data)] = got
    assert event == "message" and data["type"] == "Tick" and data["message"] is None
    assert data["subject"] == "sim.tick.nobody" and data["error"].startswith("invalid Tick:")
