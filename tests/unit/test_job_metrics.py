"""The demo's job rows from synthetic event streams: gang wait times (first member admitted → min_member
bound), the scheduler's preemptions vs quota reclaims, per-team quota use over time, a workload's pods counted
from admission; and how they reach the table, ``summary.json`` and ``<run>-quotas.jsonl``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from colo.messages import (
    EvictionCommand,
    GangSpec,
    OwnerReference,
    PodAdmitted,
    PodBound,
    PodSpec,
    PodStatus,
    QuotaStatus,
    SimWorkload,
    TickAck,
    WorkloadRejected,
    WorkloadSpec,
)
from colo.sim.job_metrics import JobMetrics
from colo.sim.metrics import METRIC_NAMES, RunMetrics
from colo.sim.report import write_report

CORE = 1000
GIB = 1 << 30


def _member(gang: str, k: int, min_member: int, owner: str = "") -> PodSpec:
    return PodSpec(uid=f"{gang}-{k}", name=f"{gang}-{k}", namespace="batch",
                   gang=GangSpec(name=f"batch/{gang}", min_member=min_member, total_member=min_member),
                   owner=OwnerReference(kind="Job", name=gang, uid=owner or f"w-{gang}"),
                   sim=SimWorkload(kind="batch", cpu_milli=100, duration_s=600.0))


def _admit(m: RunMetrics | JobMetrics, pod: PodSpec, at: float) -> None:
    m.on_admitted(PodAdmitted(spec=pod, at=at))


def _bind(m: RunMetrics | JobMetrics, pod: PodSpec, at: float) -> None:
    m.on_bound(PodBound(spec=pod, node="n1", at=at))


@pytest.mark.parametrize(("events", "expected"), [
    pytest.param([("admit", 0, 60.0), ("admit", 1, 60.0), ("bind", 0, 120.0), ("bind", 1, 180.0)], 120.0,
                 id="waits-for-the-last-of-min-member"),
    pytest.param([("admit", 1, 120.0), ("admit", 0, 60.0), ("bind", 0, 180.0), ("bind", 1, 180.0)], 120.0,
                 id="from-the-earliest-admission-in-any-order"),
    pytest.param([("admit", 0, 60.0), ("admit", 1, 60.0), ("bind", 0, 120.0), ("bind", 0, 300.0)], None,
                 id="one-member-bound-twice-is-not-two"),
    pytest.param([("bind", 0, 240.0), ("admit", 0, 60.0), ("admit", 1, 60.0), ("bind", 1, 240.0)], 180.0,
                 id="a-binding-seen-before-its-admission"),
    pytest.param([("admit", 0, 0.0), ("admit", 1, 0.0)], None, id="never-placed"),
])
def test_gang_wait(events: list[tuple[str, int, float]], expected: float | None) -> None:
    m = JobMetrics()
    for kind, k, at in events:
        (_admit if kind == "admit" else _bind)(m, _member("g", k, 2), at)
    assert m.gangs["batch/g"].wait_s == expected
    s = m.summary()
    assert (s["gangs_placed"], s["gangs_waiting"]) == ((1.0, 0.0) if expected is not None else (0.0, 1.0))
    assert s["gang_wait_max_s"] == (expected or 0.0)


def test_gang_wait_percentiles_and_partial_min_member() -> None:
    m = JobMetrics()
    for i in range(20):
        # gang i: 3 members, min_member 2, admitted at 0, second member bound at 60 × (i + 1)
        for k in range(3):
            _admit(m, _member(f"g{i}", k, 2), 0.0)
        _bind(m, _member(f"g{i}", 0, 2), 30.0)
        _bind(m, _member(f"g{i}", 1, 2), 60.0 * (i + 1))
    s = m.summary()
    assert s["gangs_placed"] == 20 and s["gangs_waiting"] == 0
    assert s["gang_wait_p50_s"] == pytest.approx(630.0)
    assert s["gang_wait_p95_s"] == pytest.approx(1143.0)
    assert s["gang_wait_max_s"] == 1200.0
    assert sorted(m.gang_waits()) == [60.0 * (i + 1) for i in range(20)]


def test_pods_without_gang_are_not_gangs() -> None:
    m = JobMetrics()
    pod = PodSpec(uid="p", name="p")
    _admit(m, pod, 0.0)
    _bind(m, pod, 60.0)
    assert m.gangs == {} and m.summary()["gang_wait_max_s"] == 0.0


@pytest.mark.parametrize(("by", "reason", "preempt", "reclaim"), [
    pytest.param("scheduler", "Preempted by batch/job-1-2-0 (priority 9500) on n1", 1, 0, id="priority"),
    pytest.param("scheduler", "Preempted by team-a reclaiming its quota min", 0, 1, id="quota-reclaim-named"),
    pytest.param("scheduler", "Quota team-b over its runtime: reclaimed by team-a", 0, 1, id="quota-word"),
    pytest.param("descheduler", "Preempted by nothing: migration", 0, 0, id="descheduler-not-counted"),
    pytest.param("node-agent", "BE memory eviction", 0, 0, id="node-agent-not-counted"),
])
def test_scheduler_evictions_split(by: str, reason: str, preempt: int, reclaim: int) -> None:
    m = JobMetrics()
    cmd = EvictionCommand(uid="v", node="n1", reason=reason, at=60.0, by=by)
    m.on_evict(cmd)
    m.on_evict(cmd)  # redelivered: counted once
    assert (m.preemptions, m.quota_reclaims) == (preempt, reclaim)
    assert sum(m.eviction_reasons.values()) == preempt + reclaim


@pytest.mark.parametrize(("events", "expected"), [
    pytest.param([], {"victims": 1, "rebound": 0, "completed": 0}, id="ordered-out-only"),
    pytest.param([("bind", 50.0), ("done", 90.0)], {"victims": 1, "rebound": 0, "completed": 0},
                 id="bound-and-done-before-the-order-count-not"),
    pytest.param([("bind", 180.0)], {"victims": 1, "rebound": 1, "completed": 0}, id="requeued-and-bound-again"),
    pytest.param([("bind", 180.0), ("done", 900.0)], {"victims": 1, "rebound": 1, "completed": 1},
                 id="requeued-and-finished-later"),
])
def test_victims_requeued_and_finished_later(events: list[tuple[str, float]], expected: dict[str, int]) -> None:
    m = RunMetrics(name="colo")
    pod = PodSpec(uid="v", name="v", namespace="batch", sim=SimWorkload(kind="batch", cpu_milli=100, duration_s=600.0))
    _admit(m, pod, 0.0)
    m.on_evict(EvictionCommand(uid="v", node="n1", reason="Preempted by batch/hp-0", at=120.0, by="scheduler"))
    m.on_evict(EvictionCommand(uid="v", node="n2", reason="Preempted by batch/hp-1", at=400.0, by="scheduler"))
    for kind, at in events:
        if kind == "bind":
            _bind(m, pod, at)
        else:
            m.on_status(PodStatus(uid="v", node="n1", phase="Succeeded", at=at))
    assert m.jobs.victim_outcomes(m.completed_at) == expected


def _status(name: str, used_cpu: int, runtime_cpu: int, at: float, key: str = "batch_cpu") -> QuotaStatus:
    mem = key.replace("cpu", "memory")
    return QuotaStatus(name=name, parent="root", min={key: 4 * CORE, mem: 8 * GIB}, max={key: 6 * CORE, mem: 12 * GIB},
                       used={key: used_cpu, mem: 2 * GIB}, request={key: used_cpu}, runtime={key: runtime_cpu,
                                                                                            mem: 8 * GIB},
                       pods=1, pending=0, at=at)


def test_quota_use_sampled_each_step() -> None:
    m = JobMetrics()
    m.sample(0.0)  # nothing yet
    m.on_quota(_status("team-a", 2 * CORE, 4 * CORE, 0.0))
    m.on_quota(_status("team-b", 5 * CORE, 6 * CORE, 0.0))
    m.sample(60.0)
    m.on_quota(_status("team-a", 6 * CORE, 6 * CORE, 90.0))  # team-a borrows
    m.on_quota(_status("team-a", 4 * CORE, 5 * CORE, 100.0))  # the latest of a step wins
    m.sample(120.0)
    assert [(s.t, s.quota) for s in m.quota_series] == [(60.0, "team-a"), (60.0, "team-b"), (120.0, "team-a"),
                                                        (120.0, "team-b")]
    table = m.quota_table()
    a, b = table["team-a"], table["team-b"]
    assert a["resources"] == "batch_cpu/batch_memory"
    assert (a["min_cores"], a["used_avg_cores"], a["used_max_cores"], a["runtime_avg_cores"]) == (4.0, 3.0, 4.0, 4.5)
    assert (a["min_gib"], a["used_avg_gib"], a["runtime_avg_gib"]) == (8.0, 2.0, 8.0)
    assert a["borrowed_ticks"] == 0 and b["borrowed_ticks"] == 2  # team-b used 5 of min 4 in both steps
    rows = m.quota_rows()
    assert rows[2] == {"t": 120.0, "quota": "team-a", "min": {"batch_cpu": 4000, "batch_memory": 8 * GIB},
                       "max": {"batch_cpu": 6000, "batch_memory": 12 * GIB},
                       "used": {"batch_cpu": 4000, "batch_memory": 2 * GIB}, "request": {"batch_cpu": 4000},
                       "runtime": {"batch_cpu": 5000, "batch_memory": 8 * GIB}, "pods": 1, "pending": 0}


def test_native_quota_resources_in_baseline() -> None:
    m = JobMetrics()
    m.on_quota(_status("team-a", 3 * CORE, 4 * CORE, 0.0, key="cpu"))
    m.sample(60.0)
    row = m.quota_table()["team-a"]
    assert row["resources"] == "cpu/memory" and row["used_avg_cores"] == 3.0


def test_workload_pods_count_from_admission_at_the_workload_time() -> None:
    m = RunMetrics("colo")
    w = WorkloadSpec(kind="Job", uid="w-g", name="g", namespace="batch", parallelism=2, completions=2,
                     template=PodSpec(uid="g", name="g"))
    m.submitted_workload(w, 300.0)
    pods = [_member("g", k, 2, owner="w-g") for k in range(2)]
    for p in pods:
        _admit(m, p, 305.0)
    assert m.submitted_at == {"g-0": 300.0, "g-1": 300.0}
    assert m.owner_of == {"g-0": "w-g", "g-1": "w-g"}
    assert set(m.batch_duration_s) == {"g-0", "g-1"}
    for p in pods:
        _bind(m, p, 360.0)
        m.on_status(PodStatus(uid=p.uid, node="n1", phase="Succeeded", at=960.0))
    s = m.summary()
    assert s["batch_tasks_completed"] == 2 and s["batch_slowdown_avg"] == pytest.approx((960 - 300) / 600)
    assert s["gang_wait_max_s"] == 55.0 and s["pods_pending"] == 0
    assert s["workloads_unadmitted"] == 0
    m.submitted_workload(WorkloadSpec(kind="Job", uid="w-never", name="never", template=PodSpec(uid="x", name="x")), 0.0)
    m.submitted_workload(WorkloadSpec(kind="Job", uid="w-bad", name="bad", template=PodSpec(uid="x", name="x")), 0.0)
    m.on_workload_rejected(WorkloadRejected(kind="Job", uid="w-bad", name="bad", namespace="default",
                                            errors=["template.requests.cpu: must be ≥ 0"], at=0.0))
    assert m.unadmitted_workloads() == ["w-never"] and m.summary()["workloads_unadmitted"] == 1
    # a bare pod submitted before its admission keeps its submission time
    bare = PodSpec(uid="b", name="b", sim=SimWorkload(kind="batch", duration_s=60.0))
    m.submitted(bare, 10.0)
    _admit(m, bare, 20.0)
    assert m.submitted_at["b"] == 10.0


def test_rows_reach_table_summary_and_page(tmp_path: Path) -> None:
    runs = []
    for name, key in (("baseline", "cpu"), ("colo", "batch_cpu")):
        m = RunMetrics(name)
        for k in range(2):
            _admit(m, _member("g", k, 2), 60.0)
            _bind(m, _member("g", k, 2), 180.0)
        m.on_evict(EvictionCommand(uid="v1", node="n1", reason="Preempted by batch/hp-0", at=120.0, by="scheduler"))
        m.on_evict(EvictionCommand(uid="v2", node="n1", reason="quota reclaim by team-a", at=120.0, by="scheduler"))
        m.on_workload_rejected(WorkloadRejected(kind="Job", uid="w-bad", name="bad", namespace="batch",
                                                errors=["parallelism: must be ≥ 1"], at=0.0))
        m.on_quota(_status("team-a", 3 * CORE, 4 * CORE, 60.0, key=key))
        m.on_ticks(60.0, [TickAck(service="node-agent", seq=1, stats={"cpu_capacity_milli": 1000})])
        runs.append(m)
    console = Console(record=True, width=220)
    summary = write_report(tmp_path, runs, {"nodes": 1}, console)
    text = console.export_text()
    for metric in ("gangs_placed", "gang_wait_p50_s", "gang_wait_p95_s", "gang_wait_max_s", "preemptions",
                   "quota_reclaims", "workloads_rejected"):
        assert metric in METRIC_NAMES
        assert next(line for line in text.splitlines() if f" {metric} " in line)
    assert summary["runs"]["colo"]["gang_wait_max_s"] == 120.0
    assert (summary["runs"]["colo"]["preemptions"], summary["runs"]["colo"]["quota_reclaims"]) == (1.0, 1.0)
    assert summary["runs"]["colo"]["workloads_rejected"] == 1.0
    assert "Team quotas" in text and "batch_cpu/batch_memory" in text and "cpu/memory" in text
    data = json.loads((tmp_path / "summary.json").read_text())
    assert data["quotas"]["colo"]["team-a"]["used_avg_cores"] == 3.0
    assert data["gang_waits_s"] == {"baseline": [120.0], "colo": [120.0]}
    assert data["scheduler_evictions"]["colo"] == {"Preempted by batch/hp-0": 1, "quota reclaim by team-a": 1}
    assert data["scheduler_victims"]["colo"] == {"victims": 2, "rebound": 0, "completed": 0}
    assert data["workloads_rejected"]["colo"] == {"w-bad": ["parallelism: must be ≥ 1"]}
    page = (tmp_path / "report.html").read_text()
    assert "<h2>Team quotas</h2>" in page and "team quota CPU used and runtime" in page
