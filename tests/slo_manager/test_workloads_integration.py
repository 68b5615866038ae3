"""Workloads through the slo-manager against real nats-server and redis-server: a Job with a gang becomes pods
on ``pod.admitted`` with owner and gang; a rejected workload admits nothing; PodGroups survive a restart and
give bare pods their gang; the Job controller creates pods as others succeed, across a restart."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from colo import subjects
from colo.bus import Bus
from colo.clock import VirtualClock
from colo.messages import (
    POD_GROUP_LABEL,
    PodAdmitted,
    PodGroupSpec,
    PodRejected,
    PodSpec,
    PodStatus,
    Resources,
    WorkloadAdmitted,
    WorkloadRejected,
    WorkloadSpec,
)
from colo.store import Store
from colo.testing.fixtures import BusFactory, service_context
from colo_slo_manager.service import SloManagerService
from colo_slo_manager.settings import SloManagerSettings

pytestmark = pytest.mark.integration

G = 10**9
T0 = 1000.0
BE = PodSpec(uid="", name="", labels={"koordinator.sh/qosClass": "BE"}, priority=5500,
             requests=Resources(cpu=2000, memory=4 * G))
KEYS = (("admitted", subjects.POD_ADMITTED), ("rejected", subjects.POD_REJECTED),
        ("wadmitted", subjects.WORKLOAD_ADMITTED), ("wrejected", subjects.WORKLOAD_REJECTED))


@dataclass
class Harness:
    service: SloManagerService
    bus: Bus
    client: Bus
    clock: VirtualClock
    seen: dict[str, list[Any]] = field(default_factory=dict)

    async def settle(self) -> None:
        for _ in range(2):
            await self.client.settle(timeout_s=20)
            await self.bus.settle(timeout_s=20)
            await self.client.settle(timeout_s=20)


def _collector(sink: list[Any]) -> Callable[[Any], Awaitable[None]]:
    async def collect(msg: Any) -> None:
        sink.append(msg)

    return collect


async def _service(bus_factory: BusFactory, store: Store, clock: VirtualClock,
                   retry_delay_s: float = 0.01) -> tuple[SloManagerService, Bus]:
    bus = await bus_factory("slo-manager", clock=clock, retry_delay_s=retry_delay_s)
    service = SloManagerService(SloManagerSettings())
    await service.start(service_context(bus, store, clock))
    return service, bus


async def _harness(bus_factory: BusFactory, store: Store, retry_delay_s: float = 0.01) -> Harness:
    clock = VirtualClock(T0)
    client = await bus_factory("test-client")
    seen: dict[str, list[Any]] = {}
    for key, subject in KEYS:
        await client.subscribe(subject, _collector(seen.setdefault(key, [])), durable=key)
    service, bus = await _service(bus_factory, store, clock, retry_delay_s)
    return Harness(service=service, bus=bus, client=client, clock=clock, seen=seen)


async def _restart(h: Harness, bus_factory: BusFactory, store: Store) -> None:
    await h.bus.stop_consumers()
    h.service, h.bus = await _service(bus_factory, store, h.clock)


def _job(**kw: Any) -> WorkloadSpec:
    base: dict[str, Any] = {"kind": "Job", "uid": "ml-train", "name": "train", "namespace": "ml", "template": BE,
                            "parallelism": 4, "completions": 4, "created_at": T0}
    base.update(kw)
    return WorkloadSpec(**base)


GANG = PodGroupSpec(uid="ml-train-gang", name="train", namespace="ml", min_member=4, timeout_s=7200.0,
                    created_at=T0)


async def test_job_with_gang_admitted_as_pods_with_owner_and_gang(bus_factory: BusFactory, store: Store) -> None:
    h = await _harness(bus_factory, store)
    await h.client.publish(subjects.WORKLOAD_SUBMITTED, _job(pod_group=GANG), msg_id="w1")
    await h.settle()
    admitted: list[PodAdmitted] = h.seen["admitted"]
    assert sorted(a.spec.uid for a in admitted) == [f"ml-train-{i}" for i in range(4)]
    for a in admitted:
        assert a.spec.owner is not None and (a.spec.owner.kind, a.spec.owner.uid) == ("Job", "ml-train")
        assert a.spec.gang is not None
        assert (a.spec.gang.name, a.spec.gang.min_member, a.spec.gang.total_member, a.spec.gang.timeout_s) == (
            "ml/train", 4, 4, 7200.0)
        assert a.profile == "batch"
    (done,) = h.seen["wadmitted"]
    assert isinstance(done, WorkloadAdmitted) and done.pods == [f"ml-train-{i}" for i in range(4)]
    assert h.seen["rejected"] == [] and h.seen["wrejected"] == []

    # the same uid again (a redelivery, a second submit): nothing new is admitted
    await h.client.publish(subjects.WORKLOAD_SUBMITTED, _job(pod_group=GANG, created_at=T0 + 5), msg_id="w1-again")
    await h.settle()
    assert len(h.seen["admitted"]) == 4 and h.service.admitted == 4
    same = h.seen["wadmitted"][-1]
    assert len(h.seen["wadmitted"]) == 2 and same.not_applied == []  # answered, and nothing was left out


async def test_a_resubmitted_workload_with_a_changed_spec_says_what_was_not_applied(bus_factory: BusFactory,
                                                                                     store: Store) -> None:
    h = await _harness(bus_factory, store)
    deployment = _job(kind="Deployment", uid="ml-web", name="web", replicas=3)
    await h.client.publish(subjects.WORKLOAD_SUBMITTED, deployment, msg_id="d1")
    await h.settle()
    bigger = _job(kind="Deployment", uid="ml-web", name="web", replicas=5, created_at=T0 + 5,
                  template=PodSpec(uid="", name="", labels={"koordinator.sh/qosClass": "BE"}, priority=5500,
                                   requests=Resources(cpu=4000, memory=4 * G), created_at=T0 + 5))
    await h.client.publish(subjects.WORKLOAD_SUBMITTED, bigger, msg_id="d2")
    await h.settle()
    assert len(h.seen["admitted"]) == 3  # the first admitted spec holds
    first, again = h.seen["wadmitted"]
    assert first.not_applied == [] and len(again.pods) == 3
    assert again.not_applied == ["replicas: 3 → 5", "template"]


async def test_rejected_workload_admits_none_of_its_pods(bus_factory: BusFactory, store: Store) -> None:
    h = await _harness(bus_factory, store)
    bad = PodSpec(uid="", name="", qos_class="LSR", priority_class="batch", requests=Resources(cpu=1500))
    await h.client.publish(subjects.WORKLOAD_SUBMITTED, _job(template=bad, pod_group=GANG), msg_id="bad")
    await h.client.publish(subjects.WORKLOAD_SUBMITTED,
                           _job(uid="ml-big", name="big", pod_group=PodGroupSpec(uid="g", name="big", namespace="ml",
                                                                                   min_member=9)), msg_id="big")
    await h.settle()
    assert h.seen["admitted"] == [] and h.seen["wadmitted"] == []
    rejected: list[WorkloadRejected] = h.seen["wrejected"]
    assert [r.uid for r in rejected] == ["ml-train", "ml-big"]
    assert any(e.startswith("template: QoS class LSR requires priority class prod") for e in rejected[0].errors)
    assert rejected[1].errors == ["pod_group.min_member: must be at most the workload's 4 pods, got 9"]
    assert await store.get_workload_record("ml-train") is None


async def test_pod_groups_survive_a_restart_and_give_bare_pods_their_gang(bus_factory: BusFactory,
                                                                           store: Store) -> None:
    h = await _harness(bus_factory, store)
    group = PodGroupSpec(uid="ml-pg", name="pg", namespace="ml", min_member=2, mode="NonStrict", created_at=T0)
    await h.client.publish(subjects.PODGROUP_SUBMITTED, group, msg_id="pg")
    await h.settle()
    assert [(w.kind, w.name) for w in h.seen["wadmitted"]] == [("PodGroup", "pg")]
    await _restart(h, bus_factory, store)
    member = PodSpec(uid="ml-a", name="a", namespace="ml", labels={POD_GROUP_LABEL: "pg"}, requests=Resources(cpu=100))
    stray = PodSpec(uid="ml-b", name="b", namespace="ml", labels={POD_GROUP_LABEL: "nope"})
    await h.client.publish(subjects.POD_SUBMITTED, member, msg_id="a")
    await h.client.publish(subjects.POD_SUBMITTED, stray, msg_id="b")
    await h.settle()
    (a,) = h.seen["admitted"]
    assert a.spec.gang is not None and (a.spec.gang.name, a.spec.gang.min_member, a.spec.gang.mode) == (
        "ml/pg", 2, "NonStrict")
    (b,) = h.seen["rejected"]
    assert isinstance(b, PodRejected) and b.uid == "ml-b" and "unknown PodGroup 'ml/nope'" in b.reason


async def test_pod_delivered_before_its_pod_group_waits_for_it(bus_factory: BusFactory, store: Store) -> None:
    # retries 0.3 s, 0.6 s, 1.2 s apart: the PodGroup published right after the pod arrives within them
    h = await _harness(bus_factory, store, retry_delay_s=0.3)
    member = PodSpec(uid="ml-a", name="a", namespace="ml", labels={POD_GROUP_LABEL: "late"})
    await h.client.publish(subjects.POD_SUBMITTED, member, msg_id="a")
    await h.client.publish(subjects.PODGROUP_SUBMITTED,
                           PodGroupSpec(uid="ml-late", name="late", namespace="ml", min_member=1), msg_id="late")
    await h.settle()
    (a,) = h.seen["admitted"]
    assert a.spec.gang is not None and a.spec.gang.name == "ml/late"
    assert h.seen["rejected"] == []


async def test_bad_pod_group_rejected(bus_factory: BusFactory, store: Store) -> None:
    h = await _harness(bus_factory, store)
    await h.client.publish(subjects.PODGROUP_SUBMITTED, PodGroupSpec(uid="g", name="g", min_member=0), msg_id="g")
    await h.settle()
    (r,) = h.seen["wrejected"]
    assert r.kind == "PodGroup" and r.errors == ["min_member: must be ≥ 1, got 0"]
    assert await store.list_pod_groups() == {}


async def _succeed(h: Harness, uid: str) -> None:
    await h.client.publish(subjects.POD_STATUS, PodStatus(uid=uid, node="n1", phase="Succeeded", at=h.clock.now()),
                           node="n1")
    await h.settle()


async def test_job_controller_creates_pods_as_others_succeed_across_a_restart(bus_factory: BusFactory,
                                                                               store: Store) -> None:
    h = await _harness(bus_factory, store)
    await h.client.publish(subjects.WORKLOAD_SUBMITTED, _job(parallelism=2, completions=4), msg_id="j")
    await h.settle()
    assert [a.spec.uid for a in h.seen["admitted"]] == ["ml-train-0", "ml-train-1"]
    await _succeed(h, "ml-train-0")
    assert [a.spec.uid for a in h.seen["admitted"]][2:] == ["ml-train-2"]
    await _succeed(h, "ml-train-0")  # a repeated status changes nothing
    assert len(h.seen["admitted"]) == 3

    await _restart(h, bus_factory, store)
    await _succeed(h, "ml-train-1")
    await _succeed(h, "ml-train-2")
    await _succeed(h, "ml-train-3")
    uids = [a.spec.uid for a in h.seen["admitted"]]
    assert uids == [f"ml-train-{i}" for i in range(4)]
    record = h.service.workloads.records["ml-train"]
    assert record.complete and record.succeeded == 4 and record.active == []
    assert h.seen["wadmitted"][-1].pods == uids
    assert all(a.spec.owner is not None and a.spec.owner.name == "train" for a in h.seen["admitted"])


async def test_job_step_that_fails_to_publish_is_redone_on_redelivery(bus_factory: BusFactory, store: Store) -> None:
    h = await _harness(bus_factory, store)
    await h.client.publish(subjects.WORKLOAD_SUBMITTED, _job(parallelism=1, completions=2), msg_id="j")
    await h.settle()
    workloads = h.service.workloads
    real = workloads._publish_pod
    calls = []

    async def flaky(results: list[Any]) -> None:
        calls.append(len(results))
        if len(calls) == 1:
            raise ConnectionError("NATS went away")
        await real(results)

    workloads._publish_pod = flaky
    await _succeed(h, "ml-train-0")
    assert calls == [1, 1]
    assert [a.spec.uid for a in h.seen["admitted"]] == ["ml-train-0", "ml-train-1"]
    record = workloads.records["ml-train"]
    assert (record.succeeded, record.active) == (1, ["ml-train-1"])


async def test_submitted_manifest_end_to_end(bus_factory: BusFactory, store: Store, nats_url: str) -> None:
    """``colo submit examples/podgroups.yaml``'s publishes: the PodGroups, then StatefulSets whose pods join them."""
    from pathlib import Path

    from colo.cli.submit import publications, publish
    from colo.manifests import load_manifest

    h = await _harness(bus_factory, store, retry_delay_s=0.2)
    manifest = load_manifest(Path(__file__).parents[2] / "examples" / "podgroups.yaml", now=T0)
    await publish(publications(manifest), nats_url, connect_attempts=1)
    await h.settle()
    pods = {a.spec.uid: a.spec for a in h.seen["admitted"]}
    assert sorted(pods) == ["ml-ps-0", "ml-ps-1", "ml-worker-0", "ml-worker-1", "ml-worker-2", "ml-worker-3"]
    for uid, spec in pods.items():
        assert spec.owner is not None and spec.owner.kind == "StatefulSet"
        assert spec.gang is not None and spec.gang.groups == ["ml/ps", "ml/worker"]
        assert (spec.gang.name, spec.gang.min_member) == (("ml/ps", 2) if "-ps-" in uid else ("ml/worker", 4))
        assert spec.gang.timeout_s == 1800.0
    assert sorted((w.kind, w.name) for w in h.seen["wadmitted"]) == [
        ("PodGroup", "ps"), ("PodGroup", "worker"), ("StatefulSet", "ps"), ("StatefulSet", "worker")]
