"""Counters with bounded labels are exported at 0 from import (a rate() over a series that does not exist yet is
empty, not 0), and no ``*_created`` series is exported (issue 14 follow-up)."""

from __future__ import annotations

import itertools

import pytest
from prometheus_client.parser import text_string_to_metric_families

from colo import telemetry
from colo_descheduler import metrics as desched
from colo_scheduler import metrics as sched


def _series() -> set[tuple[str, frozenset[tuple[str, str]]]]:
    text = telemetry.render_metrics()[0].decode()
    return {(s.name, frozenset(s.labels.items())) for f in text_string_to_metric_families(text) for s in f.samples}


def _has(name: str, **labels: str) -> bool:
    return (name, frozenset(labels.items())) in _series()


CASES = [
    *[pytest.param("colo_descheduler_evictions_total", {"strategy": s, "result": r}, id=f"desched-evictions-{r}")
      for s, r in itertools.product(desched.STRATEGIES, desched.EVICTION_RESULTS)],
    *[pytest.param("colo_descheduler_migration_jobs_total", {"result": r}, id=f"desched-jobs-{r}")
      for r in desched.JOB_RESULTS],
    *[pytest.param("colo_descheduler_rounds_total", {"strategy": s}, id="desched-rounds")
      for s in desched.STRATEGIES],
    *[pytest.param(f"colo_config_{k}_total", {"service": "slo-manager", "trigger": t}, id=f"config-{k}-{t}")
      for k, t in itertools.product(("applied", "rejected"), ("file", "kv"))],
    *[pytest.param("colo_slo_manager_admissions_total", {"result": r}, id=f"admissions-{r}")
      for r in ("admitted", "rejected")],
    *[pytest.param("colo_scheduler_schedule_attempts_total", {"result": r}, id=f"attempts-{r}")
      for r in sched.ATTEMPT_RESULTS],
    *[pytest.param("colo_scheduler_binds_total", {"result": r}, id=f"binds-{r}") for r in sched.BIND_RESULTS],
]


@pytest.mark.parametrize(("name", "labels"), CASES)
def test_bounded_counter_exported_at_zero(name: str, labels: dict[str, str]) -> None:
    assert _has(name, **labels), f"{name}{labels} not exported before it first fires"


def test_no_created_series() -> None:
    assert not [n for n, _ in _series() if n.endswith("_created")]


def test_config_generation_replaces_the_hash_as_a_number() -> None:
    names = {n for n, _ in _series()}
    assert "colo_slo_manager_config_generation" in names and "colo_slo_manager_config_version" not in names
