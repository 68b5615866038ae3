"""GPU requests in pod manifests (colo.manifests.gpu): each form parses, every problem is named with its path."""

from __future__ import annotations

import pytest

from colo.manifests import ManifestError, parse_manifest
from colo.messages import GPURequest


def pod(requests: str, annotations: str = "", limits: str = "", second: str = "") -> str:
    ann = f"\n  annotations: {{{annotations}}}" if annotations else ""
    lim = f"\n        limits: {{{limits}}}" if limits else ""
    extra = f"\n    - name: b\n      resources:\n        requests: {{{second}}}" if second else ""
    return f"""apiVersion: v1
kind: Pod
metadata:
  name: p{ann}
spec:
  containers:
    - name: a
      resources:
        requests: {{cpu: "1", {requests}}}{lim}{extra}
"""


@pytest.mark.parametrize(("requests", "annotations", "want"), [
    ('nvidia.com/gpu: 2', "", GPURequest(count=2, milli=1000)),
    ('koordinator.sh/gpu-core: 50, koordinator.sh/gpu-memory-ratio: 50', "", GPURequest(count=1, milli=500)),
    ('koordinator.sh/gpu-memory-ratio: 30', "", GPURequest(count=1, milli=300)),
    ('koordinator.sh/gpu-core: 200', "", GPURequest(count=2, milli=1000)),
    ('colo.io/gpu-milli: 250', '"colo.io/gpu-spec": "V100M16|V100M32"',
     GPURequest(count=1, milli=250, models=["V100M16", "V100M32"])),
])
def test_gpu_forms(requests: str, annotations: str, want: GPURequest) -> None:
    got = parse_manifest(pod(requests, annotations)).pods[0]
    assert got.gpu == want
    assert got.requests.cpu == 1000


def test_no_gpu_is_none() -> None:
    assert parse_manifest(pod('memory: 1Gi')).pods[0].gpu is None


def test_every_problem_listed_with_its_path() -> None:
    text = pod('nvidia.com/gpu: 9', second='colo.io/gpu-milli: "x"')
    with pytest.raises(ManifestError) as err:
        parse_manifest(text)
    msg = str(err.value)
    assert "containers[1].resources.requests.colo.io/gpu-milli: expected a whole non-negative number" in msg
    with pytest.raises(ManifestError) as err:
        parse_manifest(pod('nvidia.com/gpu: 1, koordinator.sh/gpu-core: 50'))
    assert "requests.nvidia.com/gpu: cannot be combined with koordinator.sh/gpu-core" in str(err.value)
    with pytest.raises(ManifestError) as err:
        parse_manifest(pod('koordinator.sh/gpu-core: 150'))
    assert "multiple of 100" in str(err.value)
    with pytest.raises(ManifestError) as err:
        parse_manifest(pod('memory: 1Gi', '"colo.io/gpu-spec": "A100"'))
    assert "annotations.colo.io/gpu-spec: set on a pod that requests no GPU" in str(err.value)
    with pytest.raises(ManifestError) as err:
        parse_manifest(pod('nvidia.com/gpu: 1', second='nvidia.com/gpu: 1'))
    assert "GPUs requested by more than one container" in str(err.value)
    with pytest.raises(ManifestError) as err:
        parse_manifest(pod('nvidia.com/gpu: 1', limits='nvidia.com/gpu: 2'))
    assert "GPU limit 2 must equal the request 1" in str(err.value)


def test_gpu_request_messages_are_validated() -> None:
    from colo.messages import PodSpec
    from colo.validation import pod_problems

    bad = PodSpec(uid="p", name="p", gpu=GPURequest(count=2, milli=500, models=[" "]))
    assert pod_problems(bad) == ["gpu: a share (500 milli) is of one GPU only, got count 2",
                                 "gpu.models[0]: empty model name"]
    assert "gpu.count must lie in 1..8, got 9" in pod_problems(PodSpec(uid="p", name="p", gpu=GPURequest(count=9)))
    assert pod_problems(PodSpec(uid="p", name="p", gpu=GPURequest(count=1, milli=250))) == []
