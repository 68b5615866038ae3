"""Parallel scheduler replicas: which pods a replica schedules, and how its consumers are named.

With ``replicas = N`` each replica ``i`` (0..N−1) schedules only the pods whose uid hashes to
``i`` (:func:`shard_of`: CRC-32 of the UTF-8 uid, mod N — stable across processes and Python
versions, unlike :func:`hash`); a gang's members are sharded by the gang's key instead
(:func:`shard_key`), so one replica owns a whole gang and can hold its members at Permit. Every replica still consumes every node, metric, resource,
status and bound event, so each keeps a full picture of the cluster; binds go through the
store's atomic bind script, which refuses any bind that would over-commit a node or bind a pod
twice, whatever the other replicas do.

Each replica needs its own durable consumers (a durable shared by two replicas would split the
messages between them, and each would miss half of the cluster's events): consumer names get
``-r<i>`` when N > 1 and ``-<instance>`` when leader election is on (several warm replicas of
one shard). The names stay those of a single scheduler when neither applies, so an existing
deployment resumes its consumers.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass

from colo.messages import PodSpec
from colo_scheduler.settings import SchedulerSettings

_INSTANCE_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def shard_of(uid: str, replicas: int) -> int:
    """Replica index (0..``replicas``−1) that schedules pod ``uid``: ``crc32(uid) mod replicas``.

    Raises ValueError for ``replicas`` < 1.
    """
    if replicas < 1:
        raise ValueError(f"replicas must be >= 1, got {replicas}")
    return zlib.crc32(uid.encode()) % replicas


def shard_key(spec: PodSpec) -> str:
    """What a pod is sharded by: the gang's key (``namespace/name``) for a gang member, else its uid.
    A gang group is sharded by its first key in sort order, so its gangs share a replica."""
    gang = spec.gang
    if gang is None:
        return spec.uid
    return min((gang.name, *gang.groups))


@dataclass(frozen=True)
class Replica:
    """This process's place among the scheduler replicas.

    ``index`` of ``replicas`` shards; ``instance`` names this process among the warm replicas
    of its shard when ``leader_election`` is on ('' otherwise).
    """

    index: int = 0
    replicas: int = 1
    leader_election: bool = False
    instance: str = ""

    @classmethod
    def from_settings(cls, settings: SchedulerSettings, instance: str) -> Replica:
        """The replica described by ``settings`` and the runtime's ``instance`` (``COLO_INSTANCE``).

        Raises ValueError when leader election is on and ``instance`` is empty or not a token of
        letters, digits, '-' and '_' (it names durable consumers, which must survive restarts).
        """
        if settings.leader_election and not _INSTANCE_RE.match(instance):
            raise ValueError("leader_election needs COLO_INSTANCE set to a stable name of letters, digits, '-'"
                             f" or '_' (at most 64), distinct per replica; got {instance!r}")
        return cls(settings.replica_index, settings.replicas, settings.leader_election,
                   instance if settings.leader_election else "")

    def owns(self, uid: str) -> bool:
        """True when this replica schedules pod ``uid``."""
        return self.replicas == 1 or shard_of(uid, self.replicas) == self.index

    def owns_pod(self, spec: PodSpec) -> bool:
        """True when this replica schedules the pod of ``spec`` (sharded by :func:`shard_key`)."""
        return self.replicas == 1 or shard_of(shard_key(spec), self.replicas) == self.index

    def durable(self, base: str) -> str:
        """Durable consumer name for ``base`` (e.g. ``"admitted"`` → ``"admitted-r2-a"``)."""
        name = base
        if self.replicas > 1:
            name += f"-r{self.index}"
        if self.instance:
            name += f"-{self.instance}"
        return name

    @property
    def lease_name(self) -> str:
        """Name of the lease the warm replicas of this shard compete for."""
        return "scheduler" if self.replicas == 1 else f"scheduler-r{self.index}"

    @property
    def sees_foreign_binds(self) -> bool:
        """True when other processes bind pods this one must account for (other shards or an
        earlier leader of this shard): the replica then follows ``pod.bound``."""
        return self.replicas > 1 or self.leader_election
