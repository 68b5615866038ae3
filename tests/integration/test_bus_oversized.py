"""Dead letters for payloads near the server's size limit still reach the dead-letter subject."""

from __future__ import annotations

import pytest

from colo import codec, subjects
from colo.messages import DeadLetter, PodSpec
from colo.testing.fixtures import BusFactory

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("payload", [
    pytest.param(b"{" + b"x" * 1_040_000, id="ascii-near-max-payload"),
    pytest.param(b"\xff" * 600_000, id="invalid-utf8-inflates-on-replace"),
])
async def test_oversized_garbage_is_dead_lettered_with_reason(bus_factory: BusFactory, payload: bytes) -> None:
    consumer = await bus_factory("beta")
    watcher = await bus_factory("watcher")
    dead: list[DeadLetter] = []
    good: list[str] = []

    async def on_dead(m: DeadLetter) -> None:
        dead.append(m)

    async def on_pod(m: PodSpec) -> None:
        good.append(m.uid)

    await watcher.subscribe(subjects.DEAD_LETTER, on_dead, durable="dlq", keys={"service": "beta"})
    await consumer.subscribe(subjects.POD_SUBMITTED, on_pod, durable="pods")
    await watcher.js.publish(subjects.POD_SUBMITTED.format(), payload)
    await watcher.publish(subjects.POD_SUBMITTED, PodSpec(uid="after", name="after"))
    await consumer.settle(timeout_s=10)
    await watcher.settle(timeout_s=10)
    assert good == ["after"]
    assert len(dead) == 1
    assert "PodSpec" in dead[0].reason and "truncated" in dead[0].reason
    assert len(codec.encode(dead[0])) < 256 * 1024  # ≤ 3 bytes per kept byte: far below 1 MiB
