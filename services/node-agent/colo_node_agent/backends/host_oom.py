"""OOM priority on the host: every process of every pod gets the ``oom_score_adj`` of its QoS class
(:func:`~colo_node_agent.strategies.oom_score.oom_score_adj`, docs/node-agent.md "OOM priority").

The pod wrapper sets the value before the command runs (children inherit it, :mod:`.host_pods`); each loop
:meth:`OOMScores.apply` reads each pod group's ``cgroup.procs`` (one read per pod) and handles only the pids it
has not seen with the current value: a process the kernel confirms is in the group (``/proc/<pid>/cgroup``, so
a stale or fake tree never touches a stranger) gets ``/proc/<pid>/oom_score_adj`` read and, when different,
written. A new NodeSLO value (or the strategy switched off: 0, the kernel default) makes every pid new again.

Lowering a process below its ``oom_score_adj_min`` (0 unless a privileged writer set it) needs
``CAP_SYS_RESOURCE``: without it (a container like the one these tests run in) the negative LS and LSE/LSR
values are refused, and those processes get 0 instead, reported once per pod. BE (1000) still goes first: a
process at 0 has fewer than 1000 points unless it holds all the memory.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field

from colo.messages import OOMStrategy, PodSpec, QoSClass
from colo_node_agent.backends.host_cgroups import CgroupTree
from colo_node_agent.strategies.cgroup_settings import effective_resources
from colo_node_agent.strategies.oom_score import oom_score_adj


def read_oom_score_adj(pid: int) -> int | None:
    """``/proc/<pid>/oom_score_adj``, None when the process is gone or the file unreadable."""
    try:
        with open(f"/proc/{pid}/oom_score_adj", "rb") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def write_oom_score_adj(pid: int, value: int) -> None:
    """Write ``value`` to ``/proc/<pid>/oom_score_adj``. Raises OSError (ESRCH/ENOENT gone, EACCES a value
    below the process's minimum without CAP_SYS_RESOURCE)."""
    fd = os.open(f"/proc/{pid}/oom_score_adj", os.O_WRONLY)
    try:
        os.write(fd, str(int(value)).encode())
    finally:
        os.close(fd)


def pod_score(spec: PodSpec, qos: QoSClass, memory_capacity_bytes: int, policy: OOMStrategy) -> int:
    """The ``oom_score_adj`` of pod ``spec`` (its memory request; BE: batch-memory)."""
    request, _ = effective_resources(spec, qos)
    return oom_score_adj(qos, request.memory, memory_capacity_bytes, policy)


@dataclass
class _Seen:
    value: int
    pids: set[int] = field(default_factory=set)


@dataclass
class OOMScores:
    """What :meth:`apply` has set, per pod uid: the value and the pids holding it."""

    seen: dict[str, _Seen] = field(default_factory=dict)
    written: int = 0
    """Values written since start (a process found with another value)."""
    problems: list[str] = field(default_factory=list)
    """Refused writes of the last :meth:`apply` ("pod U: ...")."""
    policy: OOMStrategy | None = None
    targets: dict[str, int] = field(default_factory=dict)
    """Per pod uid, its value under :attr:`policy` (a pod's value changes only with the policy)."""

    def apply_pods(self, tree: CgroupTree, pods: list[tuple[PodSpec, QoSClass, str]], memory_capacity_bytes: int,
                   policy: OOMStrategy) -> int:
        """:meth:`apply` for ``pods`` (spec, class, cgroup) under ``policy``, each pod's value computed once."""
        if policy != self.policy:
            self.policy, self.targets = policy, {}
        if len(self.targets) > len(pods):
            uids = {spec.uid for spec, _, _ in pods}
            self.targets = {u: v for u, v in self.targets.items() if u in uids}
        for spec, qos, _ in pods:
            if spec.uid not in self.targets:
                self.targets[spec.uid] = pod_score(spec, qos, memory_capacity_bytes, policy)
        return self.apply(tree, [(spec.uid, cg, self.targets[spec.uid]) for spec, _, cg in pods])

    def apply(self, tree: CgroupTree, pods: Iterable[tuple[str, str, int]]) -> int:
        """Give every process of ``pods`` (uid, cgroup, wanted value) its value; returns how many were
        written now. Pods not listed are forgotten."""
        self.problems = []
        wanted: set[str] = set()
        written = 0
        for uid, cgroup, value in pods:
            wanted.add(uid)
            seen = self.seen.get(uid)
            if seen is None or seen.value != value:
                seen = self.seen[uid] = _Seen(value)
            pids = set(tree.procs(cgroup))
            seen.pids &= pids
            for pid in pids - seen.pids:
                if not tree.member(pid, cgroup):
                    continue
                now = read_oom_score_adj(pid)
                if now is None:
                    continue
                if now != value:
                    try:
                        written += self._write(uid, pid, value, now)
                    except (ProcessLookupError, FileNotFoundError):
                        continue
                    except OSError as exc:
                        self.problems.append(f"pod {uid}: oom_score_adj {value}: {exc.strerror}")
                        continue
                seen.pids.add(pid)
        for uid in set(self.seen) - wanted:
            del self.seen[uid]
        self.written += written
        return written

    def _write(self, uid: str, pid: int, value: int, now: int) -> int:
        """Write ``value`` to ``pid``; a negative value refused (EACCES: below the process's minimum, no
        CAP_SYS_RESOURCE) becomes 0 when the process is above it, reported once per pod. Returns the
        writes made (0, 1). Raises OSError."""
        try:
            write_oom_score_adj(pid, value)
            return 1
        except PermissionError:
            if value >= 0:
                raise
        self.problems.append(f"pod {uid}: oom_score_adj {value} refused (no CAP_SYS_RESOURCE): "
                             f"{'set to 0, the lowest allowed' if now > 0 else f'left at {now}'}")
        if now > 0:
            write_oom_score_adj(pid, 0)
            return 1
        return 0
