"""``colo submit`` waits for the scheduler's answer to an ElasticQuota (real nats-server and redis-server, the
scheduler service): an accepted quota is reported accepted, a refused one exits 1 with the scheduler's reason,
which names the refused quota first (docs/quota.md "Submitting a quota")."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from colo.cli import main as cli
from colo.clock import VirtualClock
from colo.manifests import parse_manifest
from colo.store import Store
from colo.submission import publish_and_wait
from colo.testing.fixtures import BusFactory, service_context
from colo_scheduler.service import SchedulerService
from colo_scheduler.settings import SchedulerSettings

pytestmark = pytest.mark.integration


def quota_yaml(name: str, namespace: str = "spark") -> str:
    return f"""
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: ElasticQuota
metadata: {{name: {name}}}
spec:
  namespaces: [{namespace}]
  min: {{cpu: "4"}}
  max: {{cpu: "8"}}
"""


@contextlib.asynccontextmanager
async def running_scheduler(bus_factory: BusFactory, store: Store) -> AsyncIterator[SchedulerService]:
    """The scheduler service on a virtual clock, its cycles run every 20 ms of wall time."""
    clock = VirtualClock(1000.0)
    bus = await bus_factory("scheduler", clock=clock, retry_delay_s=0.01)
    svc = SchedulerService(SchedulerSettings(seed=1))
    await svc.start(service_context(bus, store, clock))
    await bus.start_consumers()

    async def cycles() -> None:
        while True:
            clock.advance_to(clock.now() + 0.1)
            await svc.tick(clock.now())
            await asyncio.sleep(0.02)

    task = asyncio.create_task(cycles())
    try:
        yield svc
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await svc.stop()


async def test_submit_reports_the_schedulers_answer_to_a_quota(bus_factory: BusFactory, store: Store, nats_url: str,
                                                              tmp_path: Path, monkeypatch: Any, capsys: Any) -> None:
    monkeypatch.setenv("COLO_NATS_URL", nats_url)
    client = await bus_factory("tester")
    async with running_scheduler(bus_factory, store):
        (ok,) = await publish_and_wait(client, parse_manifest(quota_yaml("team-spark"), now=1.0), wait_s=10)
        assert (ok.kind, ok.name, ok.state) == ("ElasticQuota", "team-spark", "admitted")
        again = await publish_and_wait(client, parse_manifest(quota_yaml("team-spark"), now=2.0), wait_s=10)
        assert [o.state for o in again] == ["admitted"]  # an unchanged resubmission is answered too
        bad = tmp_path / "badquota.yaml"
        bad.write_text(quota_yaml("team-dup"))
        capsys.readouterr()
        assert await asyncio.to_thread(cli.main, ["submit", str(bad), "--wait-s", "10"]) == 1
        out = capsys.readouterr().out
        assert ("elasticquota/team-dup refused by the scheduler: quota team-dup: namespaces: 'spark' is already "
                "selected by quota team-spark") in " ".join(out.split())
