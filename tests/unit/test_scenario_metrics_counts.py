"""RunMetrics keeps batch running/completed counts incrementally; they must equal a recount."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from colo.messages import PodBound, PodSpec, PodStatus, SimWorkload, TickAck
from colo.sim.metrics import RunMetrics

UIDS = [f"p{i}" for i in range(6)]
_event = st.tuples(st.sampled_from(["submit-batch", "submit-service", "bound", "Running", "Succeeded", "Failed"]),
                   st.sampled_from(UIDS))


def _spec(uid: str, batch: bool) -> PodSpec:
    sim = SimWorkload(kind="batch", cpu_milli=100, duration_s=60.0) if batch else SimWorkload(kind="series")
    return PodSpec(uid=uid, name=uid, sim=sim)


@settings(max_examples=200, deadline=None)
@given(events=st.lists(_event, max_size=40))
def test_counts_equal_a_recount(events: list[tuple[str, str]]) -> None:
    m = RunMetrics(name="colo")
    for t, (kind, uid) in enumerate(events):
        if kind.startswith("submit"):
            m.submitted(_spec(uid, kind == "submit-batch"), float(t))
        elif kind == "bound":
            m.on_bound(PodBound(spec=_spec(uid, True), node="n1", at=float(t)))
        else:
            m.on_status(PodStatus(uid=uid, node="n1", phase=kind, at=float(t)))  # type: ignore[arg-type]
        m.on_ticks(float(t), [TickAck(service="node-agent", seq=t)])
        sample = m.series[-1]
        assert sample.batch_running == sum(1 for u, p in m.phase.items()
                                           if p == "Running" and u in m.batch_duration_s)
        assert sample.batch_completed == sum(1 for u in m.completed_at if u in m.batch_duration_s)


def test_migrations_count_each_job_by_its_final_phase() -> None:
    from colo.messages import PodMigrationJob
    from colo.sim.metrics import RunMetrics

    m = RunMetrics("colo")

    def job(jid: str, phase: str) -> PodMigrationJob:
        return PodMigrationJob(id=jid, uid=jid, source="a", target="b", phase=phase)  # type: ignore[arg-type]

    for ev in (job("j1", "Pending"), job("j1", "Running"), job("j1", "Succeeded"),
               job("j2", "Pending"), job("j2", "Running"), job("j2", "Failed"),
               job("j3", "Pending"), job("j3", "Aborted"), job("j4", "Pending"),
               job("j1", "Running")):  # a late redelivery does not reopen a finished job
        m.on_migration(ev)
    s = m.summary()
    assert (s["migrations"], s["migrations_failed"], s["migrations_aborted"]) == (1.0, 1.0, 1.0)
    assert len(m.migration_events) == 10
