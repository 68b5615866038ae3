"""Issue 14, observation 1: a pod admission refuses no longer vanishes. Against real nats-server and redis-server:
admission records it in the store (``Failed``, ``Rejected: <reason>``) so that ``colo get pods`` shows it,
``colo submit`` (:func:`colo.submission.submit`) waits for the answer and gets the reason, a corrected
resubmission of the same uid is admitted and queued again, and a refused resubmission never overwrites a pod that
is queued or bound."""

from __future__ import annotations

import time
from pathlib import Path

import msgspec
import pytest
from rich.console import Console

from colo.cli.get import pod_reason, pod_status, pods_table
from colo.clock import VirtualClock
from colo.manifests import Manifest
from colo.messages import PodRecord, PodSpec, Resources
from colo.store import Store
from colo.submission import submit
from colo.testing.fixtures import BusFactory, service_context
from colo_slo_manager.service import SloManagerService
from colo_slo_manager.settings import SloManagerSettings

pytestmark = pytest.mark.integration

G = 2**30
# Valid as a manifest would build it, refused by admission: a priority outside its class's range
# (koord-batch with 9500; REFERENCE.md §1). A manifest refuses it up front; the API or an older client may not.
BAD = PodSpec(uid="shop-web", name="web", namespace="shop", priority_class="batch", priority=9500,
              labels={"koordinator.sh/qosClass": "BE"}, requests=Resources(batch_cpu=1000, batch_memory=G))
GOOD = msgspec.structs.replace(BAD, priority=5500)


async def _slo_manager(bus_factory: BusFactory, store: Store) -> SloManagerService:
    bus = await bus_factory("slo-manager", clock=VirtualClock(1000.0), retry_delay_s=0.01)
    service = SloManagerService(SloManagerSettings())
    await service.start(service_context(bus, store, VirtualClock(1000.0)))
    return service


def _table_rows(records: list[PodRecord]) -> list[list[str]]:
    console = Console(width=400, record=True)
    console.print(pods_table(records, {}))
    return [[c.strip() for c in line.split("│")[1:-1]] for line in console.export_text().splitlines()
            if "│" in line and "namespace" not in line]


async def test_rejected_pod_is_answered_recorded_and_shown(bus_factory: BusFactory, nats_url: str,
                                                           store: Store) -> None:
    await _slo_manager(bus_factory, store)
    now = time.time()
    (outcome,) = await submit(Manifest(pods=[msgspec.structs.replace(BAD, created_at=now)]), nats_url, 1, 20.0)
    assert (outcome.kind, outcome.name, outcome.state) == ("Pod", "web", "rejected")
    assert outcome.reason == "priority 9500 is outside the batch range"
    rec = await store.get_pod("shop-web")
    assert rec is not None and (rec.phase, rec.node) == ("Failed", "")
    assert rec.reason == "Rejected: priority 9500 is outside the batch range"
    assert (pod_status(rec), pod_reason(rec, {})) == ("Rejected", "priority 9500 is outside the batch range")
    (row,) = _table_rows(await store.list_pods())
    assert row[:4] == ["shop", "web", "shop-web", "Rejected"] and row[-1] == "priority 9500 is outside the batch range"

    # refused twice (a second submission within JetStream's 120 s de-duplication window): answered again
    (again,) = await submit(Manifest(pods=[msgspec.structs.replace(BAD, created_at=now + 1)]), nats_url, 1, 20.0)
    assert again.state == "rejected"

    # corrected under the same name: admitted (a new answer, not a duplicate) and queued again by the scheduler
    (fixed,) = await submit(Manifest(pods=[msgspec.structs.replace(GOOD, created_at=now + 2)]), nats_url, 1, 20.0)
    assert fixed.state == "admitted"
    assert await store.admit_pending([GOOD], now + 3) == [True]
    rec = await store.get_pod("shop-web")
    assert rec is not None and (rec.phase, rec.reason) == ("Pending", "")


async def test_refused_resubmission_never_overwrites_a_live_pod(bus_factory: BusFactory, nats_url: str,
                                                                store: Store) -> None:
    await _slo_manager(bus_factory, store)
    await store.put_pod(PodRecord(spec=GOOD, phase="Running", node="n1", updated_at=5.0))
    (outcome,) = await submit(Manifest(pods=[msgspec.structs.replace(BAD, created_at=time.time())]), nats_url, 1,
                              20.0)
    assert outcome.state == "rejected"
    rec = await store.get_pod("shop-web")
    assert rec is not None and (rec.phase, rec.node, rec.spec.priority) == ("Running", "n1", 5500)
    assert await store.record_rejected(BAD, "again", 6.0) is False


async def test_no_answer_without_admission_is_reported_unknown(bus_factory: BusFactory, nats_url: str) -> None:
    await bus_factory("nobody")  # streams exist, no slo-manager consumes
    (outcome,) = await submit(Manifest(pods=[msgspec.structs.replace(GOOD, created_at=time.time())]), nats_url, 1,
                              0.3)
    assert outcome.state == "unknown"
    assert await submit(Manifest(pods=[GOOD]), nats_url, 1, None) == []  # --no-wait


async def test_a_resubmission_reaches_the_scheduler_again(bus_factory: BusFactory, nats_url: str,
                                                          store: Store) -> None:
    """Deleted and submitted again within JetStream's de-duplication window (120 s): both submissions reach
    admission and both admissions reach the scheduler's durable consumer (ids are per submission)."""
    from colo import subjects
    from colo.messages import PodAdmitted

    await _slo_manager(bus_factory, store)
    scheduler = await bus_factory("scheduler-stand-in")
    admitted: list[PodAdmitted] = []

    async def collect(msg: PodAdmitted) -> None:
        admitted.append(msg)

    await scheduler.subscribe(subjects.POD_ADMITTED, collect, durable="admitted")
    now = time.time()
    for i in range(2):
        (o,) = await submit(Manifest(pods=[msgspec.structs.replace(GOOD, created_at=now + i)]), nats_url, 1, 20.0)
        assert o.state == "admitted"
    await scheduler.settle(timeout_s=20)
    assert [a.spec.created_at for a in admitted] == [now, now + 1]


async def test_colo_submit_exits_1_with_admissions_reason(bus_factory: BusFactory, nats_url: str, store: Store,
                                                          tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Observation 1 end to end: the command itself (its own event loop, in a thread) against the running
    slo-manager. The file is valid; admission refuses the pod (its PodGroup was never submitted)."""
    import asyncio

    from colo.cli import main as cli

    await _slo_manager(bus_factory, store)
    path = tmp_path / "orphan.yaml"
    path.write_text("metadata: {name: orphan, namespace: ml, labels: {pod-group.scheduling.sigs.k8s.io: nope}}\n"
                    "spec: {containers: [{resources: {requests: {cpu: '1', memory: 1Gi}}}]}\n")
    monkeypatch.setenv("COLO_NATS_URL", nats_url)
    monkeypatch.setenv("COLO_REDIS_URL", "redis://127.0.0.1:1/0")
    code = await asyncio.to_thread(cli.main, ["submit", str(path), "--wait-s", "20"])
    out = " ".join(capsys.readouterr().out.split())
    assert code == 1, out
    assert "pod/orphan submitted" not in out and "pod/orphan (ml-orphan) submitted" in out
    assert "pod/orphan rejected: labels.pod-group.scheduling.sigs.k8s.io: unknown PodGroup 'ml/nope'" in out
    rec = await store.get_pod("ml-orphan")
    assert rec is not None and rec.reason.startswith("Rejected: labels.pod-group")
