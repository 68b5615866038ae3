"""``colo get pod NAME -o json|yaml|wide``, ``colo describe pod|node`` and ``colo kv``/``colo sub`` against real
redis-server and nats-server (issue 14, observations 3 and 6)."""

from __future__ import annotations

import asyncio
import json

import pytest
import yaml

from colo.cli.connection import Connection
from colo.cli.describe import _load
from colo.cli.get import _get, dump, records
from colo.cli.natsops import kv_get, kv_put, subscribe
from colo.messages import NodeResource, NodeSpec, PodRecord, PodSpec, Resources
from colo.podref import RefError
from colo.settings import load_runtime_settings
from colo.store import Store

pytestmark = pytest.mark.integration

GI = 2**30


def _conn(store: Store, nats_url: str, redis_url: str) -> Connection:
    return Connection(load_runtime_settings({"COLO_NATS_URL": nats_url, "COLO_REDIS_URL": redis_url,
                                             "COLO_STORE_PREFIX": store.keys.prefix}), "env", ())


async def _cluster(store: Store) -> None:
    r = Resources(cpu=8000, memory=16 * GI, pods=110)
    await store.put_node(NodeSpec(name="n1", capacity=r, allocatable=r, unschedulable=True))
    await store.put_node_resource(NodeResource(node="n1", batch_cpu=3000, batch_memory=4 * GI))
    spark = PodSpec(uid="ml-spark", name="spark", namespace="ml", labels={"koordinator.sh/qosClass": "BE"},
                    priority=5500, requests=Resources(batch_cpu=2000, batch_memory=GI), local_storage=True,
                    mirror=True)
    await store.put_pod(PodRecord(spec=spark, phase="Pending"))
    assert (await store.bind("ml-spark", "n1", spark.requests, 5.0)).ok
    await store.put_pod(PodRecord(spec=PodSpec(uid="shop-web", name="web", namespace="shop",
                                               requests=Resources(cpu=500)), phase="Failed",
                                  reason="Rejected: priority 9500 is outside the batch range"))


async def test_get_one_pod_as_json_yaml_and_wide(store: Store, nats_url: str, redis_url: str) -> None:
    await _cluster(store)
    conn = _conn(store, nats_url, redis_url)
    one = await records("pods", conn, "ml", "spark")
    assert json.loads(dump(one, "json")) == one and yaml.safe_load(dump(one, "yaml")) == one
    assert (one["spec"]["uid"], one["node"], one["spec"]["requests"]["batch_cpu"]) == ("ml-spark", "n1", 2000)
    listed = await records("pods", conn, "shop")
    assert listed["kind"] == "List" and [p["spec"]["uid"] for p in listed["items"]] == ["shop-web"]
    node = await records("nodes", conn, "", "n1")
    assert node["unschedulable"] is True and node["resource"]["batch_cpu"] == 3000
    assert node["allocated"]["batch_cpu"] == 2000
    table = await _get("pods", conn, "", "web", wide=True)
    assert table.row_count == 1 and [c.header for c in table.columns][-5:] == [
        "priority", "owner", "age", "limits", "reason"]
    with pytest.raises(RefError):
        await _get("pods", conn, "ml", "web")
    with pytest.raises(RefError):
        await records("nodes", conn, "", "n9")


async def test_describe_pod_and_node(store: Store, nats_url: str, redis_url: str) -> None:
    await _cluster(store)
    conn = _conn(store, nats_url, redis_url)
    pod = dict(await _load("pod", "spark", "", conn))
    assert pod["Status"] == "Pending" and pod["Node"] == "n1" and pod["Requests"] == "batch-cpu=2 batch-mem=1Gi"
    assert (pod["Mirror pod"], pod["Static pod"], pod["Local storage"]) == ("yes", "no", "yes")
    rejected = dict(await _load("pod", "shop/web", "", conn))
    assert (rejected["Status"], rejected["Reason"]) == ("Rejected", "priority 9500 is outside the batch range")
    rows = await _load("node", "n1", "", conn)
    node = dict(rows)
    assert node["Cordoned"] == "yes (no new pods)" and node["Requested"].startswith("batch-cpu=2 batch-mem=1Gi")
    assert "batch-cpu=3 batch-mem=4Gi" in node["Offered (slo-manager)"]
    assert rows[-1] == ("", "ml/spark Pending BE batch-cpu=2 batch-mem=1Gi [mirror, local-storage]")


async def test_kv_put_get_and_sub_without_the_nats_cli(nats_url: str, clean_streams: None) -> None:
    rev = await kv_put(nats_url, "colo-config-test", "slo-manager", b"colocation_enabled: true\n")
    assert rev >= 1
    assert await kv_get(nats_url, "colo-config-test", "slo-manager") == b"colocation_enabled: true\n"
    assert await kv_get(nats_url, "colo-config-test", "nope") is None
    assert await kv_get(nats_url, "no-such-bucket", "k") is None

    import nats

    lines: list[str] = []
    task = asyncio.create_task(subscribe(nats_url, "colo.v1.test.>", 2, lines.append))
    nc = await nats.connect(nats_url)
    try:
        for _ in range(100):  # until the subscription is in place
            await nc.publish("colo.v1.test.a", b'{"x":1}')
            await nc.flush()
            if lines:
                break
            await asyncio.sleep(0.05)
        await nc.publish("colo.v1.test.b", b"raw")
        assert await asyncio.wait_for(task, 10) == 2
    finally:
        await nc.close()
    assert lines[0] == '[#1] colo.v1.test.a: {"x":1}' and lines[1].startswith("[#2] colo.v1.test.")


def test_explain_a_pod_that_never_reached_the_scheduler(redis_url: str, nats_url: str,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """Observation 1: ``colo explain`` of a refused pod said "unknown"; it now says why (from the store), by name
    without the namespace too. The scheduler URL answers nothing here: the store is what tells."""
    import argparse

    from colo.cli.explain import cmd_explain
    from colo.cli.output import console

    prefix = "explain-test"

    async def put() -> None:
        store = await Store.connect(redis_url, prefix=prefix)
        try:
            await store.delete_all()
            await store.put_pod(PodRecord(spec=PodSpec(uid="shop-web", name="web", namespace="shop"), phase="Failed",
                                          reason="Rejected: priority 9500 is outside the batch range"))
        finally:
            await store.close()

    asyncio.run(put())
    conn = Connection(load_runtime_settings({"COLO_NATS_URL": nats_url, "COLO_REDIS_URL": redis_url,
                                             "COLO_STORE_PREFIX": prefix}), "env", ())
    try:
        for ref, ns in (("web", ""), ("web", "shop"), ("shop/web", "")):
            args = argparse.Namespace(uid=ref, namespace=ns, scheduler="http://127.0.0.1:1", live=False, json=False,
                                      max_nodes=20)
            assert cmd_explain(args, console, {}, lambda: conn) == 0
            out = capsys.readouterr().out
            assert "pod shop/web (shop-web) never reached the scheduler: admission rejected it: priority 9500" in \
                " ".join(out.split())
        args = argparse.Namespace(uid="nope", namespace="", scheduler="http://127.0.0.1:1", live=False, json=False,
                                  max_nodes=20)
        assert cmd_explain(args, console, {}, lambda: conn) == 1
        assert "no pod 'nope'" in capsys.readouterr().out
    finally:
        async def clean() -> None:
            store = await Store.connect(redis_url, prefix=prefix)
            await store.delete_all()
            await store.close()

        asyncio.run(clean())
