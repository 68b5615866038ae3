"""Transient handler failures (a dependency unavailable) against a real nats-server: retried past the
dead-letter limit, never dead-lettered; permanent ones still dead-lettered after MAX_DELIVER failures."""

from __future__ import annotations

import asyncio

import pytest
import redis.exceptions

from colo import subjects, subscription
from colo.bus import Bus
from colo.messages import DeadLetter, PodSpec
from colo.testing.fixtures import BusFactory

pytestmark = pytest.mark.integration

OUTAGE_DELIVERIES = subscription.MAX_DELIVER + 3


async def _dead_letters(bus: Bus, service: str) -> list[DeadLetter]:
    dead: list[DeadLetter] = []

    async def on_dead(m: DeadLetter) -> None:
        dead.append(m)

    await bus.subscribe(subjects.DEAD_LETTER, on_dead, durable=f"dead-{service}", keys={"service": service})
    return dead


async def test_transient_failures_never_count_toward_the_dead_letter_limit(bus_factory: BusFactory) -> None:
    bus = await bus_factory("transient", retry_delay_s=0.005)
    watcher = await bus_factory("watcher")
    dead = await _dead_letters(watcher, "transient")
    attempts: dict[str, int] = {}
    handled: list[str] = []

    async def on_pod(msg: PodSpec) -> None:
        n = attempts[msg.uid] = attempts.get(msg.uid, 0) + 1
        if n <= OUTAGE_DELIVERIES:  # Redis down for the first deliveries of every message
            raise redis.exceptions.ConnectionError("Error 111 connecting to 127.0.0.1:6379")
        if msg.uid == "bad":
            raise ValueError("bad pod")
        handled.append(msg.uid)

    await bus.subscribe(subjects.POD_SUBMITTED, on_pod, durable="pods")
    await bus.publish(subjects.POD_SUBMITTED, PodSpec(uid="good", name="good"))
    await bus.publish(subjects.POD_SUBMITTED, PodSpec(uid="bad", name="bad"))
    await bus.settle(timeout_s=15)
    await watcher.settle()
    assert handled == ["good"]
    assert attempts == {"good": OUTAGE_DELIVERIES + 1, "bad": OUTAGE_DELIVERIES + subscription.MAX_DELIVER}
    assert [(d.subject, d.reason) for d in dead] == [
        ("colo.v1.pod.submitted", f"handler failed {subscription.MAX_DELIVER} times: ValueError: bad pod")]


async def test_a_batch_failing_on_an_outage_is_retried_whole(bus_factory: BusFactory) -> None:
    bus = await bus_factory("transientb", retry_delay_s=0.005)
    calls: list[int] = []
    done: set[str] = set()

    async def on_pods(items: list[tuple[PodSpec, object]]) -> None:
        calls.append(len(items))
        if len(calls) <= 3:
            raise redis.exceptions.ConnectionError("Connection closed by server.")
        done.update(m.uid for m, _ in items)

    await bus.publish_many([(subjects.POD_SUBMITTED, PodSpec(uid=f"p{k}", name=f"p{k}"), None, {})
                            for k in range(20)])
    await bus.subscribe_batch(subjects.POD_SUBMITTED, on_pods, durable="pods")
    await bus.settle(timeout_s=15)
    assert done == {f"p{k}" for k in range(20)}
    assert calls[0] > 1  # a batch (a loaded server may hand out fewer than all 20 in the first fetch)
    assert len(calls) < 20  # a failure is not followed by 20 calls of one message each


async def test_one_message_failing_transiently_forever_does_not_hold_its_batch(bus_factory: BusFactory) -> None:
    """Issue 15, attacked: one message whose handling always fails with a transient error (its key's Redis
    slot unavailable, say) must not keep the others of its batch from being handled; it stays visible
    (``colo_bus_handler_errors_total``) and retried, never dead-lettered."""
    bus = await bus_factory("stuckb", retry_delay_s=0.005)
    done: set[str] = set()
    calls: list[int] = []

    async def on_pods(items: list[tuple[PodSpec, object]]) -> None:
        calls.append(len(items))
        if any(m.uid == "stuck" for m, _ in items):
            raise redis.exceptions.TryAgainError("TRYAGAIN multiple keys request during rehashing of slot")
        done.update(m.uid for m, _ in items)

    await bus.publish_many([(subjects.POD_SUBMITTED, PodSpec(uid=u, name=u), None, {})
                            for u in ["stuck", *(f"p{k}" for k in range(5))]])
    await bus.subscribe_batch(subjects.POD_SUBMITTED, on_pods, durable="pods")
    for _ in range(300):
        if len(done) == 5:
            break
        await asyncio.sleep(0.02)
    assert done == {f"p{k}" for k in range(5)}, f"held by the stuck message; calls: {calls[:20]}"
    before = len(calls)
    await asyncio.sleep(0.3)
    assert len(calls) > before, "the stuck message is no longer retried"


async def test_a_dead_letter_that_cannot_be_published_keeps_its_message(bus_factory: BusFactory) -> None:
    """Issue 15, attacked: while the dead-letter stream cannot take a message (its leader being elected, here
    gone), a poisonous message was terminated all the same: lost, in no stream. It is now kept (nak'ed) until
    its dead letter is published."""
    bus = await bus_factory("dlqdown", retry_delay_s=0.005)
    watcher = await bus_factory("watcher")
    attempts: list[int] = []

    async def on_pod(msg: PodSpec) -> None:
        attempts.append(1)
        raise ValueError("bad pod")

    await bus.js.delete_stream(subjects.DLQ)
    await bus.subscribe(subjects.POD_SUBMITTED, on_pod, durable="pods")
    await bus.publish(subjects.POD_SUBMITTED, PodSpec(uid="bad", name="bad"))
    for _ in range(300):
        if len(attempts) >= subscription.MAX_DELIVER + 1:
            break
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.3)
    await watcher.ensure_streams()  # the dead-letter stream is back
    dead = await _dead_letters(watcher, "dlqdown")
    await bus.settle(timeout_s=15)
    await watcher.settle()
    assert len(dead) == 1 and dead[0].reason.endswith("times: ValueError: bad pod"), [d.reason for d in dead]
