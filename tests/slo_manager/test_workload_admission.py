"""Workload and PodGroup admission (pure): expansion into pods with owner and gang, the same admission as a
bare pod for each, all-or-nothing with every problem, PodGroups joined by label; and the Job controller."""

from __future__ import annotations

import pytest

from colo.messages import (
    POD_GROUP_LABEL,
    PodAdmitted,
    PodGroupSpec,
    PodPhase,
    PodRejected,
    PodSpec,
    Resources,
    WorkloadRejected,
    WorkloadSpec,
)
from colo.workloads import WorkloadRecord
from colo_slo_manager.expansion import MAX_WORKLOAD_PODS, admit_workload, pod_group_problems, with_gang
from colo_slo_manager.jobs import BACKOFF_LIMIT, on_pod_finished, pods_created
from colo_slo_manager.settings import SloManagerSettings

G = 10**9
SETTINGS = SloManagerSettings()
BE = PodSpec(uid="", name="", labels={"koordinator.sh/qosClass": "BE"}, priority=5500,
             requests=Resources(cpu=2000, memory=4 * G))
PROD = PodSpec(uid="", name="", priority_class="prod", requests=Resources(cpu=1000, memory=G),
               limits=Resources(cpu=1000, memory=G))
GANG = PodGroupSpec(uid="j-gang", name="train", namespace="ml", min_member=3, timeout_s=3600.0)


def _w(**kw: object) -> WorkloadSpec:
    base: dict[str, object] = {"kind": "Job", "uid": "ml-train", "name": "train", "namespace": "ml", "template": BE,
                               "parallelism": 4, "completions": 4, "created_at": 7.0}
    base.update(kw)
    return WorkloadSpec(**base)  # type: ignore[arg-type]


def _admitted(w: WorkloadSpec, groups: dict[str, PodGroupSpec] | None = None) -> list[PodAdmitted]:
    result = admit_workload(w, SETTINGS, groups or {}, 10.0)
    assert not isinstance(result, WorkloadRejected), result.errors
    return result[0]


@pytest.mark.parametrize(("w", "uids"), [
    pytest.param(_w(), ["ml-train-0", "ml-train-1", "ml-train-2", "ml-train-3"], id="job"),
    pytest.param(_w(parallelism=2, completions=10), ["ml-train-0", "ml-train-1"], id="job-parallelism-first"),
    pytest.param(_w(kind="StatefulSet", replicas=3, template=PROD), ["ml-train-0", "ml-train-1", "ml-train-2"],
                 id="statefulset"),
    pytest.param(_w(kind="Deployment", replicas=0, template=PROD), [], id="deployment-zero-replicas"),
])
def test_expansion_uids(w: WorkloadSpec, uids: list[str]) -> None:
    assert [a.spec.uid for a in _admitted(w)] == uids


def test_pods_carry_owner_gang_app_and_the_profile_of_a_bare_pod() -> None:
    pods = _admitted(_w(pod_group=GANG, max_unavailable=1))
    assert len(pods) == 4
    for i, a in enumerate(pods):
        p = a.spec
        assert (p.name, p.namespace, p.app, p.max_unavailable, p.created_at) == (f"train-{i}", "ml", "train", 1, 7.0)
        assert p.owner is not None and (p.owner.kind, p.owner.name, p.owner.uid) == ("Job", "train", "ml-train")
        assert p.gang is not None
        assert (p.gang.name, p.gang.min_member, p.gang.total_member, p.gang.timeout_s, p.gang.mode) == (
            "ml/train", 3, 4, 3600.0, "Strict")
        # the same admission as a bare BE pod: the batch profile moved cpu/memory to batch-*
        assert a.profile == "batch"
        assert p.requests == Resources(batch_cpu=2000, batch_memory=4 * G)


def test_gang_groups_include_the_gang_itself() -> None:
    group = PodGroupSpec(uid="g", name="ps", namespace="ml", min_member=1, groups=["ml/worker"])
    (a,) = _admitted(_w(parallelism=1, completions=1, pod_group=group))
    assert a.spec.gang is not None and a.spec.gang.groups == ["ml/ps", "ml/worker"]


def test_template_naming_a_pod_group() -> None:
    template = PodSpec(uid="", name="", labels={POD_GROUP_LABEL: "pg"}, requests=Resources(cpu=1000))
    groups = {"ml/pg": PodGroupSpec(uid="pg", name="pg", namespace="ml", min_member=5, mode="NonStrict")}
    pods = _admitted(_w(kind="StatefulSet", replicas=2, template=template), groups)
    assert all(a.spec.gang is not None and (a.spec.gang.name, a.spec.gang.min_member, a.spec.gang.mode,
                                            a.spec.gang.total_member) == ("ml/pg", 5, "NonStrict", 0) for a in pods)


BAD_CLASS = PodSpec(uid="", name="", qos_class="LSR", priority_class="batch", requests=Resources(cpu=1500))


@pytest.mark.parametrize(("w", "errors"), [
    pytest.param(_w(replicas=-1, kind="Deployment"), ["replicas: must be ≥ 0, got -1"], id="negative-replicas"),
    pytest.param(_w(parallelism=0, completions=0), ["parallelism: must be ≥ 1, got 0", "completions: must be ≥ 1, got 0"],
                 id="job-zero"),
    pytest.param(_w(completions=MAX_WORKLOAD_PODS + 1), [f"completions: at most {MAX_WORKLOAD_PODS} pods"],
                 id="too-many-pods"),
    pytest.param(_w(uid="a b"), ["uid: 'a b' is not a valid identifier"], id="bad-uid"),
    pytest.param(_w(max_unavailable=-2), ["max_unavailable: must be ≥ 0"], id="bad-budget"),
    pytest.param(_w(pod_group=PodGroupSpec(uid="g", name="g", namespace="ml", min_member=5)),
                 ["pod_group.min_member: must be at most the workload's 4 pods, got 5"], id="gang-larger-than-job"),
    pytest.param(_w(pod_group=PodGroupSpec(uid="g", name="g", namespace="ml", min_member=0, timeout_s=0.0)),
                 ["pod_group.min_member: must be ≥ 1, got 0", "pod_group.timeout_s: must be > 0 seconds, got 0.0"],
                 id="gang-min-timeout"),
    pytest.param(_w(template=PodSpec(uid="", name="", labels={POD_GROUP_LABEL: "nope"})),
                 [f"template.labels.{POD_GROUP_LABEL}: unknown PodGroup 'ml/nope'"], id="unknown-pod-group"),
    pytest.param(_w(template=BAD_CLASS),
                 ["template: QoS class LSR requires priority class prod",
                  "template: QoS class LSR requires a whole, non-zero number of cores"], id="every-pod-problem-once"),
])
def test_rejected_with_every_problem_and_no_pods(w: WorkloadSpec, errors: list[str]) -> None:
    result = admit_workload(w, SETTINGS, {}, 10.0)
    assert isinstance(result, WorkloadRejected)
    assert (result.kind, result.uid, result.at) == (w.kind, w.uid, 10.0)
    assert len(result.errors) == len(errors), result.errors
    for got, want in zip(result.errors, errors):
        assert got.startswith(want), (got, want)


@pytest.mark.parametrize(("group", "errors"), [
    pytest.param(PodGroupSpec(uid="g", name="g"), [], id="defaults"),
    pytest.param(PodGroupSpec(uid="g", name="g", timeout_s=30 * 86400.0), [], id="a-month-no-cap"),
    pytest.param(PodGroupSpec(uid="g", name="g", min_member=0), ["min_member: must be ≥ 1"], id="min"),
    pytest.param(PodGroupSpec(uid="g", name="g", timeout_s=float("nan")), ["timeout_s: must be > 0"], id="nan"),
    pytest.param(PodGroupSpec(uid="g", name="g", groups=["noslash"]), ["groups[0]: not a 'namespace/name'"],
                 id="groups"),
    pytest.param(PodGroupSpec(uid="", name="g"), ["uid: '' is not a valid identifier"], id="empty-uid"),
])
def test_pod_group_problems(group: PodGroupSpec, errors: list[str]) -> None:
    got = pod_group_problems(group)
    assert len(got) == len(errors) and all(g.startswith(e) for g, e in zip(got, errors)), got


def test_bare_pod_joins_its_pod_group_or_is_rejected() -> None:
    pod = PodSpec(uid="p", name="p", namespace="ml", labels={POD_GROUP_LABEL: "pg"})
    groups = {"ml/pg": PodGroupSpec(uid="pg", name="pg", namespace="ml", min_member=2)}
    joined = with_gang(pod, groups, 1.0)
    assert isinstance(joined, PodSpec) and joined.gang is not None and joined.gang.name == "ml/pg"
    rejected = with_gang(pod, {}, 1.0)
    assert isinstance(rejected, PodRejected) and "unknown PodGroup 'ml/pg'" in rejected.reason
    plain = PodSpec(uid="q", name="q")
    assert with_gang(plain, {}, 1.0) is plain


# ---------------------------------------------------------------------------------------------- Job controller

def _record(parallelism: int, completions: int) -> WorkloadRecord:
    record = WorkloadRecord(spec=_w(parallelism=parallelism, completions=completions))
    first = min(parallelism, completions)
    pods_created(record, [f"ml-train-{i}" for i in range(first)], first)
    return record


def _step(record: WorkloadRecord, uid: str, phase: PodPhase, reason: str = "") -> list[int]:
    indices = on_pod_finished(record, uid, phase, reason)
    if indices:
        pods_created(record, [f"ml-train-{i}" for i in indices], indices[-1] + 1)
    return indices


def test_job_runs_completions_with_parallelism_at_once() -> None:
    record = _record(2, 5)
    created = []
    while record.active:
        created += _step(record, record.active[0], "Succeeded")
        assert len(record.active) <= 2
    assert created == [2, 3, 4]
    assert record.succeeded == 5 and record.complete and record.pods == [f"ml-train-{i}" for i in range(5)]


@pytest.mark.parametrize(("uid", "phase", "reason", "expected"), [
    pytest.param("ml-train-0", "Succeeded", "", [2], id="success-next-index"),
    pytest.param("ml-train-0", "Failed", "OOMKilled", [2], id="failure-replaced"),
    pytest.param("ml-train-0", "Failed", "Evicted", [], id="eviction-requeued-by-scheduler"),
    pytest.param("ml-train-0", "Running", "", [], id="running-nothing"),
    pytest.param("other-0", "Succeeded", "", [], id="not-a-pod-of-the-job"),
])
def test_job_step(uid: str, phase: PodPhase, reason: str, expected: list[int]) -> None:
    assert _step(_record(2, 5), uid, phase, reason) == expected


def test_redelivered_success_counts_once() -> None:
    record = _record(2, 5)
    assert _step(record, "ml-train-0", "Succeeded") == [2]
    assert _step(record, "ml-train-0", "Succeeded") == []
    assert record.succeeded == 1


def test_backoff_limit_stops_the_job() -> None:
    record = _record(1, 100)
    for _ in range(BACKOFF_LIMIT):
        assert len(_step(record, record.active[0], "Failed", "Error")) == 1
    assert _step(record, record.active[0], "Failed", "Error") == []
    assert record.stopped.startswith("BackoffLimitExceeded") and not record.active
