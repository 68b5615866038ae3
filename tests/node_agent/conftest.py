"""Fixtures for host-backend tests on real cgroups (pytest marker ``cgroup``).

``cgroup_parent`` makes a unique parent group ``colo-test-<hex>`` and, at teardown, kills every process the
kernel lists in any group under it and removes every group under it, deepest first, the parent included.
It skips (with the reason printed by ``-ra``) where this machine cannot host the backend: cgroup v1/v2
controllers not mounted or ``/sys/fs/cgroup/cpu`` not writable.
"""

from __future__ import annotations

import os
import signal
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from colo_node_agent.backends.host import HostConfig, host_problems
from colo_node_agent.backends.host_cgroups import CgroupTree
from colo_node_agent.cgroups.fs import HostFS, detect_version

_HERE = str(Path(__file__).parent)
if _HERE not in sys.path:  # local helpers such as ``interference_tables`` (pytest runs in importlib mode)
    sys.path.insert(0, _HERE)

CGROUP_ROOT = Path("/sys/fs/cgroup")


def real_cgroups_problem() -> str:
    """Why real-cgroup tests cannot run here ("" when they can)."""
    if not CGROUP_ROOT.is_dir():
        return f"{CGROUP_ROOT} does not exist"
    if detect_version(HostFS(CGROUP_ROOT)) == "v1" and not os.access(CGROUP_ROOT / "cpu", os.W_OK):
        return f"{CGROUP_ROOT / 'cpu'} is not writable (needs root and a writable cgroup v1 mount)"
    problems = host_problems(HostConfig(node_name="probe", cgroup_parent="colo-test-probe", state_dir="/tmp"))
    return "; ".join(problems)


def purge_tree(tree: CgroupTree, timeout_s: float = 10.0) -> list[str]:
    """Kill every member of every group under the tree's parent and remove the groups (the parent too).
    Returns the groups that could not be removed."""
    deadline = time.monotonic() + timeout_s
    left: list[str] = []
    for cg in tree.all_groups():
        while True:
            members = [p for p in tree.procs(cg) if tree.member(p, cg)]
            for pid in members:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            if not members and tree.remove(cg):
                break
            if time.monotonic() > deadline:
                left.append(cg)
                break
            time.sleep(0.02)
    return left


@pytest.fixture
def cgroup_parent() -> Iterator[str]:
    """A unique parent group name for one test; everything under it is removed at teardown."""
    problem = real_cgroups_problem()
    if problem:
        pytest.skip(f"real cgroups unavailable: {problem}")
    parent = f"colo-test-{uuid.uuid4().hex[:10]}"
    tree = CgroupTree(CGROUP_ROOT, parent, detect_version(HostFS(CGROUP_ROOT)))
    try:
        yield parent
    finally:
        left = purge_tree(tree)
        assert not left, f"cgroups left behind: {left}"
