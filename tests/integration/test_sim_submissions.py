"""The coordinator's submissions against a real nats-server: the teams' quotas on ``quota.spec.<team>``
before anything else (native resources for a run without co-location), then each step the workloads due on
``workload.submitted`` and the bare pods on ``pod.submitted``, each once."""

from __future__ import annotations

import pytest

from colo import subjects
from colo.bus import MessageInfo
from colo.messages import ElasticQuota, NodeSpec, PodSpec, Resources, WorkloadSpec
from colo.sim import jobs as jb
from colo.sim.metrics import RunMetrics
from colo.sim.run import RUN_ENV
from colo.sim.scenario import Arrival, Scenario, ScenarioParams, WorkloadArrival
from colo.sim.submit import Submissions
from colo.testing.fixtures import BusFactory

pytestmark = pytest.mark.integration


def _scenario() -> Scenario:
    params = ScenarioParams(nodes=1, hours=1.0, jobs=True)
    pod = PodSpec(uid="batch-7-1-0", name="batch-7-1-0", namespace="batch", labels={"colo.sim/kind": "batch"},
                  priority=5500, qos_class="BE", requests=Resources(cpu=1000, memory=1 << 30))
    jobs = [WorkloadArrival(at, jb.make_job([pod, pod], "7", str(k), "team-a", False, at, params.job_params()))
            for k, at in ((1, 0.0), (2, 60.0), (3, 130.0))]
    ls = PodSpec(uid="ls-0", name="ls-0", namespace="online", labels={"colo.sim/kind": "ls"})
    node = NodeSpec(name="n1", capacity=Resources(cpu=8000, memory=8 << 30), allocatable=Resources(cpu=8000,
                                                                                                    memory=8 << 30))
    quotas = jb.team_quotas(Resources(cpu=8000, memory=8 << 30), 2, 1.0, 1.5, jb.BATCH_KEYS)
    baseline = jb.team_quotas(Resources(cpu=6000, memory=6 << 30), 2, 1.0, 1.5, jb.NATIVE_KEYS)
    return Scenario(params=params, nodes=[node], arrivals=[Arrival(0.0, ls)], workloads=jobs, quotas=quotas,
                    baseline_quotas=baseline)


@pytest.mark.parametrize(("run", "cpu_key", "min_cpu"), [pytest.param("colo", "batch_cpu", 4000, id="colo"),
                                                         pytest.param("baseline", "cpu", 3000, id="baseline")])
async def test_quotas_first_then_workloads_and_pods_when_due(bus_factory: BusFactory, run: str,
                                                             cpu_key: str, min_cpu: int) -> None:
    bus = await bus_factory("sim-test")
    seen: list[tuple[str, str]] = []
    quotas: list[ElasticQuota] = []

    async def on_quota(msg: ElasticQuota, info: MessageInfo) -> None:
        quotas.append(msg)
        seen.append((info.subject, msg.name))

    async def on_workload(msg: WorkloadSpec, info: MessageInfo) -> None:
        seen.append((info.subject, msg.uid))

    async def on_pod(msg: PodSpec, info: MessageInfo) -> None:
        seen.append((info.subject, msg.uid))

    await bus.subscribe(subjects.QUOTA_SPEC, on_quota, durable="quotas")
    await bus.subscribe(subjects.WORKLOAD_SUBMITTED, on_workload, durable="workloads")
    await bus.subscribe(subjects.POD_SUBMITTED, on_pod, durable="pods")
    scenario = _scenario()
    metrics = RunMetrics(run)
    subs = Submissions(scenario, RUN_ENV[run], metrics)
    await subs.start(bus)
    await bus.settle()
    assert seen == [("colo.v1.quota.spec.team-a", "team-a"), ("colo.v1.quota.spec.team-b", "team-b")]
    assert all(set(q.min) == {cpu_key, cpu_key.replace("cpu", "memory")} and q.min[cpu_key] == min_cpu
               for q in quotas)
    seen.clear()
    counts = [await subs.publish_due(bus, now) for now in (0.0, 60.0, 120.0, 180.0, 240.0)]
    await bus.settle()
    assert counts == [2, 1, 0, 1, 0]
    assert sorted(seen) == sorted([("colo.v1.pod.submitted", "ls-0"), ("colo.v1.workload.submitted", "batch-7-1"),
                                   ("colo.v1.workload.submitted", "batch-7-2"),
                                   ("colo.v1.workload.submitted", "batch-7-3")])
    assert metrics.workload_at == {"batch-7-1": 0.0, "batch-7-2": 60.0, "batch-7-3": 130.0}
    assert set(metrics.submitted_at) == {"ls-0"}  # a workload's pods count once admission names them
