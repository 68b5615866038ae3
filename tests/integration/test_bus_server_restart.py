"""nats-server restarted with the same JetStream store while a consumer runs: it reconnects and resumes."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from colo import subjects
from colo.bus import Bus
from colo.embedded import start_nats
from colo.messages import PodSpec

pytestmark = pytest.mark.integration


async def test_consumer_resumes_after_server_restart(tmp_path: Path) -> None:
    store_dir = str(tmp_path / "js")
    server = start_nats(store_dir=store_dir)
    port = int(server.url.rsplit(":", 1)[1])
    got: list[str] = []

    async def on_pod(m: PodSpec) -> None:
        got.append(m.uid)

    consumer = await Bus.connect(server.url, "beta")
    producer = await Bus.connect(server.url, "alpha")
    try:
        await consumer.ensure_streams()
        await consumer.subscribe(subjects.POD_SUBMITTED, on_pod, durable="pods")
        await producer.publish(subjects.POD_SUBMITTED, PodSpec(uid="before", name="before"))
        await consumer.settle(timeout_s=5)
        server.stop()
        server = start_nats(port=port, store_dir=store_dir)
        t0 = time.monotonic()
        while producer.nc.stats["reconnects"] < 1 or consumer.nc.stats["reconnects"] < 1:
            assert time.monotonic() - t0 < 10, "clients did not reconnect"
            await asyncio.sleep(0.05)
        await producer.publish(subjects.POD_SUBMITTED, PodSpec(uid="after", name="after"))
        t0 = time.monotonic()
        while "after" not in got:
            assert time.monotonic() - t0 < 5, f"consumer did not resume within 5 s: {got}"
            await asyncio.sleep(0.05)
        assert got == ["before", "after"]
    finally:
        await producer.close()
        await consumer.close()
        server.stop()
