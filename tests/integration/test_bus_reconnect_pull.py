"""nats-server killed (-9) and restarted on its JetStream store: consumers pull again at once, and the readiness
probe reports NATS down meanwhile.

Found broken (issue 15, observation 5): after the restart a consumer waited out the pull request the dead
server had forgotten (its expiry + 5 s), so admission stalled 5–6 s and binds 6–11 s after the server was
back. Here the pull expiry is 60 s: a message published after the restart must arrive long before it.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from colo import readiness, subjects, subscription
from colo.bus import Bus
from colo.embedded import start_nats
from colo.messages import PodSpec
from colo.store import Store

pytestmark = pytest.mark.integration


async def _until(pred: object, timeout_s: float, what: str) -> None:
    t0 = time.monotonic()
    while not pred():  # type: ignore[operator]
        assert time.monotonic() - t0 < timeout_s, f"timed out after {timeout_s} s waiting for {what}"
        await asyncio.sleep(0.02)


async def test_a_consumer_pulls_again_on_reconnect_instead_of_waiting_out_the_old_pull(
        tmp_path: Path, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(subscription, "PULL_EXPIRES_S", 60.0)
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
        sub = await consumer.subscribe(subjects.POD_SUBMITTED, on_pod, durable="pods")
        await producer.publish(subjects.POD_SUBMITTED, PodSpec(uid="before", name="before"))
        await _until(lambda: got == ["before"], 5, "the first message")
        pulls_before = sub.pulls
        server.proc.kill()
        server.proc.wait(timeout=10)
        server.stop()
        deps = await readiness.dependencies(consumer, store)
        assert deps["nats"]["state"] in ("reconnecting", "down") and deps["nats"]["error"], deps
        assert deps["redis"]["state"] == "up", deps
        server = start_nats(port=port, store_dir=store_dir)
        await _until(lambda: consumer.nc.stats["reconnects"] >= 1 and producer.nc.is_connected, 10, "reconnection")
        assert (await readiness.dependencies(consumer, store))["nats"]["state"] == "up"
        await _until(lambda: sub.pulls > pulls_before, 5, "a pull request issued on reconnect")
        await producer.publish(subjects.POD_SUBMITTED, PodSpec(uid="after", name="after"))
        # the forgotten pull would end only after 60 + 5 s: this wait is far shorter
        await _until(lambda: "after" in got, 10, "the message published after the restart")
        assert got == ["before", "after"]
    finally:
        await producer.close()
        await consumer.close()
        server.stop()
