"""The API in front of a running cluster (node agent, slo-manager, scheduler on the virtual clock): a pod
submitted through the API is admitted, bound and running; explain shows the scheduler's decision with
per-plugin scores; the event stream carries the pod's events; nodes show usage and the batch offer."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from colo.store import Store

from .cluster import Cluster, node, start_cluster
from .conftest import Api, start_api

pytestmark = pytest.mark.integration

WEB = """
kind: Pod
metadata: {name: web-0, namespace: shop, labels: {app: web}}
spec:
  priority: 9500
  containers: [{name: web, resources: {requests: {cpu: "2", memory: 4Gi}, limits: {cpu: "2", memory: 4Gi}}}]
"""
HUGE = """
kind: Pod
metadata: {name: huge, namespace: shop}
spec:
  priority: 9500
  containers: [{name: c, resources: {requests: {cpu: "500", memory: 1Gi}, limits: {cpu: "500", memory: 1Gi}}}]
"""


@pytest_asyncio.fixture
async def cluster(nats_url: str, redis_url: str, store: Store, clean_streams: None) -> AsyncIterator[Cluster]:
    c = await start_cluster(nats_url, redis_url, store.keys.prefix, [node("n1"), node("n2", cpu=8000)])
    try:
        yield c
    finally:
        await c.stop()


@pytest_asyncio.fixture
async def capi(nats_url: str, redis_url: str, store: Store, cluster: Cluster) -> AsyncIterator[Api]:
    import aiohttp

    from .conftest import TOKEN

    runner = await start_api(nats_url, redis_url, store.keys.prefix, scheduler_url=cluster.scheduler_url)
    http = aiohttp.ClientSession(headers={"Authorization": f"Bearer {TOKEN}"})
    try:
        yield Api(runner, f"http://127.0.0.1:{runner.http_port}", http)
    finally:
        await http.close()
        await runner.stop()


async def _get(api: Api, path: str) -> tuple[int, Any]:
    async with api.http.get(api.url + path) as resp:
        return resp.status, await resp.json()


async def _sse(api: Api, query: str, into: list[dict[str, Any]], ready: asyncio.Event) -> None:
    async with api.http.get(api.url + "/v1/events" + query) as resp:
        assert resp.status == 200 and resp.content_type == "text/event-stream"
        async for raw in resp.content:
            line = raw.decode().rstrip("\n")
            if line == ": subscribed":
                ready.set()
            elif line.startswith("data: "):
                into.append(json.loads(line[6:]))


async def test_submit_bind_explain_and_events(capi: Api, cluster: Cluster) -> None:
    events: list[dict[str, Any]] = []
    ready = asyncio.Event()
    reader = asyncio.create_task(_sse(capi, "?subject=pod.>&limit=3", events, ready))
    await asyncio.wait_for(ready.wait(), 10)
    for manifest in (WEB, HUGE):
        async with capi.http.post(capi.url + "/v1/submit", data=manifest) as resp:
            assert resp.status == 201, await resp.text()
    await cluster.step(2)
    await asyncio.wait_for(reader, 10)
    assert events[0]["subject"] == "pod.submitted" and events[0]["type"] == "PodSpec"
    assert events[0]["message"]["name"] == "web-0" and len(events) == 3  # the limit closed the stream
    admitted = next(e for e in events if e["subject"] == "pod.admitted")
    assert admitted["type"] == "PodAdmitted" and admitted["message"]["spec"]["uid"] == "shop-web-0"

    status, pod = await _get(capi, "/v1/pods/shop/web-0")
    assert status == 200 and pod["node"] in ("n1", "n2") and pod["state"] in ("Bound", "Running")
    status, decision = await _get(capi, "/v1/explain/shop/web-0")
    assert status == 200 and decision["status"] == "Success" and decision["node"] == pod["node"]
    plugins = next(iter(decision["scores"].values()))["plugins"]
    assert plugins and all({"raw", "normalized", "weight", "weighted"} <= set(p) for p in plugins.values())
    status, decision = await _get(capi, "/v1/explain/shop/huge")
    assert status == 200 and decision["status"] == "Unschedulable" and decision["node"] is None
    assert "0/2 nodes are available" in decision["message"]
    status, listed = await _get(capi, "/v1/pods?namespace=shop")
    reasons = {p["name"]: (p["state"], p["reason"]) for p in listed["items"]}
    assert reasons["huge"] == ("Waiting", "Unschedulable: " + decision["message"])  # as colo get pods shows it
    assert reasons["web-0"][1] == ""
    status, out = await _get(capi, "/v1/explain/shop/nobody")
    assert status == 404

    status, nodes = await _get(capi, "/v1/nodes")
    assert [n["name"] for n in nodes["items"]] == ["n1", "n2"]
    bound = next(n for n in nodes["items"] if n["name"] == pod["node"])
    assert bound["allocated"]["cpu"] == 2000 and bound["usage"] is not None
    assert all(n["offered"] is not None for n in nodes["items"])


async def test_qos_events_history(capi: Api, cluster: Cluster, bus_factory: Any) -> None:
    from colo import subjects as S
    from colo.messages import QoSEvent

    bus = await bus_factory("tester")
    for i in range(5):
        await bus.publish(S.NODE_QOS, QoSEvent(node="n1", kind="suppress", at=float(i), reason=f"r{i}"), node="n1")
    status, out = await _get(capi, "/v1/qos-events?limit=3")
    assert status == 200
    assert [e["message"]["reason"] for e in out["items"]] == ["r2", "r3", "r4"]  # the last three, oldest first
    assert {e["subject"] for e in out["items"]} == {"node.qos.n1"}
    status, out = await _get(capi, "/v1/qos-events?limit=0")
    assert status == 400


async def test_explain_asks_a_token_protected_scheduler_with_the_token(
        nats_url: str, redis_url: str, store: Store, clean_streams: None, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With COLO_HTTP_TOKEN_FILE the scheduler's /debug routes need the token: the API (whose own guard takes the
    services' token) and `colo explain` (fetch_decision, reading COLO_HTTP_TOKEN_FILE) send it."""
    import aiohttp

    from colo.cli.explain import ExplainError, fetch_decision

    token = tmp_path / "http-token"
    token.write_text("t0ken\n")
    cluster = await start_cluster(nats_url, redis_url, store.keys.prefix, [node("n1")], http_token_file=str(token))
    runner = await start_api(nats_url, redis_url, store.keys.prefix, scheduler_url=cluster.scheduler_url, token="",
                             http_token_file=str(token))
    http = aiohttp.ClientSession(headers={"Authorization": "Bearer t0ken"})
    try:
        api = Api(runner, f"http://127.0.0.1:{runner.http_port}", http)
        async with http.post(api.url + "/v1/submit", data=WEB) as resp:
            assert resp.status == 201, await resp.text()
        await cluster.step(2)
        status, decision = await _get(api, "/v1/explain/shop/web-0")
        assert status == 200 and decision["status"] == "Success", decision
        with pytest.raises(ExplainError, match="missing bearer token"):
            await fetch_decision(cluster.scheduler_url, "shop-web-0", token="")
        monkeypatch.setenv("COLO_HTTP_TOKEN_FILE", str(token))
        assert (await fetch_decision(cluster.scheduler_url, "shop-web-0"))["node"] == "n1"
    finally:
        await http.close()
        await runner.stop()
        await cluster.stop()


async def test_explain_without_scheduler_is_503(api: Api, store: Store) -> None:
    from colo.messages import PodRecord, PodSpec

    await store.put_pod(PodRecord(spec=PodSpec(uid="a-b", name="b", namespace="a")))
    status, out = await _get(api, "/v1/explain/a/b")
    assert status == 503 and "COLO_API_SCHEDULER_URL" in out["error"]


async def test_event_stream_rejects_a_bad_filter(api: Api) -> None:
    status, out = await _get(api, "/v1/events?subject=pod..x")
    assert status == 400 and "not a NATS filter" in out["error"]
    status, out = await _get(api, "/v1/events?limit=-1")
    assert status == 400 and "limit" in out["error"]


async def test_delete_pending_and_bound_pods(capi: Api, cluster: Cluster) -> None:
    for manifest in (WEB, HUGE):
        async with capi.http.post(capi.url + "/v1/submit", data=manifest) as resp:
            assert resp.status == 201, await resp.text()
    await cluster.step(2)
    status, web = await _get(capi, "/v1/pods/shop/web-0")
    assert web["node"] and web["state"] in ("Bound", "Running")
    for name in ("huge", "web-0"):
        async with capi.http.delete(f"{capi.url}/v1/pods/shop/{name}") as resp:
            assert resp.status == 202, await resp.text()
            assert (await resp.json())["name"] == name
    await cluster.step(2)
    status, huge = await _get(capi, "/v1/pods/shop/huge")
    assert huge["state"] == "Deleted" and huge["phase"] == "Failed"
    status, web = await _get(capi, "/v1/pods/shop/web-0")
    assert web["phase"] == "Failed" and web["state"] == "Deleted"  # stopped on its node: the word, not "Failed"
    async with capi.http.delete(f"{capi.url}/v1/pods/shop/huge") as resp:
        assert resp.status == 200  # already ended: nothing sent
    async with capi.http.delete(f"{capi.url}/v1/pods/shop/nobody") as resp:
        assert resp.status == 404


REFUSED = """
kind: Pod
metadata: {name: greedy, namespace: shop}
spec:
  priority: 99999999999
  containers: [{name: c, resources: {requests: {cpu: "1", memory: 1Gi}, limits: {cpu: "1", memory: 1Gi}}}]
"""


async def test_submit_answers_with_admissions_outcome(capi: Api, cluster: Cluster) -> None:
    async with capi.http.post(capi.url + "/v1/submit", data=WEB) as resp:
        out = await resp.json()
        assert resp.status == 201 and out["objects"][0]["admission"] == "admitted" and out["rejected"] == 0
    async with capi.http.post(capi.url + "/v1/submit?dryRun=All", data=REFUSED) as resp:
        dry = await resp.json()
    async with capi.http.post(capi.url + "/v1/submit", data=REFUSED) as resp:
        out = await resp.json()
    if dry.get("problems"):  # the shared validation refuses it before publishing: the same reason
        assert resp.status == 422 and out["problems"] == dry["problems"]
        return
    assert resp.status == 422 and out["rejected"] == 1, out
    (obj,) = out["objects"]
    assert obj["admission"] == "rejected" and "priority" in obj["reason"]
    status, pod = await _get(capi, "/v1/pods/shop/greedy")
    assert status == 200 and pod["state"] == "Rejected"
