"""Per-node CPU allocations of NodeNUMAResource: which pod holds which CPUs under which exclusivity policy.

The scheduler's memory only; what survives a restart is the cpuset stored with each binding
(:attr:`colo.store_binds.BindRequest.cpuset`), which the scheduler hands back when it adopts the bound pods
(:data:`colo_scheduler.podinfo.ASSIGNED_CPUSET`), so :class:`NodeCPUs` is rebuilt exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from colo_scheduler.plugins.nodenumaresource.accumulator import ExclusivePolicy


@dataclass
class NodeCPUs:
    """The CPUs held on one node: ``pods`` uid → (CPU ids, exclusivity policy); ``held`` CPU id → the policy
    of its holder (kept in step)."""

    pods: dict[str, tuple[tuple[int, ...], ExclusivePolicy]] = field(default_factory=dict)
    held: dict[int, ExclusivePolicy] = field(default_factory=dict)
    version: int = 0
    """Bumped at every change (the plugin's memo of answers keys on it)."""

    def add(self, uid: str, cpus: tuple[int, ...], exclusive: ExclusivePolicy) -> list[int]:
        """Record ``cpus`` for ``uid`` (replacing what it held); returns the CPUs another pod already held (a
        conflict: a stored assignment that overlaps another; the pod still gets them, the caller logs it)."""
        self.remove(uid)
        self.version += 1
        clash = [c for c in cpus if c in self.held]
        self.pods[uid] = (cpus, exclusive)
        for c in cpus:
            self.held[c] = exclusive
        return clash

    def remove(self, uid: str) -> tuple[int, ...]:
        """Forget ``uid``'s CPUs; the CPUs it held (empty when none)."""
        entry = self.pods.pop(uid, None)
        if entry is None:
            return ()
        self.version += 1
        owned = {c for u, (cs, _) in self.pods.items() for c in cs}
        for c in entry[0]:
            if c not in owned:
                self.held.pop(c, None)
        return entry[0]
