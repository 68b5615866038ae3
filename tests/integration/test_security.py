"""The setup of ``colo security init`` on real servers (docs/security.md): a nats-server with one nkey user per
service and TLS, a redis-server with one ACL user per service and TLS.

* every service runs in-process with its own credentials over TLS, a pod submitted through the API is admitted,
  bound and running, and neither server logged a refusal (nats-server's permission violations, Redis' ACL LOG):
  a service using a subject, key or command left out of its grant fails here;
* a node agent publishing another node's metric is refused by the server (the client's error callback
  reports the violation) and the scheduler never sees that node;
* a client without credentials, or with the wrong ones, cannot connect; each Redis user is refused outside its
  key patterns and commands;
* the HTTP endpoints but /healthz and /readyz need the bearer token.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import ssl
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import nats
import nats.errors
import pytest
import pytest_asyncio
import redis.asyncio as aioredis
import redis.exceptions

from colo import subjects as S
from colo.bus import Bus
from colo.connections import redis_options
from colo.messages import NodeMetric, NodeSpec, Resources, Tick
from colo.runtime import Service, ServiceRunner
from colo.settings import RuntimeSettings
from colo.store import Store
from colo.testing.secure import SecuredServers, secured_servers
from colo_api.service import ApiService
from colo_api.settings import ApiSettings
from colo_descheduler.service import DeschedulerService
from colo_node_agent.service import NodeAgentService
from colo_node_agent.settings import NodeAgentSettings
from colo_profiler.service import ProfilerService
from colo_scheduler.service import SchedulerService
from colo_scheduler.settings import SchedulerSettings
from colo_slo_manager.service import SloManagerService

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]
log = logging.getLogger("test.security")

NODES = ["s1", "s2"]
OTHER = "s9"
"""A node the cluster's node agent does not serve (the user for it is another node agent's)."""
STEP_S = 60.0
SAME: Any = object()
"""In a Redis command below: the key's current value."""
ORDER = ("node-agent", "profiler", "slo-manager", "scheduler", "descheduler")
WEB = """
kind: Pod
metadata: {name: web-0, namespace: shop, labels: {app: web}}
spec:
  priority: 9500
  containers: [{name: web, resources: {requests: {cpu: "2", memory: 4Gi}, limits: {cpu: "2", memory: 4Gi}}}]
"""


def node(name: str) -> NodeSpec:
    r = Resources(cpu=16_000, memory=64 * 1024**3, pods=110)
    return NodeSpec(name=name, capacity=r, allocatable=r, cpus=16)


@pytest.fixture(scope="module")
def secured() -> Iterator[SecuredServers]:
    with secured_servers([NODES, [OTHER]]) as srv:
        yield srv


def violations(srv: SecuredServers) -> list[str]:
    return [line for line in srv.nats.log_path.read_text().splitlines() if "Violation" in line]


async def acl_log(srv: SecuredServers) -> list[dict[str, Any]]:
    admin = srv.runtime_settings("admin")
    r = aioredis.from_url(srv.redis_url, **{k: v for k, v in redis_options(admin).items() if k != "ssl"})
    try:
        entries = await r.acl_log()
        return list(entries)
    finally:
        await r.aclose()


class Cluster:
    """The six services, each as its own user, and the admin's bus that steps them (as ``colo.sim`` does)."""

    def __init__(self, srv: SecuredServers) -> None:
        self.srv = srv
        self.runners: dict[str, ServiceRunner] = {}
        self.bus: Bus | None = None
        self.step_no = 0

    async def start(self) -> None:
        services: dict[str, tuple[str, Service]] = {
            "node-agent": ("node-agent-1", NodeAgentService(NodeAgentSettings(), nodes=[node(n) for n in NODES])),
            "profiler": ("profiler", ProfilerService()),
            "slo-manager": ("slo-manager", SloManagerService()),
            "scheduler": ("scheduler", SchedulerService(SchedulerSettings(seed=1))),
            "descheduler": ("descheduler", DeschedulerService()),
        }
        for name, (user, service) in services.items():
            self.runners[name] = ServiceRunner(service, self.srv.runtime_settings(user, COLO_SIM="true"))
            await self.runners[name].start()
        self.runners["api"] = ServiceRunner(ApiService(ApiSettings(admission_wait_s=0)),
                                            self.srv.runtime_settings("api"))
        await self.runners["api"].start()
        admin = self.srv.runtime_settings("admin")
        self.bus = await Bus.connect(admin.nats_url, "cluster-driver", settings=admin)
        await self.step()

    async def step(self, count: int = 1) -> None:
        assert self.bus is not None
        for _ in range(count):
            self.step_no += 1
            now = self.step_no * STEP_S
            for settle in (False, True):
                for name in ORDER:
                    ack = await self.bus.request_tick(name, Tick(seq=self.step_no, now=now, step_s=STEP_S,
                                                                 settle_only=settle), timeout_s=60)
                    assert not ack.error, f"{name}: {ack.error}"

    async def stop(self) -> None:
        for runner in reversed(list(self.runners.values())):
            await runner.stop()
        if self.bus is not None:
            await self.bus.close()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def cluster(secured: SecuredServers) -> AsyncIterator[Cluster]:
    c = Cluster(secured)
    try:
        await c.start()
        yield c
    finally:
        await c.stop()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def admin_store(secured: SecuredServers) -> AsyncIterator[Store]:
    s = secured.runtime_settings("admin")
    store = await Store.connect(s.redis_url, s.store_prefix, settings=s)
    try:
        yield store
    finally:
        await store.close()


async def test_every_service_works_with_its_own_credentials_over_tls(
        secured: SecuredServers, cluster: Cluster, admin_store: Store) -> None:
    token = (secured.dir / "http-token").read_text().strip()
    api = f"http://127.0.0.1:{cluster.runners['api'].http_port}"
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"}) as http:
        async with http.post(f"{api}/v1/submit", data=WEB) as resp:
            assert resp.status == 201, await resp.text()
        await cluster.step(3)
        async with http.get(f"{api}/v1/pods/shop/web-0") as resp:
            pod = await resp.json()
    assert pod["node"] in NODES and pod["state"] in ("Bound", "Running"), pod
    assert sorted(n.name for n in await admin_store.list_nodes()) == NODES
    assert violations(secured) == [], "a service used a subject its grant leaves out (colo.permissions)"
    refused = await acl_log(secured)
    assert refused == [], f"a service used a key or command its ACL leaves out (colo.redis_acl): {refused}"


async def test_a_node_agent_may_not_publish_another_nodes_metric(
        secured: SecuredServers, cluster: Cluster, admin_store: Store, caplog: pytest.LogCaptureFixture) -> None:
    s = secured.runtime_settings("node-agent-1")
    bus = await Bus.connect(s.nats_url, "node-agent", settings=s)  # a service's error callback: logs a warning
    try:
        with caplog.at_level(logging.WARNING, logger="colo.bus"):
            await bus.publish(S.NODE_METRIC, NodeMetric(node=NODES[0], at=cluster.step_no * STEP_S), node=NODES[0])
            with pytest.raises(TimeoutError):  # the server drops the message: no stream ever acknowledges it
                await asyncio.wait_for(bus.publish(S.NODE_METRIC, NodeMetric(node=OTHER, at=1.0), node=OTHER), 2.0)
            await bus.nc.flush()
            await asyncio.sleep(0.2)
        seen = [r.getMessage() for r in caplog.records if "permissions violation" in r.getMessage().lower()]
    finally:
        await bus.close()
    server_side = [v for v in violations(secured) if OTHER in v]
    print("client error callback:", *seen, sep="\n  ")
    print("nats-server log:", *server_side, sep="\n  ")
    assert seen and f"colo.v1.node.metric.{OTHER}" in seen[0]  # nats-py reports the subject lowercased
    assert server_side and "Publish Violation" in server_side[0]
    await cluster.step()
    info = await cluster.bus.js.stream_info(S.METRICS, subjects_filter=S.NODE_METRIC.format(node=OTHER))  # type: ignore[union-attr]
    assert not info.state.subjects, "the refused metric reached the stream"
    debug = cluster.runners["scheduler"].service.debug()
    assert OTHER not in str(debug), "the scheduler saw the node of the refused metric"
    assert OTHER not in {n.name for n in await admin_store.list_nodes()}


async def test_a_user_cannot_read_another_users_replies(secured: SecuredServers) -> None:
    s = secured.runtime_settings("node-agent-1")
    assert s.nats_inbox_prefix == "_INBOX_node-agent-1"
    errors: list[Exception] = []

    async def on_error(exc: Exception) -> None:
        errors.append(exc)

    from colo.connections import nats_options
    nc = await nats.connect(secured.nats_url, error_cb=on_error, max_reconnect_attempts=0, **nats_options(s))
    try:
        await nc.subscribe("_INBOX_scheduler.>")
        await nc.subscribe("_INBOX.>")
        await nc.flush()
        await asyncio.sleep(0.2)
    finally:
        await nc.close()
    refused = [str(e).lower() for e in errors if "permissions violation" in str(e).lower()]
    assert len(refused) == 2 and "subscription" in refused[0], errors


async def test_a_client_without_the_right_credentials_cannot_connect(secured: SecuredServers) -> None:
    with pytest.raises((ssl.SSLError, nats.errors.Error)):  # no CA: the server's certificate is not trusted
        await nats.connect(f"nats://127.0.0.1:{secured.nats.port}", allow_reconnect=False, connect_timeout=2,
                           max_reconnect_attempts=0)
    bare = RuntimeSettings(nats_url=secured.nats_url, nats_tls_ca_file=str(secured.dir / "ca.pem"))
    errors: list[Exception] = []

    async def on_error(exc: Exception) -> None:
        errors.append(exc)

    from colo.connections import nats_options
    with pytest.raises((nats.errors.NoServersError, nats.errors.Error)):  # TLS, but no credentials
        await nats.connect(secured.nats_url, allow_reconnect=False, connect_timeout=2, max_reconnect_attempts=0,
                           error_cb=on_error, **nats_options(bare))
    print("without credentials:", *map(repr, errors), sep="\n  ")
    assert any("Authorization Violation" in str(e) for e in errors)
    wrong = secured.runtime_settings("api", COLO_REDIS_PASSWORD_FILE=str(secured.dir / "redis-passwords" / "scheduler"))
    with pytest.raises(redis.exceptions.AuthenticationError):
        await Store.connect(wrong.redis_url, wrong.store_prefix, settings=wrong)


@pytest.mark.parametrize(("user", "command", "allowed"), [
    ("api", ("GET", "colo:node:x"), True),
    ("api", ("SET", "colo:node:x", "1"), False),  # read-only user
    ("profiler", ("SET", "colo:checkpoint:profiler", SAME), True),
    ("profiler", ("SET", "colo:binding:u1", "1"), False),  # outside its written families
    ("scheduler", ("SET", "other:key", "1"), False),  # outside the prefix
    ("scheduler", ("FLUSHALL",), False),  # a command no service needs
    ("scheduler", ("CONFIG", "GET", "*"), False),
    ("node-agent-1", ("HSET", "colo:podstate:u1", "phase", "Running"), True),
    ("node-agent-1", ("HSET", "colo:binding:u1", "node", "s1"), True),  # reconciliation restores bindings
    ("node-agent-1", ("HSET", "colo:alloc:s9", "cpu", "1"), False),  # another node agent's allocation
    ("node-agent-1", ("SET", "colo:lease:scheduler", "x"), False),  # outside its written families
    ("node-agent-1", ("SET", "colo:node:s1", SAME), True),
    ("node-agent-1", ("GET", "colo:node:s9"), True),
    ("node-agent-1", ("SET", "colo:node:s9", SAME), False),  # another node agent's node
    ("node-agent-1", ("HSET", "colo:limits:s9", "cpu", "1"), False),
])
async def test_redis_users_are_refused_outside_their_grant(secured: SecuredServers, user: str,
                                                           command: tuple[str, ...], allowed: bool) -> None:
    s = secured.runtime_settings(user)
    r = aioredis.from_url(s.redis_url, **{k: v for k, v in redis_options(s).items() if k != "ssl"})
    try:
        existed = True
        if command[-1] is SAME:  # write the key's own value back: the running cluster's state stays as it is
            value = await r.get(command[1])
            existed = value is not None
            command = (*command[:-1], value or b"")
        if allowed:
            await r.execute_command(*command)
            if not existed:
                await r.delete(command[1])
        else:
            with pytest.raises(redis.exceptions.NoPermissionError):
                await r.execute_command(*command)
    finally:
        await r.aclose()


async def test_http_endpoints_need_the_token_but_probes(secured: SecuredServers, cluster: Cluster) -> None:
    token = (secured.dir / "http-token").read_text().strip()
    base = f"http://127.0.0.1:{cluster.runners['scheduler'].http_port}"
    async with aiohttp.ClientSession() as http:
        for path in ("/healthz", "/readyz"):
            async with http.get(base + path) as resp:
                assert resp.status == 200, path
        for path in ("/metrics", "/debug/state"):
            async with http.get(base + path) as resp:
                assert resp.status == 401 and resp.headers["WWW-Authenticate"].startswith("Bearer"), path
            async with http.get(base + path, headers={"Authorization": "Bearer wrong"}) as resp:
                assert resp.status == 401, path
            async with http.get(base + path, headers={"Authorization": f"Bearer {token}"}) as resp:
                assert resp.status == 200, path
        api = f"http://127.0.0.1:{cluster.runners['api'].http_port}"
        async with http.get(api + "/v1/nodes") as resp:
            assert resp.status == 401  # the API takes the services' token when it has none of its own
        async with http.get(api + "/v1/nodes", headers={"Authorization": f"Bearer {token}"}) as resp:
            assert resp.status == 200


async def _colo(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("COLO_")}
    proc = await asyncio.create_subprocess_exec(str(Path(sys.executable).parent / "colo"), *args,
                                                env={**base, **env}, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode or 0, out.decode(), err.decode()


async def test_colo_commands_use_the_link_settings(secured: SecuredServers, cluster: Cluster,
                                                   tmp_path: Path) -> None:
    env = {**secured.env("admin"), "COLO_STATE_DIR": str(tmp_path)}
    code, out, err = await _colo(env, "get", "nodes", "-o", "json")
    assert code == 0, err
    assert sorted(i["name"] for i in json.loads(out)["items"]) == NODES
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(WEB.replace("web-0", "web-cli"))
    code, out, err = await _colo(env, "submit", str(manifest), "--no-wait")
    assert code == 0 and "web-cli" in out, err


async def test_the_raw_nats_reads_of_the_cli_use_the_link_settings(secured: SecuredServers, cluster: Cluster) -> None:
    from colo.cli.events import follow_events
    from colo.cli.quotas import latest_quota_statuses

    admin = secured.runtime_settings("admin")
    assert await latest_quota_statuses(admin.nats_url, settings=admin) == []
    lines: list[str] = []
    follower = asyncio.create_task(follow_events(admin.nats_url, 1, "colo.v1.node.qos.>", lines.append,
                                                 settings=admin))
    assert cluster.bus is not None
    while not follower.done() and not lines:
        await cluster.bus.nc.publish(S.NODE_QOS.format(node=NODES[0]), b"{}")
        await asyncio.sleep(0.1)
    assert await asyncio.wait_for(follower, 10) == 1 and "node.qos" in lines[0]


async def test_after_a_store_loss_the_node_agent_reconciles_under_its_acl(
        secured: SecuredServers, cluster: Cluster, admin_store: Store) -> None:
    """Issue 15, attacked: the store emptied under the running services (a Redis without persistence
    restarted). The node agent, as its own ACL user, registers its nodes again and restores the binding
    and allocation of the pod it runs; no Redis user is refused anything (ACL LOG) and no NATS user
    either."""
    admin = secured.runtime_settings("admin")
    r = aioredis.from_url(secured.redis_url, **{k: v for k, v in redis_options(admin).items() if k != "ssl"})
    await r.acl_log_reset()  # the refusals the tests above provoked on purpose
    await r.aclose()
    provoked = len(violations(secured))  # by the tests above, on purpose
    token = (secured.dir / "http-token").read_text().strip()
    api = f"http://127.0.0.1:{cluster.runners['api'].http_port}"
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"}) as http:
        async with http.post(f"{api}/v1/submit", data=WEB.replace("web-0", "web-loss")) as resp:
            assert resp.status == 201, await resp.text()
        await cluster.step(3)
        async with http.get(f"{api}/v1/pods/shop/web-loss") as resp:
            before = await resp.json()
    assert before["state"] == "Running", before
    r = aioredis.from_url(secured.redis_url, **{k: v for k, v in redis_options(admin).items() if k != "ssl"})
    try:
        keys = [k async for k in r.scan_iter(match=f"{admin.store_prefix}:*", count=1000)]
        assert keys
        await r.unlink(*keys)
        assert await r.dbsize() == 0
    finally:
        await r.aclose()
    await cluster.step(2)
    assert sorted(n.name for n in await admin_store.list_nodes()) == NODES
    record = await admin_store.get_pod(before["uid"])
    assert record is not None and record.node == before["node"], record
    assert (await admin_store.allocated(before["node"])).cpu >= 2000
    refused = await acl_log(secured)
    assert refused == [], f"a service was refused by its Redis ACL after the store loss: {refused}"
    assert violations(secured)[provoked:] == []
    fixes = cluster.runners["node-agent"].service.reconcile_fixes  # type: ignore[attr-defined]
    assert fixes.get("node_registered") and fixes.get("binding_restored"), fixes


QUOTA = """
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: ElasticQuota
metadata: {name: acl-q}
spec:
  min: {cpu: "8", memory: 32Gi}
  max: {cpu: "16", memory: 64Gi}
  namespaces: [ml]
"""
QUOTA_JOB = """
apiVersion: batch/v1
kind: Job
metadata: {name: acl-job, namespace: ml}
spec:
  parallelism: 2
  completions: 2
  template:
    metadata:
      annotations: {colo.io/sim-duration: 2m, colo.io/sim-cpu: 500m}
    spec:
      priorityClassName: koord-prod
      containers: [{name: w, resources: {requests: {cpu: "1", memory: 1Gi}, limits: {cpu: "1", memory: 1Gi}}}]
"""


async def test_quotas_reservations_and_releases_under_the_acls(secured: SecuredServers, cluster: Cluster,
                                                              admin_store: Store) -> None:
    """Issue 15, attacked: the flows beyond one pod, each service as its own Redis and NATS user: a quota,
    a reservation, a Job whose pods run in a quota and finish (release with quota use), checkpoints. No
    ACL LOG entry, no permission violation."""
    admin = secured.runtime_settings("admin")
    r = aioredis.from_url(secured.redis_url, **{k: v for k, v in redis_options(admin).items() if k != "ssl"})
    await r.acl_log_reset()
    await r.aclose()
    provoked = len(violations(secured))
    root = Path(__file__).resolve().parents[2] / "examples"
    token = (secured.dir / "http-token").read_text().strip()
    api = f"http://127.0.0.1:{cluster.runners['api'].http_port}"
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"}) as http:
        for body in (QUOTA, (root / "reservation.yaml").read_text(), QUOTA_JOB):
            async with http.post(f"{api}/v1/submit", data=body) as resp:
                assert resp.status == 201, await resp.text()
        await cluster.step(6)
        async with http.get(f"{api}/v1/pods?namespace=ml") as resp:
            pods = await resp.json()
    states = sorted((p["name"], p["state"]) for p in pods.get("items", pods))
    assert states == [("acl-job-0", "Succeeded"), ("acl-job-1", "Succeeded")], states
    refused = await acl_log(secured)
    assert refused == [], f"a Redis user was refused: {[(e['username'], e['reason'], e['object']) for e in refused]}"
    assert violations(secured)[provoked:] == []


async def test_a_node_deletion_under_the_acls(secured: SecuredServers, cluster: Cluster) -> None:
    """``DELETE /v1/nodes/{name}?force=true`` as the API's user, applied by the scheduler as its own (it reads the
    node's last ``node.registered`` from COLO_NODES and removes the node with a store script): no ACL LOG entry,
    no permission violation; the node agent's reconciliation registers the node again, and it is a candidate again.
Last in the module."""
    admin = secured.runtime_settings("admin")
    r = aioredis.from_url(secured.redis_url, **{k: v for k, v in redis_options(admin).items() if k != "ssl"})
    await r.acl_log_reset()
    await r.aclose()
    provoked = len(violations(secured))
    token = (secured.dir / "http-token").read_text().strip()
    api = f"http://127.0.0.1:{cluster.runners['api'].http_port}"
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"}) as http:
        async with http.delete(f"{api}/v1/nodes/{NODES[1]}?force=true") as resp:
            assert resp.status == 202, await resp.text()
    scheduler = cluster.runners["scheduler"].service
    assert isinstance(scheduler, SchedulerService)
    for _ in range(100):
        if scheduler.node_deletion.totals["nodes_deleted"]:
            break
        await asyncio.sleep(0.1)
    assert scheduler.node_deletion.totals["nodes_deleted"] == 1
    await cluster.step(2)  # the node agent's reconciliation registers it again: a candidate again
    assert scheduler.core.table.index[NODES[1]] not in scheduler.core.table.retired
    refused = await acl_log(secured)
    assert refused == [], f"a Redis user was refused: {[(e['username'], e['reason'], e['object']) for e in refused]}"
    assert violations(secured)[provoked:] == []
