"""Bad scheduler configuration: every problem in one listing, exit 2, never a traceback; score weights
that would overflow the int64 totals are refused at start.

Found broken:
* a type error anywhere (``filter: NodeResourcesFit`` instead of a list) hid every range problem
  (``tick_interval_s: -1``) and every profile problem (unknown plugins, bad plugin arguments):
  they came one start at a time, the profile ones only after the settings were fixed;
* score weights whose Σ × 100 exceeds int64 wrapped around: every pod was "unschedulable" with
  the empty message "0/N nodes are available." (or an OverflowError in every cycle).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from sched_helpers import node, pod

from colo.settings import SettingsError, load_settings
from colo_scheduler.core import Scheduler
from colo_scheduler.profiles import ValidatedSchedulerSettings
from colo_scheduler.settings import ProfileSettings, SchedulerSettings

MIXED = """
tick_interval_s: -1
max_pods_per_cycle: 0
profile:
  filter: NodeResourcesFit
  bogus: 1
  reserve: [NodeSelector]
  plugin_args:
    Nope: {a: 1}
    NodeResourcesFit: {scoring_strategy: {type: Weird}}
    LoadAware: {usage_thresholds: {cpu: 300}, resource_weights: {cpu: 0, memory: 0}}
"""

MIXED_PROBLEMS = (
    "profile.filter",                      # a type error ...
    "profile.bogus: unknown setting",      # ... an unknown key ...
    "tick_interval_s must be > 0",         # ... and, listed with them, range problems
    "max_pods_per_cycle must be > 0",
    "'Nope'",                              # ... and profile problems
    "Weird",
    "usage_thresholds: cpu must be within 0..100",
    "resource_weights",
    "'NodeSelector' does not implement Reserve",
)


def _load(tmp_path: Path, text: str) -> ValidatedSchedulerSettings:
    path = tmp_path / "scheduler.yaml"
    path.write_text(text)
    return load_settings(ValidatedSchedulerSettings, "COLO_SCHEDULER", env={}, yaml_path=str(path))


def test_type_range_and_profile_problems_are_listed_together(tmp_path: Path) -> None:
    with pytest.raises(SettingsError) as err:
        _load(tmp_path, MIXED)
    text = str(err.value)
    for part in MIXED_PROBLEMS:
        assert part in text, (part, text)


@pytest.mark.parametrize(("yaml_text", "parts"), [
    pytest.param("profile:\n  plugin_args:\n    NodeResourcesFit: [1, 2]\n    LoadAware: {usage_thresholds: {cpu: 300}}\n"
                 "  queue_sort: TaintToleration\n",
                 ["arguments of plugin 'NodeResourcesFit' must be a mapping, got list",
                  "usage_thresholds: cpu must be within 0..100", "'TaintToleration' does not implement QueueSort"],
                 id="args-not-a-map"),
    pytest.param("profile:\n  score: {LoadAware: 1, NoSuch: 2}\n  percentage_of_nodes_to_score: 0\n",
                 ["unknown plugin 'NoSuch'", "percentage_of_nodes_to_score must be within 1..100"],
                 id="unknown-score-plugin"),
    pytest.param("profile:\n  plugin_args:\n    NodeSelector: {x: 1}\n",
                 ["plugin 'NodeSelector' takes no arguments"], id="args-for-an-argless-plugin"),
    pytest.param("profile:\n  filter: [TaintToleration]\n  plugin_args:\n    MaxInstancePerNode: {}\n",
                 ["MaxInstancePerNode"], id="args-for-a-plugin-not-enabled"),
    pytest.param("profile:\n  score: {LoadAware: 46116860184273880, NodeResourcesLeastAllocated: 46116860184273880}\n",
                 ["overflow"], id="weights-overflow"),
    pytest.param("profile:\n  score: {LoadAware: 100000000000000000000}\n", ["overflow"], id="weight-beyond-int64"),
])
def test_bad_profiles_are_refused_at_load(tmp_path: Path, yaml_text: str, parts: list[str]) -> None:
    with pytest.raises(SettingsError) as err:
        _load(tmp_path, yaml_text)
    for part in parts:
        assert part in str(err.value), (part, str(err.value))


def test_weights_that_overflow_int64_are_refused() -> None:
    big = (2**63 - 1) // 100 // 2 + 1
    with pytest.raises(ValueError, match="overflow"):
        ValidatedSchedulerSettings(profile=ProfileSettings(score={"LoadAware": big,
                                                                  "NodeResourcesLeastAllocated": big}))
    ok = (2**63 - 1) // 100 // 2
    core = Scheduler(SchedulerSettings(profile=ProfileSettings(score={"LoadAware": ok,
                                                                      "NodeResourcesLeastAllocated": ok})))
    core.on_node(node("a"), 0.0)
    core.on_node(node("b", cpu=1_000), 0.0)
    core.add_pod(pod("p", cpu=100), 0.0)
    assert [p.node for p in core.schedule_cycle(0.0).placements] == ["a"]


@pytest.mark.parametrize(("pct", "ok"), [(1, True), (100, True), (0, False), (101, False), (-5, False)])
def test_percentage_of_nodes_to_score_edges(pct: int, ok: bool) -> None:
    profile = ProfileSettings(percentage_of_nodes_to_score=pct, min_feasible_nodes_to_find=1)
    if not ok:
        with pytest.raises(ValueError, match="percentage_of_nodes_to_score"):
            ValidatedSchedulerSettings(profile=profile)
        return
    core = Scheduler(SchedulerSettings(profile=profile))
    for i in range(5):
        core.on_node(node(f"n{i}"), 0.0)
    for k in range(10):
        core.add_pod(pod(f"p{k}", cpu=100), 0.0)
    assert len(core.schedule_cycle(0.0).placements) == 10


def test_zero_weights_and_no_filters_still_place_within_capacity() -> None:
    """Every weight 0: ties everywhere, the seeded tie-break decides; no filter at all: the store's bind
    check is the only guard, so the profile is legal (Kubernetes allows disabling every filter)."""
    core = Scheduler(SchedulerSettings(profile=ProfileSettings(
        filter=[], score={"LoadAware": 0, "NodeResourcesLeastAllocated": 0})))
    core.on_node(node("a"), 0.0)
    core.on_node(node("b"), 0.0)
    core.add_pod(pod("p", cpu=100), 0.0)
    assert len(core.schedule_cycle(0.0).placements) == 1


def test_service_exits_2_listing_every_problem_of_a_mixed_file(tmp_path: Path) -> None:
    path = tmp_path / "scheduler.yaml"
    path.write_text(MIXED)
    env = {k: v for k, v in os.environ.items() if not k.startswith("COLO_")}
    env["COLO_SCHEDULER_CONFIG"] = str(path)
    env["COLO_NATS_URL"] = "nats://127.0.0.1:1"  # never reached: the settings are refused first
    proc = subprocess.run([sys.executable, "-m", "colo_scheduler"], env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    for part in MIXED_PROBLEMS:
        assert part in proc.stderr, (part, proc.stderr)


@pytest.mark.parametrize("instance", ["", "bad name!", "x" * 65])
def test_leader_election_without_a_usable_instance_exits_2_before_connecting(instance: str) -> None:
    """The COLO_INSTANCE check ran in ``start``, after connecting to NATS and Redis: a traceback and exit 1
    (or, with NATS unreachable, only the connection error and never the configuration problem)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("COLO_")}
    env.update(COLO_SCHEDULER_LEADER_ELECTION="true", COLO_INSTANCE=instance,
               COLO_NATS_URL="nats://127.0.0.1:1", COLO_REDIS_URL="redis://127.0.0.1:1/0")
    proc = subprocess.run([sys.executable, "-m", "colo_scheduler"], env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert "COLO_INSTANCE" in proc.stderr


def test_plain_settings_are_data_and_the_scheduler_refuses_their_bad_profile(tmp_path: Path) -> None:
    """:class:`SchedulerSettings` checks its own fields only (it imports neither the framework nor the
    plugins); the profile's problems come with the service's settings type at load, and from the
    scheduler when it builds the profile — every one of them either way."""
    path = tmp_path / "scheduler.yaml"
    path.write_text(MIXED.replace("  filter: NodeResourcesFit\n  bogus: 1\n", "").replace("tick_interval_s: -1\n"
                                                                                        "max_pods_per_cycle: 0\n", ""))
    plain = load_settings(SchedulerSettings, "COLO_SCHEDULER", env={}, yaml_path=str(path))
    with pytest.raises(ValueError) as err:
        Scheduler(plain)
    with pytest.raises(SettingsError) as at_load:
        load_settings(ValidatedSchedulerSettings, "COLO_SCHEDULER", env={}, yaml_path=str(path))
    for part in MIXED_PROBLEMS[4:]:
        assert part in str(err.value), (part, str(err.value))
        assert part in str(at_load.value), (part, str(at_load.value))
