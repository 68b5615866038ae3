"""Workload expansion: a :class:`~colo.messages.WorkloadSpec` → the pods it stands for (pure functions).

Shared by admission (which publishes the pods) and ``colo submit --dry-run`` (which shows them). A
StatefulSet's or Job's pod ``i`` is uid ``<workload uid>-<i>``, name ``<name>-<i>``; a Deployment's carries
a stable hash of (workload uid, i) instead of ``i``, as Kubernetes names ReplicaSet pods. Every pod carries
its :class:`~colo.messages.OwnerReference`, ``app`` (the template's ``app`` label, else the workload's name),
the workload's disruption budget and, when the workload forms a gang, its :class:`~colo.messages.GangSpec`.

:class:`WorkloadRecord` is admission's record of an admitted workload, kept in the store (``workloads`` hash
of :mod:`colo.keys`) and read by ``colo get workloads``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import msgspec

from colo.messages import POD_GROUP_LABEL, GangSpec, OwnerReference, PodGroupSpec, PodSpec, WorkloadSpec

MAX_WORKLOAD_PODS = 10_000
"""Most pods one workload may stand for (replicas, or a Job's completions): each becomes a message and a
store record, and the WorkloadAdmitted listing their uids (≤ 10,000 × 94 bytes with uids of at most
:data:`MAX_UID_CHARS` + a suffix) stays under NATS's 1 MB default max payload."""
MAX_UID_CHARS = 80
"""Longest uid / name / namespace of a workload or PodGroup (a pod suffix of up to 11 characters is added)."""


def initial_pods(w: WorkloadSpec) -> int:
    """How many pods admission creates at once: ``replicas`` (Deployment, StatefulSet), or
    min(``parallelism``, ``completions``) for a Job (the Job controller adds the rest one by one)."""
    if w.kind == "Job":
        return min(w.parallelism, w.completions)
    return w.replicas


def pod_suffix(w: WorkloadSpec, index: int) -> str:
    """``str(index)``, or for a Deployment the first 10 hex digits of sha256(``uid/index``)."""
    if w.kind == "Deployment":
        return hashlib.sha256(f"{w.uid}/{index}".encode()).hexdigest()[:10]
    return str(index)


def gang_key(namespace: str, name: str) -> str:
    """The key ``namespace/name`` of a pod group, as GangSpec.name and PodGroupSpec.groups spell it."""
    return f"{namespace}/{name}"


def gang_of(group: PodGroupSpec, total_member: int) -> GangSpec:
    """The membership each pod of ``group`` carries; ``groups`` then includes the gang itself (GangSpec)."""
    key = gang_key(group.namespace, group.name)
    groups = sorted({key, *group.groups}) if group.groups else []
    return GangSpec(name=key, min_member=group.min_member, total_member=total_member, timeout_s=group.timeout_s,
                    mode=group.mode, groups=groups, created_at=group.created_at)


def referenced_group(pod: PodSpec) -> str:
    """The ``namespace/name`` key of the PodGroup ``pod`` names by :data:`colo.messages.POD_GROUP_LABEL`,
    or "" when it names none."""
    name = pod.labels.get(POD_GROUP_LABEL, "")
    return gang_key(pod.namespace, name) if name else ""


def expand(w: WorkloadSpec, indices: Iterable[int], gang: GangSpec | None = None) -> list[PodSpec]:
    """The pods of ``w`` with the given indices (0-based), in that order; ``gang`` defaults to the embedded
    ``w.pod_group``'s (total = :func:`initial_pods`)."""
    if gang is None and w.pod_group is not None:
        gang = gang_of(w.pod_group, initial_pods(w))
    owner = OwnerReference(kind=w.kind, name=w.name, uid=w.uid)
    app = w.template.labels.get("app") or w.template.app or w.name
    out = []
    for i in indices:
        suffix = pod_suffix(w, i)
        out.append(msgspec.structs.replace(
            w.template, uid=f"{w.uid}-{suffix}", name=f"{w.name}-{suffix}", namespace=w.namespace, app=app,
            owner=owner, gang=gang, max_unavailable=w.max_unavailable, created_at=w.created_at))
    return out


class WorkloadRecord(msgspec.Struct, kw_only=True):
    """An admitted workload: its spec, the gang its pods carry, the uids of every pod created so far (in
    index order), and a Job's progress: the next index, the pods not finished, succeeded and failed
    counts, and why it stopped creating pods ("" = it did not)."""

    spec: WorkloadSpec
    gang: GangSpec | None = None
    pods: list[str] = []
    next_index: int = 0
    active: list[str] = []
    succeeded: int = 0
    failed: int = 0
    stopped: str = ""

    @property
    def complete(self) -> bool:
        """A Job whose ``completions`` pods have succeeded."""
        return self.spec.kind == "Job" and self.succeeded >= self.spec.completions


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(WorkloadRecord)


def _comparable(w: WorkloadSpec) -> WorkloadSpec:
    """``w`` without its submission times (the workload's, its template's and its PodGroup's)."""
    group = msgspec.structs.replace(w.pod_group, created_at=0.0) if w.pod_group is not None else None
    return msgspec.structs.replace(w, created_at=0.0, template=msgspec.structs.replace(w.template, created_at=0.0),
                                   pod_group=group)


def spec_changes(old: WorkloadSpec, new: WorkloadSpec) -> list[str]:
    """The fields in which ``new`` differs from ``old`` (submission times aside), in field order: a number or
    a string as ``replicas: 3 → 5``, anything else by its name (``template``, ``labels``); [] when equal."""
    a, b = _comparable(old), _comparable(new)
    if a == b:
        return []
    out: list[str] = []
    for f in msgspec.structs.fields(WorkloadSpec):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if x == y:
            continue
        out.append(f"{f.name}: {x!r} → {y!r}" if isinstance(x, (int, str)) else f.name)
    return out


def encode_record(record: WorkloadRecord) -> bytes:
    """The record as stored (JSON)."""
    return _encoder.encode(record)


def decode_record(blob: bytes) -> WorkloadRecord:
    """A stored record; raises msgspec.DecodeError / ValidationError for a corrupt one."""
    return _decoder.decode(blob)
