"""The scheduling profile from settings (YAML / env): plugins, weights and typed plugin arguments,
validated when the scheduler starts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from sched_helpers import GI, node, pod

from colo.settings import load_settings
from colo_scheduler.core import Scheduler
from colo_scheduler.settings import SchedulerSettings

GOOD = """
profile:
  filter: [NodeSelector, TaintToleration, NodeResourcesFit, LoadAware]
  score: {NodeResourcesFit: 1}
  plugin_args:
    NodeResourcesFit:
      scoring_strategy: {type: MostAllocated}
    LoadAware:
      usage_thresholds: {cpu: 50, memory: 90}
"""

BAD = """
profile:
  filter: [NodeSelector, NoSuchFilter]
  score: {NodeResourcesFit: -2}
  plugin_args:
    NodeResourcesFit:
      scoring_strategy: {type: Sideways}
    LoadAware:
      usage_thresholds: {cpu: 150}
"""


def _settings(tmp_path: Path, text: str) -> SchedulerSettings:
    path = tmp_path / "scheduler.yaml"
    path.write_text(text)
    return load_settings(SchedulerSettings, "COLO_SCHEDULER", env={}, yaml_path=str(path))


def test_profile_from_yaml_changes_plugins_and_arguments(tmp_path: Path) -> None:
    core = Scheduler(_settings(tmp_path, GOOD))
    profile = core.framework.profile
    assert [p.name for p in profile.filter] == ["NodeSelector", "TaintToleration", "NodeResourcesFit", "LoadAware"]
    assert [(p.name, w) for p, w in profile.score] == [("NodeResourcesFit", 1)]
    # MostAllocated packs: the second pod joins the first on the fuller node
    core.on_node(node("a", cpu=8_000, memory=16 * GI), 0.0)
    core.on_node(node("b", cpu=8_000, memory=16 * GI), 0.0)
    core.add_pod(pod("p1", cpu=1_000, memory=GI), 0.0)
    first = core.schedule_cycle(0.0).placements[0].node
    core.add_pod(pod("p2", cpu=1_000, memory=GI), 1.0)
    assert core.schedule_cycle(1.0).placements[0].node == first
    # LoadAware's threshold of 50 % applies: a node at 45 % CPU rejects a 1-CPU pod (+850 m estimate)
    from sched_helpers import metric

    core.on_node(node("c", cpu=10_000, memory=16 * GI), 2.0)
    core.on_metric(metric("c", 2.0, cpu=4_500, memory=GI), 2.0)
    core.add_pod(pod("p3", cpu=1_000, memory=GI, lim_cpu=1_000), 2.0)
    core.schedule_cycle(2.0)
    rec = core.decision("p3")
    assert rec is not None
    assert any(f.plugin == "LoadAware" for f in rec.filters if f.mask(rec.nodes)[2])


def test_every_profile_problem_is_listed(tmp_path: Path) -> None:
    with pytest.raises(ValueError) as err:
        Scheduler(_settings(tmp_path, BAD))
    msg = str(err.value)
    for part in ("NoSuchFilter", "weight of 'NodeResourcesFit' must be >= 0", "Sideways", "150"):
        assert part in msg, (part, msg)


def test_service_exits_2_listing_profile_problems(tmp_path: Path) -> None:
    path = tmp_path / "scheduler.yaml"
    path.write_text(BAD)
    env = {k: v for k, v in os.environ.items() if not k.startswith("COLO_")}
    env["COLO_SCHEDULER_CONFIG"] = str(path)
    proc = subprocess.run([sys.executable, "-m", "colo_scheduler"], env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "invalid" in proc.stderr and "NoSuchFilter" in proc.stderr and "Sideways" in proc.stderr
