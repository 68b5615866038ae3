"""Issue 15, attacked: Redis refusing writes because of its own state, not the message's, must not
dead-letter valid work (deliver item 0).

A real redis-server (its own, so its configuration can be changed) refuses every write: ``NOREPLICAS`` with
``min-replicas-to-write 1`` and no replica (the refusal docs/operations.md recommends to operators who prefer
it to an unreplicated bind, colo.store_wait), ``OOM`` with ``maxmemory`` reached. A consumer whose handler
writes to it must retry past the dead-letter limit and succeed once Redis accepts writes again; a
message that fails for its own reason is still dead-lettered meanwhile.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio
import redis.asyncio as aioredis

from colo import subjects, subscription
from colo.embedded import ServerHandle, start_redis
from colo.messages import DeadLetter, PodSpec
from colo.testing.fixtures import BusFactory

pytestmark = pytest.mark.integration


@pytest.fixture
def own_redis() -> Iterator[ServerHandle]:
    handle = start_redis()
    try:
        yield handle
    finally:
        handle.stop()


@pytest_asyncio.fixture
async def client(own_redis: ServerHandle) -> AsyncIterator[aioredis.Redis]:
    r = aioredis.from_url(own_redis.url)
    try:
        yield r
    finally:
        await r.aclose()


@pytest.mark.parametrize(("refuse", "accept"), [
    ({"min-replicas-to-write": "1"}, {"min-replicas-to-write": "0"}),
    ({"maxmemory": "1", "maxmemory-policy": "noeviction"}, {"maxmemory": "0"}),
], ids=["noreplicas", "oom"])
async def test_redis_refusing_writes_dead_letters_nothing(bus_factory: BusFactory, client: aioredis.Redis,
                                                         refuse: dict[str, str], accept: dict[str, str]) -> None:
    bus = await bus_factory("refused", retry_delay_s=0.005)
    watcher = await bus_factory("watcher")
    dead: list[DeadLetter] = []

    async def on_dead(m: DeadLetter) -> None:
        dead.append(m)

    await watcher.subscribe(subjects.DEAD_LETTER, on_dead, durable="dead-refused", keys={"service": "refused"})
    attempts: dict[str, int] = {}
    errors: list[str] = []

    async def on_pod(msg: PodSpec) -> None:
        attempts[msg.uid] = attempts.get(msg.uid, 0) + 1
        if msg.uid == "bad":
            raise ValueError("bad pod")
        try:
            await client.set(f"pod:{msg.uid}", msg.name)
        except Exception as exc:
            errors.append(repr(exc))
            raise

    for k, v in refuse.items():
        await client.config_set(k, v)
    await bus.subscribe(subjects.POD_SUBMITTED, on_pod, durable="pods")
    await bus.publish(subjects.POD_SUBMITTED, PodSpec(uid="good", name="good"))
    await bus.publish(subjects.POD_SUBMITTED, PodSpec(uid="bad", name="bad"))
    for _ in range(200):  # until the good one failed past the dead-letter limit
        if attempts.get("good", 0) > subscription.MAX_DELIVER + 2:
            break
        await asyncio.sleep(0.02)
    print("refusals:", *sorted(set(errors)), sep="\n  ")
    for k, v in accept.items():
        await client.config_set(k, v)
    await bus.settle(timeout_s=15)
    await watcher.settle()
    assert errors, "Redis never refused the write"
    assert await client.get("pod:good") == b"good", "the valid message was not handled once Redis accepted writes"
    assert [d.reason for d in dead] == [f"handler failed {subscription.MAX_DELIVER} times: ValueError: bad pod"]
