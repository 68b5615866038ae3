"""Every Redis key name Colo uses, under a configurable prefix (default ``colo``).

Layout (``{p}`` = prefix)::

    {p}:nodes                 set   node names
    {p}:node:{name}           str   NodeSpec (JSON)
    {p}:noderes:{name}        str   NodeResource (JSON)
    {p}:limits:{name}         hash  allocatable the bind script checks: cpu, memory, pods (NodeSpec)
                                    and batch_cpu, batch_memory, mid_cpu, mid_memory (NodeResource)
    {p}:alloc:{name}          hash  Σ requests of pods bound to the node (Resources fields; pods = count)
    {p}:nodepods:{name}       set   uids bound to the node
    {p}:pods                  set   pod uids
    {p}:pod:{uid}             str   PodSpec (JSON)
    {p}:podstate:{uid}        hash  phase, node, reason, updated_at, bound_at
    {p}:binding:{uid}         hash  node, at, the bound requests and the quotas charged (JSON list; freed
                                    exactly once by release), the reservation consumed and, on a reusable
                                    one, the part of its room the pod took (rsv_use, returned at release)
    {p}:loaded:{name}         str   clock time a scheduler replica first loaded the store (absent: rebuild pending pods)
    {p}:lease:{name}          str   "<token>:<holder>" of the current lease holder, with a TTL (PX)
    {p}:leasefence:{name}     int   last fencing token handed out for the lease (INCR)
    {p}:checkpoint:{name}     str   a service's checkpoint blob (the profiler's models), replaced in one SET
    {p}:rsvs                  zset  names of the available reservations, scored by expiry (clock seconds)
    {p}:rsv:{name}            hash  a reservation: node, owners, held resources, state (colo.reservations);
                                    a Pending one also its submission (spec, ReservationSpec JSON)
    {p}:rsvpending            set   names of the reservations submitted and not placed yet (Pending)
    {p}:quotas                set   names of the quotas with a max or usage
    {p}:quotamax:{name}       hash  a quota's hard max the bind script checks (Resources fields; absent =
                                    unlimited), set by the scheduler from its ElasticQuota tree
    {p}:quotaused:{name}      hash  Σ requests of the pods bound charged to the quota (Resources fields;
                                    pods = count); changed only by the bind and release scripts
    {p}:migjobs               set   ids of the descheduler's migration jobs
    {p}:migjob:{id}           str   PodMigrationJob (JSON); a finished job's key expires
    {p}:podgroups             hash  "namespace/name" → PodGroupSpec (JSON) of every admitted PodGroup
    {p}:workloads             hash  workload uid → admission's record of it (JSON: spec, pods, Job progress)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_PREFIX_RE = re.compile(r"^[A-Za-z0-9_.\-]+$")


@dataclass(frozen=True)
class Keys:
    """Key builder for one prefix. Raises ValueError for a prefix with glob or separator characters."""

    prefix: str = "colo"

    def __post_init__(self) -> None:
        if not _PREFIX_RE.match(self.prefix):
            raise ValueError(f"invalid store prefix {self.prefix!r}: use letters, digits, '.', '_', '-'")

    @property
    def pattern(self) -> str:
        """SCAN pattern matching every key under the prefix."""
        return f"{self.prefix}:*"

    @property
    def nodes(self) -> str:
        """Set of node names."""
        return f"{self.prefix}:nodes"

    def node(self, name: str) -> str:
        """NodeSpec JSON of ``name``."""
        return f"{self.prefix}:node:{name}"

    def node_resource(self, name: str) -> str:
        """NodeResource JSON of ``name``."""
        return f"{self.prefix}:noderes:{name}"

    def limits(self, name: str) -> str:
        """Hash of allocatable values checked by the bind script."""
        return f"{self.prefix}:limits:{name}"

    def allocated(self, name: str) -> str:
        """Hash of requests allocated on ``name``."""
        return f"{self.prefix}:alloc:{name}"

    def node_pods(self, name: str) -> str:
        """Set of pod uids bound to ``name``."""
        return f"{self.prefix}:nodepods:{name}"

    @property
    def pods(self) -> str:
        """Set of pod uids."""
        return f"{self.prefix}:pods"

    def pod(self, uid: str) -> str:
        """PodSpec JSON of ``uid``."""
        return f"{self.prefix}:pod:{uid}"

    def pod_state(self, uid: str) -> str:
        """Hash of the pod's phase, node, reason, updated_at, bound_at."""
        return f"{self.prefix}:podstate:{uid}"

    def binding(self, uid: str) -> str:
        """Hash of the pod's binding: node, at and requested resources."""
        return f"{self.prefix}:binding:{uid}"

    def loaded(self, name: str) -> str:
        """Clock time at which the scheduler replica ``name`` (its lease name) first loaded this store; absent =
        a new or lost store, whose pending pods that replica rebuilds from the ``pod.admitted`` stream."""
        return f"{self.prefix}:loaded:{name}"

    def lease(self, name: str) -> str:
        """Holder (``"<token>:<holder>"``) of the lease ``name``; expires unless renewed."""
        return f"{self.prefix}:lease:{name}"

    def lease_fence(self, name: str) -> str:
        """Counter of fencing tokens of the lease ``name`` (each acquisition takes the next one)."""
        return f"{self.prefix}:leasefence:{name}"

    def checkpoint(self, name: str) -> str:
        """Checkpoint blob of the service state ``name`` (e.g. ``profiler``).

        Raises ValueError unless ``name`` is letters, digits, '.', '_', '-'."""
        if not name or not all(c.isascii() and (c.isalnum() or c in "._-") for c in name):
            raise ValueError(f"invalid checkpoint name {name!r}: use letters, digits, '.', '_', '-'")
        return f"{self.prefix}:checkpoint:{name}"

    @property
    def reservations(self) -> str:
        """Sorted set of available reservation names, scored by their expiry (clock seconds)."""
        return f"{self.prefix}:rsvs"

    @property
    def reservations_pending(self) -> str:
        """Set of the names of reservations submitted and not placed yet (state Pending)."""
        return f"{self.prefix}:rsvpending"

    def reservation(self, name: str) -> str:
        """Hash of the reservation ``name``: node, owner, held resources, state (:mod:`colo.reservations`)."""
        return f"{self.prefix}:rsv:{name}"

    @property
    def quotas(self) -> str:
        """Set of the names of quotas that have a max or usage."""
        return f"{self.prefix}:quotas"

    def quota_max(self, name: str) -> str:
        """Hash of the hard max of quota ``name`` (Resources field names; absent = unlimited)."""
        return f"{self.prefix}:quotamax:{name}"

    def quota_used(self, name: str) -> str:
        """Hash of Σ requests of the pods bound charged to quota ``name`` (``pods`` = their count)."""
        return f"{self.prefix}:quotaused:{name}"

    @property
    def migration_jobs(self) -> str:
        """Set of migration job ids."""
        return f"{self.prefix}:migjobs"

    def migration_job(self, job_id: str) -> str:
        """PodMigrationJob JSON of ``job_id``."""
        return f"{self.prefix}:migjob:{job_id}"

    @property
    def pod_groups(self) -> str:
        """Hash ``namespace/name`` → PodGroupSpec JSON of the admitted PodGroups."""
        return f"{self.prefix}:podgroups"

    @property
    def workloads(self) -> str:
        """Hash workload uid → admission's record of the workload (its pods, a Job's progress), JSON."""
        return f"{self.prefix}:workloads"
