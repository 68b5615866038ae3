"""``colo events``: one line per message with its key fields, and ``--count`` honoured exactly."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from colo import subjects as S
from colo.cli.main import describe, follow_events, key_fields
from colo.codec import encode
from colo.messages import (
    ConfigApplied,
    ConfigRejected,
    NodeDeleted,
    NodeMetric,
    NodeResource,
    PodBound,
    PodMigrationJob,
    PodSpec,
    PodStatus,
    PodUnschedulable,
    QoSEvent,
    Resources,
    Usage,
)

GI = 1024**3


@pytest.mark.parametrize(("subject", "msg", "parts"), [
    pytest.param("colo.v1.node.metric.n1",
                 NodeMetric(node="n1", at=1.0, node_usage=Usage(cpu=2500, memory=3 * GI), be_cpu_allowed=1200),
                 ["node.metric.n1", "NodeMetric", "node=n1", "cpu=2500m", "memory=3Gi", "be-cpu-allowed=1200m"],
                 id="node-metric"),
    pytest.param("colo.v1.pod.bound.n2",
                 PodBound(spec=PodSpec(uid="shop-web-0", name="web-0", namespace="shop"), node="n2", at=1.0,
                          attempt_ms=1.234),
                 ["PodBound", "shop/web-0", "uid=shop-web-0", "node=n2", "attempt=1.23ms"], id="pod-bound"),
    pytest.param("colo.v1.pod.submitted",
                 PodSpec(uid="b-1", name="b-1", requests=Resources(batch_cpu=500, batch_memory=GI)),
                 ["PodSpec", "uid=b-1", "qos=LS", "batch-cpu=500m", "batch-memory=1Gi"], id="pod-submitted"),
    pytest.param("colo.v1.pod.unschedulable",
                 PodUnschedulable(uid="u", name="u", reasons={"Insufficient cpu": 2},
                                  message="0/2 nodes are available: 2 Insufficient cpu.", at=1.0, attempts=3),
                 ["uid=u", "attempts=3", "0/2 nodes are available: 2 Insufficient cpu."], id="unschedulable"),
    pytest.param("colo.v1.pod.status.n1", PodStatus(uid="u", node="n1", phase="Failed", at=1.0, reason="Evicted"),
                 ["phase=Failed", "reason=Evicted", "node=n1"], id="status"),
    pytest.param("colo.v1.node.resource.n1", NodeResource(node="n1", batch_cpu=4000, batch_memory=8 * GI),
                 ["node=n1", "batch-cpu=4", "batch-memory=8Gi"], id="resource"),
    pytest.param("colo.v1.node.qos.n1",
                 QoSEvent(node="n1", kind="evict", at=1.0, reason="BE memory eviction", pods=["a", "b", "c", "d"]),
                 ["kind=evict", "reason=BE memory eviction", "pods=a,b,c…"], id="qos"),
    pytest.param("colo.v1.config.rejected.slo-manager",
                 ConfigRejected(service="slo-manager", trigger="kv", version_in_force="abc123", at=1.0,
                                errors=["kv colo-config/slo-manager: batch.bogus: unknown setting",
                                        "kv colo-config/slo-manager: mid.mode: Invalid enum value"]),
                 ["ConfigRejected", "trigger=kv", "in-force=abc123", "2 problem(s)", "batch.bogus: unknown setting",
                  "mid.mode: Invalid enum value"], id="config-rejected"),
    pytest.param("colo.v1.config.applied.slo-manager",
                 ConfigApplied(service="slo-manager", version="abc123", trigger="file", at=1.0,
                               restart_required=["tick_interval_s"]),
                 ["ConfigApplied", "version=abc123", "trigger=file", "restart-required=tick_interval_s"],
                 id="config-applied"),
    pytest.param("colo.v1.migration.Running",
                 PodMigrationJob(id="mig-a-1.000", uid="a", name="web-0", namespace="shop", source="hot",
                                 target="cold", phase="Running", reservation="rsv-mig-a-1.000",
                                 reason="evicted from hot, waiting for the replacement on cold"),
                 ["PodMigrationJob", "job=mig-a-1.000", "pod=shop/web-0", "hot→cold", "phase=Running",
                  "reservation=rsv-mig-a-1.000", "reason=evicted from hot"], id="migration"),
])
def test_lines_carry_key_fields(subject: str, msg: Any, parts: list[str]) -> None:
    line = describe(subject, encode(msg))
    for part in parts:
        assert part in line, (part, line)
    assert "\n" not in line


def test_undecodable_and_unregistered_stay_one_line() -> None:
    assert describe("colo.v1.pod.bound.n1", b"{not json\n}").startswith("pod.bound.n1  undecodable:")
    assert "\n" not in describe("colo.v1.pod.bound.n1", b"{not json\n}")
    assert describe("colo.v1.nope", b"abc") == "nope  (3 bytes, unregistered subject)"


@pytest.mark.integration
@pytest.mark.parametrize("count", [1, 3])
async def test_count_is_honoured_under_a_burst(nats_url: str, count: int) -> None:
    """A node agent reports every node's metric at once: the burst lands in the subscription's queue
    together, and lines after the count must not be written (``--count 3`` used to print 10)."""
    import nats

    nc = await nats.connect(nats_url)
    lines: list[str] = []
    follow = asyncio.create_task(follow_events(nats_url, count, f"{S.PREFIX}.node.metric.>", lines.append))
    try:
        for round_ in range(200):  # bursts of 10 until the follower has its count (it may subscribe late)
            for k in range(10):
                await nc.publish(f"{S.PREFIX}.node.metric.n{k}", encode(NodeMetric(node=f"n{k}", at=float(round_))))
            await nc.flush()
            await asyncio.sleep(0.02)
            if follow.done():
                break
        assert await asyncio.wait_for(follow, 10) == count
    finally:
        await nc.close()
    assert len(lines) == count
    assert all("NodeMetric node=n" in line for line in lines)


@pytest.mark.integration
def test_says_on_stderr_what_it_waits_for(nats_url: str) -> None:
    """``colo events`` used to print nothing until the first message: a new user could not tell it was
    running. The line goes to stderr (stdout stays the events)."""
    import os
    import select
    import subprocess
    import sys
    import time

    env = {**os.environ, "COLO_NATS_URL": nats_url, "NO_COLOR": "1", "COLUMNS": "200"}
    proc = subprocess.Popen([sys.executable, "-m", "colo.cli.main", "events", "--subject", "colo.v1.nothing.>"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    err = b""
    try:
        assert proc.stderr is not None
        deadline = time.monotonic() + 30
        while b"waiting" not in err and time.monotonic() < deadline:
            if select.select([proc.stderr], [], [], 0.5)[0]:
                chunk = os.read(proc.stderr.fileno(), 4096)
                if not chunk:
                    break
                err += chunk
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=20)
    assert "waiting for events on colo.v1.nothing.> (Ctrl-C stops)\n" in err.decode(), err
    assert out == b""


def test_node_deletion_line() -> None:
    """``colo events`` shows who deleted which node and whether it was forced."""
    assert key_fields(NodeDeleted(node="n3", at=1.0, by="api", force=True)) == "node=n3 force by=api"
    assert key_fields(NodeDeleted(node="n3", at=1.0)) == "node=n3"
