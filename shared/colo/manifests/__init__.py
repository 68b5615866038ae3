"""Kubernetes-like manifests (YAML or JSON) → Colo messages, for ``colo submit``.

A file holds one object, a list, a ``kind: List`` with ``items``, or several YAML documents, of the kinds:

==============  ==========================================  ======================================  ====================
kind            apiVersion (optional)                        message                                 module
==============  ==========================================  ======================================  ====================
Pod             v1                                          :class:`~colo.messages.PodSpec`         :mod:`.pod`
Deployment      apps/v1                                     :class:`~colo.messages.WorkloadSpec`    :mod:`.workload`
StatefulSet     apps/v1                                     :class:`~colo.messages.WorkloadSpec`    :mod:`.workload`
Job             batch/v1                                    :class:`~colo.messages.WorkloadSpec`    :mod:`.workload`
PodGroup        scheduling.sigs.k8s.io/v1alpha1             :class:`~colo.messages.PodGroupSpec`    :mod:`.podgroup`
ElasticQuota    scheduling.sigs.k8s.io/v1alpha1             :class:`~colo.messages.ElasticQuota`    :mod:`.quota`
Reservation     scheduling.koordinator.sh/v1alpha1          :class:`~colo.messages.ReservationSpec` :mod:`.reservation`
==============  ==========================================  ======================================  ====================

A document without ``kind`` is a Pod. Every problem is reported with its field path (``[2].spec.template.spec.
containers[0].resources.requests.cpu: not a quantity: '5x'``) and :func:`parse_manifest` returns objects only
when the whole file is valid, so that nothing is half-submitted. Parsing is strict: a field Colo does not read
is an error naming the nearest known field, and pods (and workload templates) must pass admission's own checks
(:mod:`colo.validation`), so that what a dry run accepts is what admission admits. Warnings (accepted but
suspicious values) are in :attr:`Manifest.warnings`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from colo.manifests.base import METADATA_FIELDS, TOP_FIELDS, Ctx, ManifestError, check_prefixed_keys, join
from colo.manifests.pod import parse_pod
from colo.manifests.podgroup import parse_pod_group
from colo.manifests.quota import parse_quota
from colo.manifests.reservation import parse_reservation
from colo.manifests.workload import parse_workload
from colo.messages import POD_GROUP_LABEL, ElasticQuota, PodGroupSpec, PodSpec, ReservationSpec, WorkloadSpec
from colo.workloads import gang_key, initial_pods, pod_suffix, referenced_group

__all__ = ["API_VERSIONS", "Manifest", "ManifestError", "load_manifest", "parse_manifest"]

API_VERSIONS: dict[str, str] = {
    "Pod": "v1", "Deployment": "apps/v1", "StatefulSet": "apps/v1", "Job": "batch/v1",
    "PodGroup": "scheduling.sigs.k8s.io/v1alpha1", "ElasticQuota": "scheduling.sigs.k8s.io/v1alpha1",
    "Reservation": "scheduling.koordinator.sh/v1alpha1",
}
"""Every accepted kind and its apiVersion."""


@dataclass
class Manifest:
    """The objects of a valid file, each list in file order."""

    pods: list[PodSpec] = field(default_factory=list)
    workloads: list[WorkloadSpec] = field(default_factory=list)
    pod_groups: list[PodGroupSpec] = field(default_factory=list)
    quotas: list[ElasticQuota] = field(default_factory=list)
    reservations: list[ReservationSpec] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    """``"<field path>: <warning>"`` of accepted but suspicious values (``kubernetes.io/batch-cpu: "2"``)."""

    def ordered(self) -> list[object]:
        """The objects in the order ``colo submit`` publishes them: quotas, PodGroups and reservations
        before the workloads and pods that use them."""
        return [*self.quotas, *self.pod_groups, *self.reservations, *self.workloads, *self.pods]


def _documents(text: str) -> list[tuple[Any, str]]:
    """The objects of a file with their paths; a ``kind: List`` (alone or among documents) is flattened."""
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        raise ManifestError([f"<root>: not valid YAML/JSON: {exc}"]) from exc
    if len(docs) == 1 and isinstance(docs[0], list):
        docs = docs[0]
        paths = [f"[{i}]" for i in range(len(docs))]
    else:
        paths = [f"[{i}]" for i in range(len(docs))] if len(docs) > 1 else [""]
    out: list[tuple[Any, str]] = []
    for doc, path in zip(docs, paths):
        if isinstance(doc, dict) and doc.get("kind") == "List":
            raw = doc.get("items")
            if not isinstance(raw, list):
                raise ManifestError([f"{join(path, 'items')}: required: a list of objects"])
            out += [(d, join(join(path, "items"), i)) for i, d in enumerate(raw)]
        else:
            out.append((doc, path))
    return out


class _Collector:
    """Adds each parsed object to the manifest and records duplicates (same kind and key)."""

    def __init__(self, ctx: Ctx) -> None:
        self.ctx = ctx
        self.out = Manifest()
        self.seen: dict[tuple[str, str], str] = {}
        self.parents: dict[str, bool] = {}
        self.group_paths: dict[str, str] = {}
        """PodGroup key ``namespace/name`` → its path in the file."""

    def key(self, family: str, key: str, path: str, what: str) -> bool:
        """Record ``key``; False (and a problem) when another object of the file has it."""
        prior = self.seen.setdefault((family, key), path)
        if prior != path:
            self.ctx.err(join(path, "metadata"), f"duplicate {what} {key!r} (also at {prior or '<root>'})")
        return prior == path

    def add(self, kind: str, doc: dict[str, Any], path: str, now: float) -> None:
        ctx = self.ctx
        if kind == "Pod":
            if (pod := parse_pod(ctx, doc, path, now)) is not None:
                self.key("pod", pod.uid, path, "pod")
                self.out.pods.append(pod)
        elif kind in ("Deployment", "StatefulSet", "Job"):
            if (w := parse_workload(ctx, doc, path, now)) is not None:
                if self.key("workload", w.uid, path, "workload"):
                    count = w.completions if w.kind == "Job" else w.replicas
                    for i in range(count):
                        self.key("pod", f"{w.uid}-{pod_suffix(w, i)}", path, f"pod of {w.kind.lower()}/{w.name}:")
                self.out.workloads.append(w)
        elif kind == "PodGroup":
            if (g := parse_pod_group(ctx, doc, path, now)) is not None:
                self.key("podgroup", f"{g.namespace}/{g.name}", path, "PodGroup")
                self.group_paths.setdefault(gang_key(g.namespace, g.name), path)
                self.out.pod_groups.append(g)
        elif kind == "ElasticQuota":
            if (parsed := parse_quota(ctx, doc, path, now)) is not None:
                self.key("quota", parsed[0].name, path, "ElasticQuota")
                self.parents[parsed[0].name] = parsed[1]
                self.out.quotas.append(parsed[0])
        elif (r := parse_reservation(ctx, doc, path, now)) is not None:
            self.key("reservation", f"{r.namespace}/{r.name}", path, "Reservation")
            self.out.reservations.append(r)

    def check_groups(self) -> None:
        """A PodGroup that pods or workloads of this file reference needs at least ``minMember`` of them: with
        fewer the gang could never be placed (members submitted in another file are not counted, so a PodGroup
        no object of this file references is not checked)."""
        members: dict[str, list[str]] = {}
        for w in self.out.workloads:
            name = w.template.labels.get(POD_GROUP_LABEL, "")
            if name and w.pod_group is None:
                n = initial_pods(w)
                members.setdefault(gang_key(w.namespace, name), []).extend([f"{w.kind.lower()}/{w.name}"] * n)
        for pod in self.out.pods:
            key = referenced_group(pod)
            if key:
                members.setdefault(key, []).append(f"pod/{pod.name}")
        for g in self.out.pod_groups:
            key = gang_key(g.namespace, g.name)
            refs = members.get(key)
            if refs and len(refs) < g.min_member:
                owners = ", ".join(f"{o} {refs.count(o)}" for o in dict.fromkeys(refs))
                self.ctx.err(join(join(self.group_paths[key], "spec"), "minMember"),
                             f"{g.min_member} is more than the {len(refs)} pods of this file that reference the "
                             f"PodGroup ({owners}): the gang could never be placed")

    def check_tree(self, paths: dict[str, str]) -> None:
        """A quota whose parent is in this file needs that parent marked ``is-parent``."""
        for q in self.out.quotas:
            if q.parent and self.parents.get(q.parent) is False:
                self.ctx.err(join(join(paths[q.name], "metadata"), "labels"),
                             f"parent quota {q.parent!r} is not marked quota.scheduling.koordinator.sh/is-parent")


def parse_manifest(text: str, now: float = 0.0, kinds: tuple[str, ...] = tuple(API_VERSIONS)) -> Manifest:
    """Every object of a manifest; raises ManifestError listing every problem with its path.

    ``now`` becomes each object's ``created_at`` (seconds); ``kinds`` limits the accepted kinds.
    """
    ctx = Ctx()
    items = _documents(text)
    if not items:
        raise ManifestError(["<root>: no objects in file"])
    collector = _Collector(ctx)
    quota_paths: dict[str, str] = {}
    for obj, path in items:
        doc = ctx.mapping(obj, path, required=True)
        if not doc:
            continue
        kind = doc.get("kind", "Pod")
        if kind not in kinds:
            ctx.err(join(path, "kind"), f"unknown kind {kind!r} (known: {', '.join(kinds)})")
            continue
        ctx.known(doc, path, TOP_FIELDS)
        if isinstance(doc.get("metadata"), dict):
            ctx.known(doc["metadata"], join(path, "metadata"), METADATA_FIELDS)
            for key in ("labels", "annotations"):
                check_prefixed_keys(ctx, doc["metadata"].get(key), join(join(path, "metadata"), key))
        version = doc.get("apiVersion")
        if version is not None and version != API_VERSIONS[kind]:
            ctx.err(join(path, "apiVersion"), f"expected {API_VERSIONS[kind]} for {kind}, got {version!r}")
        if kind == "ElasticQuota":
            meta = doc.get("metadata")
            quota_paths[str(meta.get("name") if isinstance(meta, dict) else "")] = path
        collector.add(kind, doc, path, now)
    collector.check_tree(quota_paths)
    collector.check_groups()
    if ctx.errors:
        raise ManifestError(ctx.errors)
    collector.out.warnings = ctx.warnings
    return collector.out


def load_manifest(path: Path, now: float = 0.0, kinds: tuple[str, ...] = tuple(API_VERSIONS)) -> Manifest:
    """:func:`parse_manifest` of a file; raises ManifestError (also when the file cannot be read)."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise ManifestError([f"{path}: cannot read: {exc.strerror or exc}"]) from exc
    return parse_manifest(text, now, kinds)


