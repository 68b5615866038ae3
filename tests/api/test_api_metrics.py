"""The API service's request metrics read over HTTP (real nats-server, redis-server): counted by route template
and status class, never by the concrete path."""

from __future__ import annotations

import aiohttp
import pytest

from colo.testing.scrape import delta, scrape

from .conftest import Api

pytestmark = pytest.mark.integration

REQUESTS = "colo_api_requests_total"
DURATION = "colo_api_request_duration_seconds"


async def test_requests_counted_by_route_template_and_status_class(api: Api) -> None:
    port = api.runner.http_port
    before = await scrape(port)
    for _ in range(3):
        async with api.http.get(f"{api.url}/v1/nodes") as r:
            assert r.status == 200
    for name in ("web-0", "web-1"):  # two concrete paths, one route template
        async with api.http.get(f"{api.url}/v1/pods/default/{name}") as r:
            assert r.status == 404
    async with aiohttp.ClientSession() as anonymous, anonymous.get(f"{api.url}/v1/pods") as r:
        assert r.status == 401
    async with api.http.get(f"{api.url}/v1/pods?nmespace=x") as r:
        assert r.status == 400
    async with api.http.get(f"{api.url}/v1/no-such-route") as r:
        assert r.status == 404
    after = await scrape(port)
    assert delta(before, after, REQUESTS, route="/v1/nodes", method="GET", status_class="2xx") == 3
    assert delta(before, after, f"{DURATION}_count", route="/v1/nodes", method="GET") == 3
    assert delta(before, after, REQUESTS, route="/v1/pods/{namespace}/{name}", method="GET", status_class="4xx") == 2
    assert delta(before, after, REQUESTS, route="/v1/pods", method="GET", status_class="4xx") == 2
    assert delta(before, after, REQUESTS, route="/v1/{tail:.*}", method="GET", status_class="4xx") == 1
    routes = {dict(labels)["route"] for name, labels in after if name == REQUESTS}
    assert not any("web-" in r or "no-such" in r for r in routes), routes


async def test_routes_exported_at_zero_and_health_signals(api: Api) -> None:
    """A route's request counter exists before its first request (rate() answers 0, not nothing); the service
    exports its build info and its dependencies' state."""
    samples = await scrape(api.runner.http_port)
    for cls in ("2xx", "4xx", "5xx"):
        key = (REQUESTS, frozenset({"route": "/v1/qos-events", "method": "GET", "status_class": cls}.items()))
        assert key in samples, cls
    assert samples[("colo_bus_connected", frozenset())] == 1
    assert samples[("colo_store_up", frozenset())] == 1
    assert [k for k in samples if k[0] == "colo_build_info" and dict(k[1])["service"] == "api"]
