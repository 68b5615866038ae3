"""Node-level samples of the host backend: CPU and memory used, capacity and PSI (REFERENCE.md §2).

Two scopes (setting ``node_scope``):

* ``machine`` (default): the node is this machine. CPU used = Δ(user + nice + system + irq + softirq) of the
  ``/proc/stat`` "cpu" line / Δt (psutil.cpu_times); memory used = MemTotal − MemAvailable (``/proc/meminfo``
  through psutil.virtual_memory); capacity = logical CPUs × 1000 and MemTotal; PSI from ``/proc/pressure/*``.
* ``parent``: the node is the agent's parent cgroup (a slice of a shared machine, e.g. tests or a host where
  other workloads must not count): CPU used = Δ of the parent's CPU time; memory used = the parent's anon +
  unevictable; capacity = the parent's CFS quota (else its cpuset size) × 1000 and its memory limit (else
  MemTotal); PSI from the parent's ``*.pressure`` files (v2 only).

Explicit ``cpu_capacity_milli`` / ``memory_capacity_bytes`` settings override the capacity in both scopes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import psutil

from colo_node_agent.backends.host_cgroups import PSI_RESOURCES, CgroupTree, psi_avg10
from colo_node_agent.cgroups import stats

NodeScope = Literal["machine", "parent"]


@dataclass(frozen=True)
class Capacity:
    """Node capacity: ``cpu_milli`` milli-cores, ``memory_bytes`` bytes, ``cpus`` the CPU ids pods may use."""

    cpu_milli: int
    memory_bytes: int
    cpus: tuple[int, ...]


def machine_cpus() -> tuple[int, ...]:
    """CPU ids this process may run on (its affinity, which a container's cpuset restricts)."""
    return tuple(sorted(psutil.Process().cpu_affinity() or range(psutil.cpu_count() or 1)))


def capacity(tree: CgroupTree, scope: NodeScope, cpu_override: int = 0, memory_override: int = 0) -> Capacity:
    """The node's capacity for ``scope`` (see the module doc); overrides win when > 0."""
    total_mem = int(psutil.virtual_memory().total)
    cpus = machine_cpus()
    parent_cpus = tree.cpus("")
    if parent_cpus:
        cpus = tuple(c for c in parent_cpus if c in cpus) or cpus
    cpu, mem = len(cpus) * 1000, total_mem
    if scope == "parent":
        quota = tree.cpu_limit_milli("")
        if quota is not None:
            cpu = min(cpu, quota)
        limit = tree.memory_limit("")
        if limit is not None and limit > 0:
            mem = min(mem, limit)
    return Capacity(cpu_override or cpu, memory_override or mem, cpus)


def _busy_seconds() -> float:
    """user + nice + system + irq + softirq of the /proc/stat "cpu" line, in seconds (REFERENCE.md §2)."""
    t = psutil.cpu_times()
    return float(t.user + t.nice + t.system + getattr(t, "irq", 0.0) + getattr(t, "softirq", 0.0))


class NodeSampler:
    """Node CPU (milli-cores, a rate between two samples) and memory used (bytes) for ``scope``."""

    def __init__(self, tree: CgroupTree, scope: NodeScope, proc: Path = Path("/proc")) -> None:
        self.tree = tree
        self.scope: NodeScope = scope
        self.proc = proc
        self._last: tuple[float, float] | None = None

    def _cpu_seconds(self) -> float | None:
        if self.scope == "machine":
            return _busy_seconds()
        ns = self.tree.cpu_usage_ns("")
        return None if ns is None else ns / 1e9

    def cpu_milli(self, now: float) -> float | None:
        """CPU used since the previous call (milli-cores); None on the first call or when unreadable."""
        busy = self._cpu_seconds()
        if busy is None:
            return None
        last, self._last = self._last, (now, busy)
        if last is None or now <= last[0]:
            return None
        return max(busy - last[1], 0.0) * 1000.0 / (now - last[0])

    def memory_bytes(self) -> int | None:
        """Memory used now (bytes), without page cache."""
        if self.scope == "machine":
            vm = psutil.virtual_memory()
            return int(vm.total - vm.available)
        return self.tree.memory_used("")

    def pressure(self) -> dict[str, float]:
        """PSI avg10 (percent) keyed ``cpu.some``, ``memory.full`` ...; {} where the kernel has none."""
        if self.scope == "parent":
            return self.tree.pressure("")
        out: dict[str, float] = {}
        for res in PSI_RESOURCES:
            try:
                out.update(psi_avg10(stats.parse_psi((self.proc / "pressure" / res).read_text()), res))
            except (OSError, ValueError):
                continue
        return out
