"""Cluster state kept by slo-manager, and its settings loading."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from colo.messages import NodeMetric, PodBound, PodRecord, PodSpec, PodStatus, Resources
from colo.settings import SettingsError, load_settings
from colo_slo_manager.settings import ENV_PREFIX, SloManagerSettings
from colo_slo_manager.state import ClusterState

SPEC = PodSpec(uid="p", name="p", priority=9500, requests=Resources(cpu=1000, memory=10))


def bound(node: str, at: float) -> PodBound:
    return PodBound(spec=SPEC, node=node, at=at)


def status(node: str, phase: str, at: float) -> PodStatus:
    return PodStatus(uid="p", node=node, phase=phase, at=at)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("events", "want"),
    [
        pytest.param([bound("a", 1)], {"a": "Pending"}, id="bound-is-pending"),
        pytest.param([bound("a", 1), status("a", "Running", 2)], {"a": "Running"}, id="bound-then-running"),
        pytest.param([status("a", "Running", 2), bound("a", 1)], {"a": "Running"},
                     id="status-before-binding-keeps-phase"),
        pytest.param([bound("a", 1), status("a", "Failed", 3), bound("b", 5)], {"a": None, "b": "Pending"},
                     id="evicted-then-rebound-elsewhere"),
        pytest.param([bound("a", 1), bound("b", 5), status("a", "Failed", 3)], {"a": None, "b": "Pending"},
                     id="late-status-from-old-node-ignored"),
        pytest.param([bound("a", 1), status("a", "Running", 4), status("a", "Pending", 3)], {"a": "Running"},
                     id="older-status-ignored"),
        pytest.param([bound("b", 5), bound("a", 1)], {"a": None, "b": "Pending"}, id="older-binding-ignored"),
        pytest.param([status("a", "Running", 2)], {"a": "Running"}, id="status-of-unknown-pod"),
        pytest.param([bound("a", 120), status("a", "Running", 180), status("a", "Failed", 130)], {"a": "Failed"},
                     id="end-stamped-before-a-later-stamped-running-still-ends-the-pod"),
        pytest.param([bound("a", 120), status("a", "Failed", 130), status("a", "Running", 180)], {"a": "Failed"},
                     id="running-after-the-end-of-the-same-binding-ignored"),
        pytest.param([bound("a", 1), status("a", "Succeeded", 9), status("a", "Failed", 5)], {"a": "Succeeded"},
                     id="older-end-after-an-end-ignored"),
        pytest.param([bound("a", 1), status("a", "Failed", 3), bound("a", 5), status("a", "Running", 6)],
                     {"a": "Running"}, id="rebound-on-the-same-node-after-eviction-runs-again"),
        pytest.param([bound("a", 1), status("a", "Failed", 3), status("a", "Running", 6), bound("a", 5)],
                     {"a": "Pending"}, id="running-of-a-new-binding-before-the-binding-counts-as-pending"),
        pytest.param([bound("a", 1), bound("a", 5), status("a", "Failed", 3)], {"a": "Pending"},
                     id="end-of-an-earlier-binding-on-the-same-node-ignored"),
    ],
)
def test_pod_events(events: list[PodBound | PodStatus], want: dict[str, str | None]) -> None:
    state = ClusterState()
    for e in events:
        if isinstance(e, PodBound):
            state.on_bound(e)
        else:
            state.on_status(e)
    for node, phase in want.items():
        views = state.pods_on(node)
        assert [v.phase for v in views] == ([] if phase is None else [phase])


def test_status_of_unknown_pod_uses_reported_classes() -> None:
    state = ClusterState()
    state.on_status(PodStatus(uid="x", node="a", phase="Running", at=1, qos_class="BE",
                              requests=Resources(batch_cpu=500)))
    (view,) = state.pods_on("a")
    assert (view.qos_class, view.priority_class, view.requests.batch_cpu) == ("BE", "batch", 500)


def test_records_and_forget_finished() -> None:
    state = ClusterState()
    state.put_record(PodRecord(spec=SPEC, phase="Running", node="a", updated_at=1, bound_at=1))
    state.put_record(PodRecord(spec=PodSpec(uid="q", name="q"), phase="Pending"))  # unbound: ignored
    assert [v.uid for v in state.pods_on("a")] == ["p"]
    state.on_status(status("a", "Succeeded", 10))
    assert state.forget_finished(now=100, retention_s=3600) == 0
    assert state.forget_finished(now=3611, retention_s=3600) == 1
    assert state.pods_on("a") == [] and "p" not in state.pods


def test_newest_metric_wins() -> None:
    state = ClusterState()
    assert state.put_metric(NodeMetric(node="a", at=10))
    assert not state.put_metric(NodeMetric(node="a", at=5))
    assert state.metrics["a"].at == 10


@pytest.mark.parametrize(
    ("env", "check"),
    [
        pytest.param({"COLO_SLO_MANAGER_COLOCATION_ENABLED": "0"}, lambda s: s.colocation_enabled is False,
                     id="baseline-switch"),
        pytest.param({"COLO_SLO_MANAGER_BATCH__MEMORY_POLICY": "request",
                      "COLO_SLO_MANAGER_BATCH__CPU_RECLAIM_THRESHOLD_PERCENT": "65"},
                     lambda s: (s.batch.memory_policy, s.batch.cpu_reclaim_threshold_percent) == ("request", 65),
                     id="nested-batch-policy"),
        pytest.param({"COLO_SLO_MANAGER_PROFILES": '[{"name": "spark", "match_labels": {"app": "spark"}}]'},
                     lambda s: [p.name for p in s.profiles] == ["spark"], id="profiles-as-json"),
        pytest.param({}, lambda s: (s.batch.cpu_reclaim_threshold_percent, s.batch.memory_reclaim_threshold_percent,
                                    s.diff_threshold_percent, s.max_publish_age_s, s.metric_stale_reset_s)
                     == (60, 65, 10, 300.0, 900.0), id="reference-defaults"),
    ],
)
def test_settings_from_env(env: dict[str, str], check: object) -> None:
    settings = load_settings(SloManagerSettings, ENV_PREFIX, env=env)
    assert check(settings)  # type: ignore[operator]


def test_settings_errors_listed() -> None:
    env = {"COLO_SLO_MANAGER_BOGUS": "1", "COLO_SLO_MANAGER_BATCH__CPU_POLICY": "request",
           "COLO_SLO_MANAGER_MID__CPU_THRESHOLD_PERCENT": "150"}
    with pytest.raises(SettingsError) as err:
        load_settings(SloManagerSettings, ENV_PREFIX, env=env)
    text = str(err.value)
    assert "bogus" in text and "cpu_policy" in text and "mid.cpu_threshold_percent" in text


def test_settings_constraints_listed_together() -> None:
    with pytest.raises(SettingsError) as err:
        load_settings(SloManagerSettings, ENV_PREFIX, env={
            "COLO_SLO_MANAGER_TICK_INTERVAL_S": "0", "COLO_SLO_MANAGER_MAX_PUBLISH_AGE_S": "-1",
            "COLO_SLO_MANAGER_PROFILES": '[{"name": "a"}, {"name": "a"}]'})
    text = str(err.value)
    assert "tick_interval_s" in text and "max_publish_age_s" in text and "duplicate profile names: a" in text


def test_main_exits_2_on_bad_settings() -> None:
    env = {**os.environ, "COLO_SLO_MANAGER_BATCH__MEMORY_RECLAIM_THRESHOLD_PERCENT": "101",
           "COLO_SLO_MANAGER_NOPE": "x"}
    proc = subprocess.run([sys.executable, "-m", "colo_slo_manager"], env=env, capture_output=True, text=True,
                          timeout=30)
    assert proc.returncode == 2
    assert "memory_reclaim_threshold_percent" in proc.stderr and "nope" in proc.stderr


_ONE_BINDING = st.tuples(st.floats(0, 1000), st.floats(0, 1000), st.floats(0, 1000),
                         st.sampled_from(["Failed", "Succeeded"]), st.permutations(range(3)))


@given(_ONE_BINDING)
def test_a_bindings_end_is_final_whatever_the_order_and_stamps(case: tuple[float, float, float, str, list[int]]) -> None:
    """One binding at ``b``, a Running stamped ``b + r`` and its end stamped ``b + e`` (stamps in any order, as
    a node agent whose clock and pod times disagree may send them), consumed in any order: the pod ends."""
    b, r, e, end, order = case
    events: list[PodBound | PodStatus] = [bound("a", b), status("a", "Running", b + r), status("a", end, b + e)]
    state = ClusterState()
    for k in order:
        ev = events[k]
        if isinstance(ev, PodBound):
            state.on_bound(ev)
        else:
            state.on_status(ev)
    assert [v.phase for v in state.pods_on("a")] == [end]
