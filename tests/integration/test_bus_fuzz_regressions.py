"""Payloads the fuzz run (tests/fuzz) found mishandled by the bus, each a regression test."""

from __future__ import annotations

import pytest

from colo import subjects
from colo.messages import DeadLetter, PodStatus
from colo.testing.fixtures import BusFactory

pytestmark = pytest.mark.integration


NESTED = b'{"uid":"x","node":"n1","phase":"Running","at":1.0,"unknown":' + b"[" * 1000 + b"1" + b"]" * 1000 + b"}"

PAYLOADS = [
    # msgspec raises UnicodeDecodeError (not a ValidationError) for invalid UTF-8 inside a string
    pytest.param(b'{"uid": "i\x96\x7f\xff\xfe"}', "UTF-8", id="invalid-utf8"),
    # ... and RecursionError for nesting deeper than its limit, even in an unknown field it would skip
    pytest.param(NESTED, "nested", id="deep-nesting"),
]


@pytest.mark.parametrize("batch", [False, True], ids=["subscribe", "subscribe_batch"])
@pytest.mark.parametrize(("payload", "reason"), PAYLOADS)
async def test_undecodable_payload_is_dead_lettered_not_left_unacked(
        bus_factory: BusFactory, batch: bool, payload: bytes, reason: str) -> None:
    """Found by the fuzz run: a decoder exception other than msgspec's own escaped ``codec.decode``; the
    consumer loop logged it and left the message unacked, redelivered every 30 s for good."""
    bus = await bus_factory("svc")
    watcher = await bus_factory("watcher")
    dead: list[DeadLetter] = []
    got: list[PodStatus] = []

    async def on_dead(m: DeadLetter) -> None:
        dead.append(m)

    async def on_status(m: PodStatus) -> None:
        got.append(m)

    async def on_batch(items: list[tuple[PodStatus, object]]) -> None:
        got.extend(m for m, _ in items)

    await watcher.subscribe(subjects.DEAD_LETTER, on_dead, durable="dlq")
    if batch:
        await bus.subscribe_batch(subjects.POD_STATUS, on_batch, durable="status")
    else:
        await bus.subscribe(subjects.POD_STATUS, on_status, durable="status")
    subject = subjects.POD_STATUS.format(node="n1")
    await watcher.js.publish(subject, payload)
    await watcher.js.publish(subject, b'{"uid":"ok","node":"n1","phase":"Running","at":1.0}')
    await bus.settle(timeout_s=10)
    await watcher.settle()
    assert [m.uid for m in got] == ["ok"]
    assert [d.subject for d in dead] == [subject]
    assert reason in dead[0].reason
