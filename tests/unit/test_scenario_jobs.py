"""The batch tasks as Jobs (docs/scenario.md "Jobs, gangs and teams"): one Job per task with the task's pods,
one gang per Job, a stable team split, valid team quotas that let teams borrow, a few high-priority jobs;
the parameters validated with every problem listed."""

from __future__ import annotations

import zlib
from collections import Counter

import pytest

from colo.classes import priority_class_of, qos_class_of, validate_classes
from colo.messages import (
    DEFAULT_GANG_TIMEOUT_S,
    QUOTA_NAME_LABEL,
    ElasticQuota,
    NodeSpec,
    PodSpec,
    Resources,
    WorkloadSpec,
)
from colo.sim import jobs as jb
from colo.sim import traces as tr
from colo.sim.run import RUN_ENV
from colo.sim.scenario import Scenario, ScenarioParams, build_scenario
from colo.sim.submit import run_quotas

TRACES = pytest.mark.skipif(not (tr.traces_dir() / tr.NODE_LIST).exists(),
                            reason=f"traces not found in {tr.traces_dir()}: set COLO_TRACES_DIR or run `make traces`")

PODS = ScenarioParams(nodes=20, hours=2.0, seed=7)
JOBS = ScenarioParams(nodes=20, hours=2.0, seed=7, jobs=True)


@pytest.fixture(scope="module")
def pods() -> Scenario:
    return build_scenario(PODS)


@pytest.fixture(scope="module")
def jobs() -> Scenario:
    return build_scenario(JOBS)


def _task(uid: str) -> str:
    """``batch-<job>-<task>-<k>`` → ``<job>-<task>``."""
    return "-".join(uid.split("-")[1:3])


@TRACES
def test_one_job_per_task_with_the_tasks_pods(pods: Scenario, jobs: Scenario) -> None:
    per_task = Counter(_task(p.uid) for p in pods.batch_pods())
    by_task = {_task(a.pod.uid): a for a in pods.arrivals if a.pod.uid.startswith("batch-")}
    assert jobs.batch_pods() == [] and [a for a in jobs.arrivals if a.pod.uid.startswith("batch-")] == []
    assert jobs.ls_pods() == pods.ls_pods() and jobs.nodes == pods.nodes
    got = {w.uid.removeprefix("batch-"): w for w in jobs.jobs()}
    assert set(got) == set(per_task)
    for key, w in got.items():
        pod = by_task[key].pod
        assert (w.kind, w.name, w.namespace) == ("Job", f"job-{key}", "batch")
        assert w.parallelism == w.completions == per_task[key]
        assert w.created_at == w.template.created_at == by_task[key].at
        assert (w.template.requests, w.template.limits, w.template.sim) == (pod.requests, pod.limits, pod.sim)
        assert validate_classes(w.template) == []
    assert sum(w.parallelism for w in got.values()) == len(pods.batch_pods()) == jobs.description["batch_pods"]
    # the same tasks arrive at the same times: the Job arrivals are the tasks' arrivals
    assert [(a.at, a.workload.uid) for a in jobs.workloads] == sorted(
        (by_task[k].at, f"batch-{k}") for k in per_task)


@TRACES
def test_each_job_of_two_or_more_pods_is_one_gang(jobs: Scenario) -> None:
    gangs = 0
    for w in jobs.jobs():
        if w.parallelism < 2:
            assert w.pod_group is None
            continue
        gangs += 1
        g = w.pod_group
        assert g is not None
        assert (g.name, g.namespace, g.mode, g.timeout_s) == (w.name, w.namespace, "Strict", DEFAULT_GANG_TIMEOUT_S)
        assert g.min_member == jb.gang_min_member(w.parallelism, JOBS.gang_large_members, JOBS.gang_large_min_fraction)
        assert g.created_at == w.created_at
    assert gangs == jobs.description["gangs"] > 0


@pytest.mark.parametrize(("members", "large", "fraction", "expected"), [
    pytest.param(2, 64, 0.5, 2, id="small-whole"),
    pytest.param(64, 64, 0.5, 64, id="at-threshold-whole"),
    pytest.param(65, 64, 0.5, 64, id="just-above-never-below-threshold"),
    pytest.param(136, 64, 0.5, 68, id="large-half"),
    pytest.param(255, 64, 0.75, 192, id="large-three-quarters-ceil"),
    pytest.param(300, 64, 1.0, 300, id="fraction-one-whole"),
])
def test_gang_min_member(members: int, large: int, fraction: float, expected: int) -> None:
    assert jb.gang_min_member(members, large, fraction) == expected


@TRACES
def test_teams_split_by_job_and_stable(jobs: Scenario) -> None:
    teams = Counter(w.labels[jb.TEAM_LABEL] for w in jobs.jobs())
    assert set(teams) == {"team-a", "team-b"} and min(teams.values()) > 0
    assert jobs.description["jobs_per_team"] == dict(teams)
    by_job: dict[str, set[str]] = {}
    for w in jobs.jobs():
        team = w.labels[jb.TEAM_LABEL]
        assert w.template.labels[QUOTA_NAME_LABEL] == w.template.labels[jb.TEAM_LABEL] == team
        by_job.setdefault(w.uid.split("-")[1], set()).add(team)
    assert all(len(t) == 1 for t in by_job.values()), "every task of a job in the job's team"
    # a stable hash (not Python's salted hash): the same job always lands in the same team
    assert jb.team_of("1477", 2) == jb.team_of("1477", 2) == ("team-a", "team-b")[zlib.crc32(b"1477") % 2]
    assert jb.team_names(3) == ["team-a", "team-b", "team-c"]


@pytest.mark.parametrize(("attr", "keys"), [pytest.param("quotas", jb.BATCH_KEYS, id="colo-batch-offer"),
                                            pytest.param("baseline_quotas", jb.NATIVE_KEYS, id="baseline-pool")])
@TRACES
def test_quotas_valid_and_let_teams_borrow(jobs: Scenario, attr: str, keys: tuple[str, str]) -> None:
    ls = jobs.ls_pods()
    pool = jb.batch_offer_estimate(jobs.nodes, ls) if attr == "quotas" else jb.batch_pool(jobs.nodes, ls)
    totals = dict(zip(keys, (pool.cpu, pool.memory)))
    quotas: list[ElasticQuota] = getattr(jobs, attr)
    assert [q.name for q in quotas] == ["team-a", "team-b"]
    for q in quotas:
        assert q.parent == "" and not q.deleted
        assert set(q.min) == set(q.max) == set(keys)
        for k, v in q.min.items():
            assert v == int(totals[k] * JOBS.quota_min_fraction) // 2
            assert v < q.max[k] <= totals[k]
    for k in keys:
        # the mins fit the pool together, the maxes do not: a busy team borrows an idle one's min
        assert sum(q.min[k] for q in quotas) <= totals[k] < sum(q.max[k] for q in quotas)
    assert jobs.description[attr] == {q.name: {"min": q.min, "max": q.max} for q in quotas}


@TRACES
def test_pool_and_offer_estimate(jobs: Scenario) -> None:
    ls = jobs.ls_pods()
    cap_cpu = sum(n.capacity.cpu for n in jobs.nodes)
    cap_mem = sum(n.capacity.memory for n in jobs.nodes)
    pool = jb.batch_pool(jobs.nodes, ls)
    assert pool.cpu == sum(n.allocatable.cpu for n in jobs.nodes) - sum(p.requests.cpu for p in ls) > 0
    offer = jb.batch_offer_estimate(jobs.nodes, ls)
    ls_cpu_used = sum(sum(p.sim.cpu_util) / len(p.sim.cpu_util) * p.sim.cpu_scale_milli for p in ls if p.sim)
    assert offer.cpu == int(cap_cpu * (0.60 - 0.02) - ls_cpu_used)
    # LS pods use less than they request: co-location offers more than the requests leave
    assert offer.cpu > pool.cpu and offer.memory > pool.memory
    assert offer.cpu < 0.6 * cap_cpu and offer.memory < 0.65 * cap_mem


def test_offer_estimate_counts_a_pod_without_series_at_its_request() -> None:
    node = NodeSpec(name="n", capacity=Resources(cpu=10_000, memory=100 << 30),
                    allocatable=Resources(cpu=10_000, memory=100 << 30))
    ls = PodSpec(uid="ls", name="ls", requests=Resources(cpu=1000, memory=10 << 30))
    offer = jb.batch_offer_estimate([node], [ls])
    assert offer.cpu == int(10_000 * 0.58 - 1000) and offer.memory == int((100 << 30) * 0.61 - (10 << 30))
    big = PodSpec(uid="big", name="big", requests=Resources(cpu=9000, memory=90 << 30))
    assert jb.batch_offer_estimate([node], [big]) == Resources(cpu=0, memory=0)


def test_quotas_for_each_run() -> None:
    q = jb.team_quotas(Resources(cpu=10_000, memory=4 << 30), teams=2, min_fraction=1.0, max_factor=1.5)
    assert [x.min for x in q] == [{"batch_cpu": 5000, "batch_memory": 2 << 30}] * 2
    assert [x.max for x in q] == [{"batch_cpu": 7500, "batch_memory": 3 << 30}] * 2
    assert jb.team_quotas(Resources(cpu=10_000, memory=4 << 30), 2, 1.0, 3.0)[0].max == {"batch_cpu": 10_000,
                                                                                         "batch_memory": 4 << 30}
    three = jb.team_quotas(Resources(cpu=10_000, memory=1000), teams=3, min_fraction=0.8, max_factor=1.5)
    assert [x.min for x in three] == [{"batch_cpu": 2666, "batch_memory": 266}] * 3
    assert [x.max for x in three] == [{"batch_cpu": 3999, "batch_memory": 399}] * 3
    native = jb.team_quotas(Resources(cpu=8000, memory=2 << 30), 2, 1.0, 1.5, jb.NATIVE_KEYS)
    assert [x.min for x in native] == [{"cpu": 4000, "memory": 1 << 30}] * 2

    class _S:
        quotas = q
        baseline_quotas = native

    assert run_quotas(_S(), RUN_ENV["colo"]) == q  # type: ignore[arg-type]
    assert run_quotas(_S(), RUN_ENV["baseline"]) == native  # type: ignore[arg-type]


@TRACES
def test_a_few_high_priority_jobs_late_and_top_of_batch(jobs: Scenario) -> None:
    high = [w for w in jobs.jobs() if w.template.labels.get(jb.PRIORITY_LABEL) == "high"]
    late = [w for w in jobs.jobs() if w.created_at >= JOBS.high_priority_after_fraction * JOBS.hours * 3600]
    assert len(high) == max(1, round(JOBS.high_priority_fraction * len(late)))
    assert jobs.description["high_priority_jobs"] == sorted(w.name for w in high)
    for w in high:
        t = w.template
        assert w in late
        # koord-batch above the other batch pods: they compete for the same (batch) room and preempt in it
        assert (t.priority, priority_class_of(t), qos_class_of(t)) == (jb.HIGH_PRIORITY, "batch", "BE")
        assert 5500 < jb.HIGH_PRIORITY <= 5999
        assert validate_classes(t) == []
    for w in jobs.jobs():
        if w not in high:
            assert (w.template.priority, priority_class_of(w.template), qos_class_of(w.template)) == (5500, "batch", "BE")


def test_high_priority_selection_rules() -> None:
    keys = [(f"t{i}", float(i)) for i in range(300)]
    assert jb.high_priority_tasks(keys, 0.0, 0.0, 1) == set()
    assert jb.high_priority_tasks(keys, 0.01, 1000.0, 1) == set()  # none arrives that late
    chosen = jb.high_priority_tasks(keys, 0.01, 100.0, 1)
    assert len(chosen) == 2 and all(int(k[1:]) >= 100 for k in chosen)
    assert chosen == jb.high_priority_tasks(list(reversed(keys)), 0.01, 100.0, 1)  # order-independent
    assert len(jb.high_priority_tasks(keys[:10], 0.01, 0.0, 1)) == 1  # at least one


@TRACES
def test_jobs_deterministic_from_seed() -> None:
    a, b = build_scenario(JOBS), build_scenario(JOBS)
    assert a.workloads == b.workloads and a.quotas == b.quotas and a.description == b.description


def test_make_job_refuses_no_pods() -> None:
    with pytest.raises(ValueError, match="no pods"):
        jb.make_job([], "1", "2", "team-a", False, 0.0, JOBS.job_params())


def test_invalid_job_params_list_every_problem() -> None:
    bad = ScenarioParams(jobs=True, teams=0, gang_large_members=0, gang_large_min_fraction=0.0,
                         high_priority_fraction=1.5, high_priority_after_fraction=1.0, quota_min_fraction=0.0,
                         quota_max_factor=0.5)
    problems = bad.problems()
    for field in ("teams", "gang_large_members", "gang_large_min_fraction", "high_priority_fraction",
                  "high_priority_after_fraction", "quota_min_fraction", "quota_max_factor"):
        assert sum(p.startswith(f"{field} ") for p in problems) == 1, (field, problems)
    with pytest.raises(ValueError) as exc:
        build_scenario(bad)
    assert all(p in str(exc.value) for p in problems)
    assert ScenarioParams(jobs=True, teams=26).problems() == []
    assert ScenarioParams(teams=27).problems() == ["teams must be within 1..26, got 27"]


def test_workload_types_are_the_messages() -> None:
    w = jb.make_job([PodSpec(uid="p", name="p", namespace="batch")], "1", "2", "team-b", False, 5.0, JOBS.job_params())
    assert isinstance(w, WorkloadSpec) and w.pod_group is None and w.parallelism == 1
    assert isinstance(jb.team_quotas(Resources(cpu=2, memory=2), 1, 1.0, 1.0)[0], ElasticQuota)


def test_a_run_shorter_than_the_batch_warmup_says_how_long_it_must_be() -> None:
    """``--hours 0.01`` (the command line cannot set the warm-up) used to be refused as 'batch_warmup_s must be
    within 0..hours×3600, got 300', naming neither the hours given nor how many would do."""
    assert ScenarioParams(hours=0.01).problems() == [
        "hours 0.01 (36 s) must be longer than the batch warm-up, batch_warmup_s 300 s (--hours above 0.0833)"]
    assert ScenarioParams(batch_warmup_s=-1).problems() == ["batch_warmup_s must be ≥ 0, got -1"]
