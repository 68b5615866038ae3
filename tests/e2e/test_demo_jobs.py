"""End to end: the demo with jobs (docs/scenario.md "Jobs, gangs and teams") through the five services.

The batch tasks enter as Jobs on ``workload.submitted`` and the teams' quotas on ``quota.spec``; admission
expands every Job into its pods (none rejected), gangs bind whole or not at all (no gang has a member bound
without ``min_member`` of them), the quotas' status comes back for every team and no quota's use exceeds its
max, the high-priority jobs run, and the colo run still beats the baseline on utilization and batch work done.

Needs the workload admission (slo-manager), Coscheduling and elastic quota (scheduler) of issue 13; until
those are in the services the module is skipped, naming what is missing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from colo.sim import traces as tr
from colo.sim.jobs import HIGH_PRIORITY
from colo.sim.run import RunResult
from colo.sim.scenario import Scenario

SERVICES = Path(__file__).resolve().parents[2] / "services"
NEEDED = {
    "slo-manager expands workloads (WORKLOAD_SUBMITTED)": ("slo-manager/colo_slo_manager", "WORKLOAD_SUBMITTED"),
    "scheduler publishes quota status (QUOTA_STATUS)": ("scheduler/colo_scheduler", "QUOTA_STATUS"),
    "scheduler places gangs (PodSpec.gang)": ("scheduler/colo_scheduler", ".gang"),
}


def _missing() -> list[str]:
    out = []
    for what, (package, needle) in NEEDED.items():
        if not any(needle in f.read_text() for f in (SERVICES / package).rglob("*.py")):
            out.append(what)
    return out


pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not (tr.traces_dir() / tr.NODE_LIST).exists(),
                       reason=f"traces not found in {tr.traces_dir()}: set COLO_TRACES_DIR or run `make traces`"),
    pytest.mark.skipif(bool(_missing()), reason=f"not in the services yet: {', '.join(_missing())}"),
]


@pytest.fixture(scope="module")
def scenario(jobs_scenario: Scenario) -> Scenario:
    return jobs_scenario


@pytest.fixture(scope="module")
def runs(jobs_runs: dict[str, RunResult]) -> dict[str, RunResult]:
    return jobs_runs


@pytest.mark.parametrize("run", ["baseline", "colo"])
def test_jobs_admitted_whole_and_invariants_hold(runs: dict[str, RunResult], scenario: Scenario, run: str) -> None:
    r = runs[run]
    m = r.metrics
    assert m.tick_errors == [] and r.violations == [] and m.double_bound() == []
    assert m.jobs.workloads_rejected == {} and m.summary()["workloads_unadmitted"] == 0
    jobs = {w.uid: w for w in scenario.jobs()}
    per_owner: dict[str, int] = {}
    for owner in m.owner_of.values():
        per_owner[owner] = per_owner.get(owner, 0) + 1
    # every Job expanded into all its pods (the Job controller may add one for a pod that failed for good)
    assert set(per_owner) == set(jobs) and all(per_owner[uid] >= w.parallelism for uid, w in jobs.items())
    assert set(m.submitted_at) == {p.uid for p in scenario.ls_pods()} | set(m.owner_of)
    assert all(code == 0 for code in r.exit_codes.values()), r.exit_codes


@pytest.mark.parametrize("run", ["baseline", "colo"])
def test_gangs_bind_whole_or_not_at_all(runs: dict[str, RunResult], scenario: Scenario, run: str) -> None:
    gangs = runs[run].metrics.jobs.gangs
    assert len(gangs) == scenario.description["gangs"]
    partial = {name: len(g.bound) for name, g in gangs.items() if g.bound and g.placed_at is None}
    assert partial == {}, "members bound without min_member of their gang"
    assert runs[run].metrics.jobs.summary()["gangs_placed"] > 0


@pytest.mark.parametrize(("run", "resources"), [("baseline", "cpu/memory"), ("colo", "batch_cpu/batch_memory")])
def test_quota_status_per_team_never_over_max(runs: dict[str, RunResult], run: str, resources: str) -> None:
    jm = runs[run].metrics.jobs
    table = jm.quota_table()
    assert set(table) == {"team-a", "team-b"}
    assert all(row["resources"] == resources for row in table.values())
    for s in jm.quota_series:
        over = {k: (v, s.max[k]) for k, v in s.used.items() if k in s.max and v > s.max[k]}
        assert over == {}, (s.t, s.quota, over)


@pytest.mark.parametrize("run", ["baseline", "colo"])
def test_high_priority_jobs_run(runs: dict[str, RunResult], scenario: Scenario, run: str) -> None:
    m = runs[run].metrics
    high = {w.uid for w in scenario.jobs() if w.template.priority == HIGH_PRIORITY}
    assert high
    pods = [uid for uid, owner in m.owner_of.items() if owner in high]
    assert pods and all(uid in m.bind_events for uid in pods), "a high-priority job's pods are placed"


def test_colo_beats_baseline_with_jobs(runs: dict[str, RunResult]) -> None:
    base, colo = runs["baseline"].metrics.summary(), runs["colo"].metrics.summary()
    assert colo["cpu_util_avg"] > base["cpu_util_avg"]
    assert colo["batch_tasks_completed"] > base["batch_tasks_completed"]
