"""The web dashboard in a real headless browser (Debian's chromium driven by Playwright, no browser download)
against a running cluster: the page asks for the token, shows the cluster's nodes, updates live when a pod is
submitted (no reload), shows a pod's decision with per-plugin scores and QoS events on the timeline.
Screenshots go to ``out/test-artifacts/``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio

from colo.store import Store
from colo.testing.browser import LAUNCH_ARGS, chromium_or_reason

from .cluster import Cluster, node, start_cluster
from .conftest import TOKEN, Api, start_api

pytestmark = pytest.mark.integration

ARTIFACTS = Path(__file__).parents[2] / "out" / "test-artifacts"


@pytest.fixture(scope="session")
def chromium() -> Iterator[str]:
    """Debian's chromium (:func:`colo.testing.browser.chromium_or_reason`), else the test is skipped saying why."""
    path, why = chromium_or_reason()
    if path is None:
        pytest.skip(why)
    yield path


@pytest_asyncio.fixture
async def browser(chromium: str) -> AsyncIterator[Any]:
    try:
        from playwright.async_api import async_playwright
    except ImportError:
        pytest.skip("playwright is not installed (requirements-dev.txt)")
    async with async_playwright() as pw:
        b = await pw.chromium.launch(executable_path=chromium, headless=True, args=list(LAUNCH_ARGS))
        try:
            yield b
        finally:
            await b.close()


@pytest_asyncio.fixture
async def running(nats_url: str, redis_url: str, store: Store,
                  clean_streams: None) -> AsyncIterator[tuple[Cluster, Api]]:
    cluster = await start_cluster(nats_url, redis_url, store.keys.prefix,
                                  [node("n1"), node("n2"), node("n3", cpu=8000, memory=32 * 1024**3)])
    runner = await start_api(nats_url, redis_url, store.keys.prefix, scheduler_url=cluster.scheduler_url)
    http = aiohttp.ClientSession(headers={"Authorization": f"Bearer {TOKEN}"})
    try:
        yield cluster, Api(runner, f"http://127.0.0.1:{runner.http_port}", http)
    finally:
        await http.close()
        await runner.stop()
        await cluster.stop()


PODS = """
- kind: Pod
  metadata: {name: huge, namespace: shop}
  spec:
    priority: 9500
    containers: [{name: c, resources: {requests: {cpu: "64", memory: 1Gi}, limits: {cpu: "64", memory: 1Gi}}}]
- kind: Pod
  metadata: {name: web-0, namespace: shop, labels: {app: web}}
  spec:
    priority: 9500
    containers: [{name: web, resources: {requests: {cpu: "4", memory: 8Gi}, limits: {cpu: "4", memory: 8Gi}}}]
- kind: Pod
  metadata: {name: etl-0, namespace: batch, labels: {app: etl, koordinator.sh/qosClass: BE}}
  spec:
    priority: 5500
    containers:
      - name: etl
        resources:
          requests: {kubernetes.io/batch-cpu: 2000, kubernetes.io/batch-memory: 2Gi}
          limits: {kubernetes.io/batch-cpu: 2000, kubernetes.io/batch-memory: 2Gi}
"""


async def test_dashboard_live(browser: Any, running: tuple[Cluster, Api]) -> None:
    cluster, api = running
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page = await browser.new_page(viewport={"width": 1400, "height": 1000})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    await page.goto(api.url + "/")
    # without a token the page asks for one (the API answered 401), then loads
    await page.wait_for_selector("#auth:not([hidden])", timeout=10_000)
    assert all("status of 401" in e for e in errors), errors  # the page's first requests, before the token
    errors.clear()
    await page.fill("#token", TOKEN)
    await page.click("#auth button")
    await page.wait_for_selector("body[data-live='1']", timeout=10_000)
    await page.wait_for_function("document.querySelectorAll('#nodes tbody tr[data-node]').length === 3",
                                 timeout=10_000)
    assert await page.locator("#nodes tbody tr[data-node]").evaluate_all(
        "rows => rows.map(r => r.dataset.node)") == ["n1", "n2", "n3"]
    await cluster.step(2)  # metric reports and the slo-manager's batch offer arrive over the stream
    await page.wait_for_function(
        "[...document.querySelectorAll('#nodes td.batch-offered')].every(td => td.textContent !== '-')",
        timeout=10_000)
    await page.screenshot(path=str(ARTIFACTS / "dashboard-nodes.png"), full_page=True)

    # a pod submitted through the API appears without a reload, then turns bound as the cluster steps
    async with api.http.post(api.url + "/v1/submit", data=PODS) as resp:
        assert resp.status == 201, await resp.text()
    await page.wait_for_selector("tr[data-pod='shop/web-0']", timeout=10_000)
    await cluster.step(3)
    await page.wait_for_function(
        "['Bound', 'Running'].includes(document.querySelector(\"tr[data-pod='shop/web-0'] td.state\")?.textContent)",
        timeout=10_000)
    node_of_web = await page.locator("tr[data-pod='shop/web-0'] td").nth(2).text_content()
    await page.wait_for_function(  # a pod no node fits shows the scheduler's reason, as colo get pods does
        "document.querySelector(\"tr[data-pod='shop/huge'] td.reason\")?.textContent.startsWith("
        "'Unschedulable: 0/3 nodes are available')", timeout=10_000)
    assert node_of_web in ("n1", "n2", "n3")
    # the tables fit their sections (no column scrolled out of sight: the pods' reason used to be), and the
    # nodes table has one unit per column
    clipped = await page.evaluate(
        "['overview', 'pods-section', 'quotas-section'].map(id => document.getElementById(id))"
        ".filter(s => s.scrollWidth > s.clientWidth + 1).map(s => s.id)")
    assert clipped == [], clipped
    headers = await page.locator("#nodes thead th").all_text_contents()
    assert headers[1:3] == ["CPU (cores)", "memory (GiB)"], headers

    # the decision with its per-plugin scores
    await page.click("tr[data-pod='shop/web-0']")
    await page.wait_for_selector("#explain table.scores tr[data-plugin]", timeout=10_000)
    assert await page.locator("#explain .status").text_content() == "Success"
    assert await page.locator("#explain .chosen").text_content() == node_of_web
    assert await page.locator("#explain table.scores tr[data-plugin]").count() >= 2
    await page.screenshot(path=str(ARTIFACTS / "dashboard-explain.png"), full_page=True)

    await cluster.step(5)  # the BE pod runs: the node agent's QoS actions reach the timeline
    await page.wait_for_selector("#timeline li.event", timeout=10_000)
    live = await page.locator("#timeline li.event").count()
    await page.screenshot(path=str(ARTIFACTS / "dashboard-timeline.png"), full_page=True)
    # a page opened now shows the same actions from the stream's history (GET /v1/qos-events)
    await page.reload()
    await page.wait_for_function(f"document.querySelectorAll('#timeline li.event').length >= {live}",
                                 timeout=10_000)
    assert errors == []
