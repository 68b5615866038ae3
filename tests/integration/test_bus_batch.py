"""Batch consumers (Bus.subscribe_batch) against a real nats-server: batching, order, acks,
dead letters and poison isolation."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from colo import subjects
from colo.bus import Bus, MessageInfo
from colo.messages import DeadLetter, PodSpec
from colo.testing.fixtures import BusFactory

pytestmark = pytest.mark.integration


def pod(uid: str) -> PodSpec:
    return PodSpec(uid=uid, name=f"pod-{uid}")


async def dead_letters(bus: Bus, service: str) -> list[DeadLetter]:
    got: list[DeadLetter] = []

    async def on_dead(msg: DeadLetter) -> None:
        got.append(msg)

    await bus.subscribe(subjects.DEAD_LETTER, on_dead, durable="dlq", keys={"service": service})
    return got


async def test_waiting_messages_arrive_in_batches_in_stream_order(bus_factory: BusFactory) -> None:
    publisher = await bus_factory("pub")
    await publisher.publish_many([(subjects.POD_SUBMITTED, pod(f"u{i}"), None, {}) for i in range(600)])
    bus = await bus_factory("alpha")
    batches: list[list[tuple[str, int]]] = []

    async def on_pods(items: list[tuple[PodSpec, MessageInfo]]) -> None:
        batches.append([(m.uid, info.stream_seq) for m, info in items])

    sub = await bus.subscribe_batch(subjects.POD_SUBMITTED, on_pods, durable="pods", max_batch=100)
    await bus.settle()
    flat = [uid for b in batches for uid, _ in b]
    assert flat == [f"u{i}" for i in range(600)]
    seqs = [seq for b in batches for _, seq in b]
    assert seqs == sorted(seqs)
    assert max(len(b) for b in batches) == 100  # 600 were waiting: full batches, never more
    assert len(batches) < 600  # not one call per message
    assert await sub.pending() == 0  # every message acked


async def test_undecodable_is_dead_lettered_and_the_rest_delivered(bus_factory: BusFactory) -> None:
    bus = await bus_factory("beta")
    watcher = await bus_factory("watcher")
    dead = await dead_letters(watcher, "beta")
    got: list[str] = []

    async def on_pods(items: list[tuple[PodSpec, MessageInfo]]) -> None:
        got.extend(m.uid for m, _ in items)

    await bus.publish(subjects.POD_SUBMITTED, pod("a"))
    await bus.js.publish(subjects.POD_SUBMITTED.format(), b"{garbage")
    await bus.publish(subjects.POD_SUBMITTED, pod("b"))
    sub = await bus.subscribe_batch(subjects.POD_SUBMITTED, on_pods, durable="pods")
    await bus.settle()
    await watcher.settle()
    assert got == ["a", "b"]
    assert len(dead) == 1 and dead[0].data == "{garbage"
    assert await sub.pending() == 0


async def test_a_poisonous_message_fails_alone(bus_factory: BusFactory) -> None:
    """The batch call raises because of one message: the others are handled again one by one and
    acked once; only the poisonous one is retried and finally dead-lettered."""
    bus = await bus_factory("gamma", retry_delay_s=0.005)
    watcher = await bus_factory("watcher")
    dead = await dead_letters(watcher, "gamma")
    done: list[str] = []
    calls: list[int] = []

    async def on_pods(items: list[tuple[PodSpec, MessageInfo]]) -> None:
        calls.append(len(items))
        if any(m.uid == "poison" for m, _ in items):
            raise RuntimeError("cannot handle poison")
        done.extend(m.uid for m, _ in items)

    await bus.publish_many([(subjects.POD_SUBMITTED, pod(u), None, {}) for u in ("a", "poison", "b", "c")])
    sub = await bus.subscribe_batch(subjects.POD_SUBMITTED, on_pods, durable="pods")
    await bus.settle(timeout_s=10)
    await watcher.settle()
    assert sorted(done) == ["a", "b", "c"]  # each exactly once
    assert len(dead) == 1 and "cannot handle poison" in dead[0].reason
    assert calls[0] == 4 and calls.count(1) >= 5  # the batch, then singles and the poison's retries
    assert await sub.pending() == 0


async def test_messages_published_while_handling_form_the_next_batch(bus_factory: BusFactory) -> None:
    bus = await bus_factory("delta")
    batches: list[list[str]] = []
    first = asyncio.Event()
    release = asyncio.Event()

    async def on_pods(items: list[tuple[PodSpec, MessageInfo]]) -> None:
        batches.append([m.uid for m, _ in items])
        first.set()
        await release.wait()

    await bus.subscribe_batch(subjects.POD_SUBMITTED, on_pods, durable="pods")
    await bus.publish(subjects.POD_SUBMITTED, pod("x0"))
    await asyncio.wait_for(first.wait(), 5)
    await bus.publish_many([(subjects.POD_SUBMITTED, pod(f"y{i}"), None, {}) for i in range(50)])
    await asyncio.sleep(0.2)  # let them arrive behind the running handler
    release.set()
    await bus.settle()
    assert batches[0] == ["x0"]
    assert batches[1] == [f"y{i}" for i in range(50)]


@pytest.mark.parametrize("bad", [0, -1])
async def test_max_batch_must_be_positive(bus_factory: BusFactory, bad: int) -> None:
    bus = await bus_factory("eps")

    async def on_pods(items: list[Any]) -> None:
        return None

    with pytest.raises(ValueError, match="max_batch"):
        bus.subscribe_batch(subjects.POD_SUBMITTED, on_pods, durable="pods", max_batch=bad)


@pytest.mark.parametrize("batched", [False, True], ids=["single", "batch"])
async def test_a_burst_of_busy_handlers_lets_other_tasks_run(bus_factory: BusFactory, batched: bool) -> None:
    """Handlers that never wait, on a backlog: the consumer still yields to the event loop every
    few milliseconds, so another task (a scheduling cycle) sees the burst in progress many times."""
    publisher = await bus_factory("pub")
    await publisher.publish_many([(subjects.POD_SUBMITTED, pod(f"u{i}"), None, {}) for i in range(200)])
    bus = await bus_factory("zeta")
    handled = [0]

    def spin(n: int) -> None:
        import time

        end = time.perf_counter() + 0.0005 * n
        while time.perf_counter() < end:
            pass
        handled[0] += n

    async def one(msg: PodSpec) -> None:
        spin(1)

    async def many(items: list[tuple[PodSpec, MessageInfo]]) -> None:
        spin(len(items))  # never waits

    seen: set[int] = set()

    async def other() -> None:
        while handled[0] < 200:
            seen.add(handled[0])
            await asyncio.sleep(0)

    watcher = asyncio.create_task(other())
    if batched:
        bus.subscribe_batch(subjects.POD_SUBMITTED, many, durable="pods", max_batch=10)
    else:
        bus.subscribe(subjects.POD_SUBMITTED, one, durable="pods")
    await asyncio.wait_for(watcher, 30)
    assert len([n for n in seen if 0 < n < 200]) >= 10, sorted(seen)
