"""Bus.reject: a decoded but invalid message goes to the dead-letter subject once, with its reason."""

from __future__ import annotations

import pytest

from colo import subjects
from colo.bus import MessageInfo
from colo.messages import DeadLetter, PodSpec
from colo.testing.fixtures import BusFactory

pytestmark = pytest.mark.integration


async def test_reject_dead_letters_once_per_delivery(bus_factory: BusFactory) -> None:
    bus = await bus_factory("svc")
    watcher = await bus_factory("watcher")
    dead: list[DeadLetter] = []

    async def on_dead(m: DeadLetter) -> None:
        dead.append(m)

    await watcher.subscribe(subjects.DEAD_LETTER, on_dead, durable="dlq")
    info = MessageInfo(subject="colo.v1.pod.submitted", headers={}, stream_seq=7, num_delivered=1)
    pod = PodSpec(uid="", name="x")
    await bus.reject(info, pod, "empty uid")
    await bus.reject(info, pod, "empty uid")  # the same delivery again: de-duplicated
    await bus.reject(MessageInfo(subject=info.subject, headers={}, stream_seq=8, num_delivered=1), pod, "empty uid")
    await watcher.settle()
    assert [(d.service, d.subject, d.reason) for d in dead] == [("svc", "colo.v1.pod.submitted", "empty uid")] * 2
    assert '"name":"x"' in dead[0].data
