"""A PodGroup whose minMember exceeds the pods of the file that reference it is an error at validation (so at
``colo submit --dry-run``): the gang could never be placed."""

from __future__ import annotations

from pathlib import Path

import pytest

from colo.manifests import ManifestError, parse_manifest

EXAMPLES = Path(__file__).parents[2] / "examples"

GROUP = """
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: PodGroup
metadata: {{name: train, namespace: ml}}
spec: {{minMember: {min_member}}}
---
apiVersion: batch/v1
kind: Job
metadata: {{name: train, namespace: ml}}
spec:
  parallelism: 4
  completions: 4
  template:
    metadata:
      labels: {{pod-group.scheduling.sigs.k8s.io: train}}
    spec:
      containers:
      - resources: {{requests: {{cpu: "1", memory: 1Gi}}}}
"""


def test_min_member_above_the_files_members_is_an_error() -> None:
    with pytest.raises(ManifestError) as exc:
        parse_manifest(GROUP.format(min_member=10))
    assert exc.value.errors == ["[0].spec.minMember: 10 is more than the 4 pods of this file that reference the "
                                "PodGroup (job/train 4): the gang could never be placed"]


@pytest.mark.parametrize("min_member", [1, 4])
def test_enough_members_pass(min_member: int) -> None:
    assert len(parse_manifest(GROUP.format(min_member=min_member)).pod_groups) == 1


def test_a_podgroup_alone_and_the_examples_pass() -> None:
    assert parse_manifest(GROUP.format(min_member=10).split("---")[0]).pod_groups
    assert parse_manifest((EXAMPLES / "podgroups.yaml").read_text()).pod_groups
