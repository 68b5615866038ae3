"""Pod-only manifests, as ``colo submit`` read them before the workload kinds: :mod:`colo.manifests`
restricted to ``kind: Pod``."""

from __future__ import annotations

from pathlib import Path

from colo.manifests import ManifestError, load_manifest, parse_manifest
from colo.messages import PodSpec

PodFileError = ManifestError


def parse_pods(text: str, now: float = 0.0) -> list[PodSpec]:
    """Every pod of a pod manifest; raises ManifestError listing every problem with its path."""
    return parse_manifest(text, now, kinds=("Pod",)).pods


def load_pod_file(path: Path, now: float = 0.0) -> list[PodSpec]:
    """:func:`parse_pods` of a file; raises ManifestError (also when the file cannot be read)."""
    return load_manifest(path, now, kinds=("Pod",)).pods
