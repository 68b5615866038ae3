"""Prompt cycles and batched intake of the scheduler service, against real nats-server and redis-server.

Under the wall clock a cycle runs as soon as pods are admitted (coalesced over ``batch_window_s``),
never two at once; under the virtual clock only ticks schedule. A replayed admission (crash between
persisting and acking, or a consumer replaying the stream) is scheduled exactly once.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sched_helpers import GI, MI, node, pod

from colo import subjects
from colo.clock import VirtualClock
from colo.messages import PodAdmitted, PodBound
from colo.runtime import ServiceRunner
from colo.settings import RuntimeSettings
from colo.store import Store
from colo.testing.fixtures import BusFactory, service_context
from colo_scheduler.service import SchedulerService
from colo_scheduler.settings import SchedulerSettings

pytestmark = pytest.mark.integration


async def _runner(nats_url: str, redis_url: str, store: Store, **overrides: Any) -> ServiceRunner:
    """A scheduler run by the runtime on the wall clock; its timed tick is an hour apart, so only
    the first tick (at start) and prompt cycles can schedule during a test."""
    svc = SchedulerService(SchedulerSettings(tick_interval_s=3600.0, **overrides))
    runner = ServiceRunner(svc, RuntimeSettings(nats_url=nats_url, redis_url=redis_url,
                                                store_prefix=store.keys.prefix))
    await runner.start()
    return runner


async def _collect_bound(bus: Any) -> list[PodBound]:
    got: list[PodBound] = []

    async def on_bound(m: PodBound) -> None:
        got.append(m)

    await bus.subscribe(subjects.POD_BOUND, on_bound, durable="bound")
    return got


async def _wait_for(cond: Any, timeout_s: float = 20.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not cond():
        assert loop.time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)


async def _register(tester: Any, store: Store, n: int, cpu: int = 8000) -> None:
    for i in range(n):
        spec = node(f"n{i}", cpu=cpu, memory=32 * GI)
        await store.put_node(spec)
        await tester.publish(subjects.NODE_REGISTERED, spec, node=spec.name)


async def test_pods_are_bound_without_waiting_for_a_tick(nats_url: str, redis_url: str, store: Store,
                                                        bus_factory: BusFactory) -> None:
    tester = await bus_factory("tester")
    bound = await _collect_bound(tester)
    await _register(tester, store, 3)
    runner = await _runner(nats_url, redis_url, store)
    try:
        svc = runner.service
        assert isinstance(svc, SchedulerService)
        await _wait_for(lambda: svc.core.table.n == 3)
        await tester.publish_many([(subjects.POD_ADMITTED, PodAdmitted(spec=pod(f"p{j}", 100, 64 * MI), at=0.0),
                                    f"p{j}", {}) for j in range(200)])
        await _wait_for(lambda: len(bound) == 200)
        assert runner.ticks <= 1  # only the tick at start: prompt cycles bound them
        assert 1 <= svc.totals["prompt_cycles"] < 50  # 200 arrivals coalesced into a few cycles
        assert sorted(m.spec.uid for m in bound) == sorted(f"p{j}" for j in range(200))
        alloc = await store.all_allocated()
        assert sum(r.pods for r in alloc.values()) == 200
        assert all(r.cpu <= 8000 for r in alloc.values())
    finally:
        await runner.stop()


async def test_prompt_cycles_can_be_turned_off(nats_url: str, redis_url: str, store: Store,
                                               bus_factory: BusFactory) -> None:
    tester = await bus_factory("tester")
    await _register(tester, store, 1)
    runner = await _runner(nats_url, redis_url, store, prompt_cycles=False)
    try:
        svc = runner.service
        assert isinstance(svc, SchedulerService)
        await _wait_for(lambda: svc.core.table.n == 1)
        await tester.publish(subjects.POD_ADMITTED, PodAdmitted(spec=pod("p", 500, MI), at=0.0))
        await _wait_for(lambda: "p" in svc.core.queue)
        await asyncio.sleep(0.2)
        assert await store.bound_node("p") is None and svc.totals["prompt_cycles"] == 0
        await svc.tick(svc._now())
        assert await store.bound_node("p") == "n0"
    finally:
        await runner.stop()


async def test_cycles_never_overlap(nats_url: str, redis_url: str, store: Store, bus_factory: BusFactory) -> None:
    """Timed ticks called back to back while admissions keep waking prompt cycles: the bind of
    one cycle (an await) never interleaves with another cycle."""
    tester = await bus_factory("tester")
    await _register(tester, store, 4, cpu=64_000)
    runner = await _runner(nats_url, redis_url, store)
    svc = runner.service
    assert isinstance(svc, SchedulerService)
    inside = {"now": 0, "max": 0, "calls": 0}
    real_bind_many = svc._store().bind_many

    async def watched_bind_many(*args: Any, **kwargs: Any) -> Any:
        inside["now"] += 1
        inside["calls"] += 1
        inside["max"] = max(inside["max"], inside["now"])
        try:
            await asyncio.sleep(0.005)  # widen the window another cycle would need to overlap
            return await real_bind_many(*args, **kwargs)
        finally:
            inside["now"] -= 1

    svc._store().bind_many = watched_bind_many
    try:
        await _wait_for(lambda: svc.core.table.n == 4)

        async def ticker() -> None:
            for _ in range(40):
                await svc.tick(svc._now())

        async def submitter() -> None:
            for j in range(40):
                await tester.publish(subjects.POD_ADMITTED, PodAdmitted(spec=pod(f"p{j}", 100, MI), at=0.0))
                await asyncio.sleep(0.003)

        await asyncio.gather(ticker(), submitter())
        await _wait_for(lambda: svc.totals["pods_bound"] == 40)
        assert inside["calls"] >= 2 and inside["max"] == 1
        assert svc.totals["prompt_cycles"] >= 1
    finally:
        await runner.stop()


async def test_virtual_clock_schedules_only_on_ticks(bus_factory: BusFactory, store: Store) -> None:
    clock = VirtualClock(100.0)
    bus = await bus_factory("scheduler", clock, autostart=False)
    svc = SchedulerService(SchedulerSettings())
    await svc.start(service_context(bus, store, clock))
    await bus.start_consumers()
    tester = await bus_factory("tester")
    try:
        await _register(tester, store, 1)
        await tester.publish(subjects.POD_ADMITTED, PodAdmitted(spec=pod("p", 500, MI), at=100.0))
        await bus.settle()
        await asyncio.sleep(0.1)
        assert "p" in svc.core.queue and await store.bound_node("p") is None
        assert (await svc.tick(100.0))["pods_bound"] == 1
        assert svc.totals["prompt_cycles"] == 0
    finally:
        await svc.stop()


async def test_replayed_admissions_are_scheduled_once(bus_factory: BusFactory, store: Store) -> None:
    """The pods are persisted, then the process dies before acking: the restarted scheduler
    reloads them from the store and gets every admission again; each pod is bound exactly once
    and each PodBound published once."""
    clock = VirtualClock(10.0)
    tester = await bus_factory("tester")
    bound = await _collect_bound(tester)
    await _register(tester, store, 2, cpu=4000)
    specs = [pod(f"p{j}", 1000, MI) for j in range(12)]  # 8 fit, 4 stay unschedulable
    for spec in specs:
        await tester.publish(subjects.POD_ADMITTED, PodAdmitted(spec=spec, at=10.0))

    first_bus = await bus_factory("scheduler", clock, autostart=False)
    first = SchedulerService(SchedulerSettings(seed=3))
    await first.start(service_context(first_bus, store, clock))
    await first_bus.start_consumers()
    await first_bus.settle()
    assert len(await store.list_pods()) == 12
    await first_bus.close()  # "crash": nothing scheduled yet
    # The restarted scheduler uses a fresh consumer, so every admission is delivered again; then
    # all of them twice more, as one batch and one at a time (how the bus redelivers a failed batch).
    second_bus = await bus_factory("scheduler-b", clock, autostart=False)
    second = SchedulerService(SchedulerSettings(seed=3))
    await second.start(service_context(second_bus, store, clock))
    assert len(second.core.queue) == 12  # reloaded from the store
    await second_bus.start_consumers()
    await second_bus.settle()
    assert (await second.tick(11.0))["pods_bound"] == 8
    replay = [(PodAdmitted(spec=s, at=10.0), None) for s in specs]
    await second._on_admitted(replay)  # type: ignore[arg-type]
    for item in replay:
        await second._on_admitted([item])  # type: ignore[list-item]
    assert (await second.tick(12.0))["pods_bound"] == 0
    await tester.settle()
    assert len(bound) == 8 and len({m.spec.uid for m in bound}) == 8
    bindings = await store.bound_nodes([s.uid for s in specs])
    assert len(bindings) == 8
    alloc = await store.all_allocated()
    assert sum(r.pods for r in alloc.values()) == 8 and all(r.cpu <= 4000 for r in alloc.values())
    assert sum([len(await store.bound_uids(n)) for n in alloc]) == 8
    await second.stop()
