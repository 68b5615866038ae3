"""The scheduler (the real runtime: HTTP, wall clock, prompt cycles) while its Redis is down for a few seconds.

Found broken (issue 15, observation 1): the ``pod.admitted`` handler failed 5 times in ~1.5 s with a redis
ConnectionError and dead-lettered the message, so every pod admitted early in a 5 s outage existed afterwards
only in the dead-letter stream; ``/readyz`` stayed 200 throughout. A dependency being unavailable is now a
transient failure: retried with a growing delay, never dead-lettered; ``/readyz`` names each dependency.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from sched_helpers import node, pod

from colo import store as store_mod
from colo import subjects
from colo.embedded import start_redis
from colo.messages import DeadLetter, PodAdmitted, PodBound
from colo.runtime import ServiceRunner
from colo.settings import RuntimeSettings
from colo.store import Store
from colo.testing.fixtures import BusFactory
from colo_scheduler.service import SchedulerService
from colo_scheduler.settings import SchedulerSettings

pytestmark = pytest.mark.integration

N_PODS = 6
OUTAGE_S = 4.0


async def _readyz(port: int) -> tuple[int, dict[str, Any]]:
    async with aiohttp.ClientSession() as http:
        async with http.get(f"http://127.0.0.1:{port}/readyz") as r:
            return r.status, await r.json()


async def _ready(port: int) -> dict[str, Any]:
    """The /readyz body once it is 200 (a probe may time out on a loaded machine), within 10 s."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    while True:
        status, body = await _readyz(port)
        if status == 200:
            return body
        assert loop.time() < deadline, f"/readyz stayed {status}: {body}"
        await asyncio.sleep(0.1)


async def _wait(pred: Any, timeout_s: float, what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not pred():
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


async def test_pods_admitted_while_redis_is_down_are_all_bound_after_it_returns(
        tmp_path: Path, nats_url: str, bus_factory: BusFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    # no resends by the Store: each handler call meets the outage at once, as in the issue (5 failures in ~1.5 s)
    monkeypatch.setattr(store_mod, "RECONNECT_RETRIES", 0)
    redis = start_redis(data_dir=str(tmp_path))
    seed = await Store.connect(redis.url, prefix="outage")
    await seed.put_node(node("n1", cpu=64_000))
    await seed.close()
    svc = SchedulerService(SchedulerSettings(seed=1, tick_interval_s=0.2, batch_window_s=0.01))
    runner = ServiceRunner(svc, RuntimeSettings(nats_url=nats_url, redis_url=redis.url, store_prefix="outage"))
    tester = await bus_factory("tester")
    bound: list[str] = []
    dead: list[DeadLetter] = []

    async def on_bound(m: PodBound) -> None:
        bound.append(m.spec.uid)

    async def on_dead(m: DeadLetter) -> None:
        dead.append(m)

    await tester.subscribe(subjects.POD_BOUND, on_bound, durable="bound")
    await tester.subscribe(subjects.DEAD_LETTER, on_dead, durable="dead", keys={"service": "scheduler"})
    await runner.start()
    try:
        body = await _ready(runner.http_port)
        assert body["ready"] is True, body
        assert body["dependencies"]["redis"]["state"] == "up" and body["dependencies"]["nats"]["state"] == "up"

        redis.proc.kill()
        redis.proc.wait(timeout=10)
        redis.stop()
        for k in range(N_PODS):
            await tester.publish(subjects.POD_ADMITTED, PodAdmitted(spec=pod(f"p{k}", cpu=500), at=1.0),
                                 msg_id=f"adm-p{k}")
        status, body = await _readyz(runner.http_port)
        assert status == 503, body
        assert body["ready"] is False
        assert body["dependencies"]["redis"]["state"] == "down", body
        assert body["dependencies"]["redis"]["error"], body
        assert body["dependencies"]["nats"]["state"] == "up", body
        await asyncio.sleep(OUTAGE_S)  # the old handler had dead-lettered every one of them by now
        assert dead == [], [d.reason for d in dead]

        redis = start_redis(redis.port, data_dir=str(tmp_path))
        await _wait(lambda: len(set(bound)) == N_PODS, 30, f"{N_PODS} pods bound (got {sorted(set(bound))})")
        body = await _ready(runner.http_port)
        assert body["dependencies"]["redis"]["state"] == "up", body
        check = await Store.connect(redis.url, prefix="outage")
        try:
            nodes = await check.bound_nodes([f"p{k}" for k in range(N_PODS)])
            assert {uid: n for uid, (n, _) in nodes.items()} == {f"p{k}": "n1" for k in range(N_PODS)}
            assert (await check.allocated("n1")).cpu == 500 * N_PODS  # each bound exactly once
        finally:
            await check.close()
        await tester.settle()
        assert dead == [], [d.reason for d in dead]
        assert sorted(bound) == sorted(set(bound))
    finally:
        await runner.stop()
        redis.stop()
