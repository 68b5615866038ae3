"""Issue 15, attacked: what a node agent's NATS user can do beyond publishing its own nodes' subjects.

Real secured nats-server (``colo security init``, :func:`colo.testing.secure.secured_servers`); the node
agent's user sends raw JetStream API requests, and each must be refused by the server (a permission
violation in its log, no reply) or leave the streams as they were.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Iterator

import nats
import pytest
import pytest_asyncio
from nats.aio.client import Client
from nats.js.api import ConsumerConfig

from colo import subjects as S
from colo.bus import Bus
from colo.connections import nats_options
from colo.testing.secure import SecuredServers, secured_servers

pytestmark = pytest.mark.asyncio(loop_scope="module")

NODES = ["n1"]
OTHER = "n2"
VICTIM = "scheduler-admitted"
"""A consumer of another service (the scheduler's durable on pod.admitted)."""


@pytest.fixture(scope="module")
def secured() -> Iterator[SecuredServers]:
    with secured_servers([NODES, [OTHER]], tls=False) as srv:
        yield srv


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def admin(secured: SecuredServers) -> AsyncIterator[Bus]:
    s = secured.runtime_settings("admin")
    bus = await Bus.connect(s.nats_url, "admin-driver", settings=s)
    await bus.ensure_streams()
    await bus.js.add_consumer(S.PODS, ConsumerConfig(durable_name=VICTIM, filter_subject=S.POD_ADMITTED.wildcard))
    try:
        yield bus
    finally:
        await bus.close()


@pytest_asyncio.fixture(loop_scope="module")
async def agent(secured: SecuredServers, admin: Bus) -> AsyncIterator[Client]:
    s = secured.runtime_settings("node-agent-1")
    nc = await nats.connect(secured.nats_url, max_reconnect_attempts=0, error_cb=_ignore, **nats_options(s))
    try:
        yield nc
    finally:
        await nc.close()


async def _ignore(exc: Exception) -> None:
    del exc


def violations(srv: SecuredServers, subject: str) -> list[str]:
    return [line for line in srv.nats.log_path.read_text().splitlines()
            if "Violation" in line and subject in line]


async def answered(nc: Client, subject: str, body: dict[str, object] | None = None) -> bool:
    """True when the server answered ``subject`` (the request got through), False on no reply."""
    try:
        await nc.request(subject, json.dumps(body or {}).encode(), timeout=1.0)
    except nats.errors.TimeoutError:
        return False
    return True


async def test_a_node_agent_cannot_rewrite_a_stream(secured: SecuredServers, admin: Bus, agent: Client) -> None:
    """STREAM.UPDATE would let it seal a stream, cut its retention, or set a subject transform / republish
    that turns its own node's metric into another node's (or any subject): the server must refuse it."""
    info = await admin.js.stream_info(S.METRICS)
    forged = {"name": S.METRICS, "subjects": info.config.subjects, "storage": "file", "num_replicas": 1,
              "max_age": int((info.config.max_age or 0) * 1e9), "max_msgs_per_subject": -1,
              "duplicate_window": int((info.config.duplicate_window or 0) * 1e9), "retention": "limits",
              "discard": "old", "max_msgs": -1, "max_bytes": -1, "max_consumers": -1, "max_msg_size": -1,
              "sealed": False, "subject_transform": {"src": S.NODE_METRIC.format(node=NODES[0]),
                                                     "dest": S.NODE_METRIC.format(node=OTHER)}}
    subject = f"$JS.API.STREAM.UPDATE.{S.METRICS}"
    got_through = await answered(agent, subject, forged)
    after = await admin.js.stream_info(S.METRICS)
    print("stream config after the agent's update:", after.config.subject_transform)
    assert not got_through and after.config.subject_transform is None, \
        "the node agent rewrote a stream's configuration"
    assert violations(secured, subject)


@pytest.mark.parametrize("api", ["STREAM.DELETE", "STREAM.PURGE", "STREAM.MSG.DELETE"])
async def test_a_node_agent_cannot_delete_or_purge_a_stream(secured: SecuredServers, agent: Client,
                                                            api: str) -> None:
    subject = f"$JS.API.{api}.{S.PODS}"
    assert not await answered(agent, subject, {"seq": 1})
    assert violations(secured, subject)


@pytest.mark.parametrize("api", [f"CONSUMER.MSG.NEXT.{S.PODS}.{VICTIM}", f"CONSUMER.DELETE.{S.PODS}.{VICTIM}",
                                 f"CONSUMER.CREATE.{S.PODS}.{VICTIM}.{S.POD_DELETED.wildcard}"])
async def test_a_node_agent_cannot_take_another_services_consumer(secured: SecuredServers, admin: Bus,
                                                                 agent: Client, api: str) -> None:
    """Pulling (and acking) from the scheduler's consumer would take its admitted pods; deleting or
    re-filtering it would stop its scheduling."""
    subject = f"$JS.API.{api}"
    assert not await answered(agent, subject, {"batch": 1, "expires": 200_000_000})
    assert violations(secured, subject)
    info = await admin.js.consumer_info(S.PODS, VICTIM)
    assert info.config.filter_subject == S.POD_ADMITTED.wildcard


async def test_a_node_agent_cannot_ack_for_another_services_consumer(secured: SecuredServers,
                                                                     agent: Client) -> None:
    subject = f"$JS.ACK.{S.PODS}.{VICTIM}.1.1.1.0.0"
    await agent.publish(subject, b"+TERM")
    await agent.flush()
    await asyncio.sleep(0.2)
    assert violations(secured, subject)


@pytest.mark.parametrize("subject", ["$KV.colo-config.scheduler", S.DEAD_LETTER.format(service="scheduler"),
                                     S.POD_BOUND.format(node=OTHER),
                                     f"$JS.API.DIRECT.GET.{S.PODS}"])
async def test_a_node_agent_cannot_publish_outside_its_grant(secured: SecuredServers, agent: Client,
                                                             subject: str) -> None:
    await agent.publish(subject, b"{}")
    await agent.flush()
    await asyncio.sleep(0.2)
    assert violations(secured, subject)


async def test_a_service_that_may_not_update_a_changed_stream_starts_with_it_as_it_is(
        secured: SecuredServers, admin: Bus, caplog: pytest.LogCaptureFixture) -> None:
    """After the node agent lost STREAM.UPDATE: a stream whose configuration differs from this release's
    (an operator's retention, an older release) no longer stops its start; it is left as it is."""
    info = await admin.js.stream_info(S.EVENTS)
    changed = info.config
    changed.max_age = 1234.0
    await admin.js.update_stream(changed)
    s = secured.runtime_settings("node-agent-1")
    with caplog.at_level(logging.WARNING, logger="colo.bus"):
        bus = await Bus.connect(s.nats_url, "node-agent", settings=s)
        try:
            await bus.ensure_streams()
        finally:
            await bus.close()
    assert (await admin.js.stream_info(S.EVENTS)).config.max_age == pytest.approx(1234.0)
    assert any(f"stream {S.EVENTS} differs" in r.getMessage() for r in caplog.records)
    await admin.ensure_streams()  # the admin may update: back to this release's configuration
    assert (await admin.js.stream_info(S.EVENTS)).config.max_age != pytest.approx(1234.0)


async def test_a_node_agent_with_an_instance_name_runs_with_the_consumers_granted_to_it() -> None:
    """``colo security init --instance USER=NAME`` (compose.yaml's node agents run with ``COLO_INSTANCE``):
    the user's consumers are named after the instance and the agent starts without a permission violation."""
    from colo.messages import NodeSpec, Resources
    from colo.runtime import ServiceRunner
    from colo_node_agent.service import NodeAgentService
    from colo_node_agent.settings import NodeAgentSettings

    r = Resources(cpu=8_000, memory=16 * 1024**3, pods=110)
    with secured_servers([["i1"]], tls=False, instances={"node-agent": "agent-x"}) as srv:
        s = srv.runtime_settings("node-agent", COLO_SIM="true")
        assert s.instance == "agent-x"
        runner = ServiceRunner(NodeAgentService(NodeAgentSettings(), nodes=[NodeSpec(name="i1", capacity=r,
                                                                                      allocatable=r, cpus=8)]), s)
        await runner.start()
        try:
            a = srv.runtime_settings("admin")
            admin_bus = await Bus.connect(a.nats_url, "admin-driver", settings=a)
            try:
                names = [c.name for c in await admin_bus.js.consumers_info(S.PODS)]
            finally:
                await admin_bus.close()
        finally:
            await runner.stop()
        assert "node-agent-bound-agent-x" in names, names
        assert [v for v in srv.nats.log_path.read_text().splitlines() if "Violation" in v] == []


async def test_the_api_cannot_answer_another_services_tick(secured: SecuredServers, admin: Bus) -> None:
    """The API's user listens to every Colo subject and may answer requests it receives: it answered the
    scheduler's sim tick before the scheduler could (a forged TickAck). It no longer receives other services'
    ticks; it still sees every event."""
    s = secured.runtime_settings("api")
    api = await nats.connect(secured.nats_url, max_reconnect_attempts=0, error_cb=_ignore, **nats_options(s))
    seen: list[str] = []

    async def spoof(msg: nats.aio.msg.Msg) -> None:
        seen.append(msg.subject)
        if msg.reply:
            await msg.respond(b'{"seq": 1, "error": ""}')

    try:
        await api.subscribe(f"{S.PREFIX}.>", cb=spoof)
        await api.flush()
        with pytest.raises((nats.errors.TimeoutError, nats.errors.NoRespondersError)):  # the forger got nothing
            await admin.nc.request(S.SIM_TICK.format(service="scheduler"), b"{}", timeout=0.5)
        await admin.nc.publish(S.NODE_QOS.format(node=NODES[0]), b"{}")
        await admin.nc.flush()
        await asyncio.sleep(0.2)
    finally:
        await api.close()
    assert seen == [S.NODE_QOS.format(node=NODES[0])]
