"""The host backend's configuration and the machine checks made before it starts (every problem listed)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from colo_node_agent.backends.host_cgroups import V1_REQUIRED, V2_REQUIRED, v1_mounted
from colo_node_agent.backends.host_metrics import NodeScope
from colo_node_agent.cgroups.fs import HostFS, detect_version
from colo_node_agent.gpu_discovery import PROC_ROOT


@dataclass(frozen=True)
class HostConfig:
    """Where and how the host backend runs (from NodeAgentSettings; docs/node-agent.md "host backend").

    ``loop_s`` seconds between samples and strategy rounds; ``window_s`` NodeMetric averaging window;
    ``termination_grace_s`` SIGTERM → SIGKILL delay for eviction orders (QoS evictions kill at once);
    ``*_capacity_*`` overrides (0 = measured); ``interference_signals`` read run-queue wait, CPU pressure and
    CPI of LS pods (:mod:`.host_interference`); ``gpus`` the GPU setting (``auto``, ``off`` or a JSON list,
    :func:`~colo_node_agent.gpu_discovery.host_gpus`), discovered under ``gpu_proc_root``.
    """

    node_name: str
    cgroup_root: str = "/sys/fs/cgroup"
    cgroup_parent: str = "colo"
    state_dir: str = "/var/lib/colo/node-agent"
    loop_s: float = 1.0
    window_s: float = 300.0
    node_scope: NodeScope = "machine"
    termination_grace_s: float = 30.0
    cpu_capacity_milli: int = 0
    memory_capacity_bytes: int = 0
    interference_signals: bool = True
    gpus: str = "auto"
    gpu_proc_root: str = PROC_ROOT


class HostConfigError(ValueError):
    """The machine cannot host the backend as configured; ``problems`` lists every reason."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(self.problems))


def _nearest_existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def host_problems(config: HostConfig) -> list[str]:
    """Every reason this machine cannot run the backend with ``config`` (empty when it can): cgroup root
    missing, required controllers not mounted/enabled, parent or state directory not writable."""
    out: list[str] = []
    root = Path(config.cgroup_root)
    if not root.is_dir():
        return [f"cgroup_root {root} is not a directory"]
    version = detect_version(HostFS(root))
    if version == "v1":
        mounted = v1_mounted(root)
        missing = [c for c in V1_REQUIRED if not (root / c / "cgroup.procs").exists()]
        if missing:
            out.append(f"cgroup v1 controllers not mounted under {root}: {', '.join(missing)}")
        bases = [root / c for c in mounted]
    else:
        offered = (root / "cgroup.controllers").read_text().split()
        missing = [c for c in V2_REQUIRED if c not in offered]
        if missing:
            out.append(f"cgroup v2 controllers not available at {root}: {', '.join(missing)}")
        bases = [root]
    for base in bases:
        target = _nearest_existing(base / config.cgroup_parent)
        if not os.access(target, os.W_OK):
            out.append(f"cgroup parent {base / config.cgroup_parent} is not writable ({target})")
    state = _nearest_existing(Path(config.state_dir))
    if not state.is_dir() or not os.access(state, os.W_OK):
        out.append(f"state_dir {config.state_dir} cannot be created or written ({state})")
    return out
