"""Bus against a real nats-server: delivery, dedup, dead letters, retries, settle, resume, ticks."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from colo import codec, subjects
from colo.bus import Bus, BusError, MessageInfo
from colo.messages import DeadLetter, NodeResource, PodSpec, Tick, TickAck
from colo.testing.fixtures import BusFactory

pytestmark = pytest.mark.integration


def pod(uid: str) -> PodSpec:
    return PodSpec(uid=uid, name=f"pod-{uid}")


async def collect_dead_letters(bus: Bus, service: str) -> list[DeadLetter]:
    got: list[DeadLetter] = []

    async def on_dead(msg: DeadLetter) -> None:
        got.append(msg)

    await bus.subscribe(subjects.DEAD_LETTER, on_dead, durable="dlq", keys={"service": service})
    return got


async def test_publish_subscribe_roundtrip_in_order_with_subject(bus_factory: BusFactory) -> None:
    bus = await bus_factory("alpha")
    got: list[tuple[str, str]] = []

    async def on_pod(msg: PodSpec, info: MessageInfo) -> None:
        got.append((msg.uid, info.subject))

    await bus.subscribe(subjects.POD_SUBMITTED, on_pod, durable="pods")
    for i in range(20):
        await bus.publish(subjects.POD_SUBMITTED, pod(f"u{i}"))
    await bus.settle()
    assert got == [(f"u{i}", "colo.v1.pod.submitted") for i in range(20)]


async def test_duplicate_msg_id_is_delivered_once(bus_factory: BusFactory) -> None:
    bus = await bus_factory("alpha")
    got: list[str] = []

    async def on_pod(msg: PodSpec) -> None:
        got.append(msg.uid)

    await bus.subscribe(subjects.POD_SUBMITTED, on_pod, durable="pods")
    await bus.publish(subjects.POD_SUBMITTED, pod("a"), msg_id="a")
    await bus.publish(subjects.POD_SUBMITTED, pod("a"), msg_id="a")
    await bus.publish_many([(subjects.POD_SUBMITTED, pod("a"), "a", {}),
                            (subjects.POD_SUBMITTED, pod("b"), "b", {}),
                            (subjects.POD_SUBMITTED, pod("b"), "b", {})])
    await bus.settle()
    assert got == ["a", "b"]


@pytest.mark.parametrize(
    ("payload", "reason_part"),
    [
        pytest.param(b"not json", "malformed JSON", id="not-json"),
        pytest.param(b'{"uid": 5, "name": "x"}', "$.uid", id="wrong-type-names-field"),
        pytest.param(b'{"name": "x"}', "uid", id="missing-field"),
    ],
)
async def test_garbage_is_dead_lettered_and_consumer_keeps_going(
        bus_factory: BusFactory, payload: bytes, reason_part: str) -> None:
    bus = await bus_factory("beta")
    watcher = await bus_factory("watcher")
    dead = await collect_dead_letters(watcher, "beta")
    got: list[str] = []

    async def on_pod(msg: PodSpec) -> None:
        got.append(msg.uid)

    await bus.subscribe(subjects.POD_SUBMITTED, on_pod, durable="pods")
    await bus.js.publish(subjects.POD_SUBMITTED.format(), payload)
    await bus.publish(subjects.POD_SUBMITTED, pod("after"))
    await bus.settle()
    await watcher.settle()
    assert got == ["after"]
    assert len(dead) == 1
    assert dead[0].service == "beta"
    assert dead[0].subject == "colo.v1.pod.submitted"
    assert reason_part in dead[0].reason
    assert dead[0].data == payload.decode()


async def test_handler_exception_retried_then_dead_lettered(bus_factory: BusFactory) -> None:
    bus = await bus_factory("gamma", retry_delay_s=0.005)
    watcher = await bus_factory("watcher")
    dead = await collect_dead_letters(watcher, "gamma")
    attempts: dict[str, int] = {}

    async def on_pod(msg: PodSpec) -> None:
        attempts[msg.uid] = attempts.get(msg.uid, 0) + 1
        if msg.uid == "always" or (msg.uid == "once" and attempts[msg.uid] == 1):
            raise RuntimeError(f"boom {msg.uid}")

    await bus.subscribe(subjects.POD_SUBMITTED, on_pod, durable="pods")
    await bus.publish(subjects.POD_SUBMITTED, pod("always"))
    await bus.publish(subjects.POD_SUBMITTED, pod("once"))
    await bus.settle(timeout_s=10)
    await watcher.settle()
    assert attempts == {"always": 5, "once": 2}
    assert [d.reason for d in dead] == ["handler failed 5 times: RuntimeError: boom always"]


async def test_settle_waits_for_slow_handlers_and_is_fast_when_idle(bus_factory: BusFactory) -> None:
    bus = await bus_factory("delta")
    done: list[str] = []

    async def slow(msg: PodSpec) -> None:
        await asyncio.sleep(0.02)
        done.append(msg.uid)

    await bus.subscribe(subjects.POD_SUBMITTED, slow, durable="pods")
    await bus.publish_many([(subjects.POD_SUBMITTED, pod(f"s{i}"), None, {}) for i in range(5)])
    await bus.settle()
    assert len(done) == 5
    start = time.perf_counter()
    for _ in range(20):
        await bus.settle()
    assert (time.perf_counter() - start) / 20 < 0.025


async def test_durable_consumer_resumes_after_reconnect(bus_factory: BusFactory) -> None:
    first = await bus_factory("epsilon")
    seen: list[str] = []

    async def on_pod(msg: PodSpec) -> None:
        seen.append(msg.uid)

    await first.subscribe(subjects.POD_SUBMITTED, on_pod, durable="pods")
    await first.publish(subjects.POD_SUBMITTED, pod("1"))
    await first.settle()
    await first.close()

    publisher = await bus_factory("publisher")
    await publisher.publish(subjects.POD_SUBMITTED, pod("2"))
    await publisher.publish(subjects.POD_SUBMITTED, pod("3"))

    second = await bus_factory("epsilon")
    start = time.perf_counter()
    await second.subscribe(subjects.POD_SUBMITTED, on_pod, durable="pods")
    await second.settle(timeout_s=5)
    assert seen == ["1", "2", "3"]
    assert time.perf_counter() - start < 2.0


async def test_keys_filter_to_own_nodes(bus_factory: BusFactory) -> None:
    bus = await bus_factory("agent")
    got: list[str] = []

    async def on_res(msg: NodeResource) -> None:
        got.append(msg.node)

    await bus.subscribe(subjects.NODE_RESOURCE, on_res, durable="res", keys={"node": ["n1", "n3"]})
    for n in ("n1", "n2", "n3", "n4"):
        await bus.publish(subjects.NODE_RESOURCE, NodeResource(node=n), node=n)
    await bus.settle()
    assert got == ["n1", "n3"]


@pytest.mark.parametrize(
    ("subject", "msg", "keys", "error"),
    [
        pytest.param(subjects.POD_SUBMITTED, NodeResource(node="n"), {}, TypeError, id="wrong-type"),
        pytest.param(subjects.NODE_RESOURCE, NodeResource(node="n"), {}, ValueError, id="missing-key"),
        pytest.param(subjects.NODE_RESOURCE, NodeResource(node="n"), {"node": "a.b"}, ValueError,
                     id="bad-token"),
    ],
)
async def test_publish_rejects_bad_input(bus_factory: BusFactory, subject: Any, msg: Any,
                                         keys: dict[str, str], error: type[Exception]) -> None:
    bus = await bus_factory("zeta")
    with pytest.raises(error):
        await bus.publish(subject, msg, **keys)


async def test_tick_request_reply(bus_factory: BusFactory) -> None:
    server = await bus_factory("ticker")
    client = await bus_factory("coordinator")

    async def on_tick(tick: Tick) -> TickAck:
        if tick.seq == 2:
            raise ValueError("bad tick")
        return TickAck(service="ticker", seq=tick.seq, stats={"now": tick.now})

    await server.serve_ticks(on_tick)
    ack = await client.request_tick("ticker", Tick(seq=1, now=60.0, step_s=60.0))
    assert ack == TickAck(service="ticker", seq=1, stats={"now": 60.0})
    failed = await client.request_tick("ticker", Tick(seq=2, now=120.0, step_s=60.0))
    assert failed.seq == 2 and "bad tick" in failed.error
    raw = await client.nc.request(subjects.SIM_TICK.format(service="ticker"), b"{}", timeout=5)
    assert codec.decode(raw.data, TickAck).seq == -1
    with pytest.raises(BusError, match="no nobody"):
        await client.request_tick("nobody", Tick(seq=1, now=1.0, step_s=1.0), timeout_s=1.0)


async def test_purge_streams_empties_streams(bus_factory: BusFactory) -> None:
    bus = await bus_factory("eta")
    await bus.publish(subjects.POD_SUBMITTED, pod("x"))
    await bus.purge_streams()
    got: list[str] = []

    async def on_pod(msg: PodSpec) -> None:
        got.append(msg.uid)

    await bus.subscribe(subjects.POD_SUBMITTED, on_pod, durable="pods")
    await bus.settle()
    assert got == []


async def test_restart_with_other_keys_updates_the_filter(bus_factory: BusFactory) -> None:
    first = await bus_factory("agent")
    got: list[str] = []

    async def on_res(msg: NodeResource) -> None:
        got.append(msg.node)

    await first.subscribe(subjects.NODE_RESOURCE, on_res, durable="res", keys={"node": "n1"})
    await first.settle()
    await first.close()
    second = await bus_factory("agent")
    await second.subscribe(subjects.NODE_RESOURCE, on_res, durable="res", keys={"node": ["n2", "n3"]})
    for n in ("n1", "n2", "n3"):
        await second.publish(subjects.NODE_RESOURCE, NodeResource(node=n), node=n)
    await second.settle()
    assert got == ["n2", "n3"]


async def test_deferred_consumers_start_on_demand(bus_factory: BusFactory) -> None:
    bus = await bus_factory("theta", autostart=False)
    got: list[str] = []

    async def on_pod(msg: PodSpec) -> None:
        got.append(msg.uid)

    bus.subscribe(subjects.POD_SUBMITTED, on_pod, durable="pods")
    await bus.publish(subjects.POD_SUBMITTED, pod("early"))
    await asyncio.sleep(0.05)
    assert got == []
    await bus.start_consumers()
    await bus.settle()
    assert got == ["early"]
    with pytest.raises(ValueError, match="already subscribed"):
        bus.subscribe(subjects.POD_SUBMITTED, on_pod, durable="pods")


async def test_publish_many_reports_refusals(bus_factory: BusFactory) -> None:
    bus = await bus_factory("iota")
    await bus.publish_many([])
    await bus.delete_streams()
    with pytest.raises(BusError, match="publish refused"):
        await bus.publish_many([(subjects.POD_SUBMITTED, pod("x"), None, {})])
