"""The five bus-consuming services in one event loop on the real nats-server and redis-server, as the
service integration tests drive them: each on its own :class:`colo.bus.Bus` and its own Redis connection
(one store prefix, as in a deployment), plus a client bus that publishes and collects dead letters.

:meth:`Cluster.snapshot` is the state the fuzz run compares before and after garbage: every store key under
the prefix (its type and content) and every service's ``/debug/state`` document.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from dataclasses import dataclass, field
from typing import Any

from seeds import CAP, NODES

from colo import messages as m
from colo import subjects
from colo.bus import Bus, MessageInfo, Subscription
from colo.clock import VirtualClock
from colo.messages import DeadLetter
from colo.store import Store
from colo.subjects import Subject
from colo.subscription import _errors as handler_errors
from colo.testing.fixtures import service_context
from colo_descheduler.service import DeschedulerService
from colo_descheduler.settings import DeschedulerSettings
from colo_node_agent.service import NodeAgentService
from colo_node_agent.settings import NodeAgentSettings
from colo_profiler.service import ProfilerService
from colo_profiler.settings import ProfilerSettings
from colo_scheduler.service import SchedulerService
from colo_scheduler.settings import SchedulerSettings
from colo_slo_manager.service import SloManagerService
from colo_slo_manager.settings import SloManagerSettings

T0 = 1000.0
VOLATILE_DEBUG = {"scheduler": ("heap",)}
"""``/debug/state`` parts that are process statistics, not state (the scheduler's GC heap freezer counts)."""


class ExceptionLog(logging.Handler):
    """Counts ERROR records that carry an exception (a handler or loop crash logged by the bus or a service)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info:
            self.records.append(record)


@dataclass
class Cluster:
    services: dict[str, Any]
    buses: dict[str, Bus]
    stores: list[Store]
    client: Bus
    clock: VirtualClock
    prefix: str
    dead: list[tuple[DeadLetter, MessageInfo]] = field(default_factory=list)

    def subscriptions(self) -> list[tuple[str, Subscription[Any]]]:
        """(service, subscription) of every consumer the services registered."""
        return [(name, sub) for name, bus in self.buses.items() for sub in bus._subs]

    def consumed(self) -> set[str]:
        """Patterns of every subject some service consumes."""
        return {sub.subject.pattern for _, sub in self.subscriptions()}

    def handler_errors(self, subject: Subject[Any]) -> dict[str, float]:
        """Handler exceptions so far per service on ``subject`` (the bus's ``colo_bus_handler_errors_total``)."""
        return {svc: handler_errors.labels(svc, subject.wildcard)._value.get() for svc in self.buses}

    async def settle(self) -> None:
        for bus in (*self.buses.values(), self.client):
            await bus.settle(timeout_s=600)  # 10,000 payloads on a busy 2-core machine

    async def settle_subscriptions(self, subs: list[Subscription[Any]], timeout_s: float = 120.0) -> None:
        """Return once ``subs`` have nothing pending and no handler runs (cheaper than :meth:`settle`)."""
        deadline = asyncio.get_running_loop().time() + timeout_s
        while True:
            if all(s.idle for s in subs):
                counts = await asyncio.gather(*(s.pending() for s in subs))
                if not any(counts) and all(s.idle for s in subs):
                    return
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError(f"subscriptions did not settle within {timeout_s}s")
            await asyncio.sleep(0.002)

    async def tick(self, now: float) -> list[str]:
        """Every service's periodic work at ``now``; the problems (exceptions) it raised."""
        self.clock.advance_to(max(now, self.clock.now()))
        problems = []
        for name, svc in self.services.items():
            try:
                await svc.tick(self.clock.now())
            except Exception as exc:  # a tick that crashes on fuzzed state is a bug to report
                problems.append(f"{name} tick: {type(exc).__name__}: {exc}")
        await self.settle()
        return problems

    def not_ready(self) -> list[str]:
        return [name for name, svc in self.services.items() if not svc.ready()]

    async def snapshot(self) -> dict[str, Any]:
        """Store keys under the prefix (type and content) and each service's debug document."""
        r = self.stores[0].redis
        keys: dict[str, Any] = {}
        async for raw in r.scan_iter(match=f"{self.prefix}:*", count=1000):
            key = raw.decode() if isinstance(raw, bytes) else raw
            kind = await r.type(key)
            kind = kind.decode() if isinstance(kind, bytes) else kind
            if kind == "string":
                val: Any = await r.get(key)
            elif kind == "hash":
                val = sorted((await r.hgetall(key)).items())
            elif kind == "set":
                val = sorted(await r.smembers(key))
            elif kind == "zset":
                val = await r.zrange(key, 0, -1, withscores=True)
            elif kind == "list":
                val = await r.lrange(key, 0, -1)
            else:
                val = await r.dump(key)
            keys[key] = (kind, repr(val))
        debug = {}
        for name, svc in self.services.items():
            doc = json.loads(json.dumps(svc.debug(), default=str, sort_keys=True))
            for part in VOLATILE_DEBUG.get(name, ()):
                doc.pop(part, None)
            debug[name] = doc
        return {"store": keys, "debug": debug}

    async def close(self) -> list[str]:
        """Stop consumers and services (a profiler writes its checkpoint); the exceptions stopping raised."""
        problems = []
        for bus in self.buses.values():
            await bus.stop_consumers()
        for name, svc in self.services.items():
            try:
                await svc.stop()
            except Exception as exc:  # e.g. a checkpoint that cannot encode what a handler took in
                problems.append(f"{name} stop: {type(exc).__name__}: {exc}")
        for store in self.stores:
            await store.close()
        return problems


async def start_cluster(nats_url: str, redis_url: str, bus_factory: Any) -> Cluster:
    """The services started on the real servers (streams already clean), nodes registered, consumers running."""
    clock = VirtualClock(T0)
    prefix = f"fuzz-{uuid.uuid4().hex[:10]}"
    services: dict[str, Any] = {
        "slo-manager": SloManagerService(SloManagerSettings()),
        "scheduler": SchedulerService(SchedulerSettings(seed=1)),
        "node-agent": NodeAgentService(NodeAgentSettings(),
                                       nodes=[m.NodeSpec(name=n, capacity=CAP, allocatable=CAP, cpus=8)
                                              for n in NODES]),
        "profiler": ProfilerService(ProfilerSettings()),
        "descheduler": DeschedulerService(DeschedulerSettings()),
    }
    buses: dict[str, Bus] = {}
    stores: list[Store] = []
    for name, svc in services.items():
        bus = await bus_factory(name, clock=clock, autostart=False, retry_delay_s=0.01)
        store = await Store.connect(redis_url, prefix=prefix)
        buses[name], _ = bus, stores.append(store)
        await svc.start(service_context(bus, store, clock))
    client = await bus_factory("fuzz-client", clock=clock)
    cluster = Cluster(services, buses, stores, client, clock, prefix)

    async def on_dead(msg: DeadLetter, info: MessageInfo) -> None:
        cluster.dead.append((msg, info))

    await client.subscribe(subjects.DEAD_LETTER, on_dead, durable="fuzz-dlq")
    for bus in buses.values():
        await bus.start_consumers()
    await cluster.settle()
    await cluster.tick(T0)
    return cluster
