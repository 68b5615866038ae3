"""Settings and machine checks of the host backend: every problem listed at once, before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from colo.settings import SettingsError, load_settings
from colo_node_agent.backends.host import HostConfig, HostConfigError, host_problems
from colo_node_agent.service import NodeAgentService
from colo_node_agent.settings import ENV_PREFIX, NodeAgentSettings


@pytest.mark.parametrize(("field", "value", "problem"), [
    ("cgroup_parent", "/colo", "relative path"),
    ("cgroup_parent", "colo/", "relative path"),
    ("cgroup_parent", "", "relative path"),
    ("cgroup_parent", "a/../b", "each component"),
    ("cgroup_parent", "a//b", "each component"),
    ("cgroup_parent", "my colo", "each component"),
    ("cgroup_parent", "kubepods", "host's own 'kubepods'"),
    ("cgroup_parent", "system.slice/colo", "host's own 'system.slice'"),
    ("cgroup_root", "sys/fs/cgroup", "cgroup_root must be an absolute path"),
    ("state_dir", "state", "state_dir must be an absolute path"),
    ("node_name", "Node_1", "not a valid node name"),
    ("loop_s", 0.0, "loop_s must be > 0"),
    ("report_interval_s", 0.5, "must be >= loop_s"),
    ("termination_grace_s", -1.0, "termination_grace_s must be >= 0"),
    ("memory_capacity_bytes", -1, "must be >= 0"),
], ids=lambda v: str(v))
def test_each_bad_host_setting_is_named(field: str, value: object, problem: str) -> None:
    with pytest.raises(ValueError) as err:
        NodeAgentSettings(backend="host", **{field: value})  # type: ignore[arg-type]
    assert problem in str(err.value)


def test_every_problem_is_listed_at_once_from_the_environment() -> None:
    env = {f"{ENV_PREFIX}_BACKEND": "host", f"{ENV_PREFIX}_CGROUP_PARENT": "../up",
           f"{ENV_PREFIX}_STATE_DIR": "relative", f"{ENV_PREFIX}_LOOP_S": "-1"}
    with pytest.raises(SettingsError) as err:
        load_settings(NodeAgentSettings, ENV_PREFIX, env=env)
    text = str(err.value)
    for problem in ("cgroup_parent '../up'", "state_dir must be an absolute path", "loop_s must be > 0"):
        assert problem in text


def test_valid_host_settings_load() -> None:
    env = {f"{ENV_PREFIX}_BACKEND": "host", f"{ENV_PREFIX}_CGROUP_PARENT": "colo/agent-1",
           f"{ENV_PREFIX}_NODE_SCOPE": "parent", f"{ENV_PREFIX}_LOOP_S": "0.5"}
    s = load_settings(NodeAgentSettings, ENV_PREFIX, env=env)
    assert (s.backend, s.cgroup_parent, s.node_scope, s.loop_s) == ("host", "colo/agent-1", "parent", 0.5)
    assert NodeAgentSettings().backend == "sim", "the sim stays the default"


def test_machine_problems_are_all_listed(tmp_path: Path) -> None:
    assert host_problems(HostConfig(node_name="n", cgroup_root=str(tmp_path / "missing"))) == [
        f"cgroup_root {tmp_path / 'missing'} is not a directory"]
    (tmp_path / "root").mkdir()
    (tmp_path / "a-file").write_text("")
    problems = host_problems(HostConfig(node_name="n", cgroup_root=str(tmp_path / "root"),
                                        state_dir=str(tmp_path / "a-file" / "state")))
    assert problems[0] == f"cgroup v1 controllers not mounted under {tmp_path / 'root'}: cpu, cpuacct, cpuset, memory"
    assert problems[1].startswith(f"state_dir {tmp_path / 'a-file' / 'state'} cannot be created or written")
    assert len(problems) == 2
    (tmp_path / "v2").mkdir()
    (tmp_path / "v2" / "cgroup.controllers").write_text("cpuset io pids\n")
    problems = host_problems(HostConfig(node_name="n", cgroup_root=str(tmp_path / "v2"), state_dir=str(tmp_path)))
    assert problems == [f"cgroup v2 controllers not available at {tmp_path / 'v2'}: cpu, memory"]


def test_the_service_refuses_a_machine_it_cannot_use(tmp_path: Path) -> None:
    settings = NodeAgentSettings(backend="host", cgroup_root=str(tmp_path), state_dir=str(tmp_path / "s"))
    with pytest.raises(HostConfigError) as err:
        NodeAgentService(settings)
    assert isinstance(err.value, ValueError), "python -m colo_node_agent turns it into exit 2"
    assert err.value.problems == [
        f"cgroup v1 controllers not mounted under {tmp_path}: cpu, cpuacct, cpuset, memory"]
