"""The REST routes against a running API service with real NATS and Redis: submit (valid, invalid, dry run),
pods with filters, nodes with allocation, offer and usage, quotas, auth, unknown routes."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from colo import subjects as S
from colo.messages import NodeMetric, NodeResource, NodeSpec, PodMetric, PodRecord, PodSpec, Resources, Usage
from colo.store import Store
from colo.testing.fixtures import BusFactory

from .conftest import Api

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).parents[2] / "examples"
GI = 1024**3


def _node(name: str, cpu: int = 8000) -> NodeSpec:
    r = Resources(cpu=cpu, memory=16 * GI, pods=110)
    return NodeSpec(name=name, capacity=r, allocatable=r)


async def _json(api: Api, method: str, path: str, **kw: Any) -> tuple[int, Any]:
    async with api.http.request(method, api.url + path, **kw) as resp:
        assert resp.content_type == "application/json", await resp.text()
        return resp.status, await resp.json()


async def test_submit_publishes_every_object_like_colo_submit(api: Api, bus_factory: BusFactory) -> None:
    client = await bus_factory("tester")
    seen: list[Any] = []

    async def sink(msg: Any) -> None:
        seen.append(msg)

    await client.subscribe(S.POD_SUBMITTED, sink, durable="pods")
    await client.subscribe(S.WORKLOAD_SUBMITTED, sink, durable="workloads")
    await client.start_consumers()
    body = (EXAMPLES / "pods.yaml").read_text() + "\n---\n" + (EXAMPLES / "deployment.yaml").read_text()
    status, out = await _json(api, "POST", "/v1/submit", data=body,
                              headers={"Content-Type": "application/yaml"})
    assert status == 201, out
    kinds = [o["kind"] for o in out["objects"]]
    assert "Deployment" in kinds and kinds.count("Pod") == 2
    assert {o["name"] for o in out["objects"] if o["kind"] == "Pod"} == {"web-0", "etl-0"}
    assert out["objects"][kinds.index("Deployment")]["pods"] > 0
    assert {o["admission"] for o in out["objects"]} == {"unknown"}  # no admission runs here: no answer came
    for _ in range(100):
        if len(seen) == len(kinds):
            break
        await asyncio.sleep(0.05)
    assert sorted(type(m).__name__ for m in seen) == sorted(
        "WorkloadSpec" if k == "Deployment" else "PodSpec" for k in kinds)


async def test_invalid_manifest_is_422_with_every_problem_and_nothing_published(
        api: Api, bus_factory: BusFactory) -> None:
    client = await bus_factory("tester")
    seen: list[Any] = []

    async def sink(msg: Any) -> None:
        seen.append(msg)

    await client.subscribe(S.POD_SUBMITTED, sink, durable="pods")
    await client.start_consumers()
    bad = """
- kind: Pod
  metadata: {name: ok}
  spec: {containers: [{name: c, resources: {requests: {cpu: "1"}}}]}
- kind: Pod
  metadata: {name: bad}
  spec: {containers: [{name: c, resources: {requests: {cpu: 5x}}}]}
- kind: Gadget
  metadata: {name: g}
"""
    status, out = await _json(api, "POST", "/v1/submit", data=bad)
    assert status == 422
    assert any(p.startswith("[1].spec.containers[0].resources.requests.cpu:") for p in out["problems"]), out
    assert any(p.startswith("[2].kind:") and "Gadget" in p for p in out["problems"]), out
    assert out["error"] == f"{len(out['problems'])} problem(s); nothing submitted"
    status, out = await _json(api, "POST", "/v1/submit", data=b"\xff\xfe")
    assert status == 422 and out["problems"] == ["<root>: not UTF-8 at byte 0"]
    await asyncio.sleep(0.3)
    assert seen == []


async def test_dry_run_validates_and_publishes_nothing(api: Api, bus_factory: BusFactory) -> None:
    client = await bus_factory("tester")
    seen: list[Any] = []

    async def sink(msg: Any) -> None:
        seen.append(msg)

    await client.subscribe(S.POD_SUBMITTED, sink, durable="pods")
    await client.start_consumers()
    status, out = await _json(api, "POST", "/v1/submit?dryRun=All", data=(EXAMPLES / "pods.yaml").read_text())
    assert status == 200 and out["dry_run"] is True and len(out["objects"]) == 2
    status, out = await _json(api, "POST", "/v1/submit?dryRun=yes", data="kind: Pod")
    assert status == 400 and "dryRun" in out["error"]
    await asyncio.sleep(0.3)
    assert seen == []


async def test_manifest_size_limit(api: Api) -> None:
    filler = "# " + "x" * 1000 + "\n"
    # 2 MB: over aiohttp's own 1 MiB default, under the service's 4 MiB
    big = "kind: Pod\nmetadata: {name: big}\nspec: {containers: [{name: c}]}\n" + filler * 2000
    status, out = await _json(api, "POST", "/v1/submit?dryRun=All", data=big)
    assert status == 200 and out["objects"][0]["name"] == "big"
    status, out = await _json(api, "POST", "/v1/submit?dryRun=All", data=filler * 5000)
    assert status == 413 and "over the limit of 4194304 bytes" in out["error"]


async def test_pods_list_filters_and_get(api: Api, store: Store) -> None:
    web = PodSpec(uid="shop-web-0", name="web-0", namespace="shop", requests=Resources(cpu=2000, memory=GI),
                  limits=Resources(cpu=2000, memory=GI))
    etl = PodSpec(uid="batch-etl-0", name="etl-0", namespace="batch", labels={"koordinator.sh/qosClass": "BE"},
                  requests=Resources(batch_cpu=1500, batch_memory=GI))
    await store.put_pod(PodRecord(spec=web, phase="Running", node="n1", updated_at=5.0))
    await store.put_pod(PodRecord(spec=etl, phase="Pending", reason="Rejected: no room", updated_at=6.0))
    status, out = await _json(api, "GET", "/v1/pods")
    assert status == 200 and [p["name"] for p in out["items"]] == ["etl-0", "web-0"]
    status, out = await _json(api, "GET", "/v1/pods", params={"namespace": "shop"})
    assert [p["uid"] for p in out["items"]] == ["shop-web-0"]
    assert out["items"][0]["qos"] == "LSR" and out["items"][0]["state"] == "Running"
    status, out = await _json(api, "GET", "/v1/pods", params={"phase": "Pending"})
    assert [p["state"] for p in out["items"]] == ["Waiting"] and out["items"][0]["qos"] == "BE"
    status, out = await _json(api, "GET", "/v1/pods", params={"phase": "Lost"})
    assert status == 400 and "Pending, Running, Succeeded, Failed" in out["error"]
    status, out = await _json(api, "GET", "/v1/pods/batch/etl-0")
    assert status == 200 and out["reason"] == "Rejected: no room" and out["requests"]["batch_cpu"] == 1500
    status, out = await _json(api, "GET", "/v1/pods/batch/nope")
    assert status == 404 and out["error"] == "pod batch/nope not found"


async def test_nodes_join_store_offer_and_last_metric(api: Api, store: Store, bus_factory: BusFactory) -> None:
    bus = await bus_factory("tester")
    for spec in (_node("n1"), _node("n2", 4000)):
        await store.put_node(spec)
    await store.put_node_resource(NodeResource(node="n1", batch_cpu=3000, batch_memory=4 * GI, at=10.0))
    ls = PodMetric(uid="a", cpu=1200, memory=GI, qos_class="LS")
    be = PodMetric(uid="b", cpu=700, memory=2 * GI, qos_class="BE")
    await bus.publish(S.NODE_METRIC, NodeMetric(node="n1", at=9.0, node_usage=Usage(cpu=2100, memory=3 * GI),
                                                pods=[ls, be], be_cpu_allowed=2500), node="n1")
    status, out = await _json(api, "GET", "/v1/nodes")
    assert status == 200 and [n["name"] for n in out["items"]] == ["n1", "n2"]
    n1, n2 = out["items"]
    assert n1["offered"]["batch_cpu"] == 3000 and n2["offered"] is None
    assert n1["usage"] == {"at": 9.0, "cpu": 2100, "memory": 3 * GI, "ls_cpu": 1200, "ls_memory": GI,
                           "be_cpu": 700, "be_memory": 2 * GI, "be_cpu_allowed": 2500, "pods": 2}
    assert n2["usage"] is None and n2["spec"]["allocatable"]["cpu"] == 4000 and n2["allocated"].get("cpu", 0) == 0  # defaults are omitted on the wire
    status, one = await _json(api, "GET", "/v1/nodes/n2")
    assert status == 200 and one == n2
    status, out = await _json(api, "GET", "/v1/nodes/n9")
    assert status == 404 and out["error"] == "node n9 not found"


async def test_quotas_from_the_bus_and_the_store(api: Api, store: Store) -> None:
    body = (EXAMPLES / "quotas.yaml").read_text()
    status, out = await _json(api, "POST", "/v1/submit", data=body)
    assert status == 201, out
    await store.set_quota_max("team-a", {"cpu": 8000})
    status, out = await _json(api, "GET", "/v1/quotas")
    assert status == 200
    names = [q["name"] for q in out["items"]]
    assert names == sorted(names) and {"org", "team-a", "team-b"} <= set(names)
    team_a = out["items"][names.index("team-a")]
    assert team_a["spec"]["name"] == "team-a" and team_a["max"] == {"cpu": 8000} and team_a["status"] is None


async def test_auth_missing_wrong_and_open_routes(api: Api) -> None:
    async with aiohttp.ClientSession() as anon:
        async with anon.get(api.url + "/v1/pods") as resp:
            assert resp.status == 401 and resp.headers["WWW-Authenticate"] == 'Bearer realm="colo"'
            assert "missing bearer token" in (await resp.json())["error"]
        async with anon.get(api.url + "/v1/nodes", headers={"Authorization": "Bearer nope"}) as resp:
            assert resp.status == 401 and (await resp.json())["error"] == "invalid bearer token"
        async with anon.get(api.url + "/v1/nodes", headers={"Authorization": "Basic eDp5"}) as resp:
            assert resp.status == 401 and "not 'Bearer <token>'" in (await resp.json())["error"]
        for path in ("/healthz", "/v1/openapi.json", "/", "/static/app.js"):
            async with anon.get(api.url + path) as resp:
                assert resp.status == 200, path


async def test_unknown_routes_and_methods_answer_json(api: Api) -> None:
    status, out = await _json(api, "GET", "/v1/nope")
    assert status == 404 and "no route GET /v1/nope" in out["error"]
    async with api.http.delete(api.url + "/v1/pods") as resp:
        assert resp.status == 405 and resp.headers["Allow"] == "GET"
