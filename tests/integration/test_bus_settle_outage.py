"""``Bus.settle`` rides out a NATS outage: the consumer-info requests it polls fail while the server is down
(timeout, reconnecting) and are asked again until the deadline, instead of raising.

Found broken by the chaos soak (``make chaos``): a node agent, profiler or scheduler whose NATS server was killed
answered its step's tick with ``TimeoutError: nats: timeout`` from the settle that precedes the tick's work,
so that step's work was skipped (``colo.runtime`` settles before and after each tick in simulation).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from colo import subjects
from colo.bus import Bus
from colo.embedded import start_nats
from colo.messages import PodSpec

pytestmark = pytest.mark.integration


async def test_settle_waits_out_a_server_restart(tmp_path: Path) -> None:
    store_dir = str(tmp_path / "js")
    server = start_nats(store_dir=store_dir)
    port = int(server.url.rsplit(":", 1)[1])
    got: list[str] = []

    async def on_pod(m: PodSpec) -> None:
        got.append(m.uid)

    bus = await Bus.connect(server.url, "beta")
    try:
        await bus.ensure_streams()
        await bus.subscribe(subjects.POD_SUBMITTED, on_pod, durable="pods")
        await bus.settle(timeout_s=10)  # nothing published before the kill: no ack the kill could lose
        server.proc.kill()
        server.proc.wait(timeout=10)
        server.stop()
        settling = asyncio.create_task(bus.settle(timeout_s=30))
        await asyncio.sleep(6.0)  # longer than a JetStream API request's 5 s timeout
        assert not settling.done() or settling.exception() is None, settling.exception()
        server = start_nats(port=port, store_dir=store_dir)
        await asyncio.wait_for(settling, 25)
        await bus.publish(subjects.POD_SUBMITTED, PodSpec(uid="after", name="after"))
        await bus.settle(timeout_s=10)
        assert got == ["after"]
    finally:
        await bus.close()
        server.stop()
