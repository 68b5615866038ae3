"""Redis killed (-9) and restarted on its data while a scheduling cycle binds (the real runtime, prompt cycles).

Found broken (issue 15, observation 2): the cycle whose bind call failed on the connection error left its pods
reserved in the scheduler's memory — never bound, never retried. Now they are released and retried, and a
bind that the store had applied before the answer was lost is found and announced: every pod ends bound
exactly once, with exactly one PodBound.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import redis.exceptions
from sched_helpers import node, pod

from colo import store as store_mod
from colo import subjects
from colo.embedded import ServerHandle, start_redis
from colo.messages import DeadLetter, PodAdmitted, PodBound
from colo.runtime import ServiceRunner
from colo.settings import RuntimeSettings
from colo.store import Store
from colo.testing.fixtures import BusFactory
from colo_scheduler.service import SchedulerService
from colo_scheduler.settings import SchedulerSettings

pytestmark = pytest.mark.integration

N_PODS = 8
DOWN_S = 1.0


class Restarter:
    """Kills the test's redis-server around the first ``bind_many`` call and starts it again after DOWN_S."""

    def __init__(self, server: ServerHandle, data_dir: str, applied: bool) -> None:
        self.server = server
        self.data_dir = data_dir
        self.applied = applied
        self.calls = 0
        self.restarted: asyncio.Task[None] | None = None

    def kill(self) -> None:
        self.server.proc.kill()
        self.server.proc.wait(timeout=10)
        self.server.stop()
        self.restarted = asyncio.ensure_future(self._restart())

    async def _restart(self) -> None:
        await asyncio.sleep(DOWN_S)
        self.server = start_redis(self.server.port, data_dir=self.data_dir)

    def wrap(self, store: Store) -> None:
        original = store.bind_many

        async def bind_many(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            if self.calls > 1:
                return await original(*args, **kwargs)
            if not self.applied:  # the server dies before the call: nothing bound
                self.kill()
                return await original(*args, **kwargs)
            await original(*args, **kwargs)  # applied; the server dies before its answer is read
            self.kill()
            raise redis.exceptions.ConnectionError("Connection closed by server.")

        store.bind_many = bind_many  # type: ignore[method-assign]


@pytest.mark.parametrize("applied", [False, True], ids=["killed-before-the-bind", "answer-lost-after-the-bind"])
async def test_a_cycle_whose_bind_meets_a_redis_restart_binds_every_pod_exactly_once(
        applied: bool, tmp_path: Path, nats_url: str, bus_factory: BusFactory,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_mod, "RECONNECT_RETRIES", 1)  # the bind call gives up while Redis is down
    redis_server = start_redis(data_dir=str(tmp_path))
    seed = await Store.connect(redis_server.url, prefix="rbind")
    for name in ("n1", "n2"):
        await seed.put_node(node(name, cpu=64_000))
    await seed.close()
    restarter = Restarter(redis_server, str(tmp_path), applied)
    svc = SchedulerService(SchedulerSettings(seed=1, tick_interval_s=0.2, batch_window_s=0.05,
                                             backoff_initial_s=0.2, backoff_max_s=0.5))
    runner = ServiceRunner(svc, RuntimeSettings(nats_url=nats_url, redis_url=redis_server.url, store_prefix="rbind"))
    tester = await bus_factory("tester")
    bound: list[PodBound] = []
    dead: list[DeadLetter] = []

    async def on_bound(m: PodBound) -> None:
        bound.append(m)

    async def on_dead(m: DeadLetter) -> None:
        dead.append(m)

    await tester.subscribe(subjects.POD_BOUND, on_bound, durable="bound")
    await tester.subscribe(subjects.DEAD_LETTER, on_dead, durable="dead", keys={"service": "scheduler"})
    await runner.start()
    try:
        assert runner.ctx is not None
        restarter.wrap(runner.ctx.store)
        await tester.publish_many([(subjects.POD_ADMITTED, PodAdmitted(spec=pod(f"p{k}", cpu=500), at=1.0),
                                    f"adm-p{k}", {}) for k in range(N_PODS)])
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        while len({b.spec.uid for b in bound}) < N_PODS:
            assert loop.time() < deadline, f"not every pod bound: {sorted(b.spec.uid for b in bound)}"
            await asyncio.sleep(0.05)
        assert restarter.calls >= 2 and restarter.restarted is not None
        await restarter.restarted
        await asyncio.sleep(0.5)  # a duplicate PodBound would arrive within a cycle or two
        await tester.settle()
        assert sorted(b.spec.uid for b in bound) == sorted(f"p{k}" for k in range(N_PODS))  # one PodBound each
        check = await Store.connect(restarter.server.url, prefix="rbind")
        try:
            stored = await check.bound_nodes([f"p{k}" for k in range(N_PODS)])
            assert {b.spec.uid: b.node for b in bound} == {uid: n for uid, (n, _) in stored.items()}
            total = sum(r.cpu for r in (await check.allocated_many({"n1", "n2"})).values())
            assert total == 500 * N_PODS  # each pod's request charged exactly once
        finally:
            await check.close()
        assert dead == []
        assert not svc.core.framework.placed.keys() - {f"p{k}" for k in range(N_PODS)}
    finally:
        await runner.stop()
        restarter.server.stop()
