"""pytest plugin with real servers (DESIGN.md §10: no mock broker or mock Redis).

Enable with ``pytest_plugins = ["colo.testing.fixtures"]`` (tests/conftest.py does).

* ``nats_url`` / ``redis_url`` (session): a ``nats-server -js`` and a ``redis-server`` started
  on free ports by :mod:`colo.embedded`, stopped at session end;
* ``clean_streams`` (function, async): deletes every ``COLO_*`` stream (and so every
  consumer) and recreates them empty;
* ``bus_factory`` (function, async): ``bus = await bus_factory("svc")`` → a connected
  :class:`colo.bus.Bus` with streams ensured, closed at teardown; depends on
  ``clean_streams`` so every test starts with empty streams and no consumers;
* ``store`` (function, async): a :class:`colo.store.Store` with a unique prefix, all its
  keys deleted at teardown.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import pytest
import pytest_asyncio
from opentelemetry import metrics, trace

from colo.bus import Bus
from colo.clock import Clock
from colo.embedded import ServerHandle, start_nats, start_redis
from colo.runtime import ServiceContext
from colo.settings import RuntimeSettings
from colo.store import Store

BusFactory = Callable[..., Awaitable[Bus]]


@pytest.fixture(scope="session")
def nats_server() -> Iterator[ServerHandle]:
    """A JetStream nats-server for the whole test session."""
    handle = start_nats()
    try:
        yield handle
    finally:
        handle.stop()


@pytest.fixture(scope="session")
def redis_server() -> Iterator[ServerHandle]:
    """A redis-server (no persistence) for the whole test session."""
    handle = start_redis()
    try:
        yield handle
    finally:
        handle.stop()


@pytest.fixture(scope="session")
def nats_url(nats_server: ServerHandle) -> str:
    """URL of the session's nats-server."""
    return nats_server.url


@pytest.fixture(scope="session")
def redis_url(redis_server: ServerHandle) -> str:
    """URL of the session's redis-server."""
    return redis_server.url


@pytest_asyncio.fixture
async def clean_streams(nats_url: str) -> None:
    """Delete every COLO_* stream and recreate the registry's streams empty."""
    bus = await Bus.connect(nats_url, "test-admin")
    try:
        await bus.delete_streams()
        await bus.ensure_streams()
    finally:
        await bus.close()


@pytest_asyncio.fixture
async def bus_factory(nats_url: str, clean_streams: None) -> AsyncIterator[BusFactory]:
    """``await bus_factory(service, clock=None, **connect_kwargs)`` → a connected Bus."""
    buses: list[Bus] = []

    async def make(service: str, clock: Clock | None = None, **kwargs: Any) -> Bus:
        bus = await Bus.connect(nats_url, service, clock, **kwargs)
        await bus.ensure_streams()
        buses.append(bus)
        return bus

    try:
        yield make
    finally:
        for bus in reversed(buses):
            await bus.close()


@pytest_asyncio.fixture
async def store(redis_url: str) -> AsyncIterator[Store]:
    """A Store under a unique prefix; its keys are deleted at teardown."""
    s = await Store.connect(redis_url, prefix=f"test-{uuid.uuid4().hex[:12]}")
    try:
        yield s
    finally:
        await s.delete_all()
        await s.close()


def service_context(bus: Bus, store: Store, clock: Clock, settings: RuntimeSettings | None = None) -> ServiceContext:
    """A :class:`ServiceContext` for driving a service in-process in a test (default runtime settings,
    a ``test`` logger, meter and tracer), as :class:`colo.runtime.ServiceRunner` would build it."""
    return ServiceContext(settings=settings or RuntimeSettings(), bus=bus, store=store, clock=clock,
                          log=logging.getLogger("test"), meter=metrics.get_meter("test"),
                          tracer=trace.get_tracer("test"))
