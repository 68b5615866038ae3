"""The descheduler's Prometheus metrics read over HTTP from a running service (real nats-server, redis-server)."""

from __future__ import annotations

import pytest
from test_descheduler_service import collect, descheduler, publish_cluster, wait_for

from colo import subjects
from colo.runtime import ServiceRunner
from colo.testing.fixtures import BusFactory
from colo.testing.scrape import delta, scrape, value
from colo_descheduler.service import DeschedulerService

pytestmark = pytest.mark.integration
__all__ = ["descheduler"]  # the fixture, shared with test_descheduler_service.py


async def test_eviction_rounds_and_dead_letters_counted(
        descheduler: tuple[DeschedulerService, ServiceRunner], bus_factory: BusFactory) -> None:
    service, runner = descheduler
    assert runner.ctx is not None
    bus = await bus_factory("test-descheduler")
    orders = await collect(bus, subjects.POD_EVICT, "watch-evict")
    await publish_cluster(bus, at=0.0)
    await runner.ctx.bus.settle()
    before = await scrape(runner.http_port)
    for now in (1.0, 2.0, 3.0):  # the hot node is a source on the 3rd consecutive high round
        await service.tick(now)
    await wait_for(lambda: len(orders) == 1)
    after = await scrape(runner.http_port)
    assert delta(before, after, "colo_descheduler_rounds_total", strategy="LowNodeLoad") == 3
    assert delta(before, after, "colo_descheduler_evictions_total", strategy="LowNodeLoad", result="ordered") == 1
    assert delta(before, after, "colo_descheduler_evictions_total", strategy="LowNodeLoad", result="refused") == 0
    assert value(after, "colo_descheduler_migrating_pods") == 1
    # a report that decodes but makes no sense is rejected by the handler: counted under the subject pattern
    await bus.js.publish(subjects.NODE_METRIC.format(node="hot"), b'{"node": "", "at": 1}')
    await runner.ctx.bus.settle()
    dead = await scrape(runner.http_port)
    assert delta(after, dead, "colo_bus_dead_lettered_total", service="descheduler",
                 subject="colo.v1.node.metric.*") == 1
